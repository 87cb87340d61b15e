"""How workers share variables: the strategy protocol, its registry, and the simple strategies.

A strategy is asked, in this order, by the engine's prepare phase:

* ``wrap(model)``: the model every step calls (DDP, FSDP, or the model itself);
* ``make_optimizer(model, factory)``: the optimizer over the weights this worker updates
  (``None`` on a worker that updates none: a parameter server's other ranks);
* ``optimizer_step(optimizer, scaler)``: after ``backward``, exchange what must be exchanged
  and update the weights.

It is also a measurement hook (``start``/``stop``/``metrics``): the time it spent
communicating during the timed steps, where that can be measured. A new strategy joins with
``@register_strategy("name")`` on a factory taking a :class:`StrategyContext`.

Without a process group (one device, ``cnnbench run`` alone) there is nothing to exchange:
replicated, independent and fsdp all run the model as it is (:class:`SingleDevice`); a
parameter server still keeps its master copy on ``--local-parameter-device``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from cnnbench.config import RunConfig
from cnnbench.distributed.world import World

OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]


class ParallelStrategy(Protocol):
    name: str

    def wrap(self, model: nn.Module) -> nn.Module: ...

    def make_optimizer(self, model: nn.Module, factory: OptimizerFactory) -> torch.optim.Optimizer | None: ...

    def optimizer_step(self, optimizer: torch.optim.Optimizer | None,
                       scaler: torch.amp.GradScaler | None) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def metrics(self) -> Mapping[str, Any]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class StrategyContext:
    """What a strategy is made from."""

    config: RunConfig
    """The resolved configuration (every option of the strategy filled)."""
    world: World
    device: torch.device


def step_optimizer(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
    """``optimizer.step()``, through the gradient scaler when there is one.

    An update too large for the weights' type (Adam at ``--learning-rate 1e38``: its step
    size is the rate over ``1 - beta1``), where torch raises "value cannot be converted to
    type float without overflow", makes the weights NaN, as the overflowing update would:
    the loss turns NaN and the run keeps its record, marked as diverged."""
    try:
        if scaler is not None:
            scaler.step(optimizer)
        else:
            optimizer.step()
    except RuntimeError as exc:
        if "without overflow" not in str(exc):
            raise
        with torch.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is not None:
                        param.fill_(float("nan"))
    if scaler is not None:
        scaler.update()


class SingleDevice:
    """One worker with its own weights: nothing to exchange."""

    name = "single"

    def wrap(self, model: nn.Module) -> nn.Module:
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
        return {}

    def close(self) -> None:
        pass


class Independent(SingleDevice):
    """Every worker trains its own copy on its own data; no gradient exchange (the upper
    bound of scaling). The workers meet only at the start and end of the timed steps."""

    name = "independent"

    def metrics(self) -> Mapping[str, Any]:
        return {"communication_time_s": 0.0}


StrategyFactory = Callable[[StrategyContext], ParallelStrategy]
_FACTORIES: dict[str, StrategyFactory] = {}


def register_strategy(name: str) -> Callable[[StrategyFactory], StrategyFactory]:
    """Decorator: the factory makes the strategy for ``--variable-update name``."""

    def wrap(factory: StrategyFactory) -> StrategyFactory:
        if name in _FACTORIES:
            raise ValueError(f"strategy {name!r} registered twice")
        _FACTORIES[name] = factory
        return factory

    return wrap


register_strategy("independent")(lambda ctx: Independent())


def make_strategy(context: StrategyContext) -> ParallelStrategy:
    """The strategy for the run's ``--variable-update`` in its world."""
    from cnnbench.distributed import fsdp, parameter_server, replicated  # noqa: F401  (they register)

    name = context.config.variable_update
    if not context.world.process_group and name != "parameter_server":
        return SingleDevice()
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"no strategy {name!r} (known: {', '.join(sorted(_FACTORIES))})") from None
    return factory(context)
