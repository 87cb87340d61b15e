"""The prepare phase: everything a run needs before its first step, built in a fixed order.

1. the precision policy (backend flags applied: TF32 off unless ``tf32``);
2. the input source (:func:`cnnbench.data.make_input`: synthetic or a data set);
3. the model, seeded, on the device, in the policy's dtype and the run's memory format,
   in training or evaluation mode;
4. **the strategy's wrap** (:meth:`ParallelStrategy.wrap`): where DDP, FSDP or a parameter
   server takes the model; one device keeps it as it is;
5. the optimizer, made by the strategy over the parameters it updates;
6. ``torch.compile`` with ``--compile`` (after the wrap, as DDP and FSDP expect);
7. the step function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from cnnbench.data.source import InputRequest, InputSource, make_input
from cnnbench.distributed.strategy import ParallelStrategy, SingleDevice
from cnnbench.engine.precision import PrecisionPolicy, precision_policy
from cnnbench.engine.resolve import ResolvedRun
from cnnbench.engine.step import Step, make_optimizer, make_step


@dataclass
class Prepared:
    """A run ready for its first step."""

    model: nn.Module
    """The model after the strategy's wrap (before compilation)."""
    runnable: Callable[..., Any]
    """What each step calls: ``model``, or its compiled form."""
    optimizer: torch.optim.Optimizer | None
    """``None`` for inference, and on a worker that updates no weight itself."""
    step: Step
    source: InputSource
    policy: PrecisionPolicy
    strategy: ParallelStrategy

    def close(self) -> None:
        """Stop the input source's workers and release the strategy's resources."""
        try:
            self.source.close()
        finally:
            self.strategy.close()


def prepare(run: ResolvedRun, *, strategy: ParallelStrategy | None = None,
            source: InputSource | None = None) -> Prepared:
    """Build the model, optimizer, step and input for ``run`` (see the module documentation)."""
    cfg, device = run.config, run.device
    strategy = strategy or SingleDevice()
    policy = precision_policy(cfg.precision)
    policy.apply_backend_flags()
    if source is None:
        source = make_input(InputRequest(
            config=cfg, batch_size=run.batch_size, image_size=run.image_size, device=device,
            dtype=policy.param_dtype, channels_last=cfg.data_format == "NHWC", seed=cfg.seed,
            rank=run.world.rank, world_size=run.world.world_size,
        ))
    try:
        torch.manual_seed(cfg.seed)  # the same initial weights whatever the input did with the RNG
        with torch.device(device):
            model = run.spec.build(num_classes=source.num_classes, image_size=run.image_size)
        model = model.to(dtype=policy.param_dtype)
        if cfg.data_format == "NHWC":
            model = model.to(memory_format=torch.channels_last)
        model.train(not cfg.forward_only)
        model = strategy.wrap(model)
        optimizer = None if cfg.forward_only else strategy.make_optimizer(
            model, functools.partial(make_optimizer, cfg))
        runnable: Callable[..., Any] = torch.compile(model) if cfg.compile else model
        step = make_step(runnable, model, optimizer, policy, device.type, strategy,
                         training=not cfg.forward_only, count_correct=cfg.num_epochs is not None)
    except BaseException:
        source.close()
        raise
    return Prepared(model, runnable, optimizer, step, source, policy, strategy)
