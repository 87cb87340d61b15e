"""GPU-only paths: CUDA-event timing, AMP, channels_last, allocator memory, compile.

Skipped, with the reason shown, on machines without CUDA.
"""

from __future__ import annotations

import pytest

from cnnbench.config import RunConfig
from cnnbench.engine import run_in_process
from tests.conftest import requires_cuda

pytestmark = requires_cuda


def _cfg(**changes) -> RunConfig:
    base = dict(model="resnet18", image_size=64, batch_size=16, num_batches=5, num_warmup_batches=2,
                device="cuda")
    base.update(changes)
    return RunConfig(**base)


def test_cuda_event_timing_and_device_memory():
    record = run_in_process(_cfg())
    assert record.status == "ok", record.error
    m = record.metrics
    assert len(m["step_times_s"]) == 5 and all(t > 0 for t in m["step_times_s"])
    assert m["peak_device_memory_bytes"] > 0
    assert record.environment["gpu_model"] and record.environment["gpu_count"] >= 1


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16"])
def test_precisions(precision):
    record = run_in_process(_cfg(precision=precision, data_format="NHWC"))
    assert record.status == "ok", record.error


def test_the_input_wait_is_the_gpus_and_near_zero_for_a_resident_batch():
    """On CUDA the input wait comes from events (the GPU's wait), not from the host's next()."""
    record = run_in_process(_cfg(num_batches=20, synthetic_location="device"))
    assert record.status == "ok", record.error
    assert 0.0 <= record.metrics["input_wait_fraction"] < 0.05


@pytest.mark.parametrize("location", ["device", "host", "loader"])
def test_synthetic_locations(location):
    assert run_in_process(_cfg(synthetic_location=location)).status == "ok"


def test_compile():
    record = run_in_process(_cfg(compile=True, precision="amp_bf16"))
    assert record.status == "ok", record.error
    assert record.metrics["compile_time_s"] > 0


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def test_nccl_with_one_gpu_under_torchrun(tmp_path):
    """torchrun --nproc-per-node 1: a process group of one, DDP over NCCL."""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", "-m", "cnnbench",
           "run", "--model", "resnet18", "--image-size", "64", "--batch-size", "32", "--num-batches", "10",
           "--device", "cuda", "--results-dir", str(tmp_path), "--machine-label", "gpu"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (line,) = (tmp_path / "gpu.jsonl").read_text().splitlines()
    rec = json.loads(line)
    assert rec["status"] == "ok" and rec["config"]["all_reduce"] == "nccl" and rec["config"]["num_devices"] == 1


def test_comm_over_nccl_on_one_gpu_times_batches_with_cuda_events(tmp_path):
    """cnnbench comm under torchrun --nproc-per-node 1: every collective over NCCL, each sample a
    batch of --iters back-to-back calls timed by CUDA events (issue 43)."""
    import json
    import subprocess
    import sys

    from cnnbench.engine.comm.spec import BATCHES

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", "-m", "cnnbench",
           "comm", "--device", "cuda", "--collective", "all", "--max-bytes", "64K", "--iters", "10",
           "--results-dir", str(tmp_path), "--machine-label", "gpu"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (tmp_path / "gpu.jsonl").read_text().splitlines()]
    assert len(records) == 6 * 7  # every collective, 1 KiB .. 64 KiB
    for r in records:
        assert r["status"] == "ok" and r["config"]["backend"] == "nccl", r.get("error")
        m = r["metrics"]
        assert m["timer"] == "cuda events" and len(m["time_s_samples"]) == BATCHES and m["time_s"] > 0


@pytest.mark.skipif(_gpus() < 2, reason="needs 2 CUDA GPUs")
@pytest.mark.parametrize("variable_update", ["replicated", "parameter_server", "independent", "fsdp"])
def test_two_gpus(tmp_path, variable_update):
    from cnnbench.engine import run_and_append

    record, _ = run_and_append(_cfg(num_devices=2, variable_update=variable_update, results_dir=str(tmp_path)))
    assert record.status == "ok", record.error
    assert len(record.metrics["per_device_images_per_sec"]) == 2


