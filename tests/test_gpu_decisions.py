"""Every GPU decision, checked on the CPU (issue 18): no GPU runs here, so each choice that
decides how fast or how right a CUDA run is sits in a small function, and these tests hold
its result. Only the final call into CUDA stays untested (tests/test_gpu.py, on a GPU)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cnnbench.config import ConfigError, RunConfig
from cnnbench.engine import backend
from cnnbench.engine.backend import (
    backend_flags,
    bf16_capable,
    cuda_compiler_missing,
    implementation_of,
    inference_context,
    keeps_normalization_fp32,
    normalization_to_fp32,
    optimizer_implementation,
    syncs_every_step,
)
from cnnbench.engine.log_format import device_names, header_lines
from cnnbench.engine.multidevice.launch import WorkerFailed
from cnnbench.engine.precision import unsupported_reason
from cnnbench.engine.prepare import prepare
from cnnbench.engine.resolve import resolve
from cnnbench.oom import is_out_of_memory, is_out_of_memory_text

CUDA = torch.device("cuda", 0)
CPU = torch.device("cpu")


class FakeCuda:
    """torch.cuda as a machine with ``count`` GPUs of ``capability`` would answer, noting
    every device any call names (None: "the current device", which is GPU 0 until set)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int = 4, capability: tuple[int, int] = (9, 0)) -> None:
        self.asked: list[int | None] = []
        self.current: int | None = None
        self.capability = capability
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "is_available", lambda: True)
        monkeypatch.setattr(cuda, "device_count", lambda: count)
        monkeypatch.setattr(cuda, "get_device_capability", self._capability)
        monkeypatch.setattr(cuda, "get_device_name", self._name)
        monkeypatch.setattr(cuda, "set_device", self._set_device)
        monkeypatch.setattr(cuda, "is_bf16_supported", self._forbidden)
        monkeypatch.setattr(cuda, "current_device", self._forbidden)

    def _index(self, device) -> int | None:
        if device is None:
            return None
        return device if isinstance(device, int) else torch.device(device).index

    def _capability(self, device=None):
        self.asked.append(self._index(device))
        return self.capability

    def _name(self, device=None):
        self.asked.append(self._index(device))
        return "NVIDIA Fake"

    def _set_device(self, device):
        self.current = self._index(device)
        self.asked.append(self.current)

    def _forbidden(self, *args, **kwargs):
        raise AssertionError("reads or allocates on the current device (GPU 0 unless set)")


# --------------------------------------------------------------------------- 1: cuDNN autotuning


def test_cudnn_autotuning_is_on_for_cuda_runs_unless_turned_off():
    assert backend_flags(False, CUDA, True).cudnn_benchmark is True
    assert backend_flags(False, CUDA, None).cudnn_benchmark is True  # unset means on
    assert backend_flags(False, CUDA, False).cudnn_benchmark is False  # --no-cudnn-benchmark
    assert backend_flags(False, CPU, True).cudnn_benchmark is False
    assert backend_flags(True, CUDA, True).allow_tf32 is True and backend_flags(False, CUDA, True).allow_tf32 is False


def test_the_flag_reaches_torch_backends_and_the_record(monkeypatch):
    torch.backends.cudnn.benchmark = True
    prepared = prepare(resolve(RunConfig(model="trivial", device="cpu", batch_size=2)))
    prepared.close()
    assert torch.backends.cudnn.benchmark is False  # a CPU run leaves nothing autotuning
    assert prepared.notes()["cudnn_benchmark"] is False
    applied = []
    monkeypatch.setattr(backend, "apply_backend_flags", applied.append)
    from cnnbench.engine import precision

    monkeypatch.setattr(precision, "apply_backend_flags", applied.append)
    precision.POLICIES["fp32"].apply_backend_flags(CUDA, True)
    assert applied == [backend.BackendFlags(cudnn_benchmark=True, allow_tf32=False)]


def test_no_cudnn_benchmark_flag_and_what_is_recorded():
    import argparse

    from cnnbench.config.cli_args import add_config_arguments

    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    assert parser.parse_args(["--device", "cuda", "--no-cudnn-benchmark"]).cudnn_benchmark is False
    assert parser.parse_args(["--device", "cuda"]).cudnn_benchmark is True
    cfg = RunConfig(device="cuda", cudnn_benchmark=False).with_derived_defaults()
    assert cfg.recorded()["cudnn_benchmark"] is False
    assert RunConfig(device="cpu").with_derived_defaults().recorded()["cudnn_benchmark"] is None  # unused on CPU


