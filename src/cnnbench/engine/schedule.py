"""The learning-rate schedule of a training-to-accuracy run, as tf_cnn_benchmarks shapes it.

Per step: a linear warm-up from 0 over ``--num-learning-rate-warmup-epochs``, then a
staircase decay by ``--learning-rate-decay-factor`` every ``--num-epochs-per-decay`` epochs.
Applied with :class:`torch.optim.lr_scheduler.LambdaLR`, stepped after every optimizer step.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from cnnbench.config import RunConfig


def lr_multiplier(config: RunConfig, steps_per_epoch: int) -> Callable[[int], float]:
    """The factor on the initial learning rate at each step (0-based)."""
    warmup = config.num_learning_rate_warmup_epochs or 0.0
    per_decay = config.num_epochs_per_decay
    factor = config.learning_rate_decay_factor or 1.0
    per_epoch = max(1, steps_per_epoch)

    def multiplier(step: int) -> float:
        epoch = step / per_epoch
        value = 1.0
        if warmup > 0 and epoch < warmup:
            value = (step + 1) / (warmup * per_epoch)
        if per_decay:
            value *= factor ** math.floor(epoch / per_decay)
        return value

    return multiplier


def make_schedule(config: RunConfig, optimizer: torch.optim.Optimizer | None,
                  steps_per_epoch: int) -> torch.optim.lr_scheduler.LambdaLR | None:
    """The schedule for ``optimizer`` (None when the run has none to schedule)."""
    if optimizer is None or not (config.num_learning_rate_warmup_epochs or config.num_epochs_per_decay):
        return None
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_multiplier(config, steps_per_epoch))
