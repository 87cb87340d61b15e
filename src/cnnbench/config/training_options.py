"""How a training run updates the weights (nothing here applies with --forward-only)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from cnnbench.config.checks import at_least, finite, unused
from cnnbench.config.choices import LR_SCALINGS, LrScaling
from cnnbench.config.errors import ConfigError
from cnnbench.config.options import option

OPTIMIZERS = ("sgd", "momentum", "rmsprop", "adam")
MOMENTUM_OPTIMIZERS = ("momentum", "rmsprop")

# Used when a training run leaves the option unset (tf_cnn_benchmarks' defaults, but the rate).
DEFAULT_OPTIMIZER = "sgd"
DEFAULT_LEARNING_RATE = 0.005
DEFAULT_MOMENTUM = 0.9
DEFAULT_WEIGHT_DECAY = 4e-5


@dataclass(frozen=True)
class TrainingOptions:
    """training"""

    optimizer: str | None = option(
        None, f"Optimizer (momentum = SGD with --momentum) [training default: {DEFAULT_OPTIMIZER}].",
        choices=OPTIMIZERS, depends_on=("forward_only",),
    )
    learning_rate: float | None = option(
        None, f"Learning rate [training default: {DEFAULT_LEARNING_RATE}].", depends_on=("forward_only",),
        metavar="LR",
    )
    lr_scaling: LrScaling | None = option(
        None, "How the learning rate follows the global batch (--batch-size x devices): linear multiplies "
        "--learning-rate by the device count (Goyal et al., 2017; pair it with --num-learning-rate-warmup-epochs), "
        "so --learning-rate is the rate of one device; none keeps it. The record holds the rule (config) and the "
        "rate the optimizer started from under linear (metrics.learning_rate) [default: none].",
        choices=LR_SCALINGS, depends_on=("forward_only",),
    )
    momentum: float | None = option(
        None, f"Momentum of --optimizer momentum and rmsprop [default there: {DEFAULT_MOMENTUM}].",
        depends_on=("forward_only", "optimizer"),
    )
    weight_decay: float | None = option(
        None, f"L2 weight decay [training default: {DEFAULT_WEIGHT_DECAY}].", depends_on=("forward_only",),
    )
    num_epochs_per_decay: float | None = option(
        None, "With --num-epochs: multiply the learning rate by --learning-rate-decay-factor every this "
        "many epochs (a staircase, as tf_cnn_benchmarks does).", depends_on=("num_epochs",), metavar="E",
    )
    learning_rate_decay_factor: float | None = option(
        None, "With --num-epochs-per-decay: the factor of each decay, in (0, 1].", depends_on=("num_epochs",),
        metavar="F",
    )
    num_learning_rate_warmup_epochs: float | None = option(
        None, "With --num-epochs: raise the learning rate linearly from 0 over this many epochs.",
        depends_on=("num_epochs",), metavar="E",
    )

    def check_training_options(self, forward_only: bool, num_epochs: int | None) -> None:
        for name in ("learning_rate", "momentum", "weight_decay", *_SCHEDULE):
            finite(self, name)
        if forward_only:
            for name in ("optimizer", "learning_rate", "lr_scaling", "momentum", "weight_decay"):
                unused(self, name, "with --forward-only (nothing is trained)")
        if num_epochs is None:
            for name in _SCHEDULE:
                unused(self, name, "without --num-epochs (a learning-rate schedule needs epochs)")
        self._check_schedule()
        if forward_only:
            return
        if self.learning_rate is not None and self.learning_rate <= 0:
            raise ConfigError("learning_rate", f"must be > 0 (got {self.learning_rate})")
        if self.momentum is not None:
            if not 0 <= self.momentum < 1:
                raise ConfigError("momentum", f"must be in [0, 1) (got {self.momentum})")
            if (self.optimizer or DEFAULT_OPTIMIZER) not in MOMENTUM_OPTIMIZERS:
                raise ConfigError("momentum", f"applies to --optimizer momentum or rmsprop "
                                              f"(got {self.optimizer or DEFAULT_OPTIMIZER})")
        at_least(self, "weight_decay", 0, allow_none=True)

    def _check_schedule(self) -> None:
        if self.num_epochs_per_decay is not None and self.num_epochs_per_decay <= 0:
            raise ConfigError("num_epochs_per_decay", f"must be > 0 (got {self.num_epochs_per_decay})")
        factor = self.learning_rate_decay_factor
        if factor is not None and not 0 < factor <= 1:
            raise ConfigError("learning_rate_decay_factor", f"must be in (0, 1] (got {factor})")
        if (factor is None) != (self.num_epochs_per_decay is None):
            missing = "learning_rate_decay_factor" if factor is None else "num_epochs_per_decay"
            raise ConfigError(missing, "a decay needs both --num-epochs-per-decay and --learning-rate-decay-factor")
        at_least(self, "num_learning_rate_warmup_epochs", 0, allow_none=True)

    def training_defaults(self, forward_only: bool) -> dict[str, Any]:
        """The values a training run uses for options left unset (none for inference)."""
        if forward_only:
            return {}
        optimizer = self.optimizer or DEFAULT_OPTIMIZER
        filled: dict[str, Any] = {
            "optimizer": optimizer,
            "learning_rate": DEFAULT_LEARNING_RATE if self.learning_rate is None else self.learning_rate,
            "weight_decay": DEFAULT_WEIGHT_DECAY if self.weight_decay is None else self.weight_decay,
        }
        if optimizer in MOMENTUM_OPTIMIZERS:
            filled["momentum"] = DEFAULT_MOMENTUM if self.momentum is None else self.momentum
        return filled


def scaled_learning_rate(learning_rate: float, lr_scaling: str | None, num_devices: int) -> float:
    """The rate a training run's optimizer starts from (before warm-up and decay): ``learning_rate``
    as given, or times ``num_devices`` under ``lr_scaling="linear"`` (the global batch grows with
    the device count, so the rate grows with it: Goyal et al., 2017)."""
    if lr_scaling == "linear":
        return learning_rate * max(1, num_devices)
    return learning_rate


_SCHEDULE = ("num_epochs_per_decay", "learning_rate_decay_factor", "num_learning_rate_warmup_epochs")


def training_fields() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(TrainingOptions))
