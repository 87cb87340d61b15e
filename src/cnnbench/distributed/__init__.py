"""Many devices: who is who (:class:`World`) and how workers share variables (strategies).

The engine builds the model, then hands it to the run's strategy (``strategy.wrap``: the
one place where a parallel wrapper such as DDP or FSDP is applied), and leaves the
optimizer step to it (``strategy.optimizer_step``: where a parameter server reduces and
broadcasts). One device needs no process group: :class:`SingleDevice`.
"""

from cnnbench.distributed.strategy import ParallelStrategy, SingleDevice, make_strategy
from cnnbench.distributed.world import World

__all__ = ["ParallelStrategy", "SingleDevice", "World", "make_strategy"]
