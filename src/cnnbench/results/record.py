"""The run record: one JSON object per run, the contract every later tool reads.

Top-level fields: ``schema_version``, ``tool_version``, ``run_id``, ``started_at`` (ISO 8601),
``session_id`` (the invocation that wrote it, :mod:`cnnbench.results.sessions`), ``status``
(``ok|oom|error|timeout``), ``error`` (text or null), ``config`` (every resolved
option under its snake_case flag name), ``environment`` and ``metrics``. Other top-level
fields (``source``, ``case_name``, ``suite_name``, ...) may be added freely. ``kind`` says what
a record measures (:func:`record_kind`): a model's run (``run``, when absent) or collective
bandwidth (``comm``, ``cnnbench comm``), whose ``config`` and ``metrics`` are their own.

A new record's ``run_id`` and ``started_at`` come from :mod:`cnnbench.results.stamps`, its
``error`` from :mod:`cnnbench.results.error_text`; numbers no reader can compute with are cleaned
out by :mod:`cnnbench.results.cleaning`. This module does not import torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cnnbench.results.cleaning import MAX_FIGURE, figure_text
from cnnbench.results.error_text import clip
from cnnbench.results.sessions import session_id as current_session_id
from cnnbench.results.stamps import new_run_id, now_iso
from cnnbench.version import __version__

SCHEMA_VERSION = 2
STATUSES = ("ok", "oom", "error", "timeout")

# Metric names that are part of the contract (others may be added).
METRIC_FIELDS = (
    "total_images_per_sec",
    "images_per_sec_mean",
    "images_per_sec_stderr",
    "images_per_sec_jitter",
    "images_per_sec_median",
    "per_device_images_per_sec",
    "step_times_s",
    "wall_time_s",
    "peak_device_memory_bytes",
    "peak_host_memory_bytes",
    "input_wait_fraction",
    "loss_first",
    "loss_last",
)
ENVIRONMENT_FIELDS = (
    "machine",
    "hostname",
    "cpu_model",
    "cpu_cores",
    "gpu_model",
    "gpu_count",
    "torch_version",
    "torchvision_version",
    "cuda_version",
    "python_version",
    "platform",
)


RUN_KIND = "run"
"""The kind of a record without a ``kind`` field: a model's run (or ``cnnbench data``'s)."""


def record_kind(record: Mapping[str, Any]) -> str:
    """What a record measures: its top-level ``kind`` (``comm`` for ``cnnbench comm``), else ``run``.
    Throughput tables, ``compare`` of runs and sweeps read ``run`` records only."""
    kind = record.get("kind")
    return kind if isinstance(kind, str) and kind else RUN_KIND


class RecordError(ValueError):
    """A record that breaks the contract (see :func:`check_record`); the message says why, in one line."""


SECTIONS = ("config", "environment", "metrics")
MAX_DEPTH = 16
"""Deepest nesting of objects and lists a record may have (records are 4 deep; every tool
that walks one recursively stays far from Python's recursion limit)."""
_LIST_METRICS = frozenset({"step_times_s", "per_device_images_per_sec", "warnings"})
_TEXT_FIELDS = ("run_id", "started_at", "tool_version", "error", "session_id", "started_at_source")


def check_record(record: Mapping[str, Any], *, shallow: bool = False) -> None:
    """Raise :class:`RecordError` when ``record`` breaks the contract every reader relies on.

    The contract: ``status`` is one of :data:`STATUSES`; ``config``, ``environment`` and
    ``metrics`` are objects; ``schema_version`` is a whole number; ``run_id``,
    ``started_at``, ``tool_version``, ``error``, ``session_id`` and ``started_at_source`` are text
    or null;
    ``config`` fields that are number options of ``cnnbench run`` are numbers of the option's
    kind (or null);
    the contract's metrics (:data:`METRIC_FIELDS`) are numbers (lists for step times and
    per-device rates) or null; ``environment.machine`` is text; nothing nests deeper than
    :data:`MAX_DEPTH`. Other fields are free. ``shallow=True``: the caller knows the record
    cannot nest that deep (its text has fewer brackets than that), so the walk is skipped.
    """
    if "status" not in record:
        raise RecordError(f"no status (one of {', '.join(STATUSES)})")
    if record["status"] not in STATUSES:
        raise RecordError(f"status {record['status']!r} is not one of {', '.join(STATUSES)}")
    for section in SECTIONS:
        if not isinstance(record.get(section), dict):
            raise RecordError(f"{section} is {_kind(record.get(section))}, not an object of fields")
    version = record.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise RecordError(f"schema_version is {_kind(version)}, not a whole number")
    for name in _TEXT_FIELDS:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            raise RecordError(f"{name} is {_kind(value)}, not text")
    _check_config_types(record["config"])
    _check_metric_types(record["metrics"])
    machine = record["environment"].get("machine")
    if machine is not None and not isinstance(machine, str):
        raise RecordError(f"environment.machine is {_kind(machine)}, not text")
    if not shallow:
        check_depth(record)


def check_figures(metrics: Mapping[str, Any]) -> None:
    """Raise :class:`RecordError` for a measured figure no run can have: a metric (or an
    element of a list of them) that is negative, NaN or infinite, or one larger than
    :data:`~cnnbench.results.cleaning.MAX_FIGURE`, which readers show as not available. Used
    where figures come from outside cnnbench (imported tables, ``--set``)."""
    for name, value in metrics.items():
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                continue
            if item != item or item < 0 or item in (math.inf, -math.inf):  # an int too large for a float too
                raise RecordError(f"metrics.{name} is {item!r}: a measured figure is a finite number, 0 or more")
            if item > MAX_FIGURE:
                raise RecordError(f"metrics.{name} is {figure_text(item)}: more than {MAX_FIGURE:g}, which no run "
                                  "measures and readers show as not available")


_LONG_LIST = 64


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`RecordError` when ``value`` nests objects or lists deeper than ``limit``.

    Objects and short lists are walked whole; of a long list (step times: thousands of
    numbers) only the first and last items are looked at, which keeps the check cheap and
    still catches a list of lists or of objects.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise RecordError(f"nested more than {limit} levels deep")
        if type(node) is dict:
            children: Any = node.values()
        elif len(node) > _LONG_LIST:
            children = (node[0], node[-1])
        else:
            children = node
        stack.extend((child, depth + 1) for child in children if type(child) in _CONTAINERS)


_CONTAINERS = (dict, list)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (true/false)"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {clip(value, 40)!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_NONE = type(None)
_ACCEPTED = {int: frozenset({int, _NONE}), float: frozenset({int, float, _NONE}), str: frozenset({str, _NONE}),
             bool: frozenset({bool, _NONE})}
"""The exact types (as JSON gives them: ``true`` is no number here) a value of each kind may have."""
_WORDS = {int: "a whole number", float: "a number", str: "text", bool: "true or false"}
_CONFIG_GROUPS: list[tuple[type, tuple[str, ...]]] = []


def _config_groups() -> list[tuple[type, tuple[str, ...]]]:
    """The number options of ``cnnbench run`` by type (from the configuration's own declarations):
    readers compute with them (device counts, batch sizes), so their type is part of the contract."""
    if not _CONFIG_GROUPS:
        from cnnbench.config.options import field_types
        from cnnbench.config.run_config import RunConfig

        types = field_types(RunConfig)
        groups = [(base, tuple(n for n, (b, _) in types.items() if b is base)) for base in (int, float)]
        _CONFIG_GROUPS[:] = groups  # whole at once: another thread never sees it half made, nor twice
    return _CONFIG_GROUPS


_METRIC_GROUPS = (
    (frozenset({int, float, _NONE}), "a number", tuple(n for n in METRIC_FIELDS if n not in _LIST_METRICS)),
    (frozenset({list, _NONE}), "a list", (*(n for n in METRIC_FIELDS if n in _LIST_METRICS), "warnings")),
)


def _check_config_types(config: Mapping[str, Any]) -> None:
    # map(..) keeps the loop in C: a few microseconds a record, for every record a reader reads
    for base, names in _config_groups():
        allowed = _ACCEPTED[base]
        if not allowed.issuperset(map(type, map(config.get, names))):
            name = next(n for n in names if type(config.get(n)) not in allowed)
            raise RecordError(f"config.{name} is {_kind(config[name])}, not {_WORDS[base]}")


def _check_metric_types(metrics: Mapping[str, Any]) -> None:
    for allowed, word, names in _METRIC_GROUPS:
        if not allowed.issuperset(map(type, map(metrics.get, names))):
            name = next(n for n in names if type(metrics.get(n)) not in allowed)
            raise RecordError(f"metrics.{name} is {_kind(metrics[name])}, not {word}")


STARTED_AT_FILLED_IN = "import"
"""The top-level ``started_at_source`` of a record whose ``started_at`` an import filled in (the
file's modification time, or the time of the import): not when the run started."""


@dataclass(frozen=True)
class Record:
    """An immutable run record. ``to_dict()`` gives the JSON form."""

    config: Mapping[str, Any]
    environment: Mapping[str, Any]
    metrics: Mapping[str, Any]
    status: str = "ok"
    error: str | None = None
    run_id: str = field(default_factory=new_run_id)
    started_at: str = field(default_factory=now_iso)
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further top-level fields (``source``, ``case_name``, ``suite_name``, ...)."""
    session_id: str | None = field(default_factory=current_session_id)
    """The invocation that made the record (an ``extra`` ``session_id`` wins); None: unknown."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        session = extra.pop("session_id", None) or d["session_id"]
        ordered = {
            "schema_version": d["schema_version"],
            "tool_version": d["tool_version"],
            "run_id": d["run_id"],
            "started_at": d["started_at"],
            **({"session_id": session} if session else {}),
            "status": d["status"],
            "error": d["error"],
            "config": dict(d["config"]),
            "environment": dict(d["environment"]),
            "metrics": dict(d["metrics"]),
        }
        for key, value in extra.items():
            ordered.setdefault(key, value)
        return ordered

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        known = {"schema_version", "tool_version", "run_id", "started_at", "session_id", "status", "error",
                 "config", "environment", "metrics"}
        return cls(
            config=data.get("config") or {},
            environment=data.get("environment") or {},
            metrics=data.get("metrics") or {},
            status=data.get("status", "ok"),
            error=data.get("error"),
            run_id=data.get("run_id") or new_run_id(),
            started_at=data.get("started_at") or now_iso(),
            tool_version=data.get("tool_version", __version__),
            schema_version=data.get("schema_version", SCHEMA_VERSION),
            extra={k: v for k, v in data.items() if k not in known},
            session_id=data.get("session_id"),
        )
