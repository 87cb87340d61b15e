"""The busy-machine guard and the step-time checks: scripted probes, a real busy core, a scripted NVML."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from cnnbench.engine.guard import BusyMachineGuard, CpuSnapshot, other_cpu_cores
from cnnbench.engine.stability import coefficient_of_variation, spread_warnings
from cnnbench.engine.telemetry import HostSample, TelemetrySampler
from cnnbench.machine import host
from tests.fake_nvml import FakeGpu, FakeNvml

# --------------------------------------------------------------------------- step times


def test_steady_steps_give_no_warning():
    assert spread_warnings([0.100, 0.101, 0.099, 0.100, 0.102, 0.098]) == []
    assert spread_warnings([0.1]) == []  # one step: nothing to judge


def test_coefficient_of_variation_over_ten_percent_warns():
    steps = [0.09, 0.11] * 10  # sample std 0.01026 / mean 0.1: 10.3%
    assert coefficient_of_variation(steps) == pytest.approx(0.1026, abs=1e-4)
    (text,) = spread_warnings(steps)
    assert text.startswith("unstable: step times vary by 10% of their mean")
    just_under = [0.091, 0.109] * 10  # 9.2%
    assert spread_warnings(just_under) == []


def test_one_hiccup_does_not_warn_but_one_that_moves_the_mean_does():
    assert spread_warnings([0.1] * 99 + [0.15]) == []  # the mean moves by 0.5%
    (text,) = spread_warnings([0.1] * 49 + [0.2])  # one step 2x among 50: 14%, the mean moves by 2%
    assert text.startswith("unstable: step times vary by 14% of their mean") and "slowest 200 ms" in text


def test_a_run_records_unstable_steps_from_its_own_step_times(monkeypatch):
    """The check runs where step times become metrics: fake a jumpy loop, see the warning."""
    from cnnbench.config import RunConfig
    from cnnbench.engine import benchmark, loop, run_in_process

    real = loop.timed_loop

    def jumpy(*args, **kwargs):
        result = real(*args, **kwargs)
        times = [0.01 if i % 2 else 0.03 for i in range(len(result.step_times_s))]
        return loop.LoopResult(times, result.losses, result.input_wait_s, sum(times), 0.0, None, result.images)

    monkeypatch.setattr(benchmark, "timed_loop", jumpy)
    record = run_in_process(RunConfig(model="trivial", batch_size=4, num_batches=6, num_warmup_batches=1,
                                      device="cpu"))
    assert any(w.startswith("unstable: step times vary by") for w in record.metrics["warnings"])


# --------------------------------------------------------------------------- CPU use by others


def test_other_cores_are_busy_time_minus_this_runs_own():
    a = CpuSnapshot(0.0, busy_s=100.0, own_s={1: 10.0, 2: 5.0})
    b = CpuSnapshot(2.0, busy_s=104.0, own_s={1: 11.0, 2: 5.5, 3: 0.5})  # 3: a loader worker born meanwhile
    assert other_cpu_cores(a, b) == pytest.approx((4.0 - 2.0) / 2.0)
    assert other_cpu_cores(a, CpuSnapshot(0.5, 101.0, {})) is None  # too short to judge


class Script:
    """Scripted probe answers, one per call."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def __call__(self, *args):
        return self.answers.pop(0)


def _guard(busy, own, *, cpus=(0, 1), governors=None, frequency_range=None, sampler=None, **kw):
    return BusyMachineGuard(cpus=list(cpus), run_roots=[1], clock=Script(0.0, 5.0, 15.0),
                            busy_seconds=Script(*busy), own_seconds=Script(*own),
                            governors=governors or (lambda cpus: {}), sampler=sampler,
                            frequency_range=frequency_range or (lambda cpus: {"min": None, "base": None, "max": None}),
                            **kw)


def _run(guard):
    guard.start()
    guard.stop()
    return guard.metrics()


