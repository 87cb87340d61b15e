"""The parameter server as a GPU runs it, checked on the CPU (issue 43, items 1 and 9).

Item 1: under NHWC the weights are channels_last; torch's fused CUDA optimizers refuse a
parameter whose gradient has other strides (``check_fast_path_restrictions`` in
``ForeachUtils.h``), and CPU kernels do not check, so the strides are checked directly here.

Item 9: with the master weights on the host for a GPU run, the flat buffers are allocated
once, pinned (only then), each step copies once each way per dtype, without blocking, waits
for the device once, and updates with a fused or foreach host optimizer on every core. A fake
device description (``cuda``, its buffers allocated on the CPU by a spy) runs that path here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from cnnbench.config import RunConfig
from cnnbench.distributed import parameter_server
from cnnbench.distributed.parameter_server import ParameterServer, updates_on_host
from cnnbench.distributed.strategy import ParallelStrategy, StrategyContext
from cnnbench.distributed.world import World
from cnnbench.engine.backend import BackendFlags, implementation_of, optimizer_implementation
from cnnbench.engine.prepare import Prepared
from cnnbench.engine.step import make_optimizer
from cnnbench.machine.host import usable_cpus
from cnnbench.results.store import read_records
from tests.test_gpu_acceptance import FakeGpuMachine, _accept, _arg, ga
from tests.test_guarded_behaviours import GlooThreads, gloo_pair  # noqa: F401  (a fixture)

CPU = torch.device("cpu")
CUDA = torch.device("cuda")
LR = 0.1


def _nhwc_model(dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    return model.to(dtype=dtype).to(memory_format=torch.channels_last)


def _config(where: str | None) -> RunConfig:
    config = RunConfig(model="trivial", device="cpu", variable_update="parameter_server", data_format="NHWC")
    # --local-parameter-device cpu is refused on a CPU run (no effect there); the strategy's own
    # path for it (master weights apart from the device's buffers, as on a GPU) is exercised here.
    object.__setattr__(config, "local_parameter_device", where)
    return config


def _server(where: str | None, device: torch.device = CPU, world: World | None = None) -> ParameterServer:
    return ParameterServer(StrategyContext(_config(where), world or World(), device))


def _set_gradients(model: nn.Module, seed: int) -> None:
    """Gradients as backward leaves them: each with its parameter's strides (channels_last)."""
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.grad = torch.empty_like(p).copy_(torch.randn(p.shape, generator=g, dtype=torch.float32))


def _fused_fast_path_ok(params: list[torch.Tensor], grads: list[torch.Tensor]) -> bool:
    """What torch's fused CUDA optimizers require of each (parameter, gradient) pair
    (``check_fast_path_restrictions``: same device, dtype and strides, non-overlapping and dense)."""
    return all(p.device == g.device and p.dtype == g.dtype and p.stride() == g.stride()
               and p.is_contiguous(memory_format=torch.channels_last) == g.is_contiguous(
                   memory_format=torch.channels_last)
               for p, g in zip(params, grads, strict=True))


# --------------------------------------------------------------------------- item 1: strides

@pytest.mark.parametrize("where", [None, "cpu"])
def test_master_weights_and_their_gradients_have_identical_strides_under_nhwc(where):
    """Every master weight keeps its parameter's strides (channels_last for the convolutions),
    and so does its gradient: the pair takes torch's fused CUDA path. Before the fix the
    master kept channels_last and its gradient was a contiguous NCHW view."""
    model = _nhwc_model()
    server = _server(where)
    server.wrap(model)
    convs = [p for p in model.parameters() if p.dim() == 4]
    assert convs and all(not p.is_contiguous() for p in convs)  # the weights really are channels_last
    masters = server.master
    optimizer = server.make_optimizer(model, lambda ps, **kw: torch.optim.SGD(ps, lr=LR))
    for seed in range(2):  # as the optimizer sees them, at each step
        _set_gradients(model, seed)
        server.optimizer_step(optimizer, None)
        assert all(m.grad is not None for m in masters)
        grads = [m.grad for m in masters if m.grad is not None]
        assert [m.stride() for m in masters] == [p.stride() for p in model.parameters()]
        assert [m.stride() for m in masters] == [g.stride() for g in grads]
        assert _fused_fast_path_ok(list(masters), grads)


