"""What ``cnnbench comm`` measures, without torch: the collectives, the message sizes, the
configuration and nccl-tests' bandwidth definitions.

Definitions (NVIDIA nccl-tests, ``doc/PERFORMANCE.md``):

* ``size``: the bytes of the operation's whole buffer. For all_reduce, reduce and broadcast,
  the tensor every rank holds; for all_gather the gathered output (``n`` x each rank's part),
  for reduce_scatter the input that is reduced (``n`` x each rank's part), for all_to_all
  each rank's send buffer (``n`` parts). A size is rounded down to whole elements (for the
  last three: to whole elements per rank), and the bytes actually moved are recorded;
* ``count``: elements per rank's part, as nccl-tests prints it (the whole tensor for
  all_reduce, reduce and broadcast);
* ``algbw = size / time`` and ``busbw = algbw x factor``, with the factor
  :func:`bus_factor`: 2(n-1)/n for all_reduce, (n-1)/n for reduce_scatter, all_gather and
  all_to_all, 1 for broadcast and reduce. GB/s are 10^9 bytes per second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cnnbench.config.output_options import check_label_text
from cnnbench.config.parallel_options import check_timeout
from cnnbench.errors import ConfigError

COLLECTIVES = ("all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64",
          "float8_e4m3fn", "float8_e5m2")
ITEM_SIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1, "int32": 4,
              "int64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1}
DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "nccl", "gloo")
KIND = "comm"
"""The record's top-level ``kind``."""
GB = 1e9
"""nccl-tests' GB/s: 10^9 bytes per second."""
MAX_BYTES_LIMIT = 1 << 40
MAX_ITERS = 100_000
BATCHES = 5
"""Timed batches (samples) per size, each of ``--iters`` back-to-back calls."""
DEFAULT_MAX_BYTES = {"cuda": 1 << 30, "cpu": 64 << 20}
"""``--max-bytes`` when not given: 1 GiB on GPUs (nccl-tests' usual top), 64 MiB on CPUs (Gloo
moves a GiB in about a second per operation here, which makes the ladder minutes long)."""

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_bytes(text: str | int, flag: str = "max_bytes") -> int:
    """``1K`` -> 1024, ``4M`` -> 4194304, ``1G``/``1GiB``/``1GB`` -> 2**30 (powers of 1024, as
    nccl-tests' ``-b``/``-e``), ``512`` -> 512; a ConfigError naming ``flag`` otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE.match(str(text))
        if not match:
            raise ConfigError(flag, f"{text!r} is not a size: a whole number of bytes, or with K, M, G or T "
                                    "(powers of 1024), e.g. 1K, 64M, 1G")
        value = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if value < 1 or value > MAX_BYTES_LIMIT:
        raise ConfigError(flag, f"{text} is out of range: 1 byte to 1T")
    return value


def parse_collectives(text: str) -> tuple[str, ...]:
    """``all`` or a comma list of :data:`COLLECTIVES` (``allreduce`` and ``all-reduce`` too)."""
    words = [w.strip().lower().replace("-", "_") for w in str(text).split(",") if w.strip()]
    if not words:
        raise ConfigError("collective", "names no collective")
    if words == ["all"]:
        return COLLECTIVES
    spelled = {c.replace("_", ""): c for c in COLLECTIVES}
    out: list[str] = []
    for word in words:
        name = word if word in COLLECTIVES else spelled.get(word.replace("_", ""))
        if name is None:
            raise ConfigError("collective", f"unknown collective {word!r}; one or more of "
                                            f"{', '.join(COLLECTIVES)}, or all")
        if name not in out:
            out.append(name)
    return tuple(out)


def size_ladder(min_bytes: int, max_bytes: int, step_factor: int) -> list[int]:
    """min, min x factor, ... up to max (included when reached), as nccl-tests' ``-b -e -f``."""
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= step_factor
    return out


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor for ``collective`` among ``n`` ranks."""
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):
        return (n - 1) / n
    if collective in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


SPLIT = frozenset({"all_gather", "reduce_scatter", "all_to_all"})
"""Collectives whose buffer is made of one part per rank."""


def element_counts(collective: str, size: int, n: int, item_size: int) -> tuple[int, int]:
    """(elements per rank's part, bytes of the whole buffer) for a ``size``-byte operation."""
    if collective in SPLIT:
        per_rank = max(1, size // (item_size * n))
        return per_rank, per_rank * n * item_size
    count = max(1, size // item_size)
    return count, count * item_size


def bandwidths(collective: str, size: int, seconds: float, n: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s of a ``size``-byte operation that took ``seconds``."""
    algbw = size / seconds / GB if seconds > 0 else 0.0
    return algbw, algbw * bus_factor(collective, n)


def default_backend(device_kind: str) -> str:
    """NCCL on GPUs, Gloo on CPUs (as ``cnnbench run``'s ``--all-reduce``)."""
    return "nccl" if device_kind == "cuda" else "gloo"


@dataclass(frozen=True)
class CommConfig:
    """One ``cnnbench comm``: which collectives, which sizes, how often, on which world."""

    collectives: tuple[str, ...] = ("all_reduce",)
    min_bytes: int = 1 << 10
    max_bytes: int | None = None
    """None: :data:`DEFAULT_MAX_BYTES` of the device."""
    step_factor: int = 2
    warmup: int = 5
    iters: int = 20
    dtype: str = "float32"
    num_devices: int | None = None
    """Workers to start on this node (None: every GPU, 2 on CPU, or torchrun's world)."""
    device: str = "auto"
    backend: str = "auto"
    results_dir: str = "results"
    machine_label: str | None = None
    oversubscribe: bool = False
    timeout: float = 300.0
    """Seconds any collective may wait for the others (the process group's timeout)."""
    extra: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.collectives:
            if name not in COLLECTIVES:
                raise ConfigError("collective", f"unknown collective {name!r}; one or more of {', '.join(COLLECTIVES)}")
        if not self.collectives:
            raise ConfigError("collective", "names no collective")
        _between("min_bytes", self.min_bytes, 1, MAX_BYTES_LIMIT)
        if self.max_bytes is not None:
            _between("max_bytes", self.max_bytes, 1, MAX_BYTES_LIMIT)
            if self.max_bytes < self.min_bytes:
                raise ConfigError("max_bytes", f"{self.max_bytes} is below --min-bytes {self.min_bytes}")
        _between("step_factor", self.step_factor, 2, 1024)
        _between("warmup", self.warmup, 0, MAX_ITERS)
        _between("iters", self.iters, 1, MAX_ITERS)
        if self.dtype not in DTYPES:
            raise ConfigError("dtype", f"unknown dtype {self.dtype!r}; one of {', '.join(DTYPES)}")
        if self.num_devices is not None:
            _between("num_devices", self.num_devices, 2, 4096)
        if self.device not in DEVICES:
            raise ConfigError("device", f"{self.device!r} is not one of {', '.join(DEVICES)}")
        if self.backend not in BACKENDS:
            raise ConfigError("backend", f"{self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.backend == "nccl" and self.device == "cpu":
            raise ConfigError("backend", "nccl needs CUDA devices; use gloo on cpu")
        if not self.results_dir.strip():
            raise ConfigError("results_dir", "is empty; name a folder (the default is results)")
        if self.machine_label is not None and not self.machine_label.strip():
            raise ConfigError("machine_label", "is empty; leave it out to name the machine from its CPU and GPU")
        if self.machine_label is not None:
            check_label_text("machine_label", self.machine_label)
        check_timeout(self.timeout)

    def sizes(self, device_kind: str) -> list[int]:
        """The message sizes on ``device_kind`` (``--max-bytes`` by default: :data:`DEFAULT_MAX_BYTES`)."""
        top = self.max_bytes if self.max_bytes is not None else max(DEFAULT_MAX_BYTES[device_kind], self.min_bytes)
        return size_ladder(self.min_bytes, top, self.step_factor)


def _between(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(name, f"must be a whole number from {low} to {high:,}, got {value!r}")
