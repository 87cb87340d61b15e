"""``--variable-update fsdp``: FSDP2 (``torch.distributed.fsdp.fully_shard``).

Every direct child of the model that holds weights becomes one FSDP unit, then the model
itself: a unit's weights are all-gathered before it runs and its gradients
reduce-scattered after its backward, so each worker keeps 1/N of the weights, gradients
and optimizer state. Under amp_bf16/amp_fp16 the units all-gather their weights in the
autocast dtype and reduce gradients in fp32 (:func:`mixed_precision`), as FSDP2 is meant to
run mixed precision; under amp and pure fp16/bf16, normalisation layers are units of their
own with fp32 weights. amp_fp16's gradient scaler is torch's own, which FSDP2 supports.
Communication time is not measured for FSDP.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
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


def _is_unit(module: nn.Module) -> bool:
    """Whether ``fully_shard`` was already applied to ``module`` (it becomes an FSDPModule)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


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
            # Normalisation layers are units of their own that keep fp32 weights: a unit holds
            # one dtype; under amp FSDP2 casts a unit's parameters but not its buffers, and batch
            # norm refuses bf16 weights beside fp32 running statistics; under pure fp16/bf16 the
            # engine keeps them fp32 (cuDNN's takes half input only with fp32 weights).
            for module in model.modules():
                if isinstance(module, NORMALIZATION) and any(True for _ in module.parameters()):
                    fully_shard(module, mesh=mesh, mp_policy=MixedPrecisionPolicy(cast_forward_inputs=False))
        for child in model.children():
            if any(True for _ in child.parameters()) and not _is_unit(child):
                fully_shard(child, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        return model

    def measurement_hooks(self) -> list[CommunicationTimer]:
        return [self.timer]
