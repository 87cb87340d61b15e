"""Timing one collective at one size, as nccl-tests times it, per iteration.

Warm-up calls first (untimed: Gloo sets up its buffers and NCCL its channels), then each
timed iteration starts together on every rank (a barrier, and on a GPU the stream drained),
runs the collective once and waits for it to finish (``torch.cuda.synchronize``). An
iteration's time is the longest any rank saw (nccl-tests' ``-a 3``): the collective is done
when the last rank is. The figure is the median over the iterations, with their spread
(relative stdev). nccl-tests by default times ``-n`` back-to-back iterations as one span and
averages it over ranks; per-iteration times after a barrier give the same figure for large
messages and leave out the skew between ranks that a back-to-back loop carries from one
iteration into the next, at small ones.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from cnnbench.distributed.process_group import barrier, max_over_workers
from cnnbench.engine.comm.ops import Op


@dataclass(frozen=True)
class Timing:
    """Seconds per iteration (the slowest rank's), their median and relative stdev."""

    samples: list[float]

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @property
    def spread(self) -> float | None:
        if len(self.samples) < 2:
            return None
        mean = statistics.fmean(self.samples)
        return statistics.stdev(self.samples) / mean if mean > 0 else None


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_op(op: Op, warmup: int, iters: int, device: torch.device) -> Timing:
    """Run ``op`` ``warmup`` times untimed, then ``iters`` timed iterations (see the module)."""
    for _ in range(warmup):
        op()
    synchronize(device)
    times: list[float] = []
    clock = time.perf_counter
    for _ in range(iters):
        barrier(device)
        synchronize(device)
        start = clock()
        op()
        synchronize(device)
        times.append(clock() - start)
    return Timing(max_over_workers(times, device))
