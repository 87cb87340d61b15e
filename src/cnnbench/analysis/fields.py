"""Record fields by dotted name, short aliases, and how their values sort and read.

A field is named by its dotted path in the record (``config.model``,
``environment.gpu_model``, ``metrics.total_images_per_sec``, ``source``). Common fields
have short aliases (``model``, ``machine``, ``gpu``, ...); any other bare name is looked up
in ``config``, then ``environment``, then ``metrics``. No torch here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

# Field access lives with the records; report code reads it through this module.
from cnnbench.results.query import MACHINE as MACHINE
from cnnbench.results.query import SOURCE as SOURCE
from cnnbench.results.query import get_value as get_value
from cnnbench.results.query import nearest_fields
from cnnbench.results.step_summary import plain
from cnnbench.words import natural_key

ALIASES: dict[str, str] = {
    "model": "config.model",
    "machine": "environment.machine",
    "gpu": "environment.gpu_model",
    "cpu": "environment.cpu_model",
    "num_devices": "config.num_devices",
    "devices": "config.num_devices",
    "batch_size": "config.batch_size",
    "batch": "config.batch_size",
    "data": "config.data_name",
    "variable_update": "config.variable_update",
    "precision": "config.precision",
    "device": "config.device",
    "compile": "config.compile",
    "source": "source",
    "status": "status",
}

# Short display names (the reverse of the aliases that read best).
SHORT_NAMES: dict[str, str] = {
    "config.model": "model",
    "environment.machine": "machine",
    "environment.gpu_model": "gpu",
    "environment.cpu_model": "cpu",
    "config.num_devices": "num_devices",
    "config.batch_size": "batch_size",
    "config.data_name": "data",
    "config.variable_update": "variable_update",
    "config.precision": "precision",
}

TOP_LEVEL = (
    "status", "source", "run_id", "suite_name", "case_name", "tool_version",
    "schema_version", "started_at", "error", "source_path",
)
SECTIONS = ("config", "environment", "metrics")

MODEL = "config.model"
BATCH = "config.batch_size"
DEVICES = "config.num_devices"
IPS = "metrics.total_images_per_sec"

# Fields that describe the machine itself: they come with the machine label, so they
# never split a configuration; comparing by one of them compares machines.
HARDWARE_FIELDS = frozenset({
    "environment.machine", "environment.hostname", "environment.cpu_model", "environment.cpu_cores",
    "environment.gpu_model", "environment.gpu_count", "environment.platform",
})

# Fields whose values read on their own in a label ("resnet50", "fp16"); others read "name=value".
BARE_VALUE_FIELDS = frozenset({
    "config.model", "environment.machine", "environment.gpu_model", "environment.cpu_model",
    "config.data_name", "config.variable_update", "config.precision", "source", "environment.hostname",
})


class FieldError(ValueError):
    """An unknown field name or a malformed field expression (one line, for the user)."""


def known_fields(records: Iterable[Mapping[str, Any]]) -> set[str]:
    """Dotted names seen in the records, plus the aliases."""
    keys: dict[str, set[str]] = {s: set() for s in SECTIONS}
    top: set[str] = set()
    for rec in records:
        top.update(rec)
        for section, seen in keys.items():
            sub = rec.get(section)
            if isinstance(sub, dict):
                seen.update(sub)
    names = set(ALIASES) | set(TOP_LEVEL) | (top - set(SECTIONS))
    for section, seen in keys.items():
        names.update(f"{section}.{k}" for k in seen)
    return names


def resolve_field(name: str, records: Sequence[Mapping[str, Any]]) -> str:
    """The dotted field for a user-given name or alias; raises :class:`FieldError` naming the
    nearest known names when no record has it (``config.bogus`` as much as ``bogus``)."""
    name = name.strip()
    if not name:
        raise FieldError("empty field name")
    if name in ALIASES:
        return ALIASES[name]
    known = known_fields(records)  # a scan of every record: only for names that need it
    if "." in name:
        if name in known or any(name.startswith(k + ".") for k in known if "." in k):
            return name  # a field, or a value nested under one (metrics.step_series.loss)
    else:
        if name in TOP_LEVEL:
            return name
        for section in SECTIONS:
            if f"{section}.{name}" in known:
                return f"{section}.{name}"
        if name in known:
            return name
    close = nearest_fields(name, known)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise FieldError(f"unknown field {name!r}{hint}")


def short_name(field: str) -> str:
    """A short display name: the alias for common fields, else the last dotted part."""
    return SHORT_NAMES.get(field) or field.rsplit(".", 1)[-1]


def hashable(value: Any) -> Hashable:
    """A hashable stand-in for a record value (lists and objects become JSON text)."""
    value = plain(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


sort_key = natural_key
"""Order values naturally (``resnet50`` before ``resnet101``; see :func:`cnnbench.words.natural_key`)."""


def text(value: Any) -> str:
    """A value as plain text (``—`` for ``None``)."""
    if value is None:
        return "—"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def label(field: str, value: Any) -> str:
    """A value as it reads in a label: ``resnet50``, ``fp16``, ``batch_size=64``, ``compile=True``
    (``None`` reads ``none``)."""
    if field == "config.forward_only" and isinstance(value, bool):
        return "inference" if value else "training"
    shown = "none" if value is None else text(value)
    if field in BARE_VALUE_FIELDS:
        return shown
    return f"{short_name(field)}={shown}"


def slug(value: str, limit: int = 100) -> str:
    """A file-name-safe form of a label (long ones cut, with a hash of the whole to stay unique)."""
    s = re.sub(r"[^A-Za-z0-9._+-]+", "_", value).strip("_.") or "table"
    if len(s) > limit:
        s = s[: limit - 9] + "-" + hashlib.sha1(s.encode()).hexdigest()[:8]
    return s