@pytest.mark.parametrize("where", [None, "cpu"])
def test_the_optimizer_over_the_master_is_built_fused_and_updates_as_on_the_parameters(where):
    """The run's own factory builds the fused optimizer for the master weights when they are on
    CUDA (here faked), and a step through the parameter server leaves each worker's weights
    where plain SGD on the same gradients leaves them (so the strided views map each element
    to itself)."""
    model, reference = _nhwc_model(), _nhwc_model()
    server = _server(where)
    server.wrap(model)
    cfg = RunConfig(model="trivial", device="cpu", optimizer="momentum").with_derived_defaults()
    from cnnbench.engine import step

    real = step.first_device_type
    step.first_device_type = lambda params: ("cuda", False, list(params))  # type: ignore[assignment]
    try:
        optimizer = server.make_optimizer(model, lambda ps, **kw: make_optimizer(cfg, ps, **kw))
    finally:
        step.first_device_type = real
    assert implementation_of(optimizer) == "fused"  # torch builds fused SGD on the CPU too
    expected = make_optimizer(cfg, reference.parameters())
    for seed in range(3):
        _set_gradients(model, seed)
        _set_gradients(reference, seed)
        server.optimizer_step(optimizer, None)
        expected.step()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        assert p.stride() == q.stride()
        torch.testing.assert_close(p, q)


@pytest.mark.parametrize("where", [None, "cpu"])
def test_two_workers_under_nhwc_end_with_sgd_on_their_mean_gradient(gloo_pair, where):  # noqa: F811
    """Two ranks (Gloo, in threads): rank 1's buffers receive the broadcast, rank 0's the
    reduce; both end where SGD on the mean gradient leaves one model, strides unchanged."""
    models = [_nhwc_model(), _nhwc_model()]
    reference = _nhwc_model()

    def worker(rank: int) -> list[torch.Tensor]:
        server = _server(where, world=World(rank=rank, world_size=2, process_group=True))
        model = server.wrap(models[rank])
        optimizer = server.make_optimizer(model, lambda ps, **kw: torch.optim.SGD(ps, lr=LR))
        for step in range(2):
            _set_gradients(model, seed=10 * step + rank)
            server.optimizer_step(optimizer, None)
        return [p.detach().clone(memory_format=torch.preserve_format) for p in model.parameters()]

    r0, r1 = gloo_pair.run(worker)
    sgd = torch.optim.SGD(reference.parameters(), lr=LR)
    for step in range(2):
        a, b = _nhwc_model(), _nhwc_model()
        _set_gradients(a, seed=10 * step)
        _set_gradients(b, seed=10 * step + 1)
        for p, pa, pb in zip(reference.parameters(), a.parameters(), b.parameters(), strict=True):
            p.grad = (pa.grad + pb.grad) / 2
        sgd.step()
    for x, y, p in zip(r0, r1, reference.parameters(), strict=True):
        assert torch.equal(x, y) and x.stride() == p.stride()
        torch.testing.assert_close(x, p.detach())


# --------------------------------------------------------------------------- item 9: the host


@dataclass
class Spy:
    """The parameter server's allocations, copies and waits, on a fake ``cuda`` run."""

    allocations: list[tuple[int, torch.dtype, str, bool]] = field(default_factory=list)
    copies: list[tuple[int, int]] = field(default_factory=list)
    waits: int = 0
    events: list[str] = field(default_factory=list)
    """The copies, waits and host updates in the order they happened."""

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def allocate(numel: int, dtype: torch.dtype, device: torch.device, pin: bool) -> torch.Tensor:
            self.allocations.append((numel, dtype, device.type, pin))
            return torch.empty(numel, dtype=dtype)  # on the CPU: a device described, not used

        def copy(dst: torch.Tensor, src: torch.Tensor) -> None:
            self.copies.append((dst.data_ptr(), src.data_ptr()))
            self.events.append("copy")
            dst.copy_(src)

        def wait(device: torch.device) -> None:
            self.waits += 1
            self.events.append("wait")

        real_step = parameter_server.step_optimizer

        def step(*args: Any, **kwargs: Any) -> Any:
            self.events.append("update")
            return real_step(*args, **kwargs)

        monkeypatch.setattr(parameter_server, "_flat_buffer", allocate)
        monkeypatch.setattr(parameter_server, "_copy_flat", copy)
        monkeypatch.setattr(parameter_server, "_wait_for_device", wait)
        monkeypatch.setattr(parameter_server, "step_optimizer", step)


