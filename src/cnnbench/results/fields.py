"""The field registry: every record field that a reader names, declared once.

A :class:`Field` is one dotted path in a record (``config.model``, ``environment.gpu_model``,
``metrics.total_images_per_sec``, ``source``) with its unit, which way is better, how the
workers of a multi-device run combine it, its label and number format, whether it is part of
a configuration's identity, its aliases, and whether a report shows it in tables of its own
(:class:`Shown`: declaring a field with ``shown=Shown()`` is all it takes to have them).
Tables, observations, ``compare``, ``predict``, ``--where`` and the exports name fields by the
constants here (:data:`MODEL`, :data:`IPS`, ...) rather than by spelling the path
(``tests/test_field_registry.py`` holds them to it).

The ``config`` fields are not repeated here: they come from the run options' own declarations
(:func:`cnnbench.config.run_config.config_fields`, identity from ``identity_fields()``), with
the few display details in :data:`_CONFIG_DETAILS`. This module lives in ``results`` (not a
leaf) because it reads ``config``; everything from ``results`` up may import it. No torch here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from cnnbench.config.run_config import config_fields, identity_fields

Direction = Literal["higher", "lower"]
Combine = Literal["sum", "max", "mean", "per_rank"]


@dataclass(frozen=True)
class Shown:
    """How a report shows a field: one table of it per configuration, under its own heading
    (:mod:`cnnbench.report.tables.shown`); each part has a default made of the field's label,
    unit and direction."""

    heading: str = ""
    """The heading of its tables (default: the label, with the unit in brackets)."""
    name: str = ""
    """Its tables' kind and the start of their ids (default: the key, ``-`` for ``_``)."""
    means: str = ""
    """What a value is, in the tables' note (default: its unit and which way is better)."""
    absent: str = "no value"
    """What a ``—`` cell means."""
    positive: bool = False
    """Only values above 0 count (a 0 or less is no figure)."""


@dataclass(frozen=True)
class Field:
    """One record field and how it reads."""

    path: str
    """Dotted path in the record (``metrics.total_images_per_sec``); top-level fields have no dot."""
    unit: str | None = None
    """``"images/s"``, ``"s"``, ``"bytes"``, ``"J"``, ...; ``None`` for a count, a name or a flag."""
    direction: Direction | None = None
    """Which way is better: ``"higher"``, ``"lower"``, or ``None`` for descriptive fields."""
    combine: Combine | None = None
    """How the workers of one run make the run's value: ``"sum"``, ``"max"``, ``"mean"``,
    ``"per_rank"`` (a list, one per worker), or ``None`` (one value for the run)."""
    label: str = ""
    """Its name as output heads a column or a table of it (``images/sec``, ``batch``; default: the
    last dotted part): printed headers of a registered field read it, never spell it."""
    format: str = ""
    """A format spec for numbers (``",.1f"``); empty for ``str()``."""
    identity: bool = False
    """Part of a configuration's identity: runs that differ in it are different configurations."""
    aliases: tuple[str, ...] = ()
    """Short names a user may write for it (``model``, ``gpu``); a common field's first one is its short name."""
    common: bool = False
    """A common field: output that names fields briefly (``batch_size=64``, ``columns: machine``) uses its
    first alias for its path (:data:`SHORT_NAMES`)."""
    hardware: bool = False
    """Describes the machine itself: it comes with the machine label, never splits a configuration."""
    bare: bool = False
    """Its values read on their own in a label (``resnet50``, ``fp16``); others read ``name=value``."""
    shown: Shown | None = None
    """Shown in reports, a table of it per configuration, as this says; ``None``: in no table of its own."""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.path.rsplit(".", 1)[-1])

    @property
    def section(self) -> str:
        """``config``, ``environment``, ``metrics``, or ``""`` for a top-level field."""
        return self.path.split(".", 1)[0] if "." in self.path else ""

    @property
    def name(self) -> str:
        """The key within its section (the path itself for a top-level field)."""
        return self.path.split(".", 1)[-1]

    def show(self, value: float) -> str:
        """A number in the field's format."""
        return format(value, self.format)