def test_the_header_says_whether_cudnn_autotunes():
    cfg = {**RunConfig(device="cuda", batch_size=8, image_size=64).with_derived_defaults().recorded(),
           "num_devices": 1, "num_nodes": 1}
    on = header_lines(cfg, framework="torch", dataset="synthetic", notes={"cudnn_benchmark": True})
    off = header_lines(cfg, framework="torch", dataset="synthetic", notes={"cudnn_benchmark": False})
    assert any(line.startswith("cuDNN:") and "benchmark" in line for line in on)
    assert any(line.startswith("cuDNN:") and "heuristic" in line for line in off)


# --------------------------------------------------------------------------- 2: fused optimizers


@pytest.mark.parametrize(("optimizer", "sharded", "expected"), [
    ("sgd", False, "fused"), ("momentum", False, "fused"), ("adam", False, "fused"), ("rmsprop", False, "foreach"),
    ("adam", True, "fused"), ("momentum", True, "foreach"),  # FSDP2's DTensors: torch fuses Adam only
])
def test_cuda_parameters_get_the_fused_optimizer_where_torch_has_one(optimizer, sharded, expected):
    assert optimizer_implementation(optimizer, "cuda", sharded) == expected
    assert optimizer_implementation(optimizer, "cpu", sharded) == "default"


@pytest.mark.parametrize(("optimizer", "expected"), [("momentum", "fused"), ("adam", "fused"), ("rmsprop", "foreach")])
def test_make_optimizer_builds_the_chosen_implementation(monkeypatch, optimizer, expected):
    from cnnbench.engine import step

    monkeypatch.setattr(step, "first_device_type", lambda params: ("cuda", False, list(params)))
    cfg = RunConfig(model="trivial", device="cpu", optimizer=optimizer).with_derived_defaults()
    built = step.make_optimizer(cfg, nn.Linear(2, 2).parameters())  # torch builds fused SGD/Adam on CPU too
    assert implementation_of(built) == expected


def test_amp_fp16_steps_sync_only_without_a_fused_optimizer():
    assert syncs_every_step(True, "fused") is False
    assert syncs_every_step(True, "foreach") is True  # foreach does not help: GradScaler.step reads found_inf
    assert syncs_every_step(False, "foreach") is False
    assert syncs_every_step(True, None) is False  # inference: no step
    assert implementation_of(torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)) == "default"


# --------------------------------------------------------------------------- 8, 9: capability, current device


def test_bf16_is_decided_from_the_runs_device_capability(monkeypatch):
    fake = FakeCuda(monkeypatch, capability=(7, 5))
    device = torch.device("cuda", 2)
    assert "8.0 or newer" in (unsupported_reason("bf16", device) or "")
    assert "8.0 or newer" in (unsupported_reason("amp_bf16", device) or "")
    fake.capability = (8, 0)
    assert unsupported_reason("bf16", device) is None
    assert set(fake.asked) == {2}
    assert bf16_capable((8, 6)) and not bf16_capable((7, 0))


def test_a_one_device_run_on_gpu_k_never_asks_for_gpu_0(monkeypatch):
    fake = FakeCuda(monkeypatch)
    run = resolve(RunConfig(model="trivial", device="cuda", gpu_indices="3", precision="bf16", batch_size=2))
    assert run.device == torch.device("cuda", 3)
    backend.make_current(run.device)
    assert fake.current == 3
    assert fake.asked and set(fake.asked) == {3}, fake.asked


def test_resolve_and_measure_makes_the_device_current_before_anything_else(monkeypatch):
    """The order in the engine: resolve, then make_current, then the rest (stopped there)."""
    from cnnbench.engine import benchmark

    calls: list[str] = []
    monkeypatch.setattr(benchmark, "make_current", lambda device: calls.append(f"current {device}"))

    def stop(*args, **kwargs):
        calls.append("run")
        raise RuntimeError("stop here")

    monkeypatch.setattr(benchmark, "_run", stop)
    with pytest.raises(RuntimeError, match="stop here"):
        benchmark.resolve_and_measure(RunConfig(model="trivial", device="cpu", batch_size=2))
    assert calls == ["current cpu", "run"]


