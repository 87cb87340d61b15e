"""How workers share variables: the strategy protocol, its registry, and the simple strategies.

A strategy is asked, in this order, by the engine's prepare phase:

* ``wrap(model)``: the model every step calls (DDP, FSDP, or the model itself);
* ``make_optimizer(model, factory)``: the optimizer over the weights this worker updates
  (``None`` on a worker that updates none: a parameter server's other ranks);
* ``optimizer_step(optimizer, scaler)``: after ``backward``, exchange what must be exchanged
  and update the weights.

:class:`ParallelStrategy` is the base that carries this lifecycle for the strategies that
change little of it. Its ``measurement_hooks()`` are what the engine measures around the
timed steps for it: the time spent communicating (:class:`~cnnbench.distributed.comm_timer.CommunicationTimer`),
where that can be measured. A strategy declares what it is (``declared``: its name among
:data:`~cnnbench.config.strategy_rules.VARIABLE_UPDATES`, its options, its ``validate(config)``
rules, its help and its exchange, written torch-free in :mod:`cnnbench.config.strategy_rules`)
and joins with ``@register_strategy`` on its class (made from a :class:`StrategyContext`), in a
module of :mod:`cnnbench.distributed`: :func:`registered_strategies` imports every one of them.

Without a process group (one device, ``cnnbench run`` alone) there is nothing to exchange:
replicated, independent and fsdp all run the model as it is (:class:`SingleDevice`); a
parameter server still keeps its master copy on ``--local-parameter-device``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import torch
from torch import nn

from cnnbench.config import RunConfig
from cnnbench.config.choices import Declared
from cnnbench.config.strategy_rules import INDEPENDENT, VARIABLE_UPDATES, VariableUpdate
from cnnbench.distributed.comm_timer import CommunicationTimer
from cnnbench.distributed.world import World


class OptimizerFactory(Protocol):
    """Builds the run's optimizer over ``params`` (``host_update``: host weights updated for a
    run on an accelerator, a parameter server's master on ``--local-parameter-device cpu``)."""

    def __call__(self, params: Iterable[nn.Parameter], *, host_update: bool = False) -> torch.optim.Optimizer: ...


S = TypeVar("S", bound="ParallelStrategy")


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


class ParallelStrategy:
    """The lifecycle every strategy shares: the model as it is, an optimizer over all its
    weights, a plain optimizer step, nothing measured, nothing to release. Strategies
    override what they change."""

    name: ClassVar[str]
    declared: ClassVar[Declared[VariableUpdate] | None] = None
    """What the strategy answers to and checks (``None``: :class:`SingleDevice`, no choice)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("declared") is not None:
            cls.name = cls.__dict__["declared"].name

    def __init__(self, context: StrategyContext | None = None) -> None:
        self.context = context

    @classmethod
    def options(cls) -> tuple[str, ...]:
        """The options that apply to this strategy alone."""
        return cls.declared.options if cls.declared is not None else ()

    @classmethod
    def validate(cls, config: Any) -> None:
        """This strategy's own rules (raises :class:`~cnnbench.config.ConfigError`)."""
        if cls.declared is not None:
            cls.declared.validate(config)

    def wrap(self, model: nn.Module) -> nn.Module:
        return model

    def make_optimizer(self, model: nn.Module, factory: OptimizerFactory) -> torch.optim.Optimizer | None:
        return factory(model.parameters())

    def optimizer_step(self, optimizer: torch.optim.Optimizer | None,
                       scaler: torch.amp.GradScaler | None) -> None:
        if optimizer is not None:
            step_optimizer(optimizer, scaler)

    def measurement_hooks(self) -> list[CommunicationTimer]:
        """What is measured for this strategy around the timed steps (start/stop/metrics)."""
        return []

    def syncs_host_every_step(self) -> bool:
        """Whether the run's steps wait for the device on the host every step, by the strategy's
        own doing (``metrics.step_syncs_host``): a parameter server's rank 0 updating on the host,
        which every worker's next step then waits for."""
        return False

    def close(self) -> None:
        pass


class SingleDevice(ParallelStrategy):
    """One worker with its own weights: nothing to exchange."""

    name = "single"


class Independent(ParallelStrategy):
    """Every worker trains its own copy on its own data; no gradient exchange (the upper
    bound of scaling). The workers meet only at the start and end of the timed steps."""

    declared = INDEPENDENT

    def __init__(self, context: StrategyContext | None = None) -> None:
        super().__init__(context)
        self.timer = CommunicationTimer(measurable=True)  # nothing is exchanged: 0 s

    def measurement_hooks(self) -> list[CommunicationTimer]:
        return [self.timer]


StrategyClass = type[ParallelStrategy]
_STRATEGIES: dict[str, StrategyClass] = {}


def register_strategy(cls: type[S]) -> type[S]:
    """Class decorator: ``cls`` is made for ``--variable-update cls.declared.name``."""
    if cls.declared is None:
        raise ValueError(f"{cls.__name__} declares no --variable-update name")
    name = cls.declared.name
    if name not in VARIABLE_UPDATES:
        raise ValueError(f"strategy {name!r} is not a --variable-update choice ({', '.join(VARIABLE_UPDATES)})")
    if name in _STRATEGIES:
        raise ValueError(f"strategy {name!r} registered twice")
    _STRATEGIES[name] = cls
    return cls


register_strategy(Independent)


def registered_strategies() -> dict[str, StrategyClass]:
    """Every strategy, by name (importing every module of :mod:`cnnbench.distributed`: those that
    hold a strategy register it)."""
    import cnnbench.distributed as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    return dict(_STRATEGIES)


def make_strategy(context: StrategyContext) -> ParallelStrategy:
    """The strategy for the run's ``--variable-update`` in its world."""
    strategies = registered_strategies()
    name = context.config.variable_update
    if not context.world.process_group and name != "parameter_server":
        return SingleDevice()
    try:
        cls = strategies[name]
    except KeyError:
        raise ValueError(f"no strategy {name!r} (known: {', '.join(sorted(strategies))})") from None
    return cls(context)
