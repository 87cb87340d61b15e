"""Per-step times that are true on asynchronous devices.

A timer records a start and an end mark per step. ``start()`` opens the first step;
``mark()`` closes the open step and opens the next at the same instant, so consecutive
steps tile the timed span with no gap; ``restart()`` moves the open step's start to now,
so that whatever happened in between (a progress line) counts in no step. On CUDA the
marks are CUDA events recorded on the current stream: nothing waits for the GPU during
the steps, and times are read (one synchronisation) only when asked for. On CPU the marks
are ``time.perf_counter()`` readings; CPU kernels have finished when the call returns.
"""

from __future__ import annotations

import time
from typing import Protocol

import torch


class StepTimer(Protocol):
    def start(self) -> None:
        """Open the first step."""

    def mark(self) -> None:
        """Close the open step and open the next one at the same instant."""

    def restart(self) -> None:
        """Move the open step's start to now (time since the last mark counts in no step)."""

    def step_times(self, upto: int | None = None) -> list[float]:
        """Seconds per closed step, for the first ``upto`` steps (all by default)."""
        ...


class CpuStepTimer:
    def __init__(self) -> None:
        self._starts: list[float] = []
        self._ends: list[float] = []

    def start(self) -> None:
        self._starts.append(time.perf_counter())

    def mark(self) -> None:
        now = time.perf_counter()
        self._ends.append(now)
        self._starts.append(now)

    def restart(self) -> None:
        self._starts[-1] = time.perf_counter()

    def step_times(self, upto: int | None = None) -> list[float]:
        n = len(self._ends) if upto is None else min(upto, len(self._ends))
        return [self._ends[i] - self._starts[i] for i in range(n)]


class CudaStepTimer:
    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._starts: list[torch.cuda.Event] = []
        self._ends: list[torch.cuda.Event] = []
        self._times: list[float] = []

    def _event(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self._device))
        return event

    def start(self) -> None:
        self._starts.append(self._event())

    def mark(self) -> None:
        event = self._event()
        self._ends.append(event)
        self._starts.append(event)

    def restart(self) -> None:
        self._starts[-1] = self._event()

    def step_times(self, upto: int | None = None) -> list[float]:
        n = len(self._ends) if upto is None else min(upto, len(self._ends))
        if n > len(self._times):
            self._ends[n - 1].synchronize()
            for i in range(len(self._times), n):
                self._times.append(self._starts[i].elapsed_time(self._ends[i]) / 1000.0)
        return self._times[:n]


def make_step_timer(device: torch.device) -> StepTimer:
    return CudaStepTimer(device) if device.type == "cuda" else CpuStepTimer()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
