"""``--variable-update parameter_server``: one master copy of the weights, on rank 0.

Each step every worker computes its gradients; they are summed onto rank 0 with one
``reduce`` of a flat buffer per dtype (pure fp16/bf16 keep normalisation layers in fp32),
and averaged; rank 0 copies them to its master weights on
``--local-parameter-device`` (its GPU, or the host CPU), steps the optimizer there (the
optimizer's state lives only there), and ``broadcast``\\ s the updated weights and the
model's buffers (batch-norm statistics) back to every worker.

How this maps to tf_cnn_benchmarks' ``parameter_server``: there, variables live on the
parameter device(s) and every tower reads them each step and sends its gradients there,
the update running where the variables live. Here the same data moves, but through two
torch.distributed collectives per step over all weights at once (not per variable),
rank 0 is the only parameter server (tf can spread variables over several), and each
worker keeps a working copy between steps. Built on collectives, not the deprecated RPC
framework. Without a process group (one device) the master copy still lives on the
parameter device, so ``--local-parameter-device cpu`` costs what it costs in tf.
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from cnnbench.config.strategy_rules import PARAMETER_SERVER
from cnnbench.distributed.comm_timer import CommunicationTimer, now
from cnnbench.distributed.strategy import (
    OptimizerFactory,
    ParallelStrategy,
    StrategyContext,
    register_strategy,
    step_optimizer,
)


def _by_dtype(tensors: list[nn.Parameter]) -> list[list[int]]:
    """Indices of ``tensors`` grouped by dtype, in order of first appearance."""
    groups: dict[torch.dtype, list[int]] = defaultdict(list)
    for i, t in enumerate(tensors):
        groups[t.dtype].append(i)
    return list(groups.values())


@register_strategy
class ParameterServer(ParallelStrategy):
    declared = PARAMETER_SERVER

    def __init__(self, context: StrategyContext) -> None:
        super().__init__(context)
        self.world = context.world
        self.device = context.device
        where = context.config.local_parameter_device or "device"
        self.param_device = torch.device("cpu") if where == "cpu" else context.device
        self.exchange = context.world.process_group
        self.timer = CommunicationTimer(measurable=self.exchange and context.device.type == "cpu")
        self.params: list[nn.Parameter] = []
        self.buffers: list[torch.Tensor] = []
        self.master: list[nn.Parameter] = []

    def wrap(self, model: nn.Module) -> nn.Module:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = list(model.buffers())
        if self.exchange:
            with torch.no_grad():
                self._broadcast(self.params + self.buffers)  # every worker starts from rank 0's weights
        if self.world.is_main:
            self.master = [nn.Parameter(p.detach().to(self.param_device, copy=True)) for p in self.params]
        return model

    def make_optimizer(self, model: nn.Module, factory: OptimizerFactory) -> torch.optim.Optimizer | None:
        return factory(self.master) if self.world.is_main else None

    @torch.no_grad()
    def optimizer_step(self, optimizer: torch.optim.Optimizer | None,
                       scaler: torch.amp.GradScaler | None) -> None:
        groups = _by_dtype(self.params)  # one flat buffer per dtype (pure half keeps norms fp32)
        flats = [self._reduced_gradients(group) for group in groups]
        if self.world.is_main:
            assert optimizer is not None
            for group, flat in zip(groups, flats, strict=True):
                masters = [self.master[i] for i in group]
                for master, grad in zip(masters, _unflatten_dense_tensors(flat.to(self.param_device), masters),
                                        strict=True):
                    master.grad = grad
            step_optimizer(optimizer, None)
        for group, flat in zip(groups, flats, strict=True):
            self._receive_update(group, flat)
        t0 = now()
        if self.exchange:
            self._broadcast(self.buffers)
        self.timer.add(now() - t0)

    def _reduced_gradients(self, group: list[int]) -> torch.Tensor:
        """The gradients of parameters ``group`` as one flat buffer, summed onto rank 0 and
        averaged there (other ranks' buffers are left as sent)."""
        params = [self.params[i] for i in group]
        flat = _flatten_dense_tensors([p.grad if p.grad is not None else torch.zeros_like(p) for p in params])
        t0 = now()
        if self.exchange:
            dist.reduce(flat, dst=0)
        self.timer.add(now() - t0)
        if self.exchange and self.world.is_main:
            flat.div_(self.world.world_size)
        return flat

    def _receive_update(self, group: list[int], flat: torch.Tensor) -> None:
        """Rank 0's updated master weights of ``group`` copied into every worker's parameters."""
        params = [self.params[i] for i in group]
        if self.world.is_main:
            updated = _flatten_dense_tensors([self.master[i].detach() for i in group]).to(self.device, flat.dtype)
        else:
            updated = torch.empty_like(flat)
        t0 = now()
        if self.exchange:
            dist.broadcast(updated, src=0)
        self.timer.add(now() - t0)
        for param, value in zip(params, _unflatten_dense_tensors(updated, params), strict=True):
            param.copy_(value)

    def _broadcast(self, tensors: list[torch.Tensor]) -> None:
        """Rank 0's values of ``tensors`` on every worker: one broadcast per dtype."""
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = defaultdict(list)
        for t in tensors:
            by_dtype[t.dtype].append(t)
        for group in by_dtype.values():
            flat = _flatten_dense_tensors([t.detach() for t in group])
            dist.broadcast(flat, src=0)
            for t, value in zip(group, _unflatten_dense_tensors(flat, group), strict=True):
                t.detach().copy_(value)

    def measurement_hooks(self) -> list[CommunicationTimer]:
        return [self.timer]
