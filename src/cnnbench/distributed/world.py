"""The distributed layout of a run: one object says which worker this process is."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class World:
    """This process's place among the run's workers (one worker per device)."""

    rank: int = 0
    """Global index of this worker, 0 .. world_size - 1."""
    world_size: int = 1
    local_rank: int = 0
    """Index of this worker on its node (picks its GPU)."""
    num_nodes: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the worker that prints and writes the record."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def single(cls) -> World:
        return cls()
