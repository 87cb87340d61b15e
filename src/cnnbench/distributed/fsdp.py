"""``--variable-update fsdp``: FSDP2 (``torch.distributed.fsdp.fully_shard``).

Every direct child of the model that holds weights becomes one FSDP unit, then the model
itself: a unit's weights are all-gathered before it runs and its gradients
reduce-scattered after its backward, so each worker keeps 1/N of the weights, gradients
and optimizer state. Communication time is not measured for FSDP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from cnnbench.distributed.strategy import (
    OptimizerFactory,
    StrategyContext,
    register_strategy,
    step_optimizer,
)


class FullyShard:
    name = "fsdp"

    def __init__(self, context: StrategyContext) -> None:
        self.context = context

    def wrap(self, model: nn.Module) -> nn.Module:
        world, device = self.context.world, self.context.device
        mesh = init_device_mesh(device.type, (world.world_size,))
        for child in model.children():
            if any(True for _ in child.parameters()):
                fully_shard(child, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model

    def make_optimizer(self, model: nn.Module, factory: OptimizerFactory) -> torch.optim.Optimizer | None:
        return factory(model.parameters())

    def optimizer_step(self, optimizer: torch.optim.Optimizer | None,
                       scaler: torch.amp.GradScaler | None) -> None:
        if optimizer is not None:
            step_optimizer(optimizer, scaler)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def metrics(self) -> Mapping[str, Any]:
        return {"communication_time_s": None}

    def close(self) -> None:
        pass


register_strategy("fsdp")(FullyShard)