# --- path constants: the names readers use ------------------------------------------------
SOURCE = "source"
STATUS = "status"
MODEL = "config.model"
BATCH = "config.batch_size"
DEVICES = "config.num_devices"
DEVICE = "config.device"
PRECISION = "config.precision"
DATA = "config.data_name"
DATA_FORMAT = "config.data_format"
VARIABLE_UPDATE = "config.variable_update"
FORWARD_ONLY = "config.forward_only"
COMPILE = "config.compile"
IMAGE_SIZE = "config.image_size"
DISTORTIONS = "config.distortions"
THREADS_PER_WORKER = "config.threads_per_worker"
NUM_NODES = "config.num_nodes"
NUM_WORKERS = "config.num_workers"
HOST_CPUS = "config.host_cpus"
SYNTHETIC_LOCATION = "config.synthetic_location"
LOCAL_PARAMETER_DEVICE = "config.local_parameter_device"
BUCKET_CAP_MB = "config.bucket_cap_mb"
ALL_REDUCE = "config.all_reduce"
MACHINE = "environment.machine"
HOSTNAME = "environment.hostname"
GPU = "environment.gpu_model"
CPU = "environment.cpu_model"
CPU_CORES = "environment.cpu_cores"
GPU_COUNT = "environment.gpu_count"
PLATFORM = "environment.platform"
CPU_THREADS = "environment.cpu_threads"
MEMORY_BYTES = "environment.memory_bytes"
TORCH_NUM_THREADS = "environment.torch_num_threads"
CUDNN_VERSION = "environment.cudnn_version"
AVAILABLE_CPUS = "environment.available_cpus"
TORCH_VERSION = "environment.torch_version"
TORCHVISION_VERSION = "environment.torchvision_version"
PYTHON_VERSION = "environment.python_version"
CUDA_VERSION = "environment.cuda_version"
CUDA_DRIVER_VERSION = "environment.cuda_driver_version"
NCCL_VERSION = "environment.nccl_version"
GPU_DRIVER = "environment.gpu_driver"
GPU_MIG_PROFILE = "environment.gpu_mig_profile"
GPU_SM_CLOCK = "environment.gpus.sm_clock_max_mhz"
GPU_MEMORY_CLOCK = "environment.gpus.memory_clock_max_mhz"
GPU_POWER_LIMIT = "environment.gpus.power_limit_w"
GPU_PCIE_GENERATION = "environment.gpus.pcie_generation"
GPU_PCIE_WIDTH = "environment.gpus.pcie_width"
IPS = "metrics.total_images_per_sec"
STEP_TIMES = "metrics.step_times_s"
ENERGY = "metrics.energy_j"
IMAGES_PER_JOULE = "metrics.images_per_joule"
BUSBW = "metrics.busbw_gbps"
IPS_PER_CORE = "metrics.images_per_sec_per_core"
PER_DEVICE_TORCH_THREADS = "metrics.per_device_torch_threads"
OTHER_PROCESSES_CPU_CORES = "metrics.other_processes_cpu_cores"
IPS_MEAN = "metrics.images_per_sec_mean"
IPS_MEDIAN = "metrics.images_per_sec_median"
IPS_STDERR = "metrics.images_per_sec_stderr"
IPS_JITTER = "metrics.images_per_sec_jitter"
PER_DEVICE_IPS = "metrics.per_device_images_per_sec"
WALL_TIME = "metrics.wall_time_s"
COMPILE_TIME = "metrics.compile_time_s"
COMMUNICATION_TIME = "metrics.communication_time_s"
COMMUNICATION_FRACTION = "metrics.communication_fraction"
INPUT_WAIT_FRACTION = "metrics.input_wait_fraction"
PEAK_DEVICE_MEMORY = "metrics.peak_device_memory_bytes"
PEAK_HOST_MEMORY = "metrics.peak_host_memory_bytes"
LOSS_FIRST = "metrics.loss_first"
LOSS_LAST = "metrics.loss_last"
ACC1 = "metrics.acc1"
ACC5 = "metrics.acc5"

TOP_LEVEL = (
    "status", "source", "run_id", "suite_name", "case_name", "tool_version",
    "schema_version", "started_at", "error", "source_path",
)
"""The record's top-level fields (no section)."""
SECTIONS = ("config", "environment", "metrics")

_TOP_LABELS = {"started_at": "started", "case_name": "case"}

