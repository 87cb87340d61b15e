"""``--variable-update fsdp``: FSDP2 (``torch.distributed.fsdp.fully_shard``).

Every direct child of the model that holds weights becomes one FSDP unit, then the model
itself: a unit's weights are all-gathered before it runs and its gradients
reduce-scattered after its backward, so each worker keeps 1/N of the weights, gradients
and optimizer state. Under amp_bf16/amp_fp16 the units all-gather their weights in the
autocast dtype and reduce gradients in fp32 (:func:`mixed_precision`), as FSDP2 is meant to
run mixed precision; under amp and pure fp16/bf16 the normalisation layers' weights stay fp32
and all of them form one unit of their own (:func:`shard_normalization`). amp_fp16's gradient
scaler is torch's own, which FSDP2 supports. Communication time is not measured for FSDP.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from cnnbench.config.strategy_rules import FSDP
from cnnbench.distributed.comm_timer import CommunicationTimer
from cnnbench.distributed.strategy import ParallelStrategy, StrategyContext, register_strategy
from cnnbench.models.layers import NORMALIZATION

AUTOCAST_DTYPES = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}
HALF_PRECISIONS = ("amp_bf16", "amp_fp16", "bf16", "fp16")


def mixed_precision(precision: str) -> MixedPrecisionPolicy:
    """FSDP2's policy for ``--precision``: under amp, weights all-gathered in the autocast
    dtype (half the bytes of fp32) and gradients reduced in fp32; otherwise the weights' own
    dtype both ways."""
    dtype = AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)


def _has_unsharded_weights(module: nn.Module) -> bool:
    """Whether ``module`` holds weights that no unit shards yet (``fully_shard`` turns the
    weights of the units it makes into DTensors)."""
    from torch.distributed.tensor import DTensor

    return any(not isinstance(p, DTensor) for p in module.parameters())


def shard_normalization(model: nn.Module, mesh: DeviceMesh, *, check: str | None = None) -> int:
    """Make the model's normalisation layers with weights one FSDP unit that keeps fp32
    weights and stays unsharded between forward and backward; returns how many layers it holds.
    ``check`` (the precision, for its message): also check the unit's one assumption in the
    first forward that records gradients (:class:`NormalizationPath`).

    A unit all-gathers one dtype: under amp FSDP2 casts a unit's parameters but not its
    buffers, and batch norm refuses bf16 weights beside fp32 running statistics; under pure
    fp16/bf16 the engine keeps them fp32 (cuDNN's takes half input only with fp32 weights). So
    the norms cannot share their block's unit. One unit per layer (torchvision's ResNet-50: 59
    units with weights instead of 7) costs three tiny collectives each per step (all-gather
    before forward, again before backward, reduce-scatter after it): 177 a step instead of 21,
    counted on two workers. ``fully_shard`` takes a list of modules as one unit: its weights are
    all-gathered once, before the first of them runs, and reduce-scattered once, when the
    gradient of that first one's input is complete. Kept unsharded after forward
    (``reshard_after_forward=False``), it needs no all-gather in backward: two collectives a step
    for all the norms (ResNet-50: 20 in all), against two for each block with one such unit per
    block, or two for each layer with one unit per layer kept unsharded. The memory kept is the
    norms' full weights: 53,120 fp32 values for ResNet-50 (0.2 % of its weights).

    One unit per block would also be wrong: a block's first norm (a bottleneck's ``bn1``, an
    Inception branch's) does not take in what its other norms (the downsample's, the other
    branches') are computed from, so the reduce-scatter could run before their gradients
    exist. The first norm of the whole model follows the stem, which everything else is
    computed from."""
    layers: list[nn.Module] = [m for m in model.modules()
                               if isinstance(m, NORMALIZATION) and any(True for _ in m.parameters(recurse=False))]
    if layers:
        fully_shard(layers, mesh=mesh, reshard_after_forward=False,
                    mp_policy=MixedPrecisionPolicy(cast_forward_inputs=False))
        if check is not None:
            NormalizationPath(model, layers, check)
    return len(layers)


def _reaches(node: Any, target: Any) -> bool:
    """Whether autograd node ``target`` is behind ``node`` (its gradient is complete only
    after ``node``'s backward ran)."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n is target:
            return True
        if n is None or n in seen:
            continue
        seen.add(n)
        stack.extend(next_node for next_node, _ in n.next_functions)
    return False


class NormalizationPath:
    """Checks, in the first forward that records gradients, that every layer of the
    normalisation unit runs on what was computed from the input of the first one to run.

    FSDP2 reduce-scatters the unit's gradients when that input's gradient is complete; a layer
    off its path (a norm in a second stem, a norm of a learned token) would get its gradient
    after that, and the gradient would be lost. Such a model is refused there in one line. The
    hooks are removed after that forward: nothing is checked in the timed steps."""

    def __init__(self, model: nn.Module, layers: list[nn.Module], precision: str) -> None:
        self.names = {layer: name for name, layer in model.named_modules()}
        self.precision = precision
        self.first: tuple[str, Any] | None = None
        check = torch.compiler.disable(self.check)  # after FSDP's pre-hook: it sees FSDP's node
        self.handles = [layer.register_forward_pre_hook(check) for layer in layers]
        self.handles.append(model.register_forward_hook(torch.compiler.disable(self.done)))

    def check(self, layer: nn.Module, args: tuple[Any, ...]) -> None:
        if not torch.is_grad_enabled():
            return
        node = next((a.grad_fn for a in args if isinstance(a, torch.Tensor) and a.requires_grad), None)
        name = self.names.get(layer, type(layer).__name__)
        if self.first is None:
            self.first = (name, node)
            if node is None:  # no gradient reaches the first input: FSDP reduces after backward
                self.remove()
        elif not _reaches(node, self.first[1]):
            raise RuntimeError(
                f"--variable-update fsdp under {self.precision}: normalisation layer {name} does not run on "
                f"what the first one ({self.first[0]}) takes in, so FSDP2 could reduce its gradient before it "
                "exists; use --precision fp32 or another --variable-update for this model")

    def done(self, *_: Any) -> None:
        if self.first is not None:
            self.remove()

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


@register_strategy
class FullyShard(ParallelStrategy):
    declared = FSDP

    def __init__(self, context: StrategyContext) -> None:
        super().__init__(context)
        self.context: StrategyContext = context
        self.timer = CommunicationTimer(measurable=False)  # FSDP's collectives are not timed

    def wrap(self, model: nn.Module) -> nn.Module:
        world, device = self.context.world, self.context.device
        mesh = init_device_mesh(device.type, (world.world_size,))
        precision = self.context.config.precision
        policy = mixed_precision(precision)
        if precision in HALF_PRECISIONS:
            shard_normalization(model, mesh, check=None if self.context.config.forward_only else precision)
        for child in model.children():
            if _has_unsharded_weights(child):
                fully_shard(child, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        return model

    def measurement_hooks(self) -> list[CommunicationTimer]:
        return [self.timer]
