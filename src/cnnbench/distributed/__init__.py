"""Many devices: who is who (:class:`World`), the process group's collectives, and the strategies.
May import: ``config``, ``machine``, ``models``, ``data``, ``results`` and the leaf modules; never ``engine``.

How the workers are started, run and watched is :mod:`cnnbench.engine.multidevice`'s.
Strategies declare their name, options and rules (:mod:`cnnbench.config.strategy_rules`), and
share their lifecycle through :class:`ParallelStrategy`; :func:`registered_strategies` lists them.

The engine builds the model, then hands it to the run's strategy (``strategy.wrap``: the
one place where a parallel wrapper such as DDP or FSDP is applied), and leaves the
optimizer step to it (``strategy.optimizer_step``: where a parameter server reduces and
broadcasts). One device needs no process group: :class:`SingleDevice`.
"""

from cnnbench.distributed.strategy import (
    ParallelStrategy,
    SingleDevice,
    make_strategy,
    register_strategy,
    registered_strategies,
)
from cnnbench.distributed.world import World

__all__ = ["ParallelStrategy", "SingleDevice", "World", "make_strategy", "register_strategy", "registered_strategies"]