_TOP: tuple[Field, ...] = (
    Field(STATUS, aliases=("status",)),
    Field(SOURCE, aliases=("source",), bare=True),
    *(Field(name, label=_TOP_LABELS.get(name, "")) for name in TOP_LEVEL if name not in (STATUS, SOURCE)),
)

# Display details of config fields; the fields themselves, and their identity, are the run options'.
_CONFIG_DETAILS: dict[str, dict[str, Any]] = {
    "model": {"aliases": ("model",), "common": True, "bare": True},
    "batch_size": {"label": "batch", "aliases": ("batch_size", "batch"), "common": True, "unit": "images"},
    "num_devices": {"label": "devices", "aliases": ("num_devices", "devices"), "common": True},
    "data_name": {"label": "data", "aliases": ("data",), "common": True, "bare": True},
    "variable_update": {"aliases": ("variable_update",), "common": True, "bare": True},
    "precision": {"aliases": ("precision",), "common": True, "bare": True},
    "data_format": {"label": "format"},
    "forward_only": {"label": "fwd-only"},
    "device": {"aliases": ("device",)},
    "compile": {"aliases": ("compile",)},
    "image_size": {"unit": "px"},
    "bucket_cap_mb": {"unit": "MB"},
}

NOT_IDENTITY = frozenset({"data_dir"})
"""Recorded options that are identity for a run but not for a table: the folder says where the
images were, and the data set's name (``config.data_name``) already says which."""

LEGACY_CONFIG = frozenset({
    "repeat", "repeats", "num_repeats", "timeout_s", "trace", "trace_dir", "profile", "profile_dir", "output",
    "log_every",
})
"""``config`` keys that older records and imported tables may carry, none of them a run option
today; none changes what is measured."""


def _config() -> tuple[Field, ...]:
    identity = identity_fields() - NOT_IDENTITY
    out = []
    for f in config_fields():
        details: dict[str, Any] = dict(_CONFIG_DETAILS.get(f.name, {}))
        out.append(Field(f"config.{f.name}", identity=f.name in identity, **details))
    known = {f.name for f in config_fields()}
    out += [Field(f"config.{name}") for name in sorted(LEGACY_CONFIG - known)]
    return tuple(out)


_ENVIRONMENT: tuple[Field, ...] = (
    Field(MACHINE, aliases=("machine",), common=True, hardware=True, bare=True),
    Field(HOSTNAME, hardware=True, bare=True),
    Field(CPU, label="cpu", aliases=("cpu",), common=True, hardware=True, bare=True),
    Field(CPU_CORES, hardware=True),
    Field(GPU, label="gpu", aliases=("gpu",), common=True, hardware=True, bare=True),
    Field(GPU_COUNT, hardware=True),
    Field(PLATFORM, hardware=True),
    Field(CPU_THREADS),
    Field(AVAILABLE_CPUS),
    Field(MEMORY_BYTES, unit="bytes"),
    Field(TORCH_NUM_THREADS),
    Field(TORCH_VERSION),
    Field(TORCHVISION_VERSION),
    Field(PYTHON_VERSION),
    Field(CUDA_VERSION),
    Field(CUDA_DRIVER_VERSION),
    Field(CUDNN_VERSION),
    Field(NCCL_VERSION),
    Field(GPU_DRIVER),
    Field(GPU_MIG_PROFILE),
    Field(GPU_SM_CLOCK, unit="MHz"),
    Field(GPU_MEMORY_CLOCK, unit="MHz"),
    Field(GPU_POWER_LIMIT, unit="W"),
    Field(GPU_PCIE_GENERATION),
    Field(GPU_PCIE_WIDTH),
)