def _two_dtype_model() -> nn.Module:
    """bf16 weights with fp32 batch norm (pure bf16 keeps norms fp32): two flat buffers."""
    model = _nhwc_model(torch.bfloat16)
    model[1].float()
    return model


def test_rank_0_updates_on_the_host_only_for_a_run_on_an_accelerator():
    assert updates_on_host(CUDA, CPU)
    assert not updates_on_host(CUDA, CUDA)
    assert not updates_on_host(CPU, CPU)  # a CPU run's device is the host: nothing to copy or wait for


def test_a_host_master_for_a_gpu_run_pins_its_buffers_allocates_once_and_copies_once_each_way(monkeypatch):
    spy = Spy()
    spy.install(monkeypatch)
    model = _two_dtype_model()
    server = _server("cpu", device=CUDA)
    server.wrap(model)
    made: dict[str, Any] = {}

    def factory(params: Any, **kwargs: Any) -> torch.optim.Optimizer:
        made.update(kwargs)
        return torch.optim.SGD(params, lr=LR, foreach=True)

    optimizer = server.make_optimizer(model, factory)
    assert made == {"host_update": True}  # the host update is built fused or foreach
    buckets = len(server.buckets)
    assert buckets == 2
    # per dtype: the device's gradients and weights (not pinned); the host's master and its gradients (pinned)
    assert sorted((device, pin) for _, _, device, pin in spy.allocations) == (
        [("cpu", True)] * 2 * buckets + [("cuda", False)] * 2 * buckets)
    allocated = list(spy.allocations)
    for step in range(3):
        spy.copies.clear()
        _set_gradients(model, seed=step)
        server.optimizer_step(optimizer, None)
        assert spy.allocations == allocated  # none after wrap
        to_host = [(b.master_grads.data_ptr(), b.device_grads.data_ptr()) for b in server.buckets]
        to_device = [(b.device_weights.data_ptr(), b.master_flat.data_ptr()) for b in server.buckets]
        assert spy.copies == to_host + to_device  # one flat copy each way per dtype, every step
        assert spy.waits == step + 1  # one wait for the device per step
        # the host reads the gradients only once their non-blocking copy has landed, and the
        # weights go back only once updated
        assert spy.events[-(2 * buckets + 2):] == ["copy"] * buckets + ["wait", "update"] + ["copy"] * buckets
    assert server.syncs_host_every_step()


def test_the_non_blocking_copy_and_pinning_decisions(monkeypatch):
    """The copy helper asks for non_blocking; a device-resident master pins nothing and makes no
    host copy or wait."""
    seen: list[bool] = []

    class Flat:
        def copy_(self, src: Any, non_blocking: bool = False) -> None:
            seen.append(non_blocking)

    parameter_server._copy_flat(Flat(), None)  # type: ignore[arg-type]
    assert seen == [True]
    spy = Spy()
    spy.install(monkeypatch)
    model = _nhwc_model()
    server = _server(None, device=CUDA)
    server.wrap(model)
    assert not any(pin for *_, pin in spy.allocations)
    assert {device for _, _, device, _ in spy.allocations} == {"cuda"}
    _set_gradients(model, seed=0)
    server.optimizer_step(server.make_optimizer(model, lambda ps, **kw: torch.optim.SGD(ps, lr=LR)), None)
    assert spy.copies == [] and spy.waits == 0 and not server.syncs_host_every_step()


def test_the_host_update_runs_on_every_core_this_process_may_use(monkeypatch):
    spy = Spy()
    spy.install(monkeypatch)
    model = _nhwc_model()
    server = _server("cpu", device=CUDA)
    server.wrap(model)
    during: list[int] = []

    class Counting(torch.optim.SGD):
        def step(self, closure: Any = None) -> Any:
            during.append(torch.get_num_threads())
            return super().step(closure)

    optimizer = server.make_optimizer(model, lambda ps, **kw: Counting(ps, lr=LR))
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a worker's share of the cores
    try:
        _set_gradients(model, seed=0)
        server.optimizer_step(optimizer, None)
        assert during == [len(usable_cpus())]
        assert torch.get_num_threads() == 1  # the worker's share again after the update
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(("optimizer", "expected"), [("sgd", "fused"), ("momentum", "fused"), ("adam", "fused"),
                                                     ("rmsprop", "foreach")])