def test_the_header_names_the_gpus_the_run_uses():
    base = {"device": "cuda", "num_devices": 2, "num_nodes": 1}
    assert device_names({**base, "gpu_indices": "2,3"}) == ["cuda:2", "cuda:3"]
    assert device_names({**base, "gpu_indices": None}) == ["cuda:0", "cuda:1"]
    assert device_names({"device": "cuda", "num_devices": 8, "num_nodes": 2, "gpu_indices": None}) == [
        f"cuda:{i}" for i in range(4)]


# --------------------------------------------------------------------------- 10: one OOM classifier

OOM_MESSAGES = [
    "CUDA out of memory. Tried to allocate 2.00 GiB",
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
    "CUSOLVER_STATUS_ALLOC_FAILED",
    "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.21.5\n"
    "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'out of memory'",
    "CUDA driver error: CUDA_ERROR_OUT_OF_MEMORY",
    "cudaErrorMemoryAllocation",
    "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1099511627776 bytes",
]
NOT_OOM = ["CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm`", "CUDNN_STATUS_NOT_SUPPORTED",
           "mat1 and mat2 shapes cannot be multiplied", "illegal memory access was encountered"]


@pytest.mark.parametrize("message", OOM_MESSAGES)
def test_every_allocation_failure_of_the_cuda_libraries_is_oom(message):
    assert is_out_of_memory(RuntimeError(message))
    assert is_out_of_memory_text(f"RuntimeError: {message}")
    assert WorkerFailed(1, f"RuntimeError: {message.splitlines()[0]}").out_of_memory or "\n" in message
    from cnnbench.sweep.isolation import ChildOutcome
    from cnnbench.sweep.runner import _failure

    status, _ = _failure(ChildOutcome(exception={"type": "RuntimeError", "message": message}), 60)
    assert status == "oom"


@pytest.mark.parametrize("message", NOT_OOM)
def test_other_cuda_failures_are_errors(message):
    assert not is_out_of_memory(RuntimeError(message))
    assert not WorkerFailed(1, f"RuntimeError: {message}").out_of_memory
    assert is_out_of_memory(torch.OutOfMemoryError("x"))


# --------------------------------------------------------------------------- 12: compile's C compiler


def test_compile_on_cuda_needs_a_c_compiler(monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(backend.shutil, "which", lambda name: None)
    assert "C compiler" in (cuda_compiler_missing() or "")
    monkeypatch.setattr(backend.shutil, "which", lambda name: "/usr/bin/clang" if name == "clang" else None)
    assert cuda_compiler_missing() is None
    monkeypatch.setenv("CC", "my-cc")
    monkeypatch.setattr(backend.shutil, "which", lambda name: "/opt/my-cc" if name == "my-cc" else None)
    assert cuda_compiler_missing() is None


def test_the_check_runs_before_any_work_for_a_cuda_compile(monkeypatch):
    FakeCuda(monkeypatch)
    from cnnbench.engine import resolve as resolve_module

    monkeypatch.setattr(resolve_module, "cuda_compiler_missing", lambda: "torch.compile on CUDA needs a C compiler")
    with pytest.raises(ConfigError, match="C compiler"):
        resolve(RunConfig(model="trivial", device="cuda", compile=True, batch_size=2))
    resolve(RunConfig(model="trivial", device="cuda", batch_size=2))  # without --compile: no check


def test_compile_mode_implies_compile():
    cfg = RunConfig(compile_mode="reduce-overhead").with_derived_defaults()
    assert cfg.compile is True and cfg.compile_mode == "reduce-overhead"
    assert RunConfig(compile=True).with_derived_defaults().compile_mode == "default"
    assert RunConfig().with_derived_defaults().compile_mode is None


# --------------------------------------------------------------------------- 14: normalisation in fp32


def test_pure_half_precision_keeps_normalization_layers_in_fp32():
    assert keeps_normalization_fp32(torch.bfloat16) and keeps_normalization_fp32(torch.float16)
    assert not keeps_normalization_fp32(torch.float32)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.GroupNorm(2, 4), nn.ReLU()).to(torch.bfloat16)
    assert normalization_to_fp32(model) == 2
    assert model[0].weight.dtype == torch.bfloat16
    assert model[1].weight.dtype == torch.float32 and model[1].running_mean.dtype == torch.float32
    assert model[2].weight.dtype == torch.float32


