"""Where the input comes from: synthetic batches (and, later, real data sets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cnnbench.config.checks import unused
from cnnbench.config.errors import ConfigError
from cnnbench.config.options import option

DATA_NAMES = ("synthetic",)
SYNTHETIC_LOCATIONS = ("device", "host", "loader")
DEFAULT_SYNTHETIC_WORKERS = 2
MAX_WORKERS = 256


@dataclass(frozen=True)
class InputOptions:
    """input"""

    data_name: str = option(
        "synthetic", "Data set; only synthetic input in this version.", choices=DATA_NAMES
    )
    synthetic_location: str = option(
        "device",
        "Where synthetic batches are made: device (one batch resident on the device, no copy per "
        "step), host (a new batch on the host each step, copied pinned and non-blocking), loader "
        "(batches made in DataLoader worker processes with prefetch).",
        choices=SYNTHETIC_LOCATIONS,
    )
    num_workers: int | None = option(
        None,
        f"DataLoader worker processes, for --synthetic-location loader "
        f"[default there: {DEFAULT_SYNTHETIC_WORKERS}].",
        depends_on=("synthetic_location", "data_name"), metavar="N", minimum=0, maximum=MAX_WORKERS,
    )
    distortions: bool = option(False, "Training augmentation of real images (needs real data).")

    def check_input_options(self) -> None:
        if self.data_name == "synthetic" and self.synthetic_location != "loader":
            unused(self, "num_workers", f"with --synthetic-location {self.synthetic_location} "
                                        "(no DataLoader workers there)")
        if self.distortions and self.data_name == "synthetic":
            raise ConfigError("distortions", "augments real images; synthetic input has none to distort")

    def input_defaults(self) -> dict[str, Any]:
        """The values this input uses for options left unset."""
        if self.data_name == "synthetic" and self.synthetic_location == "loader" and self.num_workers is None:
            return {"num_workers": DEFAULT_SYNTHETIC_WORKERS}
        return {}