def test_busy_cpu_warning_at_ten_percent_of_the_runs_cores():
    own = ({1: 0.0}, {1: 9.0}, {1: 29.0})  # this run: 1.8 then 2.0 cores
    quiet = _run(_guard((0.0, 9.9, 31.8), own))  # others: 0.18, then 0.19 of 2 cores
    assert quiet["warnings"] == [] and quiet["other_processes_cpu_cores"] == pytest.approx(0.19)
    busy = _run(_guard((0.0, 9.0, 31.0), own))  # others: 0 before, 0.2 during
    assert busy["other_processes_cpu_cores"] == pytest.approx(0.2)
    (text,) = busy["warnings"]
    assert text.startswith("busy CPU: other processes used 0.20 of the 2 cores this run may use during the timed "
                           "steps")
    both = _run(_guard((0.0, 14.0, 36.0), own))  # 1.0 before, 0.2 during
    assert _run(_guard((0.0, 14.0, 34.0), own))["warnings"] == []  # busy only during the warm-up: fine
    assert "; 1.00 before them" in both["warnings"][0]


def test_no_host_checks_on_workers_that_leave_them_to_another():
    guard = BusyMachineGuard(cpus=None, gpus=[], busy_seconds=Script(), own_seconds=Script())
    assert _run(guard) == {"other_processes_cpu_cores": None, "other_processes_cpu_cores_before": None,
                           "warnings": []}


def _burner(seconds: float) -> int:
    """A process that burns a core for ``seconds`` (bounded) and is not our child: started
    through a shell that exits at once, so it belongs to no tree of this run."""
    code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"
    out = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', code],
                         capture_output=True, text=True, timeout=30, check=True)
    return int(out.stdout.strip())


def test_a_process_burning_a_core_is_noticed():
    guard = BusyMachineGuard(cpus=host.usable_cpus(), gpus=[])
    pid = _burner(20)
    try:
        time.sleep(0.3)  # the burner gets going
        guard.start()
        time.sleep(1.5)
        guard.stop()
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    m = guard.metrics()
    assert m["other_processes_cpu_cores"] >= 0.5
    assert any(w.startswith("busy CPU: other processes used") for w in m["warnings"]), m


def test_this_runs_own_children_count_as_its_own():
    """A burning child's CPU time is in this process's tree. On a loaded machine the child may
    get little CPU: wait (generously) until it has burnt some, rather than for a fixed time."""
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + 120\n"
                              "while time.monotonic() < end: pass\n"])
    try:
        deadline = time.monotonic() + 100
        first = host.tree_cpu_seconds([os.getpid()])
        while child.pid not in first and time.monotonic() < deadline:
            time.sleep(0.05)
            first = host.tree_cpu_seconds([os.getpid()])
        assert child.pid in first, "the child is not in this process's tree"
        now = first
        while now.get(child.pid, 0.0) - first[child.pid] < 0.3 and time.monotonic() < deadline:
            time.sleep(0.1)
            now = host.tree_cpu_seconds([os.getpid()])
    finally:
        child.kill()
        child.wait()
    assert now[child.pid] - first[child.pid] >= 0.3  # the burning child's time is ours


# --------------------------------------------------------------------------- frequency


def test_a_governor_other_than_performance_warns():
    guard = _guard((0.0, 0.0, 0.0), ({}, {}, {}), governors=lambda cpus: {"powersave": [0, 1]})
    assert _run(guard)["warnings"] == [
        "CPU frequency: scaling governor powersave (not performance); figures may vary with load"]
    mixed = _guard((0.0, 0.0, 0.0), ({}, {}, {}), governors=lambda cpus: {"performance": [0], "ondemand": [1]})
    assert _run(mixed)["warnings"] == [
        "CPU frequency: scaling governor ondemand on cores 1 (not performance); figures may vary with load"]
    assert _run(_guard((0.0, 0.0, 0.0), ({}, {}, {}), governors=lambda cpus: {"performance": [0, 1]}))[
        "warnings"] == []


