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

The flat buffers (:class:`_Bucket`, one per dtype) are allocated once, in ``wrap``. Every
weight's view into them has the weight's own strides (channels_last under NHWC), so a master
weight and its gradient always have identical strides: torch's fused CUDA optimizers refuse
anything else (``check_fast_path_restrictions``), and the copies in and out of the flat
buffers take the ``_foreach_copy_`` fast path. With the master on the host
(:func:`updates_on_host`), its buffers are pinned, each step makes one ``non_blocking`` copy
each way per dtype, waits for the device once (``metrics.step_syncs_host``), and updates with
the fused (SGD, Adam) or foreach host implementation on every core this process may use.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

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
from cnnbench.machine.host import usable_cpus


def _by_dtype(tensors: list[nn.Parameter]) -> list[list[int]]:
    """Indices of ``tensors`` grouped by dtype, in order of first appearance."""
    groups: dict[torch.dtype, list[int]] = defaultdict(list)
    for i, t in enumerate(tensors):
        groups[t.dtype].append(i)
    return list(groups.values())


def updates_on_host(device: torch.device, param_device: torch.device) -> bool:
    """Whether rank 0 updates the weights on the host for a run on an accelerator
    (``--local-parameter-device cpu`` on a GPU): its host buffers are then pinned, its copies
    asynchronous, and it waits for the device once a step before the host update."""
    return param_device.type == "cpu" and device.type != "cpu"


def dense_strides(t: torch.Tensor) -> tuple[int, ...]:
    """The strides of ``t``'s view into a flat buffer: ``t``'s own where they are dense
    (channels_last stays channels_last), else the dense strides nearest them."""
    return tuple(torch.empty_like(t, device="meta").stride())


def flat_views(flat: torch.Tensor, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Views of ``flat``, one per tensor of ``like``, each with that tensor's shape and strides,
    back to back."""
    views, offset = [], 0
    for t in like:
        n = t.numel()
        views.append(flat[offset:offset + n].as_strided(t.shape, dense_strides(t)))
        offset += n
    return views


def _flat_buffer(numel: int, dtype: torch.dtype, device: torch.device, pin: bool) -> torch.Tensor:
    """Every flat buffer the parameter server allocates (once, in ``wrap``)."""
    return torch.empty(numel, dtype=dtype, device=device, pin_memory=pin)


def _copy_flat(dst: torch.Tensor, src: torch.Tensor) -> None:
    """A copy between the device's flat buffers and the host's (pinned there on a GPU run)."""
    dst.copy_(src, non_blocking=True)


def _wait_for_device(device: torch.device) -> None:
    """The host waits for the gradients' copy to land before it reads them."""
    torch.cuda.current_stream(device).synchronize()


@contextmanager
def _host_threads(enabled: bool) -> Iterator[None]:
    """The host update on every core this process may use (a worker otherwise has its share)."""
    if not enabled:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, len(usable_cpus())))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class _Bucket:
    """The flat buffers of one dtype's parameters, allocated once."""

    indices: list[int]
    device_grads: torch.Tensor
    """The gradients, gathered on the worker's device; reduced onto rank 0 in place."""
    device_weights: torch.Tensor
    """The updated weights on the worker's device, as broadcast from rank 0."""
    master_flat: torch.Tensor | None = None
    """Rank 0: the master weights, on the parameter device."""
    master_grads: torch.Tensor | None = None
    """Rank 0: the master weights' gradients (``device_grads`` itself unless on the host)."""
    grad_views: list[torch.Tensor] = field(default_factory=list)
    weight_views: list[torch.Tensor] = field(default_factory=list)


