"""Importers: turn other tools' output into cnnbench records.

A small registry: each importer is a function ``(paths, options) -> ImportResult``
registered under the name ``cnnbench import NAME`` uses. A new importer is a module
that calls :func:`register_importer` and is listed in :data:`_MODULES`; nothing else
changes. Imported records say where they came from (``source``, ``source_path``) and
carry a ``run_id`` derived from their content, so importing the same file twice can be
recognised and skipped. No torch here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.results import files
from cnnbench.results.naming import case_name

MAX_INPUT = 1 << 30
"""Most bytes an importer reads from one input file (a log or a table is read whole)."""


def read_input(path: Path) -> bytes:
    """The whole of input file ``path``: a regular file (a symlink to one is fine) of at most
    :data:`MAX_INPUT` bytes. A FIFO, a device, a socket or a folder (or a link to one, or a file
    swapped in after a listing) raises :class:`~cnnbench.results.files.FileProblem`, whose text
    is one line naming it, and is never waited on nor read."""
    return files.read_regular(path, MAX_INPUT)


@dataclass(frozen=True)
class ImportOptions:
    """What the user says about the imported runs."""

    machine_label: str | None = None
    """``environment.machine`` for every record (instead of what the input says)."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """Dotted record fields set on every record, e.g. ``{"config.precision": "amp_fp16"}``."""


@dataclass
class ImportResult:
    """Records made, and one line per input that could not be used at all."""

    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """The problems that refuse a whole input as the wrong kind of input (a folder, a file that
    is no CSV, a table whose columns are no record fields): usage errors, when nothing else came."""

    def refuse(self, problem: str) -> None:
        """Record a problem that refuses a whole input (see :attr:`refused`)."""
        self.problems.append(problem)
        self.refused.append(problem)


ImporterFn = Callable[[Sequence[Path], ImportOptions], ImportResult]


@dataclass(frozen=True)
class Importer:
    name: str
    help: str
    run: ImporterFn


_REGISTRY: dict[str, Importer] = {}
_NAMING_FIELDS = ("data_name", "variable_update", "all_reduce", "distortions", "num_devices", "device")
_MODULES = ("cnnbench.results.importers.tf_cnn_benchmarks", "cnnbench.results.importers.csv_table")


def register_importer(name: str, help: str) -> Callable[[ImporterFn], ImporterFn]:
    """Decorator: register ``fn(paths, options) -> ImportResult`` as ``cnnbench import NAME``."""

    def wrap(fn: ImporterFn) -> ImporterFn:
        if name in _REGISTRY and _REGISTRY[name].run is not fn:
            raise ValueError(f"importer {name!r} registered twice")
        _REGISTRY[name] = Importer(name, help, fn)
        return fn

    return wrap


def _load() -> None:
    for module in _MODULES:
        importlib.import_module(module)


def importers() -> dict[str, Importer]:
    """All registered importers by name."""
    _load()
    return dict(_REGISTRY)


def get_importer(name: str) -> Importer:
    """The importer called ``name``; ``KeyError`` naming the known ones."""
    known = importers()
    if name not in known:
        raise KeyError(f"unknown importer {name!r} (choose from {', '.join(sorted(known))})")
    return known[name]


def finalize_record(record: dict[str, Any], options: ImportOptions) -> dict[str, Any]:
    """Set ``--machine-label`` and ``--set`` fields on a record, then its ``case_name`` if it has none
    (in place; returned)."""
    if options.machine_label:
        record.setdefault("environment", {})["machine"] = options.machine_label
    apply_overrides(record, options.overrides)
    if "started_at" in options.overrides:  # the user's own start time: no longer one the import filled in
        record.pop("started_at_source", None)
    config = record.get("config") or {}
    if not record.get("case_name") and any(k in config for k in _NAMING_FIELDS):
        record["case_name"] = case_name(config, record.get("source"))
    return record


def apply_overrides(record: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Set dotted fields on ``record`` (in place); ``ValueError`` when a part on the way is no object."""
    for dotted, value in overrides.items():
        node = record
        *parents, leaf = dotted.split(".")
        for depth, part in enumerate(parents, 1):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"{'.'.join(parents[:depth])} is not an object of fields, so it has no {leaf!r}")
            node = child
        node[leaf] = value


NATIVE_SOURCES = (None, "cnnbench", "csv")
"""``source`` values of records in cnnbench's own words (a record of another tool keeps that
tool's words for its options: ``distributed_replicated``)."""


