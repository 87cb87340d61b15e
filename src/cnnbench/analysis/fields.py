"""Record fields by dotted name, short aliases, and how their values sort and read.

A field is named by its dotted path in the record (``config.model``,
``environment.gpu_model``, ``metrics.total_images_per_sec``, ``source``). Common fields
have short aliases (``model``, ``machine``, ``gpu``, ...); any other bare name is looked up
in ``config``, then ``environment``, then ``metrics``. The fields themselves (unit, direction,
label, identity, aliases) are declared once in the field registry, :mod:`cnnbench.results.fields`,
whose tables and path constants this module re-exports. No torch here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

# Field access lives with the records; report code reads it through this module.
from cnnbench.results.fields import ALIASES as ALIASES
from cnnbench.results.fields import ALL_REDUCE as ALL_REDUCE
from cnnbench.results.fields import BARE_VALUE_FIELDS as BARE_VALUE_FIELDS
from cnnbench.results.fields import BATCH as BATCH
from cnnbench.results.fields import BUCKET_CAP_MB as BUCKET_CAP_MB
from cnnbench.results.fields import BUSBW as BUSBW
from cnnbench.results.fields import COMPILE as COMPILE
from cnnbench.results.fields import CPU as CPU
from cnnbench.results.fields import CPU_CORES as CPU_CORES
from cnnbench.results.fields import CPU_THREADS as CPU_THREADS
from cnnbench.results.fields import CUDNN_VERSION as CUDNN_VERSION
from cnnbench.results.fields import DATA as DATA
from cnnbench.results.fields import DATA_FORMAT as DATA_FORMAT
from cnnbench.results.fields import DEVICE as DEVICE
from cnnbench.results.fields import DEVICES as DEVICES
from cnnbench.results.fields import DISTORTIONS as DISTORTIONS
from cnnbench.results.fields import ENERGY as ENERGY
from cnnbench.results.fields import FIELDS as FIELDS
from cnnbench.results.fields import FORWARD_ONLY as FORWARD_ONLY
from cnnbench.results.fields import GPU as GPU
from cnnbench.results.fields import GPU_COUNT as GPU_COUNT
from cnnbench.results.fields import HARDWARE_FIELDS as HARDWARE_FIELDS
from cnnbench.results.fields import HOST_CPUS as HOST_CPUS
from cnnbench.results.fields import HOSTNAME as HOSTNAME
from cnnbench.results.fields import IMAGE_SIZE as IMAGE_SIZE
from cnnbench.results.fields import IMAGES_PER_JOULE as IMAGES_PER_JOULE
from cnnbench.results.fields import IPS as IPS
from cnnbench.results.fields import IPS_PER_CORE as IPS_PER_CORE
from cnnbench.results.fields import LOCAL_PARAMETER_DEVICE as LOCAL_PARAMETER_DEVICE
from cnnbench.results.fields import MACHINE as MACHINE
from cnnbench.results.fields import MEMORY_BYTES as MEMORY_BYTES
from cnnbench.results.fields import MODEL as MODEL
from cnnbench.results.fields import NUM_NODES as NUM_NODES
from cnnbench.results.fields import NUM_WORKERS as NUM_WORKERS
from cnnbench.results.fields import OTHER_PROCESSES_CPU_CORES as OTHER_PROCESSES_CPU_CORES
from cnnbench.results.fields import PER_DEVICE_TORCH_THREADS as PER_DEVICE_TORCH_THREADS
from cnnbench.results.fields import PLATFORM as PLATFORM
from cnnbench.results.fields import PRECISION as PRECISION
from cnnbench.results.fields import SECTIONS as SECTIONS
from cnnbench.results.fields import SHORT_NAMES as SHORT_NAMES
from cnnbench.results.fields import SOURCE as SOURCE
from cnnbench.results.fields import STATUS as STATUS
from cnnbench.results.fields import STEP_TIMES as STEP_TIMES
from cnnbench.results.fields import SYNTHETIC_LOCATION as SYNTHETIC_LOCATION
from cnnbench.results.fields import THREADS_PER_WORKER as THREADS_PER_WORKER
from cnnbench.results.fields import TOP_LEVEL as TOP_LEVEL
from cnnbench.results.fields import TORCH_NUM_THREADS as TORCH_NUM_THREADS
from cnnbench.results.fields import VARIABLE_UPDATE as VARIABLE_UPDATE
from cnnbench.results.fields import Field as Field
from cnnbench.results.fields import UnknownField as UnknownField
from cnnbench.results.fields import by_alias as by_alias
from cnnbench.results.fields import field as field
from cnnbench.results.fields import headers as headers
from cnnbench.results.fields import list_fields as list_fields
from cnnbench.results.fields import paths as paths
from cnnbench.results.query import get_value as get_value
from cnnbench.results.query import nearest_fields
from cnnbench.results.step_summary import plain
from cnnbench.words import natural_key


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
        if name in known:
            return name
        # a value nested under a field that holds an object in some run (metrics.step_series.loss); not
        # one under a field of single values (config.model.nosuch, which ordered nothing, in silence)
        parents = [k for k in known if "." in k and name.startswith(k + ".")]
        if any(isinstance(get_value(r, k), Mapping) for k in parents for r in records):
            return name
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
    if field == FORWARD_ONLY and isinstance(value, bool):
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
