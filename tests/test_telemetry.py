"""The telemetry sampler with a scripted NVML: lifecycle, figures, never blocking, merging workers."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from cnnbench.engine.metrics import WorkerMeasure, measured_metrics
from cnnbench.engine.telemetry import TelemetrySampler
from cnnbench.engine.telemetry_figures import (
    GpuSample,
    HostSample,
    gpu_summary,
    gpu_totals,
    gpu_warnings,
    host_summary,
    integrate,
    window_energy_j,
)
from tests.fake_nvml import FakeGpu, FakeNvml


def _wait_for(predicate, limit_s: float = 10.0) -> None:
    """Poll (bounded) until ``predicate()`` holds; fails the test if it never does."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.01)


class ScriptedClock:
    def __init__(self, times: list[float]) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


@pytest.fixture
def nvml(monkeypatch):
    def install(gpus: list[FakeGpu], **kw) -> FakeNvml:
        fake = FakeNvml(gpus, **kw)
        monkeypatch.setitem(sys.modules, "pynvml", fake.module)
        return fake
    return install


def _sampled(sampler: TelemetrySampler, extra_samples: int) -> dict:
    """start, wait for the thread's first sample, take ``extra_samples`` more, stop."""
    sampler.start()
    _wait_for(lambda: sampler._gpus and len(sampler._gpus[0].samples) >= 1)
    for _ in range(extra_samples):
        sampler.sample()
    sampler.stop()
    return dict(sampler.metrics())


def test_means_maxima_energy_from_power_and_throttling(nvml):
    gpu = FakeGpu(power_mw=[100_000, 200_000, 300_000, 100_000], sm_clock_mhz=[1900, 1800, 1000, 1900],
                  memory_clock_mhz=[2600], temperature_c=[50, 60, 70, 80], utilization_pct=[0, 90, 100, 50],
                  reasons=[0, 0x4, 0x1, 0], energy_mj=None, memory_used_bytes=[2 << 30, 9 << 30, 7 << 30, 7 << 30])
    idle = FakeGpu(power_mw=[50_000], reasons=[0x1, 0x2, 0x10, 0x100], energy_mj=None, memory_used_bytes=None)
    fake = nvml([gpu, idle])
    # clock: the window opens at 0 (start), samples at 0, 1, 2, the window closes at 3 (stop), last sample at 4
    sampler = TelemetrySampler([0, 1], interval_s=3600, clock=ScriptedClock([0.0, 0.0, 1.0, 2.0, 3.0, 4.0]))
    m = _sampled(sampler, extra_samples=2)
    g0, g1 = m["gpu_telemetry"]
    assert g0["samples"] == 4 and g0["index"] == 0 and g0["name"] == gpu.name
    assert g0["power_mean_w"] == 175.0 and g0["power_max_w"] == 300.0
    assert g0["sm_clock_mean_mhz"] == 1650.0 and g0["sm_clock_max_mhz"] == 1900.0
    assert g0["memory_clock_mean_mhz"] == 2600.0
    assert g0["temperature_mean_c"] == 65.0 and g0["temperature_max_c"] == 80.0
    assert g0["utilization_mean_pct"] == 60.0 and g0["utilization_max_pct"] == 100.0
    # the most device memory in use, NVML's (torch's allocator does not see DALI's pool)
    assert g0["memory_used_max_bytes"] == 9 << 30 and g1["memory_used_max_bytes"] is None  # not read: null
    # trapezoids over the window t = 0..3 s: (100+200)/2 + (200+300)/2 + (300+100)/2; the
    # sample after the window's end counts at its edge
    assert g0["energy_j"] == 600.0 and g0["energy_source"] == "power samples"
    # the software power cap is reported, not a throttle; the idle sample's low clock does not count
    assert g0["power_capped"] is True and g0["throttled"] is False and g0["throttle_reasons"] == []
    assert g0["sm_clock_limit_mhz"] == 1980 and g0["sm_clock_share"] == round(5600 / 3 / 1980, 3)
    # idle, application clocks, sync boost, display: not power or heat
    assert g1["throttled"] is False and g1["throttle_reasons"] == [] and g1["power_capped"] is False
    assert m["energy_j"] == 600.0 + 150.0
    assert m["throttled"] is False and m["power_capped"] is True and m["throttle_reasons"] == []
    assert m["warnings"] == []  # running at the power cap is normal under boost
    assert fake.inits == fake.shutdowns == 1  # the session is closed when the thread ends


