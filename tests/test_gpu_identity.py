"""Which GPU a run's name, machine label and MFU come from: the run's own device(s), every
rank's, and a MIG slice's share of its chip. CUDA is faked: no GPU needed."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from cnnbench.engine.hooks import RunDevice
from cnnbench.engine.metrics import WorkerMeasure, flop_metrics, measured_metrics
from cnnbench.machine.cuda_device import describe_cuda_device
from cnnbench.machine.environment import capture_environment
from cnnbench.machine.peaks import known_gpu, mig_profile, peak_flops, peak_share
from tests.fake_nvml import FakeNvml

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
SLICE = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"


class FakeCuda:
    """torch.cuda's device queries for scripted devices; records which devices were asked."""

    def __init__(self, monkeypatch, devices: list[tuple[str, int]], current: int = 0) -> None:
        self.devices = devices
        self.asked: list[int] = []
        self.current = current
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "is_available", lambda: True)
        monkeypatch.setattr(cuda, "device_count", lambda: len(devices))
        monkeypatch.setattr(cuda, "current_device", lambda: self.current)
        monkeypatch.setattr(cuda, "get_device_properties", self.properties)
        monkeypatch.setattr(cuda, "get_device_name", lambda i=None: self.properties(i).name)
        monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91000)
        monkeypatch.setattr(cuda.nccl, "version", lambda: (2, 27, 3))
        monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([], init_error=True).module)  # no NVML

    def properties(self, index):
        self.asked.append(index)
        name, sms = self.devices[index]
        return types.SimpleNamespace(name=name, multi_processor_count=sms, uuid=f"uuid-{index}")


def test_mig_slice_gets_its_share_of_the_chip_peak():
    assert mig_profile(SLICE) == "3g.40gb" and mig_profile(A100) is None
    assert known_gpu(SLICE) == "A100"
    assert peak_share(A100, 108) == 1.0
    assert peak_share(SLICE, 42) == pytest.approx(42 / 108)
    assert peak_flops(SLICE, "bf16", sm_count=42) == pytest.approx(312e12 * 42 / 108)
    assert peak_flops(SLICE, "bf16") is None  # a slice of unknown size: no guess
    assert peak_flops("NVIDIA L4 MIG 1g.6gb", "bf16", sm_count=10) is None  # no chip SM count: no guess
    assert peak_flops(A100, "bf16", sm_count=108) == 312e12


def test_the_runs_device_is_described_not_device_0(monkeypatch):
    cuda = FakeCuda(monkeypatch, [(H100, 132), (A100, 108), (SLICE, 42)])
    d = describe_cuda_device(torch.device("cuda:2"))
    assert (d.cuda_index, d.name, d.sm_count, d.mig_profile) == (2, SLICE, 42, "3g.40gb")
    assert cuda.asked == [2]
    cuda.current = 1
    assert describe_cuda_device("cuda").name == A100  # no index: the current device


def test_environment_names_the_runs_gpu(monkeypatch):
    FakeCuda(monkeypatch, [(H100, 132), (SLICE, 42)])
    env = capture_environment(torch.device("cuda:1"))
    assert env["gpu_model"] == SLICE and env["gpu_sm_count"] == 42 and env["gpu_mig_profile"] == "3g.40gb"
    assert env["machine"] == f"2x {SLICE}"
    env = capture_environment(torch.device("cuda:0"))
    assert env["gpu_model"] == H100 and env["gpu_mig_profile"] is None


def _run(device: str, world_size: int, precision: str = "bf16"):
    return types.SimpleNamespace(device=torch.device(device), world=types.SimpleNamespace(world_size=world_size),
                                 config=types.SimpleNamespace(precision=precision, forward_only=False))


COST = {"train_flops": 10**12, "forward_flops": 3 * 10**11}


def test_every_ranks_gpu_is_recorded_and_mfu_uses_each_ranks_peak(monkeypatch):
    FakeCuda(monkeypatch, [(H100, 132), (SLICE, 42)])
    hooks = [RunDevice(torch.device("cuda:0")), RunDevice(torch.device("cuda:1"))]
    workers = [WorkerMeasure([0.1, 0.1], 0.2, 0.0, 0.0, [1.0, 1.0], 64, dict(h.metrics()), {}) for h in hooks]
    m = measured_metrics(workers, 32, first_step_s=None, compiled=False)
    assert [(d["rank"], d["name"], d["mig_profile"]) for d in m["gpu_devices"]] == [
        (0, H100, None), (1, SLICE, "3g.40gb")]
    # rank 0's environment says H100: the old rule would take 2x the H100's peak
    env = {"gpu_model": H100, "gpu_sm_count": 132}
    f = flop_metrics(COST, _run("cuda:0", 2), env, 600.0, m["gpu_devices"])
    peak = 989.4e12 + 312e12 * 42 / 108
    assert f["peak_tflops"] == pytest.approx(peak / 1e12)
    assert f["mfu"] == pytest.approx(600.0 * 1e12 / peak)
    # a rank's device missing, or unknown: no MFU rather than a wrong one
    assert flop_metrics(COST, _run("cuda:0", 3), env, 600.0, m["gpu_devices"])["mfu"] is None
    unknown = [*m["gpu_devices"][:1], {"rank": 1, "name": "Some Future GPU", "sm_count": 200}]
    assert flop_metrics(COST, _run("cuda:0", 2), env, 600.0, unknown)["mfu"] is None


def test_without_rank_devices_mfu_falls_back_to_the_environments_device():
    env = {"gpu_model": SLICE, "gpu_sm_count": 42}
    f = flop_metrics(COST, _run("cuda:0", 1), env, 100.0)
    assert f["mfu"] == pytest.approx(100.0 * 1e12 / (312e12 * 42 / 108))
    assert flop_metrics(COST, _run("cpu", 1), env, 100.0)["mfu"] is None
    assert RunDevice(torch.device("cpu")).metrics() == {}