_METRICS: tuple[Field, ...] = (
    Field(IPS, unit="images/s", direction="higher", combine="sum", label="images/sec", format=",.1f"),
    Field(IPS_MEAN, unit="images/s", direction="higher", combine="sum", format=",.1f"),
    Field(IPS_MEDIAN, unit="images/s", direction="higher", combine="sum", format=",.1f"),
    Field(IPS_STDERR, unit="images/s", direction="lower", format=",.1f"),
    Field(IPS_JITTER, unit="images/s", direction="lower", format=",.1f"),
    Field(PER_DEVICE_IPS, unit="images/s", direction="higher", combine="per_rank",
          format=",.1f"),
    Field(IPS_PER_CORE, unit="images/s", direction="higher", label="images/sec per core", format=",.1f"),
    Field(STEP_TIMES, unit="s", direction="lower", combine="max", format=".4f"),
    Field(WALL_TIME, unit="s", direction="lower", combine="max", format=".1f"),
    Field(COMPILE_TIME, unit="s", direction="lower", combine="max", format=".1f"),
    Field(COMMUNICATION_TIME, unit="s", direction="lower", combine="max", format=".4f"),
    Field(COMMUNICATION_FRACTION, direction="lower", combine="mean", format=".1%"),
    Field(INPUT_WAIT_FRACTION, direction="lower", combine="mean", format=".1%"),
    Field(PEAK_DEVICE_MEMORY, unit="bytes", direction="lower", combine="max", format=",.0f"),
    Field(PEAK_HOST_MEMORY, unit="bytes", direction="lower", combine="sum", format=",.0f"),
    Field(ENERGY, unit="J", direction="lower", combine="sum", format=",.0f"),
    Field(IMAGES_PER_JOULE, unit="images/J", direction="higher", label="images per joule", format=",.2f",
          shown=Shown(heading="Energy efficiency (images per joule)", name="energy", absent="no energy figure",
                      means="images of the timed steps over the energy the GPUs drew meanwhile (NVML; host CPU "
                            "and memory not included)", positive=True)),
    Field(BUSBW, unit="GB/s", direction="higher", label="busbw", format=",.1f"),
    Field(LOSS_FIRST, direction="lower", combine="mean", format=".4f"),
    Field(LOSS_LAST, direction="lower", combine="mean", format=".4f"),
    Field(ACC1, unit="%", direction="higher", format=".2f"),
    Field(ACC5, unit="%", direction="higher", format=".2f"),
    Field(OTHER_PROCESSES_CPU_CORES, direction="lower", format=".1f"),
    Field(PER_DEVICE_TORCH_THREADS, combine="per_rank"),
)

FIELDS: dict[str, Field] = {f.path: f for f in (*_TOP, *_config(), *_ENVIRONMENT, *_METRICS)}
"""Every registered field, by path."""

ALIASES: dict[str, str] = {a: f.path for f in FIELDS.values() for a in f.aliases}
"""A user's short name for a field -> its path."""


class UnknownField(KeyError):
    """A name that is neither a registered path nor an alias."""


def field(name: str) -> Field:
    """The field a path or an alias names; raises :class:`UnknownField`."""
    found = FIELDS.get(name) or FIELDS.get(ALIASES.get(name, ""))
    if found is None:
        raise UnknownField(name)
    return found


def headers(*names: str) -> list[str]:
    """The column headers of registered fields: their labels (``batch``, ``images/sec``)."""
    return [field(name).label for name in names]


def by_alias(alias: str) -> Field:
    """The field an alias names (``gpu`` -> ``environment.gpu_model``); raises :class:`UnknownField`."""
    if alias not in ALIASES:
        raise UnknownField(alias)
    return FIELDS[ALIASES[alias]]


def list_fields(pattern: str = "*", **where: object) -> list[Field]:
    """Registered fields whose path matches a shell pattern (``metrics.*images*``), in
    declaration order, optionally only those with the given attribute values
    (``list_fields("config.*", identity=True)``)."""
    return [f for f in FIELDS.values() if fnmatch.fnmatchcase(f.path, pattern)
            and all(getattr(f, k) == v for k, v in where.items())]


def paths(pattern: str = "*", **where: object) -> Iterator[str]:
    """The paths of :func:`list_fields`."""
    return (f.path for f in list_fields(pattern, **where))


SHORT_NAMES: dict[str, str] = {f.path: (*f.aliases, f.label)[0] for f in FIELDS.values() if f.common}
"""Short display names of the common fields: their first alias (``batch_size``; the label, ``batch``,
heads its columns), or the label for one declared without aliases."""

HARDWARE_FIELDS = frozenset(paths(hardware=True))
"""Fields that describe the machine itself: they come with the machine label, so they never
split a configuration; comparing by one of them compares machines."""

BARE_VALUE_FIELDS = frozenset(paths(bare=True))
"""Fields whose values read on their own in a label (``resnet50``, ``fp16``)."""

IGNORED_CONFIG = frozenset(f.name for f in list_fields("config.*", identity=False))
"""``config`` keys that do not change what is measured (only how long, where, or which draw)."""
