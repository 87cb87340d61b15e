"""Timing one collective at one size, as nccl-tests times it: a batch of back-to-back calls.

Warm-up calls first (untimed: Gloo sets up its buffers and NCCL its channels). Then each
sample: every rank starts together (a barrier, and on a GPU the stream drained), launches
``iters`` calls back to back with nothing between them (no barrier, no synchronize), waits
for the last one, and divides the span by ``iters`` (nccl-tests' ``BenchTime``: one span of
``-n`` iterations, divided). Launch and synchronization costs are paid once per batch, not
once per call, so small messages are timed at the rate the collective can be issued.

On a GPU the span is measured by two CUDA events on the current stream around the batch
(``torch.cuda.Event.elapsed_time``): synchronous collectives order the current stream after
their work, so the end event completes when the last call does. On a CPU (Gloo, whose calls
return when they are done) the host clock times the same batch. A sample's time is the
longest any rank saw (nccl-tests' ``-a 3``: the collective is done when the last rank is).
There are :data:`BATCHES` samples per size; the figure is their median, with their spread
(relative stdev).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from cnnbench.distributed.process_group import barrier, max_over_workers
from cnnbench.engine.comm.ops import Op
from cnnbench.engine.comm.spec import BATCHES


@dataclass(frozen=True)
class Timing:
    """Seconds per call, one sample per batch (the slowest rank's), their median and relative stdev."""

    samples: list[float]
    timer: str = "host clock"
    """How the batches were timed: ``cuda events`` or ``host clock``."""

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @property
    def spread(self) -> float | None:
        if len(self.samples) < 2:
            return None
        mean = statistics.fmean(self.samples)
        return statistics.stdev(self.samples) / mean if mean > 0 else None


class BatchTimer(Protocol):
    """Times one batch: :meth:`start` before its first call, :meth:`stop` after its last."""

    name: str

    def start(self) -> None: ...

    def stop(self) -> float:
        """Seconds since :meth:`start`, once every call launched since is done."""
        ...


class HostTimer:
    """The host clock; :meth:`stop` waits for the device first (nothing to wait for on a CPU)."""

    name = "host clock"

    def __init__(self, device: torch.device, clock: Callable[[], float] = time.perf_counter) -> None:
        self.device, self.clock, self.began = device, clock, 0.0

    def start(self) -> None:
        self.began = self.clock()

    def stop(self) -> float:
        synchronize(self.device)
        return self.clock() - self.began


class CudaEventTimer:
    """Two CUDA events on the current stream around the batch (what the GPU did, not the host)."""

    name = "cuda events"

    def __init__(self, device: torch.device) -> None:
        self.begin = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.device = device

    def start(self) -> None:
        self.begin.record(torch.cuda.current_stream(self.device))

    def stop(self) -> float:
        self.end.record(torch.cuda.current_stream(self.device))
        self.end.synchronize()
        return self.begin.elapsed_time(self.end) / 1e3  # milliseconds to seconds


def batch_timer(device: torch.device) -> BatchTimer:
    """CUDA events on a GPU, the host clock on a CPU."""
    return CudaEventTimer(device) if device.type == "cuda" else HostTimer(device)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_op(op: Op, warmup: int, iters: int, device: torch.device, *, timer: BatchTimer | None = None,
            batches: int = BATCHES) -> Timing:
    """Run ``op`` ``warmup`` times untimed, then ``batches`` timed batches of ``iters`` calls (see the module)."""
    for _ in range(warmup):
        op()
    synchronize(device)
    timer = timer if timer is not None else batch_timer(device)
    per_call: list[float] = []
    for _ in range(batches):
        barrier(device)
        synchronize(device)
        timer.start()
        for _ in range(iters):
            op()
        per_call.append(timer.stop() / iters)
    return Timing(max_over_workers(per_call, device), timer.name)