@register_strategy
class ParameterServer(ParallelStrategy):
    declared = PARAMETER_SERVER

    def __init__(self, context: StrategyContext) -> None:
        super().__init__(context)
        self.world = context.world
        self.device = context.device
        where = context.config.local_parameter_device or "device"
        self.param_device = torch.device("cpu") if where == "cpu" else context.device
        self.on_host = where == "cpu"
        """The master lives apart from the device's buffers (copied each way every step)."""
        self.host_update = updates_on_host(self.device, self.param_device)
        self.exchange = context.world.process_group
        self.timer = CommunicationTimer(measurable=self.exchange and context.device.type == "cpu")
        self.params: list[nn.Parameter] = []
        self.buffers: list[torch.Tensor] = []
        self.master: list[nn.Parameter] = []
        self.buckets: list[_Bucket] = []

    def wrap(self, model: nn.Module) -> nn.Module:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = list(model.buffers())
        if self.exchange:
            with torch.no_grad():
                self._broadcast(self.params + self.buffers)  # every worker starts from rank 0's weights
        self.buckets = [self._bucket(group) for group in _by_dtype(self.params)]
        if self.world.is_main:
            master: dict[int, nn.Parameter] = {}
            for bucket in self.buckets:
                assert bucket.master_flat is not None and bucket.master_grads is not None
                like = [self.params[i] for i in bucket.indices]
                for i, view, grad in zip(bucket.indices, flat_views(bucket.master_flat, like),
                                         flat_views(bucket.master_grads, like), strict=True):
                    with torch.no_grad():
                        view.copy_(self.params[i].detach())
                    master[i] = nn.Parameter(view)  # shares the flat buffer's storage
                    master[i].grad = grad
            self.master = [master[i] for i in range(len(self.params))]
        return model

    def _bucket(self, group: list[int]) -> _Bucket:
        """The flat buffers of the parameters ``group`` (one dtype)."""
        params = [self.params[i] for i in group]
        numel, dtype = sum(p.numel() for p in params), params[0].dtype
        device_grads = _flat_buffer(numel, dtype, self.device, False)
        master_flat = master_grads = None
        if self.world.is_main:
            pin = self.host_update
            master_flat = _flat_buffer(numel, dtype, self.param_device, pin)
            master_grads = _flat_buffer(numel, dtype, self.param_device, pin) if self.on_host else device_grads
        if self.world.is_main and not self.on_host:
            device_weights = master_flat  # the master is on the device: broadcast from it
        else:
            device_weights = _flat_buffer(numel, dtype, self.device, False)
        assert device_weights is not None
        return _Bucket(group, device_grads, device_weights, master_flat, master_grads,
                       flat_views(device_grads, params), flat_views(device_weights, params))

    def make_optimizer(self, model: nn.Module, factory: OptimizerFactory) -> torch.optim.Optimizer | None:
        if not self.world.is_main:
            return None
        return factory(self.master, host_update=True) if self.host_update else factory(self.master)

    def syncs_host_every_step(self) -> bool:
        return self.host_update

    @torch.no_grad()
    def optimizer_step(self, optimizer: torch.optim.Optimizer | None,
                       scaler: torch.amp.GradScaler | None) -> None:
        for bucket in self.buckets:
            self._reduce_gradients(bucket)
        if self.world.is_main:
            assert optimizer is not None
            self._update(optimizer)
        for bucket in self.buckets:
            self._receive_update(bucket)
        t0 = now()
        if self.exchange:
            self._broadcast(self.buffers)
        self.timer.add(now() - t0)

    def _reduce_gradients(self, bucket: _Bucket) -> None:
        """The gradients of ``bucket``'s parameters gathered into its flat buffer (one
        ``_foreach_copy_``), summed onto rank 0 and averaged there (other ranks' buffers are
        left as sent)."""
        grads, views = [], []
        for i, view in zip(bucket.indices, bucket.grad_views, strict=True):
            grad = self.params[i].grad
            if grad is None:
                view.zero_()
            else:
                grads.append(grad)
                views.append(view)
        if views:
            torch._foreach_copy_(views, grads)
        t0 = now()
        if self.exchange:
            dist.reduce(bucket.device_grads, dst=0)
        self.timer.add(now() - t0)
        if self.exchange and self.world.is_main:
            bucket.device_grads.div_(self.world.world_size)

    def _update(self, optimizer: torch.optim.Optimizer) -> None:
        """Rank 0's update of the master weights, where they live."""
        if self.on_host:
            for bucket in self.buckets:
                assert bucket.master_grads is not None
                _copy_flat(bucket.master_grads, bucket.device_grads)
            if self.host_update:
                _wait_for_device(self.device)
        with _host_threads(self.host_update):
            step_optimizer(optimizer, None)
        if self.on_host:
            for bucket in self.buckets:
                assert bucket.master_flat is not None
                _copy_flat(bucket.device_weights, bucket.master_flat)

    def _receive_update(self, bucket: _Bucket) -> None:
        """Rank 0's updated master weights of ``bucket`` copied into every worker's parameters."""
        t0 = now()
        if self.exchange:
            dist.broadcast(bucket.device_weights, src=0)
        self.timer.add(now() - t0)
        torch._foreach_copy_([self.params[i] for i in bucket.indices], bucket.weight_views)

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