def test_the_host_update_is_built_fused_or_foreach(optimizer, expected):
    """Not torch's CPU default (single-tensor): its fused CPU kernel where it has one."""
    assert optimizer_implementation(optimizer, "cpu", host_update=True) == expected
    assert optimizer_implementation(optimizer, "cpu") == "default"  # a CPU run's own optimizer is unchanged
    cfg = RunConfig(model="trivial", device="cpu", optimizer=optimizer).with_derived_defaults()
    built = make_optimizer(cfg, nn.Linear(2, 2).parameters(), host_update=True)
    assert implementation_of(built) == expected


@pytest.mark.parametrize(("where", "device", "syncs"), [("cpu", CUDA, True), (None, CUDA, False), (None, CPU, False)])
def test_the_record_says_the_step_syncs_the_host_where_rank_0_updates_on_the_host(where, device, syncs):
    """``metrics.step_syncs_host`` (from :meth:`Prepared.notes`), on every rank of the run."""
    for rank in (0, 1):
        world = World(rank=rank, world_size=2, process_group=True)
        server = _server(where, device=device, world=world)
        prepared = Prepared(model=nn.Linear(1, 1), runnable=None, optimizer=None, step=None,  # type: ignore[arg-type]
                            source=None, policy=None, strategy=server,  # type: ignore[arg-type]
                            flags=BackendFlags(cudnn_benchmark=False, allow_tf32=False))
        assert prepared.notes()["step_syncs_host"] is syncs
    assert ParallelStrategy().syncs_host_every_step() is False


# --------------------------------------------------------------------------- make gpu-check


def test_gpu_check_runs_the_parameter_server_nhwc_amp_bf16_on_every_gpu_within_its_budget(tmp_path):
    """Both masters (rank 0's GPU, the host), NHWC and amp_bf16, torchrun over every local GPU
    (a group of one on one GPU), each step under its own time budget; their records' waits shown."""
    machine = FakeGpuMachine(ours=3000.0)
    budgets: list[tuple[list[str], float]] = []

    def runner(cmd: list[str], timeout_s: float) -> Any:
        budgets.append((list(cmd), timeout_s))
        return machine(cmd, timeout_s)

    _, summary, _ = _accept(tmp_path, runner, "--skip", "tests,timm,locations,jpeg,compile,ddp,fsdp,comm,sysinfo")
    ps = [(c, t) for c, t in budgets if "parameter_server" in c]
    assert [_arg(c, "--local-parameter-device") for c, _ in ps] == ["device", "cpu"]
    for cmd, timeout_s in ps:
        assert timeout_s == ga.PARAMETER_SERVER_TIMEOUT_S
        assert (_arg(cmd, "--data-format"), _arg(cmd, "--precision"), _arg(cmd, "--device")) == (
            "NHWC", "amp_bf16", "cuda")
        assert cmd[1:3] == ["-m", "torch.distributed.run"] and _arg(cmd, "--nproc-per-node") == "1"
    assert "## Parameter server, 1 GPU (torchrun)" in summary
    assert "| rank 0's GPU | 3,000.0 | 1.000 | fused | False |" in summary
    assert "| host (pinned) | 3,000.0 | 1.000 | fused | True |" in summary
    assert "None: every step exited 0 and gave its figures." in summary


def test_gpu_check_fails_the_parameter_server_step_whose_record_hides_the_hosts_wait(tmp_path):
    machine = FakeGpuMachine(ours=3000.0)

    def hiding(cmd: list[str], timeout_s: float) -> Any:
        done = machine(cmd, timeout_s)
        if "--local-parameter-device" in cmd:  # a record that says the host never waits
            folder = _arg(cmd, "--results-dir")
            record = read_records(folder, step_times=False)[0][-1]
            record["metrics"]["step_syncs_host"] = False
            for f in Path(folder).glob("*.jsonl"):
                f.write_text(json.dumps(record) + "\n")
        return done

    _, summary, _ = _accept(tmp_path, hiding, "--skip", "tests,timm,locations,jpeg,compile,ddp,fsdp,comm,sysinfo")
    assert "the record says step_syncs_host False with the master on cpu" in summary
    assert "parameter server, master on device (" not in summary  # the device master's record is right
