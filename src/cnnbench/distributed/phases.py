"""Phases where the workers' work differs: compilation in warm-up, rank 0's profile export.

``--timeout`` bounds every collective, but in these phases a worker can be minutes behind
the others for good reasons: ``torch.compile`` takes longer on one rank than another, and
rank 0 alone writes the profiler's trace. :func:`uneven_phase` brackets such a phase:

* inside it, the process group's timeout is raised to ``max(--timeout, PHASE_TIMEOUT_S)``
  (:func:`~cnnbench.distributed.torch_compat.set_group_timeout`), for the collectives the
  phase's steps make;
* at its end every worker says in the c10d store that it is done and waits there for the
  others (:func:`wait_for_all`), in no collective, so that neither a collective nor NCCL's
  watchdog times out while a worker finishes work the others do not have. A worker that
  does not come within the raised timeout is named: every waiting worker raises
  :class:`SlowWorker` with its rank.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterator
from contextlib import contextmanager

import torch.distributed as dist
from torch.distributed import Store

from cnnbench.distributed.torch_compat import set_group_timeout
from cnnbench.distributed.world import World

PHASE_TIMEOUT_S = 1800.0
"""The least time a worker may take over an uneven phase (compilation, profiling)."""

_phases = itertools.count()  # the n-th phase of this process; the same on every worker


class SlowWorker(RuntimeError):
    """A worker did not finish a phase within its timeout while the others waited for it."""

    def __init__(self, ranks: list[int], phase: str, timeout_s: float) -> None:
        who = ", ".join(map(str, ranks))
        super().__init__(f"rank {who} did not finish {phase} within {timeout_s:g} s; the other workers waited for it")
        self.failed_rank = ranks[0]
        """The slow worker (the first, when several were)."""


def phase_timeout(timeout_s: float) -> float:
    return max(timeout_s, PHASE_TIMEOUT_S)


def default_store() -> Store:
    """The store the process group was set up with (torch's elastic agent's, under torchrun)."""
    return dist.distributed_c10d._get_default_store()


def wait_for_all(world: World, phase: str, timeout_s: float, store: Store | None = None) -> None:
    """Every worker reaches this point before any goes on, waiting in the store (no collective).

    Raises :class:`SlowWorker` naming the workers that did not come within ``timeout_s``.
    """
    store = store if store is not None else default_store()
    prefix = f"cnnbench/phase/{next(_phases)}/"
    store.set(prefix + str(world.rank), phase)
    keys = [prefix + str(rank) for rank in range(world.world_size)]
    try:
        store.wait(keys, datetime.timedelta(seconds=timeout_s))
    except dist.DistError:
        missing = [rank for rank, key in enumerate(keys) if not store.check([key])]
        if not missing:
            raise
        raise SlowWorker(missing, phase, timeout_s) from None


@contextmanager
def uneven_phase(world: World, phase: str, timeout_s: float) -> Iterator[None]:
    """Run the body with the raised timeout, then wait for every worker (see the module)."""
    if not world.process_group:
        yield
        return
    raised = phase_timeout(timeout_s)
    set_group_timeout(datetime.timedelta(seconds=raised))
    yield
    wait_for_all(world, phase, raised)
    set_group_timeout(datetime.timedelta(seconds=timeout_s))
