"""Per-step times that are true on asynchronous devices.

Each timer records one mark per step boundary; step ``i`` lasts from mark ``i`` to
mark ``i+1``, so the steps tile the timed span with no gap. On CUDA the marks are
CUDA events recorded on the current stream: nothing waits for the GPU during the
steps, and times are read (one synchronisation) only when asked for. On CPU the
marks are ``time.perf_counter()`` readings; CPU kernels have finished when the call
returns.
"""

from __future__ import annotations

import time
from typing import Protocol

import torch


class StepTimer(Protocol):
    def mark(self) -> None:
        """Record a step boundary (call once before the first timed step, then after each)."""

    def step_times(self, upto: int | None = None) -> list[float]:
        """Seconds per step for the first ``upto`` steps (all so far by default)."""


class CpuStepTimer:
    def __init__(self) -> None:
        self._marks: list[float] = []

    def mark(self) -> None:
        self._marks.append(time.perf_counter())

    def step_times(self, upto: int | None = None) -> list[float]:
        marks = self._marks if upto is None else self._marks[: upto + 1]
        return [b - a for a, b in zip(marks, marks[1:], strict=False)]


class CudaStepTimer:
    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._events: list[torch.cuda.Event] = []
        self._times: list[float] = []

    def mark(self) -> None:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self._device))
        self._events.append(event)

    def step_times(self, upto: int | None = None) -> list[float]:
        last = len(self._events) - 1 if upto is None else upto
        if last > len(self._times):
            self._events[last].synchronize()
            for i in range(len(self._times), last):
                self._times.append(self._events[i].elapsed_time(self._events[i + 1]) / 1000.0)
        return self._times[:last]


def make_step_timer(device: torch.device) -> StepTimer:
    return CudaStepTimer(device) if device.type == "cuda" else CpuStepTimer()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
