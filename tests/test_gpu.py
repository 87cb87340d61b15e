"""GPU-only paths: CUDA-event timing, AMP, channels_last, allocator memory, compile.

Skipped, with the reason shown, on machines without CUDA.
"""

from __future__ import annotations

import pytest

from cnnbench.config import RunConfig
from cnnbench.engine import run_benchmark
from tests.conftest import requires_cuda

pytestmark = requires_cuda


def _cfg(**changes) -> RunConfig:
    base = dict(model="resnet18", image_size=64, batch_size=16, num_batches=5, num_warmup_batches=2,
                device="cuda")
    base.update(changes)
    return RunConfig(**base)


def test_cuda_event_timing_and_device_memory():
    record = run_benchmark(_cfg())
    assert record.status == "ok", record.error
    m = record.metrics
    assert len(m["step_times_s"]) == 5 and all(t > 0 for t in m["step_times_s"])
    assert m["peak_device_memory_bytes"] > 0
    assert record.environment["gpu_model"] and record.environment["gpu_count"] >= 1


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16"])
def test_precisions(precision):
    record = run_benchmark(_cfg(precision=precision, data_format="NHWC"))
    assert record.status == "ok", record.error


@pytest.mark.parametrize("location", ["device", "host", "loader"])
def test_synthetic_locations(location):
    assert run_benchmark(_cfg(synthetic_location=location)).status == "ok"


def test_compile():
    record = run_benchmark(_cfg(compile=True, precision="amp_bf16"))
    assert record.status == "ok", record.error
    assert record.metrics["compile_time_s"] > 0