def _sampler_with(freqs: list[float]) -> TelemetrySampler:
    sampler = TelemetrySampler([], host_cpus=[0, 1])
    sampler.host_samples = [HostSample(t=float(i), frequency_mhz=f) for i, f in enumerate(freqs)]
    return sampler


def test_cores_below_their_base_frequency_warn():
    limits = {"min": 800.0, "base": 3000.0, "max": 4500.0}
    slow = _guard((0.0, 0.0, 0.0), ({}, {}, {}), governors=lambda c: {"performance": [0, 1]},
                  frequency_range=lambda c: limits, sampler=_sampler_with([2000.0, 2200.0]))
    assert _run(slow)["warnings"] == ["CPU frequency: cores ran at 2.10 GHz on average during the timed steps, "
                                      "70% of their 3.00 GHz base (power or thermal limits?)"]
    fine = _guard((0.0, 0.0, 0.0), ({}, {}, {}), frequency_range=lambda c: limits,
                  sampler=_sampler_with([2900.0, 3100.0]))
    assert _run(fine)["warnings"] == []


# --------------------------------------------------------------------------- GPUs


def _nvml_with(monkeypatch, gpu: FakeGpu) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([gpu]).module)


def test_another_process_on_the_gpu_is_named(monkeypatch):
    me = os.getpid()
    _nvml_with(monkeypatch, FakeGpu(processes=[(me, 2**30), (4242, 2 * 2**30)], process_sm_pct={me: 90, 4242: 35}))
    m = _run(BusyMachineGuard(cpus=None, gpus=[0]))
    assert m["warnings"] == ["busy GPU: GPU 0 is shared with 1 other process: pid 4242 (?, 2.0 GiB, up to 35% SM)"]


def test_only_this_run_on_the_gpu_is_quiet(monkeypatch):
    _nvml_with(monkeypatch, FakeGpu(processes=[(os.getpid(), 2**30)]))
    assert _run(BusyMachineGuard(cpus=None, gpus=[0]))["warnings"] == []


def test_processes_from_another_pid_namespace(monkeypatch):
    _nvml_with(monkeypatch, FakeGpu(processes=[(7, 2**30)]))  # only one: it is this run's
    assert _run(BusyMachineGuard(cpus=None, gpus=[0]))["warnings"] == []
    _nvml_with(monkeypatch, FakeGpu(processes=[(7, 2**30), (8, 2**30)]))
    (text,) = _run(BusyMachineGuard(cpus=None, gpus=[0]))["warnings"]
    assert text.startswith("busy GPU: 2 processes hold memory on GPU 0")


def test_one_worker_per_node_judges_the_host_and_the_run_is_every_worker():
    import torch

    from cnnbench.distributed.world import World
    from cnnbench.engine.hooks import PeakMemory, default_hooks

    cpu = torch.device("cpu")
    single = default_hooks(cpu)
    assert isinstance(single[0], PeakMemory)
    guard, sampler = single[1], single[2]
    assert guard.run_roots == [os.getpid()] and guard.cpus == host.usable_cpus()
    assert sampler.host_cpus == host.usable_cpus() and sampler.gpu_indices == []
    first = default_hooks(cpu, World(rank=0, world_size=2, local_rank=0, local_world_size=2, process_group=True))
    assert first[1].run_roots == [os.getppid()]  # the launcher's tree holds every worker of this node
    other = default_hooks(cpu, World(rank=1, world_size=2, local_rank=1, local_world_size=2, process_group=True))
    assert other[1].cpus is None and other[2].host_cpus is None  # rank 0 of the node looks at the host


def test_batches_in_bursts_of_the_loader_processes_are_not_unstable():
    # two loader processes: a batch after a long wait, the next one at once, and so on
    bursts = [0.190, 0.010] * 30
    assert spread_warnings(bursts)  # batch by batch, a 90% spread
    assert spread_warnings(bursts, block=2) == []  # per pair of batches: steady
    (text,) = spread_warnings([0.19, 0.01] * 15 + [0.38, 0.02] * 15, block=2)  # the pace halves midway
    assert text.startswith("unstable: times of blocks of 2 batches vary by")
