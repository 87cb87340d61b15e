"""The distributed layout of a run: one object says which worker this process is.

A run on one device has no process group (:meth:`World.single`). Workers started by
``cnnbench run --num-devices N`` or by ``torchrun`` read their place from the environment
torch's elastic agent sets (:meth:`World.from_env`): ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``GROUP_WORLD_SIZE`` (the number of nodes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

_TORCHRUN_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class World:
    """This process's place among the run's workers (one worker per device)."""

    rank: int = 0
    """Global index of this worker, 0 .. world_size - 1."""
    world_size: int = 1
    local_rank: int = 0
    """Index of this worker on its node (picks its GPU)."""
    local_world_size: int = 1
    """Workers on this node."""
    num_nodes: int = 1
    process_group: bool = False
    """Whether the workers form a torch.distributed process group (launched, or under torchrun)."""

    @property
    def is_main(self) -> bool:
        """Rank 0: the worker that prints and writes the record."""
        return self.rank == 0

    @classmethod
    def single(cls) -> World:
        return cls()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> World:
        """The layout torch's elastic agent (torchrun, or our launcher) put in the environment."""
        env = os.environ if env is None else env
        world_size = int(env["WORLD_SIZE"])
        local_world_size = int(env.get("LOCAL_WORLD_SIZE", world_size))
        nodes = env.get("GROUP_WORLD_SIZE")
        num_nodes = int(nodes) if nodes else max(1, world_size // max(1, local_world_size))
        return cls(rank=int(env["RANK"]), world_size=world_size, local_rank=int(env.get("LOCAL_RANK", "0")),
                   local_world_size=local_world_size, num_nodes=num_nodes, process_group=True)


def launched_by_torchrun(env: Mapping[str, str] | None = None) -> bool:
    """Is this process a worker that torchrun (or another elastic agent) started?"""
    env = os.environ if env is None else env
    return all(k in env for k in _TORCHRUN_KEYS)
