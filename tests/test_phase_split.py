"""The forward/backward split `run` measures after its timed window (issue 21 item 2)."""

from __future__ import annotations

import torch

from cnnbench.config import RunConfig
from cnnbench.engine import benchmark, phase_split
from cnnbench.engine.backend import phase_timing_syncs
from cnnbench.engine.benchmark import resolve_and_measure
from cnnbench.engine.phase_split import measure_phase_split, split_line, splits_phases

SPLIT = ("forward_time_s", "backward_time_s", "optimizer_time_s")


def test_the_split_comes_after_the_timed_window_and_stays_out_of_its_figures(monkeypatch):
    events: list[str] = []
    real_loop, real_split = benchmark.timed_loop, benchmark.measure_phase_split

    def loop(*args, **kwargs):
        events.append("timed loop starts")
        result = real_loop(*args, **kwargs)
        events.append(f"timed loop ends after {len(result.step_times_s)} steps")
        return result

    def split(*args, **kwargs):
        events.append("split")
        return real_split(*args, **kwargs)

    monkeypatch.setattr(benchmark, "timed_loop", loop)
    monkeypatch.setattr(benchmark, "measure_phase_split", split)
    record = resolve_and_measure(RunConfig(model="trivial", device="cpu", num_batches=4, num_warmup_batches=1))
    m = record.metrics
    assert events == ["timed loop starts", "timed loop ends after 4 steps", "split"]
    assert len(m["step_times_s"]) == 4  # the split's steps are not timed steps
    assert m["phase_split_steps"] == phase_split.SPLIT_STEPS
    assert all(m[k] > 0 for k in SPLIT), {k: m[k] for k in SPLIT}
    # the three phases are a step: the same order of magnitude as a timed one (no timing threshold beyond that)
    step = sorted(m["step_times_s"])[len(m["step_times_s"]) // 2]
    assert 0.001 * step < sum(m[k] for k in SPLIT) < 1000 * step


def test_forward_only_and_multi_worker_runs_measure_no_split():
    assert splits_phases(training=True, world_size=1, epochs=False)
    assert not splits_phases(training=False, world_size=1, epochs=False)
    assert not splits_phases(training=True, world_size=2, epochs=False)
    assert not splits_phases(training=True, world_size=1, epochs=True)
    record = resolve_and_measure(RunConfig(model="trivial", device="cpu", num_batches=2, num_warmup_batches=1,
                                           forward_only=True))
    assert not any(k in record.metrics for k in (*SPLIT, "phase_split_steps"))


def test_phase_boundaries_wait_for_a_cuda_device_only():
    assert phase_timing_syncs("cuda")
    assert not phase_timing_syncs("cpu")


class _Phases:
    """Phases that say when they ran (what the split times, in order)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def forward(self, images, labels):
        self.calls.append("forward")
        return images, images.sum()

    def backward(self, loss):
        self.calls.append("backward")

    def update(self):
        self.calls.append("update")


def test_each_split_step_runs_forward_backward_update_in_order_on_its_own_batch():
    phases = _Phases()
    batches = iter([(torch.zeros(2), torch.zeros(2))] * 3)
    split = measure_phase_split(phases, batches, torch.device("cpu"), steps=3)  # type: ignore[arg-type]
    assert phases.calls == ["forward", "backward", "update"] * 3
    assert split["phase_split_steps"] == 3 and all(split[k] >= 0 for k in SPLIT)
    assert split_line(split).startswith("Forward/backward split (3 steps after the timed ones): forward ")