def test_a_bf16_run_keeps_batch_norm_fp32_and_records_it():
    from cnnbench.engine import run_in_process

    record = run_in_process(RunConfig(model="resnet18", image_size=32, batch_size=2, num_batches=1,
                                      num_warmup_batches=1, device="cpu", precision="bf16"))
    assert record.status == "ok", record.error
    assert record.metrics["normalization_fp32_layers"] == 20  # resnet18's batch norms
    prepared = prepare(resolve(RunConfig(model="resnet18", image_size=32, batch_size=2, device="cpu",
                                         precision="bf16")))
    prepared.close()
    bns = [m for m in prepared.model.modules() if isinstance(m, nn.BatchNorm2d)]
    convs = [m for m in prepared.model.modules() if isinstance(m, nn.Conv2d)]
    assert all(m.weight.dtype == torch.float32 for m in bns) and all(m.weight.dtype == torch.bfloat16 for m in convs)


def test_fsdp_under_amp_gathers_in_the_autocast_dtype_and_reduces_in_fp32():
    from cnnbench.distributed.fsdp import mixed_precision

    bf16, fp16, fp32 = mixed_precision("amp_bf16"), mixed_precision("amp_fp16"), mixed_precision("fp32")
    assert (bf16.param_dtype, bf16.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert (fp16.param_dtype, fp16.reduce_dtype) == (torch.float16, torch.float32)
    assert (fp32.param_dtype, fp32.reduce_dtype) == (None, None)
    RunConfig(device="cuda", precision="amp_fp16", variable_update="fsdp")  # accepted, as the README says
    with pytest.raises(ConfigError, match="parameter_server"):
        RunConfig(device="cuda", precision="amp_fp16", variable_update="parameter_server")


# --------------------------------------------------------------------------- 15: FSDP forward-only


def test_fsdp_inference_runs_under_no_grad_in_a_group_of_one():
    """torchrun --nproc-per-node 1 with fsdp and --forward-only: a group of one, two forwards."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    assert inference_context("fsdp") is torch.no_grad and inference_context("replicated") is torch.inference_mode
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)).eval()
        mesh = init_device_mesh("cpu", (1,))
        for child in model.children():
            if any(True for _ in child.parameters()):
                fully_shard(child, mesh=mesh)
        fully_shard(model, mesh=mesh)
        for _ in range(2):
            with inference_context("fsdp")():
                assert model(torch.ones(3, 4)).shape == (3, 2)
    finally:
        dist.destroy_process_group()


# --- peak memory under CUDA graphs (seen on an H200: 0.26 GB "peak" for a 13.4 GB run) ---

def test_a_cuda_graph_pool_counts_whole_in_the_peak(monkeypatch):
    """Replays allocate nothing, so the allocated peak sees only the pool's blocks that tensors
    hold; the pool's other bytes are added (from the allocator's snapshot), on the run's GPU only."""
    from cnnbench.engine import memory

    gib = 1 << 30
    segments = [
        {"device": 1, "segment_pool_id": (0, 0), "total_size": 12 * gib, "allocated_size": 11 * gib},  # default pool
        {"device": 1, "segment_pool_id": (1, 0), "total_size": 2 * gib, "allocated_size": gib // 4},  # a graph's
        {"device": 0, "segment_pool_id": (2, 0), "total_size": 5 * gib, "allocated_size": 0},  # another GPU's
    ]
    assert memory.graph_pool_slack(segments, 1) == 2 * gib - gib // 4
    assert memory.graph_pool_slack(segments[:1], 1) == 0  # no graph: the allocated peak as it is
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 11 * gib + gib // 4)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device=None: 14 * gib)
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda *a, **k: segments)
    peaks = memory.peak_device_memory(torch.device("cuda", 1))
    assert peaks == {"peak_device_memory_bytes": 13 * gib, "peak_device_reserved_bytes": 14 * gib}
    assert memory.device_peaks(gib, 2 * gib, 5 * gib)["peak_device_memory_bytes"] == 2 * gib  # never over reserved
