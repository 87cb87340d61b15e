"""Where a run executes: the device kind, how many devices, and how they share variables.

The words are tf_cnn_benchmarks' (``--variable-update``, ``--all-reduce``,
``--local-parameter-device``); the machinery is torch.distributed (see
:mod:`cnnbench.distributed`). Options of one strategy given with another are errors.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from cnnbench.config.checks import finite
from cnnbench.config.errors import ConfigError
from cnnbench.config.options import option
from cnnbench.config.strategy_rules import (
    DEFAULT_BUCKET_CAP_MB,
    STRATEGY_RULES,
    VARIABLE_UPDATES,
    VariableUpdate,
    check_strategy_options,
    strategies_help,
    strategy_defaults,
)

DEVICES = ("auto", "cpu", "cuda")
ALL_REDUCES = ("nccl", "gloo")
GRADIENT_COMPRESSIONS = ("none", "fp16", "bf16", "powersgd")
PARAMETER_DEVICES = ("cpu", "device")
MAX_DEVICES = 4096
MAX_THREADS = 65536
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 7 * 24 * 3600.0
"""The largest ``--timeout`` of ``run`` and ``comm`` (and of the Python API): one week in
seconds. Far below what the waits the timeout becomes can hold (``datetime.timedelta`` stops near
8.6e13 s, ``threading``'s waits near 9.2e9 s), and longer than any collective has a reason to wait."""
_GPU_INDICES = re.compile(r"^\d+(,\d+)*$")


def check_timeout(value: object, name: str = "timeout") -> None:
    """A ``--timeout`` in seconds: a number more than 0 and at most :data:`MAX_TIMEOUT_S`, or a
    :class:`ConfigError` in one line. ``run`` and ``comm`` share it."""
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not 0 < value <= MAX_TIMEOUT_S):
        raise ConfigError(name, f"must be a number of seconds more than 0 and at most {MAX_TIMEOUT_S:.0f} "
                                f"(one week), got {value!r}")


def thread_rule(threads_per_worker: int | None) -> str:
    """How a CPU run's workers got their torch threads, in words (``run --scaling``'s header, the
    report's scaling notes): fixed by ``--threads-per-worker``, or the default division."""
    if threads_per_worker:
        return f"{threads_per_worker} per worker (fixed)"
    return "the host's cores divided among workers (default)"