def test_energy_counter_wins_over_power_samples(nvml):
    nvml([FakeGpu(power_mw=[100_000, 900_000], energy_mj=[5_000_000, 5_250_500], reasons=[0x40, 0x20])])
    m = _sampled(TelemetrySampler([0], interval_s=3600, clock=ScriptedClock([0.0, 10.0])), extra_samples=0)
    g = m["gpu_telemetry"][0]
    assert g["energy_j"] == 250.5 and g["energy_source"] == "counter"
    assert g["throttle_reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert m["warnings"] == ["throttled: GPU 0 (sw_thermal_slowdown, hw_thermal_slowdown) during the timed steps"]


def test_the_energy_window_is_the_timed_window_not_the_threads(nvml):
    """The counter is read in start() and stop() themselves: energy drawn while the sampler
    thread is still starting up (here: stuck in its first reading) is counted."""
    meter = [1_000_000]  # mJ; the fake counter reads meter[0]
    slow_start = threading.Event()
    gpu = FakeGpu(energy_mj=meter, block=slow_start)
    nvml([gpu])
    sampler = TelemetrySampler([0], interval_s=3600)
    sampler.start()
    meter[0] = 1_400_000  # the first timed steps draw 400 J before the thread's first sample
    slow_start.set()
    _wait_for(lambda: len(sampler._gpus[0].samples) >= 1)
    meter[0] = 1_500_000  # and 100 J more until the last step
    sampler.stop()
    meter[0] = 9_000_000  # after stop(): not in the window
    _wait_for(lambda: not sampler._thread.is_alive())
    g = sampler.metrics()["gpu_telemetry"][0]
    assert g["energy_source"] == "counter" and g["energy_j"] == 500.0


def test_power_samples_are_held_out_to_the_window_edges():
    # samples at 1 s and 3 s of a window from 0 to 4 s: 100 W held from 0, 300 W held to 4
    assert window_energy_j([(1.0, 100.0), (3.0, 300.0)], 0.0, 4.0) == 100 + 400 + 300
    assert window_energy_j([(1.0, 100.0), (5.0, 300.0)], 0.0, 4.0) == 100 + 600  # a late sample sits on the edge
    assert window_energy_j([(1.0, 100.0), (3.0, 300.0)], None, None) == 400  # no window: the samples alone
    assert window_energy_j([], 0.0, 1.0) is None


def _sample(t: float, clock: float, reasons: int = 0) -> GpuSample:
    return GpuSample(t=t, power_w=300.0, sm_clock_mhz=clock, reasons=reasons)


def test_power_cap_is_reported_apart_and_only_abnormal_throttling_warns():
    capped = [_sample(0, 1800, 0x4), _sample(1, 1750, 0x4)]  # at the power cap, clocks near their maximum
    g = gpu_summary(0, "H100", capped, sm_clock_limit_mhz=1980)
    assert g["power_capped"] is True and g["throttled"] is False and gpu_warnings(g) == []
    for bit, name in ((0x8, "hw_slowdown"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
                      (0x80, "hw_power_brake_slowdown")):
        g = gpu_summary(0, "H100", [_sample(0, 1900, 0x4), _sample(1, 1900, bit)], sm_clock_limit_mhz=1980)
        assert g["throttled"] is True and g["throttle_reasons"] == [name]
        assert gpu_warnings(g) == [f"throttled: GPU 0 ({name}) during the timed steps"]
    # the power cap holding the clocks well below their maximum does warn
    low = gpu_summary(1, "L4", [_sample(0, 1000, 0x4), _sample(1, 1100, 0x4), _sample(2, 300, 0x1)],
                      sm_clock_limit_mhz=2040)
    assert low["throttled"] is True and low["throttle_reasons"] == [] and low["power_capped"] is True
    assert gpu_warnings(low) == ["low GPU clock: GPU 1 ran its SMs at 1050 MHz on average during the timed steps, "
                                 "51% of its 2040 MHz maximum (at its software power cap)"]
    # idle samples are left out of the clock check; an unknown maximum judges nothing
    assert gpu_summary(0, "x", [_sample(0, 300, 0x1), _sample(1, 1900)], sm_clock_limit_mhz=1980)["throttled"] is False
    assert gpu_summary(0, "x", [_sample(0, 300)], sm_clock_limit_mhz=None)["throttled"] is False


def test_the_thread_samples_on_its_own_and_stop_ends_it(nvml):
    gpu = FakeGpu()
    nvml([gpu])
    sampler = TelemetrySampler([0], host_cpus=[0], interval_s=0.01)
    sampler.start()
    assert sampler._thread is not None and sampler._thread.is_alive()
    # nothing here calls the sampler: the samples come from its thread
    _wait_for(lambda: len(sampler._gpus[0].samples) >= 5 and len(sampler.host_samples) >= 5)
    sampler.stop()
    assert not sampler._thread.is_alive()
    n = len(sampler._gpus[0].samples)
    time.sleep(0.05)
    assert len(sampler._gpus[0].samples) == n  # stopped means stopped
    m = sampler.metrics()
    assert m["gpu_telemetry"][0]["samples"] == n and m["warnings"] == []
    host = m["host_telemetry"]
    assert host["samples"] == len(sampler.host_samples) and host["cpu_percent_mean"] is not None
    assert 0 <= host["cpu_percent_mean"] <= 100 and host["load_average_1m_max"] is not None
    assert host["cpus"] == 1 and host["cores_used_mean"] == round(host["cpu_percent_mean"] / 100, 2)
    sampler.stop()  # a second stop is harmless


def test_the_host_cores_a_run_used_are_its_utilisation_times_the_cpus_it_may_use():
    samples = [HostSample(0.0, cpu_percent=10.0), HostSample(1.0, cpu_percent=15.0)]  # 2 of 16 cores busy
    host = host_summary(samples, 16)
    assert host["cpus"] == 16 and host["cpu_percent_mean"] == 12.5 and host["cores_used_mean"] == 2.0
    assert host_summary([HostSample(0.0)], 16)["cores_used_mean"] is None  # no utilisation read
    assert host_summary(samples)["cores_used_mean"] is None  # the CPUs not known


def test_a_hung_driver_never_blocks_start_or_stop(nvml):
    hang = threading.Event()
    nvml([FakeGpu(block=hang)])
    sampler = TelemetrySampler([0], interval_s=0.01, stop_timeout_s=0.2)
    finished = threading.Event()

    def lifecycle() -> None:
        sampler.start()
        sum(range(10_000))  # the "timed steps" go on while the sampler is stuck
        sampler.stop()
        finished.set()

    runner = threading.Thread(target=lifecycle, daemon=True)
    runner.start()
    try:
        assert finished.wait(30), "start/stop waited for a hung NVML call"
        m = sampler.metrics()
        assert m["warnings"] and m["warnings"][0].startswith("telemetry: the sampler did not answer")
        assert m["energy_j"] is None  # an incomplete window gives no energy, never a partial one
    finally:
        hang.set()
    _wait_for(lambda: not sampler._thread.is_alive())


def test_no_driver_means_nulls_not_errors(nvml, monkeypatch):
    nvml([FakeGpu()], init_error=True)
    m = _no_gpu_metrics()
    assert m["gpu_telemetry"] == [] and m["energy_j"] is None and m["throttled"] is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed at all
    m = _no_gpu_metrics()
    assert m["gpu_telemetry"] == [] and m["energy_j"] is None


def _no_gpu_metrics() -> dict:
    sampler = TelemetrySampler([0], interval_s=0.01)
    sampler.start()
    time.sleep(0.05)
    sampler.stop()
    return dict(sampler.metrics())


def test_unsupported_readings_are_null_and_asked_once(nvml):
    gpu = FakeGpu(temperature_c=None, reasons=None, energy_mj=None, power_mw=None, sm_clock_mhz=None)
    nvml([gpu])
    m = _sampled(TelemetrySampler([0], interval_s=3600), extra_samples=3)
    g = m["gpu_telemetry"][0]
    assert g["temperature_mean_c"] is None and g["power_max_w"] is None
    assert g["energy_j"] is None and g["throttled"] is None and g["power_capped"] is None
    assert gpu.calls["temperature_c"] == 1  # not asked again after "not supported"
    assert gpu.calls["energy_mj"] == 1  # start() asked; stop() did not ask again


def test_helpers():
    assert integrate([(0.0, 2.0), (2.0, 4.0)]) == 6.0
    assert integrate([(0.0, 1.0)]) is None
    assert gpu_totals([{"energy_j": 1.0, "throttled": False, "power_capped": True},
                       {"energy_j": None, "throttled": None}]) == {
        "energy_j": None, "throttled": False, "throttle_reasons": [], "power_capped": True}


def _worker(images: int, hook: dict) -> WorkerMeasure:
    return WorkerMeasure([0.1, 0.1, 0.1], 0.3, 0.0, 0.0, [1.0, 0.9, 0.8], images, hook, {})


def test_several_workers_merge_energy_throttling_and_warnings():
    def hook(index, energy, throttled, warnings):
        g = {"index": index, "energy_j": energy, "throttled": throttled,
             "throttle_reasons": ["hw_slowdown"] if throttled else []}
        return {"gpu_telemetry": [g], **gpu_totals([g]), "host_telemetry": {"samples": index},
                "warnings": warnings}

    busy = "busy CPU: other processes used 1.00 of the 2 cores this run may use during the timed steps"
    workers = [_worker(96, hook(0, 100.0, False, [busy, busy])),
               _worker(96, hook(1, 140.0, True, ["throttled: GPU 1 (hw_slowdown) during the timed steps"]))]
    m = measured_metrics(workers, 32, first_step_s=None, compiled=False)
    assert m["energy_j"] == 240.0
    assert m["images_per_joule"] == pytest.approx(192 / 240.0)
    assert m["throttled"] is True and m["throttle_reasons"] == ["hw_slowdown"]
    assert [g["rank"] for g in m["gpu_telemetry"]] == [0, 1]
    assert m["host_telemetry"] == {"samples": 0}  # rank 0's host
    assert m["warnings"] == [busy, "rank 1: throttled: GPU 1 (hw_slowdown) during the timed steps"]

    # one worker without an energy figure: no total (a partial sum would flatter the run)
    workers[1] = _worker(96, hook(1, None, False, []))
    m = measured_metrics(workers, 32, first_step_s=None, compiled=False)
    assert m["energy_j"] is None and m["images_per_joule"] is None and m["throttled"] is False


def test_a_cpu_run_records_host_telemetry_and_null_energy():
    from cnnbench.config import RunConfig
    from cnnbench.engine import run_in_process

    record = run_in_process(RunConfig(model="trivial", batch_size=4, num_batches=6, num_warmup_batches=1,
                                      device="cpu"))
    m = record.metrics
    assert m["gpu_telemetry"] == [] and m["energy_j"] is None and m["images_per_joule"] is None
    assert m["throttled"] is None and isinstance(m["warnings"], list)
    assert m["host_telemetry"]["samples"] >= 2 and m["telemetry_interval_s"] == 0.5


def test_a_run_on_a_scripted_gpu_carries_its_telemetry(nvml, monkeypatch):
    """The whole path on CPU: the engine's hooks sample 'GPU 0' of a scripted NVML."""
    from cnnbench.config import RunConfig
    from cnnbench.engine import hooks, run_in_process

    nvml([FakeGpu(power_mw=[200_000], energy_mj=[1_000_000, 1_000_500], reasons=[0, 0x8])])
    monkeypatch.setattr(hooks, "nvml_indices", lambda device: [0])
    record = run_in_process(RunConfig(model="trivial", batch_size=4, num_batches=6, num_warmup_batches=1,
                                      device="cpu"))
    m = record.metrics
    assert m["gpu_telemetry"][0]["energy_source"] == "counter" and m["energy_j"] == 0.5
    assert m["images_per_joule"] == pytest.approx(24 / 0.5)
    assert m["throttled"] is True and "throttled: GPU 0 (hw_slowdown) during the timed steps" in m["warnings"]
