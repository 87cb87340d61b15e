"""How long a run is measured and what it prints while it runs."""

from __future__ import annotations

from dataclasses import dataclass

from cnnbench.config.checks import at_least
from cnnbench.config.options import option


@dataclass(frozen=True)
class MeasurementOptions:
    """steps and measurement"""

    num_batches: int = option(100, "Timed steps.", identity=False, metavar="N")
    num_warmup_batches: int = option(
        10, "Untimed steps before the timed ones; excluded from every figure.", identity=False, metavar="N"
    )
    display_every: int = option(
        10, "Print a progress line every N timed steps (its time is kept out of every figure).",
        identity=False, metavar="N",
    )
    seed: int = option(1234, "Random seed for weights and synthetic data.", identity=False)

    def check_measurement_options(self) -> None:
        at_least(self, "num_batches", 1)
        at_least(self, "num_warmup_batches", 0)
        at_least(self, "display_every", 1)
