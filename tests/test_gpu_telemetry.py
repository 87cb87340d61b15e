"""The real NVML path: sysinfo, telemetry during a run, the guard's process lists, GPU profiling.

Skipped, with the reason shown, on machines without CUDA.
"""

from __future__ import annotations

import json
import os

import torch

from cnnbench.config import RunConfig
from cnnbench.engine import run_and_append, run_in_process
from cnnbench.engine.hooks import nvml_indices
from cnnbench.machine.environment import capture_environment
from cnnbench.machine.nvml import open_nvml
from tests.conftest import requires_cuda

pytestmark = requires_cuda


def _cfg(**changes) -> RunConfig:
    base = dict(model="resnet18", image_size=64, batch_size=64, num_batches=60, num_warmup_batches=5,
                device="cuda")
    base.update(changes)
    return RunConfig(**base)


def test_environment_lists_the_gpus_nvml_sees():
    env = capture_environment("cuda")
    assert env["gpu_driver"] and env["cuda_driver_version"]
    visible = [g for g in env["gpus"] if g["cuda_index"] is not None]
    assert len(visible) == torch.cuda.device_count()
    g = next(g for g in visible if g["cuda_index"] == 0)
    props = torch.cuda.get_device_properties(0)
    assert g["name"] == torch.cuda.get_device_name(0)
    assert g["compute_capability"] == f"{props.major}.{props.minor}"
    assert g["memory_bytes"] >= props.total_memory
    assert g["pcie_generation_max"] and g["pcie_width_max"]
    json.dumps(env)


def test_the_runs_gpu_maps_to_its_nvml_index():
    (index,) = nvml_indices(torch.device("cuda:0"))
    nv = open_nvml()
    assert nv is not None
    with nv:
        assert (nv.uuid(index) or "").lower().removeprefix("gpu-") == str(
            torch.cuda.get_device_properties(0).uuid).lower()


def test_a_run_records_power_clocks_energy_and_images_per_joule():
    record = run_in_process(_cfg())
    assert record.status == "ok", record.error
    m = record.metrics
    (g,) = m["gpu_telemetry"]
    assert g["samples"] >= 2 and g["name"] == torch.cuda.get_device_name(0)
    assert g["sm_clock_max_mhz"] > 0 and g["temperature_max_c"] > 0
    assert g["energy_j"] is not None and g["energy_j"] > 0 and m["energy_j"] == g["energy_j"]
    assert m["images_per_joule"] > 0
    assert isinstance(m["throttled"], bool) and isinstance(m["throttle_reasons"], list)
    # this run's own process is on the GPU, and it is not reported as another one
    assert not any(w.startswith("busy GPU") and f"pid {os.getpid()} " in w for w in m["warnings"])


def test_profile_on_a_gpu_ranks_by_device_time(tmp_path):
    record, path = run_and_append(_cfg(num_batches=5, profile_steps=2, results_dir=str(tmp_path)))
    assert record.status == "ok", record.error
    top = record.metrics["profile_top_operators"]
    assert top and top[0]["self_device_ms"] is not None and top[0]["self_device_ms"] > 0
    assert (path.parent / record.metrics["profile_trace"]).is_file()
