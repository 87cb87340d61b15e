"""Each engine mode does what it says: observed from inside the model, the optimizer and the loop.

A probe model records, at every forward, the dtype and memory format of its input and
weights, whether autocast and inference mode are on, and whether it is in training mode.
The phases (resolve → prepare → timed loop) are driven directly, so a slow input source or
a sleeping step can replace the real ones.
"""

from __future__ import annotations

import time
from dataclasses import replace

import psutil
import pytest
import torch
from torch import nn

from cnnbench.config import RunConfig
from cnnbench.data.synthetic import SyntheticInput
from cnnbench.engine import run_in_process
from cnnbench.engine.loop import timed_loop, warm_up
from cnnbench.engine.precision import POLICIES
from cnnbench.engine.prepare import Prepared, prepare
from cnnbench.engine.resolve import resolve
from cnnbench.engine.timer import CpuStepTimer
from cnnbench.models import register_model

CPU = torch.device("cpu")
SEEN: list[dict] = []


class Probe(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "meta":  # the model-cost trace, not a step
            return self.fc(self.conv(x).mean((2, 3)))
        SEEN.append({
            "input_dtype": x.dtype,
            "input_channels_last": x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous(),
            "weight_dtype": self.conv.weight.dtype,
            "weight_channels_last": self.conv.weight.is_contiguous(memory_format=torch.channels_last)
            and not self.conv.weight.is_contiguous(),
            "autocast": torch.is_autocast_enabled("cpu"),
            "autocast_dtype": torch.get_autocast_dtype("cpu"),
            "inference_mode": torch.is_inference_mode_enabled(),
            "grad": torch.is_grad_enabled(),
            "training": self.training,
        })
        return self.fc(self.conv(x).mean((2, 3)))


@register_model("test_probe", default_image_size=16, default_batch_size=4)
def _probe(num_classes: int = 1000, image_size: int = 16) -> nn.Module:
    return Probe(num_classes)


def cfg(**changes) -> RunConfig:
    base = dict(model="test_probe", device="cpu", num_batches=3, num_warmup_batches=1, display_every=100)
    base.update(changes)
    return RunConfig(**base)


def observe(**changes) -> dict:
    """What the probe saw during the timed steps of a run."""
    SEEN.clear()
    record = run_in_process(cfg(**changes))
    assert record.status == "ok", record.error
    split = record.metrics.get("phase_split_steps") or 0  # training: the forward/backward split's, after
    assert len(SEEN) == 4 + split  # 1 warm-up + 3 timed (+ the split's steps)
    return SEEN[3]


# --------------------------------------------------------------------------- precision


def test_fp32_turns_tf32_off_whatever_the_defaults():
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    prepared = prepare(resolve(cfg(precision="fp32")))
    prepared.close()
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cudnn.allow_tf32 is False


def test_tf32_policy_turns_tf32_on():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        POLICIES["tf32"].apply_backend_flags()
        assert torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is True
    finally:
        POLICIES["fp32"].apply_backend_flags()


def test_fp32_runs_without_autocast_in_float32():
    seen = observe(precision="fp32")
    assert (seen["input_dtype"], seen["weight_dtype"], seen["autocast"]) == (torch.float32, torch.float32, False)


def test_amp_bf16_runs_under_bf16_autocast_with_fp32_weights():
    seen = observe(precision="amp_bf16")
    assert seen["autocast"] is True and seen["autocast_dtype"] == torch.bfloat16
    assert seen["input_dtype"] == torch.float32 and seen["weight_dtype"] == torch.float32


def test_bf16_casts_weights_and_inputs_without_autocast():
    seen = observe(precision="bf16")
    assert (seen["input_dtype"], seen["weight_dtype"], seen["autocast"]) == (torch.bfloat16, torch.bfloat16, False)


def test_amp_fp16_scales_gradients_only_on_cuda():
    policy = POLICIES["amp_fp16"]
    assert policy.autocast_dtype == torch.float16 and policy.grad_scaler
    assert policy.scaler("cpu", forward_only=False) is None
    assert policy.scaler("cuda", forward_only=True) is None


# --------------------------------------------------------------------------- memory format, mode


def test_nhwc_puts_weights_and_inputs_in_channels_last():
    seen = observe(data_format="NHWC")
    assert seen["input_channels_last"] and seen["weight_channels_last"]


def test_nchw_keeps_them_contiguous():
    seen = observe(data_format="NCHW")
    assert not seen["input_channels_last"] and not seen["weight_channels_last"]


def test_forward_only_runs_in_eval_and_inference_mode_and_changes_no_weight():
    run = resolve(cfg(forward_only=True))
    prepared = prepare(run)
    before = [p.detach().clone() for p in prepared.model.parameters()]
    SEEN.clear()
    try:
        timed_loop(prepared, 3, CPU)
    finally:
        prepared.close()
    assert prepared.optimizer is None
    assert all(s["training"] is False and s["inference_mode"] is True for s in SEEN)
    assert all(torch.equal(a, b) for a, b in zip(before, prepared.model.parameters(), strict=True))


def test_training_runs_in_train_mode_and_updates_weights():
    prepared = prepare(resolve(cfg()))
    before = [p.detach().clone() for p in prepared.model.parameters()]
    SEEN.clear()
    try:
        timed_loop(prepared, 2, CPU)
    finally:
        prepared.close()
    assert all(s["training"] is True and s["grad"] is True and s["inference_mode"] is False for s in SEEN)
    assert not all(torch.equal(a, b) for a, b in zip(before, prepared.model.parameters(), strict=True))


def test_inference_records_null_for_training_options():
    record = run_in_process(cfg(forward_only=True))
    assert (record.config["optimizer"], record.config["learning_rate"], record.config["momentum"]) == (
        None, None, None)


# --------------------------------------------------------------------------- optimizers


def _optimizer(**changes) -> torch.optim.Optimizer:
    prepared = prepare(resolve(cfg(**changes)))
    prepared.close()
    assert prepared.optimizer is not None
    return prepared.optimizer


def test_sgd_is_plain_sgd():
    opt = _optimizer(optimizer="sgd", learning_rate=0.1, weight_decay=0.01)
    group = opt.param_groups[0]
    assert type(opt) is torch.optim.SGD
    assert (group["lr"], group["momentum"], group["weight_decay"]) == (0.1, 0, 0.01)


def test_momentum_is_sgd_with_momentum():
    opt = _optimizer(optimizer="momentum")
    assert type(opt) is torch.optim.SGD and opt.param_groups[0]["momentum"] == 0.9
    assert _optimizer(optimizer="momentum", momentum=0.5).param_groups[0]["momentum"] == 0.5


def test_momentum_buffers_exist_after_a_step():
    prepared = prepare(resolve(cfg(optimizer="momentum")))
    try:
        timed_loop(prepared, 1, CPU)
    finally:
        prepared.close()
    assert prepared.optimizer is not None
    states = [prepared.optimizer.state[p] for p in prepared.model.parameters()]
    assert all(s.get("momentum_buffer") is not None for s in states)


def test_rmsprop_uses_tf_cnn_benchmarks_decay_and_epsilon():
    opt = _optimizer(optimizer="rmsprop", momentum=0.7)
    group = opt.param_groups[0]
    assert type(opt) is torch.optim.RMSprop
    assert (group["alpha"], group["eps"], group["momentum"]) == (0.9, 1.0, 0.7)


def test_adam_and_defaults():
    opt = _optimizer(optimizer="adam")
    assert type(opt) is torch.optim.Adam
    group = opt.param_groups[0]
    assert (group["lr"], group["weight_decay"]) == (0.005, 4e-5)


# --------------------------------------------------------------------------- synthetic locations


def _worker_processes(before: set[int]) -> list[psutil.Process]:
    """Child processes started since ``before`` and still running (not multiprocessing's
    resource tracker, which a spawned process elsewhere may have left for the session)."""
    alive = []
    for child in psutil.Process().children():
        try:
            if child.pid in before or child.status() == psutil.STATUS_ZOMBIE:
                continue
            if "resource_tracker" in " ".join(child.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        alive.append(child)
    return alive


def _two_batches(**changes):
    before = {c.pid for c in psutil.Process().children()}
    prepared = prepare(resolve(cfg(batch_size=2, **changes)))
    try:
        return next(prepared.source), next(prepared.source), prepared, _worker_processes(before)
    finally:
        prepared.close()


def test_device_location_reuses_one_resident_batch():
    (a, _), (b, _), prepared, _ = _two_batches(synthetic_location="device")
    assert a.data_ptr() == b.data_ptr() and a.device == CPU
    assert isinstance(prepared.source, SyntheticInput) and prepared.source.location == "device"


def test_host_location_makes_a_new_batch_every_step_in_process():
    (a, _), (b, _), _, children = _two_batches(synthetic_location="host")
    assert a.data_ptr() != b.data_ptr() and not torch.equal(a, b)
    assert children == []


def test_loader_location_makes_batches_in_worker_processes():
    (a, _), (b, _), _, children = _two_batches(synthetic_location="loader", num_workers=2)
    assert not torch.equal(a, b)
    assert len(children) == 2


# --------------------------------------------------------------------------- what the loop measures


class SlowSource:
    """An input source that takes ``delay`` seconds per batch."""

    description = "slow"
    num_classes = 10

    def __init__(self, batch: tuple[torch.Tensor, torch.Tensor], delay: float) -> None:
        self.batch, self.delay = batch, delay

    def __next__(self):
        time.sleep(self.delay)
        return self.batch

    def close(self) -> None:
        pass


def _prepared(**changes) -> Prepared:
    prepared = prepare(resolve(cfg(batch_size=2, **changes)))
    prepared.close()
    return prepared


def _sleeping_step(seconds: float):
    def step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        time.sleep(seconds)
        return torch.zeros(())

    return step


# These tests sleep instead of computing, so that a busy machine (which stretches compute,
# not the proportions between sleeps) cannot change what they observe; bounds are relations
# between the loop's own figures, with a wide margin, rather than absolute times.
BATCH = (torch.zeros(2, 3, 16, 16), torch.zeros(2, dtype=torch.long))


def test_a_slow_input_source_shows_up_as_input_wait():
    prepared = _prepared()
    slow = replace(prepared, step=_sleeping_step(0.0), source=SlowSource(BATCH, 0.03))
    result = timed_loop(slow, 5, CPU)
    assert result.input_wait_fraction is not None and result.input_wait_fraction > 0.8
    assert result.input_wait_s >= 5 * 0.03
    fast = replace(prepared, step=_sleeping_step(0.03), source=SlowSource(BATCH, 0.0))
    assert timed_loop(fast, 5, CPU).input_wait_fraction < 0.2


def test_wall_clock_matches_a_known_sleep():
    prepared = replace(_prepared(), step=_sleeping_step(0.02), source=SlowSource(BATCH, 0.0))
    result = timed_loop(prepared, 5, CPU)
    steps = sum(result.step_times_s)
    assert len(result.step_times_s) == 5 and all(t >= 0.02 for t in result.step_times_s)
    assert result.wall_time_s >= 0.1
    assert abs(result.wall_time_s - steps) < 0.25 * steps  # the same span, not counted twice


def test_progress_lines_count_in_no_step_and_not_in_the_wall_clock():
    prepared = replace(_prepared(), step=_sleeping_step(0.02), source=SlowSource(BATCH, 0.0))
    calls = []

    def slow_progress(step: int, times: list[float], loss: float) -> None:
        calls.append(step)
        time.sleep(0.1)

    result = timed_loop(prepared, 4, CPU, display_every=1, on_progress=slow_progress)
    assert calls == [1, 2, 3, 4]
    assert result.progress_time_s >= 0.4
    # Counted, a progress line would add 100 ms to the steps after it and to the wall clock.
    assert sum(t >= 0.1 for t in result.step_times_s) <= 1
    assert result.wall_time_s < 0.5 * result.progress_time_s


def test_warm_up_runs_its_steps_and_times_the_first():
    prepared = prepare(resolve(cfg()))
    SEEN.clear()
    try:
        assert warm_up(prepared, 2, CPU) is not None
    finally:
        prepared.close()
    assert len(SEEN) == 2


def test_cpu_timer_restart_drops_the_gap():
    timer = CpuStepTimer()
    timer.start()
    time.sleep(0.01)
    timer.mark()
    time.sleep(0.03)
    timer.restart()
    time.sleep(0.01)
    timer.mark()
    first, second = timer.step_times()
    assert first >= 0.01 and 0.01 <= second < 0.03


@pytest.mark.parametrize("changes", [{}, {"forward_only": True}])
def test_run_records_the_progress_time_it_left_out(changes):
    record = run_in_process(cfg(display_every=1, **changes))
    assert record.metrics["progress_time_s"] > 0
    assert record.metrics["wall_time_s"] > 0 and record.metrics["diverged"] is False


class FakeClock:
    """``time.perf_counter`` that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_waiting_for_slower_workers_at_a_progress_line_counts_in_the_wall_clock(monkeypatch):
    """At a progress line rank 0 waits (in ``slowest``) for workers still in their steps: that
    is step time, and only what follows (the line itself) is kept out of the wall clock."""
    from cnnbench.engine import loop as loop_module
    from cnnbench.engine import timer as timer_module

    clock = FakeClock()
    monkeypatch.setattr(loop_module, "time", clock)
    monkeypatch.setattr(timer_module, "time", clock)

    def step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        clock.now += 1.0
        return torch.zeros(())

    def slowest(times: list[float]) -> list[float]:
        clock.now += 5.0  # the other worker finishes its steps meanwhile
        return times

    def progress(i: int, times: list[float], loss: float) -> None:
        clock.now += 100.0

    prepared = replace(_prepared(), step=step, source=SlowSource(BATCH, 0.0))
    result = timed_loop(prepared, 4, CPU, display_every=2, on_progress=progress, slowest=slowest,
                        barrier=lambda: None)
    # lines at steps 1, 2 and 4: 4 steps of 1 s and 3 waits of 5 s; 3 lines of 100 s kept out
    assert result.wall_time_s == 4 * 1.0 + 3 * 5.0
    assert result.progress_time_s == 3 * 100.0