@pytest.mark.parametrize("compression", ["fp16", "bf16", "powersgd"])
def test_gradient_compression_on_one_gpu_process_group(tmp_path, compression):
    """The communication hooks run on CUDA tensors (a group of one, started by torchrun's API)."""
    from cnnbench.engine.multidevice.launch import launch_workers
    from cnnbench.engine.multidevice.worker import launched_worker

    config = _cfg(gradient_compression=compression, results_dir=str(tmp_path), num_warmup_batches=3)
    fields = {f: getattr(config, f) for f in config.__dataclass_fields__}
    out = launch_workers(launched_worker, (fields, {}, False), nprocs=1, timeout_s=120)
    assert out[0]["status"] == "ok", out[0]["error"]


@pytest.mark.parametrize("where", ["device", "cpu"])
def test_parameter_server_nhwc_amp_bf16_on_one_gpu_process_group(tmp_path, where):
    """Issue 43: channels_last master weights take the fused CUDA optimizer (identical strides to
    their gradients), over NCCL in a group of one; with the master on the host its buffers are
    pinned and the record says each step waits for the device."""
    from cnnbench.engine.multidevice.launch import launch_workers
    from cnnbench.engine.multidevice.worker import launched_worker

    config = _cfg(variable_update="parameter_server", local_parameter_device=where, data_format="NHWC",
                  precision="amp_bf16", results_dir=str(tmp_path))
    fields = {f: getattr(config, f) for f in config.__dataclass_fields__}
    out = launch_workers(launched_worker, (fields, {}, False), nprocs=1, timeout_s=180)
    assert out[0]["status"] == "ok", out[0]["error"]
    metrics = out[0]["metrics"]
    assert metrics["optimizer_implementation"] == "fused"  # fused SGD on the GPU, and on the host
    assert metrics["step_syncs_host"] is (where == "cpu")


def test_dali_decodes_on_the_gpu_into_the_runs_layout_and_dtype(tmp_path):
    """--input-pipeline dali on CUDA: mixed decoding (nvJPEG), batches on the device, NHWC bf16."""
    pytest.importorskip("nvidia.dali", reason="NVIDIA DALI is not installed (pip install 'cnnbench[dali]')")
    import torch

    from cnnbench.data.catalog import open_data_set
    from cnnbench.data.dali import DaliSource
    from cnnbench.data.generate import make_data_set
    from cnnbench.data.source import InputRequest

    make_data_set("imagefolder", tmp_path / "f", num_classes=2, images_per_class=8, image_size=(80, 60))
    cfg = _cfg(data_dir=str(tmp_path / "f"), data_name="imagefolder", input_pipeline="dali", distortions=True,
               num_workers=2, precision="bf16", data_format="NHWC")
    request = InputRequest(cfg, 4, 32, torch.device("cuda", 0), torch.bfloat16, True, 1)
    source = DaliSource(request, open_data_set("imagefolder", str(tmp_path / "f")))
    try:
        images, labels = next(source)
        assert images.is_cuda and labels.is_cuda and images.dtype == torch.bfloat16
        assert images.shape == (4, 3, 32, 32) and images.is_contiguous(memory_format=torch.channels_last)
        assert source.metrics()["dali"]["decode_device"] == "mixed"
        assert source.metrics()["dali"]["hw_decoder_load"] == 0.65  # DALI's default, where none is given
    finally:
        source.close()
    record = run_in_process(_cfg(model="trivial", data_dir=str(tmp_path / "f"), input_pipeline="dali",
                                 distortions=True, batch_size=4, num_workers=2))
    assert record.status == "ok", record.error
    assert record.metrics["dali"]["decode_device"] == "mixed"
