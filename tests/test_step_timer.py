"""Input wait on an asynchronous device: what the GPU waited, not what the host waited.

On an H200 a loader-fed resnet50 run lost 7.7% of the device rate while its host waited
43.9% of the time in ``next()``: the host runs ahead of the GPU and waits while queued steps
still run. On CUDA the input wait is therefore read from events (checked here with events
that read a scripted GPU clock)."""

from __future__ import annotations

import itertools
import types

import pytest
import torch

from cnnbench.engine import loop as loop_module
from cnnbench.engine import timer as timer_module


class ScriptedGpu:
    """torch.cuda.Event whose record() reads the next time of a scripted GPU clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, times: list[float]) -> None:
        clock = iter(times)

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t: float | None = None

            def record(self, stream=None) -> None:
                self.t = next(clock)

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, end: Event) -> float:
                return (end.t - self.t) * 1000.0

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)


def test_the_cuda_timer_sums_the_gpus_wait_from_each_steps_start_to_its_batch(monkeypatch):
    # start 0; batch 1 handed over at 0.5; step 1 ends at 2.0; batch 2 at 2.1; step 2 ends at 4.0;
    # batch 3 at 4.5, its step never closed (the loop stopped): not counted
    ScriptedGpu(monkeypatch, [0.0, 0.5, 2.0, 2.1, 4.0, 4.5])
    timer = timer_module.CudaStepTimer(torch.device("cuda", 0))
    timer.start()
    for _ in range(2):
        timer.input_ready()
        timer.mark()
    timer.input_ready()
    assert timer.step_times() == pytest.approx([2.0, 2.0])
    assert timer.input_wait() == pytest.approx(0.6)


def test_a_progress_line_between_steps_is_no_input_wait(monkeypatch):
    # step 1 ends at 1.0; a progress line; restart at 3.0; batch 2 at 3.25; step 2 ends at 4.0
    ScriptedGpu(monkeypatch, [0.0, 0.0, 1.0, 3.0, 3.25, 4.0])
    timer = timer_module.CudaStepTimer(torch.device("cuda", 0))
    timer.start()
    timer.input_ready()
    timer.mark()
    timer.restart()
    timer.input_ready()
    timer.mark()
    assert timer.input_wait() == pytest.approx(0.25)
    assert timer.step_times() == pytest.approx([1.0, 1.0])


def test_the_cpu_timer_leaves_the_input_wait_to_the_host():
    timer = timer_module.CpuStepTimer()
    timer.start()
    timer.input_ready()
    timer.mark()
    assert timer.input_wait() is None


class RecordingTimer:
    """A step timer that measures the device's input wait (as on CUDA), noting the calls."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def start(self) -> None:
        self.calls.append("start")

    def mark(self) -> None:
        self.calls.append("mark")

    def restart(self) -> None:
        pass

    def step_times(self, upto=None):
        return [1.0] * self.calls.count("mark")

    def input_ready(self) -> None:
        self.calls.append("ready")

    def input_wait(self) -> float:
        return 0.125


def test_the_loop_marks_each_batch_between_its_arrival_and_its_step_and_reports_the_devices_wait(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(loop_module, "make_step_timer", lambda device: RecordingTimer(calls))
    monkeypatch.setattr(loop_module, "synchronize", lambda device: None)
    batch = (torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))

    def source():
        for b in itertools.repeat(batch):
            calls.append("next")
            yield b

    def step(images, labels):
        calls.append("step")
        return torch.zeros(())

    prepared = types.SimpleNamespace(step=step, source=source())
    result = loop_module.timed_loop(prepared, 2, torch.device("cuda", 0))
    assert calls == ["start", "next", "ready", "step", "mark", "next", "ready", "step", "mark"]
    assert result.input_wait_s == 0.125  # the device's, not the host's


def test_on_the_cpu_the_loop_reports_the_hosts_wait(monkeypatch):
    def slow_source():
        while True:
            t0 = timer_module.time.perf_counter()
            while timer_module.time.perf_counter() - t0 < 0.01:
                pass
            yield torch.zeros(2, 3), torch.zeros(2, dtype=torch.long)

    prepared = types.SimpleNamespace(step=lambda images, labels: torch.zeros(()), source=slow_source())
    result = loop_module.timed_loop(prepared, 3, torch.device("cpu"))
    assert result.input_wait_s >= 0.03
