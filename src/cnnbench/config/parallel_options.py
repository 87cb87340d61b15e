"""Where a run executes: the device kind and how devices share the work."""

from __future__ import annotations

from dataclasses import dataclass

from cnnbench.config.checks import at_least
from cnnbench.config.errors import ConfigError
from cnnbench.config.options import option

DEVICES = ("auto", "cpu", "cuda")
VARIABLE_UPDATES = ("replicated", "parameter_server", "independent", "fsdp")
ALL_REDUCES = ("nccl", "gloo")


@dataclass(frozen=True)
class ParallelOptions:
    """devices"""

    device: str = option("auto", "Device kind; 'auto' takes cuda when present, else cpu.", choices=DEVICES)
    num_devices: int = option(
        1, "Devices that train together (data parallel). Only 1 is supported in this version.", metavar="N"
    )
    variable_update: str = option(
        "replicated",
        "How devices share variables (tf_cnn_benchmarks' word): replicated (all-reduce of gradients). "
        "parameter_server, independent and fsdp need several devices, which this version does not run yet.",
        choices=VARIABLE_UPDATES,
    )
    all_reduce: str | None = option(
        None, "All-reduce back end for --variable-update replicated (needs several devices).", choices=ALL_REDUCES
    )

    def check_parallel_options(self) -> None:
        at_least(self, "num_devices", 1)
        if self.num_devices > 1:
            raise ConfigError(
                "num_devices", f"only 1 device per run is supported in this version (got {self.num_devices})"
            )
        if self.variable_update != "replicated":
            raise ConfigError(
                "variable_update",
                f"{self.variable_update} shares variables between several devices, which this version does "
                "not run yet; with one device use replicated (the default)",
            )
        if self.all_reduce is not None:
            raise ConfigError("all_reduce", "nothing is all-reduced with one device (the only count in this version)")
