"""The prepare phase: everything a run needs before its first step, built in a fixed order.

1. the precision policy and the backend flags (:mod:`cnnbench.engine.backend`: TF32 off
   unless ``tf32``, cuDNN autotuning on for CUDA unless ``--no-cudnn-benchmark``);
2. the input source (:func:`cnnbench.data.make_input`: synthetic or a data set);
3. the model, seeded, on the device, in the policy's dtype (normalisation layers kept in
   fp32 under pure fp16/bf16) and the run's memory format, in training or evaluation mode;
4. **the strategy's wrap** (:meth:`ParallelStrategy.wrap`): where DDP, FSDP or a parameter
   server takes the model; one device keeps it as it is;
5. the optimizer, made by the strategy over the parameters it updates (fused on CUDA where
   torch has a fused implementation);
6. ``torch.compile`` with ``--compile`` in ``--compile-mode`` (after the wrap, as DDP and
   FSDP expect);
7. the step function.

:meth:`Prepared.notes` says what was chosen, for the record.
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
from cnnbench.engine.backend import (
    BackendFlags,
    implementation_of,
    keeps_normalization_fp32,
    normalization_to_fp32,
    syncs_every_step,
)
from cnnbench.engine.precision import PrecisionPolicy, precision_policy
from cnnbench.engine.resolve import ResolvedRun
from cnnbench.engine.step import Step, TrainPhases, make_optimizer, make_step, make_train_phases


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
    flags: BackendFlags
    scaled: bool = False
    """Whether the step goes through amp_fp16's gradient scaler."""
    normalization_fp32: int = 0
    """Normalisation layers kept in fp32 under pure fp16/bf16 (0 otherwise)."""
    phases: TrainPhases | None = None
    """The training step's phases (``step`` runs them), None for inference."""

    def notes(self) -> dict[str, Any]:
        """What the run chose, for the record's metrics: cuDNN autotuning, the optimizer's
        implementation (read from the optimizer itself), whether each step waits for the
        device (amp_fp16's scaler without a fused optimizer, or the strategy's own wait: a
        parameter server updating on the host), and the normalisation layers kept in fp32."""
        implementation = implementation_of(self.optimizer)
        return {
            "cudnn_benchmark": self.flags.cudnn_benchmark,
            "optimizer_implementation": implementation,
            "step_syncs_host": syncs_every_step(self.scaled, implementation) or self.strategy.syncs_host_every_step(),
            "normalization_fp32_layers": self.normalization_fp32,
        }

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
    flags = policy.apply_backend_flags(device, cfg.cudnn_benchmark)
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
        kept_fp32 = normalization_to_fp32(model) if keeps_normalization_fp32(policy.param_dtype) else 0
        if cfg.data_format == "NHWC":
            model = model.to(memory_format=torch.channels_last)
        model.train(not cfg.forward_only)
        model = strategy.wrap(model)
        optimizer = None if cfg.forward_only else strategy.make_optimizer(
            model, functools.partial(make_optimizer, cfg))
        runnable: Callable[..., Any] = model
        if cfg.compile:
            runnable = torch.compile(model, mode=None if cfg.compile_mode in (None, "default") else cfg.compile_mode)
        phases = None if cfg.forward_only else make_train_phases(runnable, model, optimizer, policy, device.type,
                                                                 strategy)
        step = make_step(runnable, model, optimizer, policy, device.type, strategy,
                         training=not cfg.forward_only, count_correct=cfg.num_epochs is not None, phases=phases)
    except BaseException:
        source.close()
        raise
    scaled = policy.scaler_used(device.type, cfg.forward_only)
    return Prepared(model, runnable, optimizer, step, source, policy, strategy, flags, scaled, kept_fp32, phases)
