"""Upgrading records written under older ``schema_version``s to the current one.

Every reader goes through :func:`migrate`, so code downstream of the store sees only
current records. A schema change bumps :data:`cnnbench.results.record.SCHEMA_VERSION`
and adds one function here that upgrades a record from the previous version; the
chain runs in order, so a version-0 record passes through every step.

Version 0 is the name for records without a ``schema_version`` (hand-written, or
from tools before the field existed): they get the fields version 1 requires.
Version 2 records ``null`` for options a run did not use (the optimizer of an inference
run, the momentum of plain SGD) and renamed ``loader_workers`` to ``num_workers``.
No torch here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cnnbench.results.record import SCHEMA_VERSION, STATUSES, RecordError

Migration = Callable[[dict[str, Any]], dict[str, Any]]


class SchemaTooNewError(RecordError):
    """A record written by a newer cnnbench than this one."""


def _v0_to_v1(record: dict[str, Any]) -> dict[str, Any]:
    """Fill what schema 1 requires: the three sections, a status and an error text."""
    for section in ("config", "environment", "metrics"):
        if not isinstance(record.get(section), dict):
            record[section] = {}
    status = record.get("status")
    if status not in STATUSES:
        # Without a status, a record is a success only if it carries the figure.
        has_figure = record["metrics"].get("total_images_per_sec") is not None
        record["status"] = "ok" if has_figure else "error"
        if not has_figure and not record.get("error"):
            record["error"] = "record without a status or a total_images_per_sec (schema 0)"
    record.setdefault("error", None)
    record["schema_version"] = 1
    return record


_TRAINING_OPTIONS = ("optimizer", "learning_rate", "momentum", "weight_decay")


def _v1_to_v2(record: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 records ``null`` for options a run did not use, and names the DataLoader
    worker count ``num_workers`` (it was ``loader_workers``)."""
    cfg = record.get("config")
    if isinstance(cfg, dict) and cfg:
        if "loader_workers" in cfg:
            workers = cfg.pop("loader_workers")
            cfg.setdefault("num_workers", workers if cfg.get("synthetic_location") == "loader" else None)
        if cfg.get("forward_only") is True:
            for name in _TRAINING_OPTIONS:
                if name in cfg:
                    cfg[name] = None
        elif cfg.get("optimizer") in ("sgd", "adam") and "momentum" in cfg:
            cfg["momentum"] = None
    record["schema_version"] = 2
    return record


MIGRATIONS: dict[int, Migration] = {0: _v0_to_v1, 1: _v1_to_v2}
"""``MIGRATIONS[v]`` upgrades a record from version ``v`` to ``v + 1`` (in place or not)."""


def record_version(record: dict[str, Any]) -> int:
    """The record's schema version; 0 when it has none (absent or null).

    Raises :class:`RecordError` for a value that is not a version (text, a negative number).
    """
    version = record.get("schema_version")
    if version is None:
        return 0
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise RecordError(f"schema_version {version!r} is not a version (a whole number, 0 or more)")
    return version


def migrate(record: dict[str, Any]) -> dict[str, Any]:
    """The record upgraded to :data:`SCHEMA_VERSION`.

    Raises :class:`SchemaTooNewError` for a version this cnnbench does not know, and
    :class:`RecordError` for one that is no version at all.
    """
    version = record_version(record)
    if version == SCHEMA_VERSION:
        return record
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"schema_version {version} is newer than this cnnbench reads ({SCHEMA_VERSION}); upgrade cnnbench"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:  # pragma: no cover - a missing step is a programming error
            raise RuntimeError(f"no migration from schema_version {version}")
        record = step(record)
        version += 1
    return record