def check_imported(record: Mapping[str, Any], *, native: bool | None = None) -> None:
    """``ValueError`` (one line) when a record to import is not one ``cnnbench run`` could have
    written and every reader reads: the record contract
    (:func:`~cnnbench.results.record.check_record`), a ``schema_version`` this cnnbench reads
    (0 to the current), a ``started_at`` in ISO 8601, a ``config.model`` that names something,
    each option by its own rules as ``cnnbench run`` checks them (in cnnbench's words unless
    the record is another tool's: ``native``, default from its ``source``), measured
    figures (finite, not negative, none that readers show as not available), no throughput
    on a failed run (``status`` other than ``ok``), and a machine label a results file can be
    named after (:func:`~cnnbench.results.store.machine_file_name`). Imported tables and
    ``--set`` are checked by this, whole records after ``--set`` too, so nothing reaches a
    store that ``run`` would refuse or a reader would not show, and every record is checked
    before any is written."""
    import datetime as _dt

    from cnnbench.config.errors import ConfigError
    from cnnbench.config.run_config import check_config_values
    from cnnbench.results.cleaning import unusable_figure
    from cnnbench.results.migrate import record_version
    from cnnbench.results.record import SCHEMA_VERSION, RecordError, check_figures, check_record

    try:
        check_record(record)
        version = record_version(dict(record))
    except RecordError as exc:
        raise ValueError(str(exc)) from None
    if version > SCHEMA_VERSION:
        raise ValueError(f"schema_version {version} is newer than this cnnbench writes ({SCHEMA_VERSION})")
    started = record.get("started_at")
    if started is not None:
        try:
            _dt.datetime.fromisoformat(started)
        except ValueError:
            raise ValueError(f"started_at {started[:40]!r} is not an ISO 8601 time (such as "
                             "2024-01-31T12:00:00+00:00)") from None
    config = record["config"]
    model = config.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"config.model is {'missing' if model is None else repr(model)}: a record names its model")
    if native is None:
        native = record.get("source") in NATIVE_SOURCES
    try:
        check_config_values(config, choices=native)
    except ConfigError as exc:
        raise ValueError(f"config.{exc.field}: {exc.reason}") from None
    try:
        check_figures(record["metrics"])
    except RecordError as exc:
        raise ValueError(str(exc)) from None
    thrown = _failed_run_throughput(record)
    if thrown is not None:
        name, figure = thrown
        raise ValueError(f"status {record['status']} with metrics.{name} {figure!r}: a failed run "
                         "has no throughput (leave the figure empty, or give status ok)")
    unusable = unusable_figure(record)  # what a reader would show as not available
    if unusable:
        raise ValueError(f"{unusable}: a reader would show it as not available")
    _check_machine_label(record["environment"].get("machine"))


def _failed_run_throughput(record: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The first throughput figure (a metric named ``*images_per_sec*``: the total, the mean,
    median, stderr and jitter, the per-device list) of a failed record, or None. ``cnnbench run``
    writes none on a failed run (only what it measured before: memory, time, notes). A record
    read from a log that did not finish (it has a ``source_header``) keeps the figures of its
    last progress line, as the log says them (any record with a ``source_header`` does: such figures
    are never shown, as no reader shows a figure of a failed run, ``results list`` included)."""
    if record["status"] == "ok":
        return None
    metrics = record["metrics"]
    if "source_header" not in record:
        names = [n for n in metrics if "images_per_sec" in n]
    else:
        names = ["total_images_per_sec"]
    for name in names:
        figure = metrics.get(name)
        if figure is not None and figure != []:
            return name, figure
    return None


def _check_machine_label(machine: str | None) -> None:
    """``ValueError`` when no results file can be named after the label ``machine``."""
    from cnnbench.results.files import NAME_MAX
    from cnnbench.results.store import machine_file_name

    if not machine:
        return
    try:
        name = machine_file_name(machine)
    except (OSError, ValueError) as exc:  # store.MachineLabelError
        raise ValueError(str(exc)) from None
    if len(name.encode()) > NAME_MAX:
        raise ValueError(f"environment.machine {machine[:24]!r}...: too long for a results file name "
                         f"({len(name.encode())} bytes; at most {NAME_MAX})")


def check_overrides(overrides: Mapping[str, Any]) -> None:
    """``ValueError`` (one line) when ``--set`` fields would break a record (see
    :func:`check_imported`: the record contract, a readable schema version, an ISO 8601
    ``started_at``, options as ``cnnbench run`` checks them, measured figures)."""
    from cnnbench.results.record import Record

    for dotted in overrides:
        if not dotted or any(not part for part in dotted.split(".")):
            raise ValueError(f"{dotted!r} is not a dotted field name")
    sample = Record(config={"model": "resnet50"}, environment={"machine": "m"}, metrics={}).to_dict()
    apply_overrides(sample, overrides)
    check_imported(sample, native=True)


__all__ = [
    "ImportOptions",
    "ImportResult",
    "Importer",
    "apply_overrides",
    "check_imported",
    "check_overrides",
    "finalize_record",
    "get_importer",
    "importers",
    "read_input",
    "register_importer",
]
