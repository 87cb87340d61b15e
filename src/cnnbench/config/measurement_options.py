"""How long a run lasts and what it prints while it runs.

A benchmark run times ``--num-batches`` steps after ``--num-warmup-batches`` untimed ones.
A training-to-accuracy run (``--num-epochs``) trains on a data set's training split for that
many epochs and evaluates on its validation split after each; every step of it counts.
``--profile-steps N`` profiles N more steps between the warm-up and the timed steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cnnbench.config.errors import ConfigError
from cnnbench.config.options import option

DEFAULT_NUM_BATCHES = 100
DEFAULT_WARMUP_BATCHES = 10
MAX_STEPS = 100_000_000
MAX_SEED = 2**32 - 1  # what every random generator takes (numpy's is the narrowest)


@dataclass(frozen=True)
class MeasurementOptions:
    """steps and measurement"""

    num_batches: int | None = option(
        None, f"Timed steps [default: {DEFAULT_NUM_BATCHES}; not with --num-epochs].", identity=False, metavar="N",
        minimum=1, maximum=MAX_STEPS,
    )
    num_epochs: int | None = option(
        None,
        "Train to accuracy: this many epochs of the data set's training split, evaluating on its "
        "validation split after each (needs --data-dir; not with --num-batches).",
        metavar="E", minimum=1, maximum=100_000,
    )
    num_warmup_batches: int | None = option(
        None,
        f"Untimed steps before the timed ones; excluded from every figure [default: {DEFAULT_WARMUP_BATCHES}; "
        "none with --num-epochs, where every step trains].",
        identity=False, metavar="N", minimum=0, maximum=MAX_STEPS,
    )
    display_every: int = option(
        10, "Print a progress line every N timed steps (its time is kept out of every figure).",
        identity=False, metavar="N", minimum=1, maximum=MAX_STEPS,
    )
    seed: int = option(1234, "Random seed for weights and synthetic data.", identity=False,
                       minimum=0, maximum=MAX_SEED)
    profile_steps: int | None = option(
        None,
        "Profile N extra steps right after warm-up, before the timed steps (which it does not "
        "change): a torch.profiler trace (Chrome trace JSON) in the results folder's traces/, and "
        "the top operators by self time printed after the result [default: off; 0 = off].",
        identity=False, metavar="N", minimum=0, maximum=MAX_STEPS,
    )

    def check_measurement_options(self) -> None:
        if self.num_epochs is not None:
            if self.num_batches is not None:
                raise ConfigError("num_batches", "a run lasts either --num-batches steps or --num-epochs epochs, "
                                                 "not both")
            if self.num_warmup_batches not in (None, 0):
                raise ConfigError("num_warmup_batches", "has no effect with --num-epochs: every step of a "
                                                        "training-to-accuracy run trains and is timed")
            if self.profile_steps:
                raise ConfigError("profile_steps", "profiles steps after warm-up; a --num-epochs run has no "
                                                   "warm-up (every step trains and is timed)")

    def warmup_steps(self) -> int:
        """The warm-up steps this run takes (set, or the default of its kind)."""
        if self.num_warmup_batches is not None:
            return self.num_warmup_batches
        return 0 if self.num_epochs is not None else DEFAULT_WARMUP_BATCHES

    def measurement_defaults(self) -> dict[str, Any]:
        """The values this run uses for unset step counts."""
        filled: dict[str, Any] = {}
        if self.num_epochs is None and self.num_batches is None:
            filled["num_batches"] = DEFAULT_NUM_BATCHES
        if self.num_warmup_batches is None:
            filled["num_warmup_batches"] = self.warmup_steps()
        return filled
