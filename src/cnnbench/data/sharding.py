"""Which images each worker reads, batch by batch: deterministic from the seed and the epoch.

Training (:meth:`ShardPlan.train_batches`): each epoch, one permutation of the whole
training split is drawn from ``(seed, epoch)`` (the same on every worker); worker ``r`` of
``W`` takes every ``W``-th image of it starting at ``r`` (as torch's ``DistributedSampler``
does), the shards cut to the same length ``N // W`` so that every worker takes the same
number of steps; batches of ``batch_size``, the last partial batch dropped. Each image of
the epoch also gets its own augmentation seed, drawn from the same generator, so a crop
does not depend on the worker count or the loader's processes.

Evaluation (:meth:`ShardPlan.eval_batches`): worker ``r`` takes images ``r, r + W, ...``
of the validation split, in order; together the workers cover it exactly once. Every
worker takes the same number of evaluation steps (``ceil(ceil(N / W) / batch_size)``): a
worker with fewer images ends with an empty batch, so that models whose forward pass
communicates (FSDP) stay in step.

No torch here (numpy's PCG64 generator, the same on every platform).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

SEED_LIMIT = 2**63 - 1


@dataclass(frozen=True)
class BatchKey:
    """One batch to load: the split, the images' indices in it, and one augmentation seed per image."""

    split: str
    indices: tuple[int, ...]
    seeds: tuple[int, ...] | None = None
    """``None``: no randomness (evaluation preprocessing)."""


@dataclass(frozen=True)
class ShardPlan:
    """The images of one worker of ``world_size``, split into batches."""

    train_size: int
    val_size: int
    batch_size: int
    seed: int
    rank: int = 0
    world_size: int = 1

    @property
    def train_shard_size(self) -> int:
        """Training images per worker and epoch (every worker the same)."""
        return self.train_size // self.world_size

    @property
    def steps_per_epoch(self) -> int:
        return self.train_shard_size // self.batch_size

    @property
    def eval_steps(self) -> int:
        """Evaluation batches per worker (every worker the same; the last ones may be partial or empty)."""
        return math.ceil(math.ceil(self.val_size / self.world_size) / self.batch_size) if self.val_size else 0

    def train_order(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """This worker's image indices for ``epoch`` and their augmentation seeds (before batching)."""
        rng = np.random.default_rng([self.seed & SEED_LIMIT, epoch])
        order = rng.permutation(self.train_size)
        seeds = rng.integers(0, SEED_LIMIT, size=self.train_size, dtype=np.int64)
        mine = slice(self.rank, self.world_size * self.train_shard_size, self.world_size)
        return order[mine], seeds[mine]

    def train_batches(self, epoch: int, split: str = "train", *, with_seeds: bool = True) -> Iterator[BatchKey]:
        """This worker's training batches of ``epoch`` (full batches only)."""
        order, seeds = self.train_order(epoch)
        b = self.batch_size
        for step in range(self.steps_per_epoch):
            part = slice(step * b, (step + 1) * b)
            yield BatchKey(split, tuple(order[part].tolist()), tuple(seeds[part].tolist()) if with_seeds else None)

    def eval_indices(self) -> np.ndarray:
        return np.arange(self.rank, self.val_size, self.world_size)

    def eval_batches(self, split: str = "val") -> Iterator[BatchKey]:
        """This worker's share of the validation split, in order, in :attr:`eval_steps` batches."""
        mine = self.eval_indices()
        b = self.batch_size
        for step in range(self.eval_steps):
            yield BatchKey(split, tuple(mine[step * b:(step + 1) * b].tolist()))
