"""The run record: one JSON object per run, the contract every later tool reads.

Top-level fields: ``schema_version``, ``tool_version``, ``run_id``, ``started_at`` (ISO 8601),
``status`` (``ok|oom|error|timeout``), ``error`` (text or null), ``config`` (every resolved
option under its snake_case flag name), ``environment`` and ``metrics``. Other top-level
fields (``source``, ``case_name``, ``suite_name``, ...) may be added freely.

This module does not import torch.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cnnbench import __version__

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


ERROR_LIMIT = 2000
"""Most characters a record's ``error`` keeps (the start of the text, which names the cause)."""

_NATIVE_STACK = re.compile(
    r"^\s*(Exception raised from |frame #\d+|C\+\+ CapturedTraceback:|#\d+ \S.*\bfrom\b|"
    r"\[ ?frame \d+ ?\]|0x[0-9a-f]+ in |-+ C\+\+ Traceback)"
)


def without_native_stack(text: str) -> str:
    """``text`` without the C++ stack traces torch appends to its errors (``Exception raised
    from ...`` and ``frame #0: ...`` lines, ``C++ CapturedTraceback:`` blocks); the Python
    lines around them stay."""
    kept: list[str] = []
    in_stack = False
    for line in text.splitlines():
        if _NATIVE_STACK.match(line):
            in_stack = True
            continue
        if in_stack and (line.startswith((" ", "\t")) or not line.strip()):
            continue  # the indented continuation of a frame
        in_stack = False
        kept.append(line)
    return "\n".join(kept).strip()


def clip(text: str, limit: int = ERROR_LIMIT) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis marks the cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_text(exc: BaseException, limit: int = ERROR_LIMIT) -> str:
    """``"Type: message"`` for a record's ``error``: the message without the C++ stack that
    some torch errors append (``Exception raised from ...``, ``frame #0``), cut to ``limit``."""
    message = without_native_stack(str(exc).strip())
    text = f"{type(exc).__name__}: {message}".strip().rstrip(":")
    return clip(text, limit)


class RecordError(ValueError):
    """A record that breaks the contract (see :func:`check_record`); the message says why, in one line."""


SECTIONS = ("config", "environment", "metrics")
MAX_DEPTH = 16
"""Deepest nesting of objects and lists a record may have (records are 4 deep; every tool
that walks one recursively stays far from Python's recursion limit)."""
_LIST_METRICS = frozenset({"step_times_s", "per_device_images_per_sec", "warnings"})
_TEXT_FIELDS = ("run_id", "started_at", "tool_version", "error")


def check_record(record: Mapping[str, Any], *, shallow: bool = False) -> None:
    """Raise :class:`RecordError` when ``record`` breaks the contract every reader relies on.

    The contract: ``status`` is one of :data:`STATUSES`; ``config``, ``environment`` and
    ``metrics`` are objects; ``schema_version`` is a whole number; ``run_id``,
    ``started_at``, ``tool_version`` and ``error`` are text (``error`` may be null);
    ``config`` fields that are ``cnnbench run`` options have the option's type (or null);
    the contract's metrics (:data:`METRIC_FIELDS`) are numbers (lists for step times and
    per-device rates) or null; ``environment.machine`` is text; nothing nests deeper than
    :data:`MAX_DEPTH`. Other fields are free. ``shallow=True``: the caller knows the record
    cannot nest that deep (its text has fewer brackets), so the walk is skipped.
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
    element of a list of them) that is negative, NaN or infinite. Used where figures come
    from outside cnnbench (imported tables, ``--set``)."""
    for name, value in metrics.items():
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                continue
            if not math.isfinite(item) or item < 0:
                raise RecordError(f"metrics.{name} is {item!r}: a measured figure is a finite number, 0 or more")


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`RecordError` when ``value`` nests objects or lists deeper than ``limit``."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise RecordError(f"nested more than {limit} levels deep")
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))


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


_CONFIG_TYPES: dict[str, tuple[type, ...]] = {}
_ACCEPTED = {int: (int, type(None)), float: (int, float, type(None)), str: (str, type(None)),
             bool: (bool, type(None))}
"""The exact types (as JSON gives them: ``true`` is no number here) a value of each kind may have."""
_WORDS = {int: "a whole number", float: "a number", str: "text", bool: "true or false"}


def _config_types() -> dict[str, tuple[type, ...]]:
    """The types each ``cnnbench run`` option's value may have (from the configuration's own declarations)."""
    if not _CONFIG_TYPES:
        from cnnbench.config.options import field_types
        from cnnbench.config.run_config import RunConfig

        _CONFIG_TYPES.update({name: _ACCEPTED[base] for name, (base, _) in field_types(RunConfig).items()
                              if base in _ACCEPTED})
    return _CONFIG_TYPES


_ANY = (str, int, float, bool, type(None), list, dict)
_METRIC_TYPES = {name: (list, type(None)) if name in _LIST_METRICS else (int, float, type(None))
                 for name in (*METRIC_FIELDS, "warnings")}


def _check_config_types(config: Mapping[str, Any]) -> None:
    types = _config_types()
    bad = [name for name, value in config.items() if type(value) not in types.get(name, _ANY)]  # fast when none
    if bad:
        value, allowed = config[bad[0]], types[bad[0]]
        base = next(b for b, a in _ACCEPTED.items() if a is allowed)
        raise RecordError(f"config.{bad[0]} is {_kind(value)}, not {_WORDS[base]}")


def _check_metric_types(metrics: Mapping[str, Any]) -> None:
    bad = [name for name, allowed in _METRIC_TYPES.items() if type(metrics.get(name)) not in allowed]
    if bad:
        word = "a list" if bad[0] in _LIST_METRICS else "a number"
        raise RecordError(f"metrics.{bad[0]} is {_kind(metrics[bad[0]])}, not {word}")


def finite_numbers(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with every NaN or infinite number replaced by null (JSON has no such numbers),
    and, when any was, a ``metrics.warnings`` entry naming the fields. A copy; ``record`` is
    not changed."""
    replaced: list[str] = []
    out = _finite_copy(record, "", replaced)
    if replaced:
        metrics = out.get("metrics")
        if not isinstance(metrics, dict):
            metrics = out["metrics"] = {}
        warnings = metrics.get("warnings")
        warnings = list(warnings) if isinstance(warnings, list) else []
        warnings.append("non-finite numbers (NaN or infinity) stored as null: " + ", ".join(dict.fromkeys(replaced)))
        metrics["warnings"] = warnings
    return out


def _finite_copy(value: Any, path: str, replaced: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        replaced.append(path or "(value)")
        return None
    if isinstance(value, Mapping):
        return {k: _finite_copy(v, f"{path}.{k}" if path else str(k), replaced) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_copy(v, path, replaced) for v in value]
    return value


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        ordered = {
            "schema_version": d["schema_version"],
            "tool_version": d["tool_version"],
            "run_id": d["run_id"],
            "started_at": d["started_at"],
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
        known = {"schema_version", "tool_version", "run_id", "started_at", "status", "error",
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
        )
