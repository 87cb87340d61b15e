"""``--variable-update replicated``: DistributedDataParallel, gradients all-reduced.

DDP's knobs are the run's options: ``--bucket-cap-mb``, ``--gradient-as-bucket-view``,
``--static-graph``, ``--no-broadcast-buffers``, and ``--gradient-compression`` (DDP communication hooks: fp16 / bf16
casts for the all-reduce, PowerSGD at rank 1 from the last warm-up step). On CPU each
bucket's all-reduce is timed through the communication hook (see
:mod:`cnnbench.distributed.comm_timer`); on GPUs it is not measured.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel

from cnnbench.config.strategy_rules import POWERSGD_MIN_WARMUP, REPLICATED
from cnnbench.distributed.comm_timer import CommunicationTimer, now
from cnnbench.distributed.strategy import ParallelStrategy, StrategyContext, register_strategy

CommHook = Callable[[Any, Any], torch.futures.Future]


def powersgd_start_iter(warmup_steps: int) -> int:
    """PowerSGD's ``start_powerSGD_iter`` for a run with ``warmup_steps``: the last warm-up step
    (steps count from 0, and the hook compresses step ``i`` once ``i >= start_powerSGD_iter``), so
    its one-time set-up (the P and Q matrices, their first orthogonalisation) is not timed.
    torch requires ``start_powerSGD_iter > 1``: the configuration refuses fewer than
    :data:`~cnnbench.config.strategy_rules.POWERSGD_MIN_WARMUP` warm-up steps before any work."""
    if warmup_steps < POWERSGD_MIN_WARMUP:
        raise ValueError(f"PowerSGD needs {POWERSGD_MIN_WARMUP} or more warm-up steps (got {warmup_steps})")
    return warmup_steps - 1


BUFFERS_KWARG = ("forward_sync_buffers"
                 if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
                 else "broadcast_buffers")
"""DDP's name for syncing rank 0's buffers before each forward: ``forward_sync_buffers`` from torch
2.13 (``broadcast_buffers``, deprecated there with a FutureWarning on every use, before)."""


@register_strategy
class Replicated(ParallelStrategy):
    declared = REPLICATED

    def __init__(self, context: StrategyContext) -> None:
        super().__init__(context)
        self.context: StrategyContext = context
        self.timer = CommunicationTimer(measurable=context.device.type == "cpu")

    def wrap(self, model: nn.Module) -> nn.Module:
        cfg, device = self.context.config, self.context.device
        if cfg.forward_only:
            return model  # nothing to all-reduce: every worker infers its own batches
        buffers: dict[str, Any] = {BUFFERS_KWARG: cfg.broadcast_buffers is not False}
        ddp = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=cfg.bucket_cap_mb,
            gradient_as_bucket_view=cfg.gradient_as_bucket_view,
            static_graph=cfg.static_graph,
            **buffers,
        )
        state, hook = self._comm_hook()
        if hook is not None:
            ddp.register_comm_hook(state, self._timed(hook))
        return ddp

    def _comm_hook(self) -> tuple[Any, CommHook | None]:
        cfg = self.context.config
        compression = cfg.gradient_compression or "none"
        if compression == "fp16":
            return None, default_hooks.fp16_compress_hook
        if compression == "bf16":
            return None, default_hooks.bf16_compress_hook
        if compression == "powersgd":
            state = powerSGD_hook.PowerSGDState(
                process_group=None, matrix_approximation_rank=1,
                start_powerSGD_iter=powersgd_start_iter(cfg.warmup_steps()),
            )
            return state, powerSGD_hook.powerSGD_hook
        # Plain all-reduce: DDP's built-in one, unless the hook is needed to time it.
        return None, default_hooks.allreduce_hook if self.timer.measurable else None

    def _timed(self, hook: CommHook) -> CommHook:
        timer = self.timer

        def timed_hook(state: Any, bucket: Any) -> torch.futures.Future:
            t0 = now()
            future = hook(state, bucket)

            def done(f: torch.futures.Future) -> Any:
                timer.add(now() - t0)
                return f.value()

            return future.then(done)

        # DDP checks a hook's annotations as objects (this module's are strings).
        timed_hook.__annotations__ = {"state": object, "bucket": dist.GradBucket,
                                      "return": torch.futures.Future[torch.Tensor]}
        return timed_hook

    def measurement_hooks(self) -> list[CommunicationTimer]:
        return [self.timer]
