"""How workers share variables: the strategy protocol and the single-device strategy.

A strategy is asked three things, in this order, by the engine's prepare phase:

* ``wrap(model)``: the model every step calls (DDP, FSDP, or the model itself);
* ``make_optimizer(model, factory)``: the optimizer over the parameters it updates
  (a parameter server's master copy lives elsewhere);
* ``optimizer_step(optimizer, scaler)``: after ``backward``, exchange what must be
  exchanged and update the weights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

if TYPE_CHECKING:
    from cnnbench.distributed.world import World

OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]


class ParallelStrategy(Protocol):
    name: str

    def wrap(self, model: nn.Module) -> nn.Module: ...

    def make_optimizer(self, model: nn.Module, factory: OptimizerFactory) -> torch.optim.Optimizer: ...

    def optimizer_step(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None: ...

    def close(self) -> None: ...


class SingleDevice:
    """One device: nothing to exchange."""

    name = "single"

    def wrap(self, model: nn.Module) -> nn.Module:
        return model

    def make_optimizer(self, model: nn.Module, factory: OptimizerFactory) -> torch.optim.Optimizer:
        return factory(model.parameters())

    def optimizer_step(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()

    def close(self) -> None:
        pass


def make_strategy(variable_update: str, world: World) -> ParallelStrategy:
    """The strategy for ``--variable-update`` in ``world`` (one device: :class:`SingleDevice`)."""
    if world.world_size == 1:
        return SingleDevice()
    raise NotImplementedError(f"--variable-update {variable_update} over {world.world_size} workers")