@dataclass(frozen=True)
class ParallelOptions:
    """devices"""

    device: str = option("auto", "Device kind; 'auto' takes cuda when present, else cpu.", choices=DEVICES)
    num_devices: int | None = option(
        None,
        "Devices that train together, one worker process each (data parallel). Under torchrun it "
        "is the world size [default: 1, or torchrun's world size].",
        metavar="N", minimum=1, maximum=MAX_DEVICES,
    )
    num_nodes: int | None = option(
        None, "Machines the devices are spread over: set from torchrun's environment, not by hand [default: 1].",
        unnamed=(1,), metavar="N", minimum=1, maximum=MAX_DEVICES,
    )
    gpu_indices: str | None = option(
        None, "Which GPUs the workers use, one per worker: 0,2,... [default: 0 .. N-1].",
        identity=False, metavar="I,J,...",
    )
    oversubscribe: bool = option(
        False, "On CPU, start more workers (--num-devices) than the cores this run may use, which is "
        "refused otherwise (each worker would get no core of its own): for tests and scaling studies; "
        "the record then carries a warning.",
        identity=False,
    )
    threads_per_worker: int | None = option(
        None,
        "On CPU, the torch threads of every worker, whatever the device count, so that a scaling series "
        "compares N workers x the same threads [default: the cores this run may use, divided among the "
        "workers of the node: a 1-device run has all of them].",
        metavar="N", minimum=1, maximum=MAX_THREADS,
    )
    variable_update: VariableUpdate = option(
        "replicated",
        f"How devices share variables (tf_cnn_benchmarks' word): {strategies_help()}.",
        choices=VARIABLE_UPDATES,
    )
    all_reduce: str | None = option(
        None,
        "Communication back end of the process group: nccl (GPUs) or gloo (CPUs; GPUs too) "
        "[default: nccl on cuda, gloo on cpu; none for independent].",
        choices=ALL_REDUCES, depends_on=("variable_update",),
    )
    local_parameter_device: str | None = option(
        None,
        "Where a parameter server keeps the master weights and steps the optimizer: cpu, or the "
        "device of rank 0 [default there: device].",
        choices=PARAMETER_DEVICES, unnamed=("device",), depends_on=("variable_update", "forward_only"),
    )
    bucket_cap_mb: float | None = option(
        None, f"replicated: DDP gradient bucket size in MiB [default there: {DEFAULT_BUCKET_CAP_MB:g}].",
        unnamed=(DEFAULT_BUCKET_CAP_MB,), depends_on=("variable_update", "forward_only"), metavar="MB",
    )
    gradient_as_bucket_view: bool = option(
        False, "replicated: gradients are views into DDP's buckets (saves a copy and memory).",
        depends_on=("variable_update", "forward_only"),
    )
    static_graph: bool = option(False, "replicated: tell DDP the graph is the same every step.",
                                depends_on=("variable_update", "forward_only"))
    broadcast_buffers: bool | None = option(
        True,
        "replicated: DDP sends rank 0's buffers (batch-norm running statistics) to every worker before "
        "each forward, torch's default; --no-broadcast-buffers lets each worker keep its own (one "
        "collective less per step). Recorded as null for other strategies.",
        unnamed=(True,), depends_on=("variable_update", "forward_only"),
    )
    gradient_compression: str | None = option(
        None,
        "replicated: a DDP communication hook: none, fp16 / bf16 (gradients cast for the all-reduce), "
        "powersgd (rank-1 PowerSGD from the first timed step; NCCL only) [default there: none].",
        choices=GRADIENT_COMPRESSIONS, unnamed=("none",), depends_on=("variable_update", "forward_only"),
    )
    timeout: float = option(
        DEFAULT_TIMEOUT_S,
        "Seconds a worker may wait on the others (rendezvous, each collective) before the run stops "
        f"with an error, at most one week ({MAX_TIMEOUT_S:.0f}); a worker that dies stops the run at once.",
        identity=False, metavar="S",
    )

    def check_parallel_options(self) -> None:
        """The options' own checks, then the strategy's (:mod:`~cnnbench.config.strategy_rules`:
        options of other strategies refused, its own rules); ``self`` is the whole configuration."""
        check_timeout(self.timeout)
        finite(self, "bucket_cap_mb")
        if self.bucket_cap_mb is not None and self.bucket_cap_mb <= 0:
            raise ConfigError("bucket_cap_mb", f"must be > 0 (got {self.bucket_cap_mb})")
        if self.gpu_indices is not None:
            self._check_gpu_indices()
        if self.threads_per_worker is not None and self.device == "cuda":
            raise ConfigError("threads_per_worker", "sets each CPU worker's torch threads; it has no effect "
                                                    "on a cuda run")
        takes_all_reduce = "all_reduce" in STRATEGY_RULES[self.variable_update].options
        if takes_all_reduce and self.all_reduce == "nccl" and self.device == "cpu":
            raise ConfigError("all_reduce", "nccl needs CUDA devices; use gloo on cpu")
        check_strategy_options(self)

    def _check_gpu_indices(self) -> None:
        text = str(self.gpu_indices).replace(" ", "")
        if not _GPU_INDICES.match(text):
            raise ConfigError("gpu_indices", f"expected GPU numbers separated by commas, e.g. 0,2 "
                                             f"(got {self.gpu_indices!r})")
        indices = [int(i) for i in text.split(",")]
        if len(set(indices)) != len(indices):
            raise ConfigError("gpu_indices", f"lists a GPU twice ({self.gpu_indices})")
        if self.device == "cpu":
            raise ConfigError("gpu_indices", "picks GPUs; it has no effect with --device cpu")
        if self.num_devices is not None and self.num_devices != len(indices):
            raise ConfigError("gpu_indices", f"names {len(indices)} GPUs for --num-devices {self.num_devices}")

    def requested_devices(self) -> int:
        """How many workers this configuration asks for (outside torchrun)."""
        indices = self.gpu_index_list()
        return self.num_devices or (len(indices) if indices else 1)

    def gpu_index_list(self) -> list[int] | None:
        if self.gpu_indices is None:
            return None
        return [int(i) for i in str(self.gpu_indices).replace(" ", "").split(",")]

    def parallel_defaults(self, device_kind: str, forward_only: bool) -> dict[str, Any]:
        """Values a run uses for unset options: those of the options its strategy takes, as the
        strategy registry declares them (:func:`~cnnbench.config.strategy_rules.strategy_defaults`;
        the back end only once the device kind is known)."""
        return strategy_defaults(self, device_kind, forward_only)
