"""Issue 43 item 8: ``--variable-update fsdp`` under amp, bf16 or fp16 makes no unit per norm.

A unit all-gathers one dtype and the norms keep fp32 weights, so they need a unit apart from
their blocks'; one unit per norm made torchvision's ResNet-50 60 FSDP units instead of 8 (59
and 7 with weights: the root holds none), three tiny collectives each per step. All norms now
form one unit, kept unsharded from forward to backward. The units are counted on the meta
device (one process, a group of one) and the collectives of a real step on two Gloo workers;
the unit's one assumption (every norm is computed from the first norm's input) is checked on
torchvision's models and refused where it fails.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torchvision
from torch import nn

from cnnbench.config import RunConfig
from cnnbench.distributed import fsdp as fsdp_module
from cnnbench.distributed.fsdp import FullyShard
from cnnbench.distributed.strategy import StrategyContext
from cnnbench.distributed.world import World
from cnnbench.engine.backend import keeps_normalization_fp32, normalization_to_fp32
from cnnbench.engine.multidevice.launch import launch_workers
from cnnbench.engine.precision import precision_policy
from cnnbench.models.layers import NORMALIZATION

PRECISIONS = ("fp32", "amp_bf16", "amp_fp16", "bf16", "fp16")
RESNET50_NORMS = 53  # bn1, 3 per bottleneck (16) and 4 downsample norms


@pytest.fixture
def group_of_one():
    """A Gloo process group of one, in this process."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _as_the_engine_builds(model: nn.Module, precision: str) -> nn.Module:
    """The weights' dtypes as :func:`cnnbench.engine.prepare.prepare` leaves them before wrapping."""
    dtype = precision_policy(precision).param_dtype
    model = model.to(dtype=dtype)
    if keeps_normalization_fp32(dtype):
        normalization_to_fp32(model)
    return model


def _wrap(model: nn.Module, precision: str, *, forward_only: bool = False) -> nn.Module:
    config = RunConfig(device="cuda", precision=precision, variable_update="fsdp", forward_only=forward_only)
    context = StrategyContext(config, World(process_group=True), torch.device("cpu"))
    return FullyShard(context).wrap(_as_the_engine_builds(model, precision))


def _units(model: nn.Module) -> list[Any]:
    """The FSDP param groups ``fully_shard`` made (one per unit that holds weights), in module order."""
    from torch.distributed.fsdp import FSDPModule

    states: dict[int, Any] = {}
    for module in model.modules():
        if isinstance(module, FSDPModule):
            state = module._get_fsdp_state()
            states.setdefault(id(state), state)
    return [group for state in states.values() for group in state._fsdp_param_groups]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_resnet50_has_one_unit_per_block_under_every_precision(group_of_one, precision):
    """conv1, layer1..4 and fc (the root holds no weight of its own); under amp, bf16 and fp16
    bn1 joins the other 52 norms in one fp32 unit instead of each norm being a unit (59)."""
    with torch.device("meta"):
        model = torchvision.models.resnet50()
    units = _units(_wrap(model, precision))
    assert len(units) == 7
    assert all(len({f.sharded_param.dtype for f in u.fsdp_params}) == 1 for u in units)  # one dtype a unit
    norms = [u for u in units if all(isinstance(m, NORMALIZATION) for m in u.modules)]
    if precision == "fp32":
        assert norms == [units[1]] and len(norms[0].modules) == 1  # bn1, a direct child
        return
    (unit,) = norms
    assert len(unit.modules) == RESNET50_NORMS
    assert {f.sharded_param.dtype for f in unit.fsdp_params} == {torch.float32}
    assert unit.mp_policy.param_dtype is None  # gathered in fp32, not in the autocast dtype
    assert not unit._reshard_after_forward  # no all-gather again in backward
    blocks = [u for u in units if u is not unit]
    assert all(not isinstance(m, NORMALIZATION) for u in blocks for m in u.modules)
    gathered = {u.mp_policy.param_dtype for u in blocks}
    assert gathered == ({torch.bfloat16} if precision == "amp_bf16" else
                        {torch.float16} if precision == "amp_fp16" else {None})  # pure: their own dtype


# --- a real step on two workers: the collectives FSDP issues -----------------------------

def _counted(calls: dict[str, int], name: str, fn: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return fn(*args, **kwargs)
    return call


def count_collectives(precisions: list[str]) -> dict[str, Any] | None:
    """On each worker: resnet50 at 32 px through the engine under each precision; the FSDP
    all-gathers and reduce-scatters of the second step (the first initialises). Rank 0 returns
    the counts and each run's loss."""
    from cnnbench.distributed.process_group import start_process_group, stop_process_group
    from cnnbench.distributed.strategy import make_strategy
    from cnnbench.engine.prepare import prepare
    from cnnbench.engine.resolve import resolve

    world = World.from_env()
    cpu = torch.device("cpu")
    out: dict[str, Any] = {}
    start_process_group(world, "gloo", cpu, 120.0)
    gather, scatter = dist.all_gather_single, dist.reduce_scatter_single
    try:
        for precision in precisions:
            run = resolve(RunConfig(model="resnet50", device="cpu", batch_size=2, image_size=32, num_batches=2,
                                    variable_update="fsdp", precision=precision), world)
            prepared = prepare(run, strategy=make_strategy(StrategyContext(run.config, world, run.device)))
            try:
                images, labels = next(prepared.source)
                prepared.step(images, labels)
                calls = {"all_gather": 0, "reduce_scatter": 0}
                dist.all_gather_single = _counted(calls, "all_gather", gather)
                dist.reduce_scatter_single = _counted(calls, "reduce_scatter", scatter)
                try:
                    loss = float(prepared.step(images, labels))
                finally:
                    dist.all_gather_single, dist.reduce_scatter_single = gather, scatter
                out[precision] = {**calls, "loss": loss}
            finally:
                prepared.close()
    finally:
        stop_process_group()
    return out if world.is_main else None


def test_a_step_under_amp_or_bf16_issues_no_more_collectives_than_under_fp32():
    """fp32: 7 units resharded after forward, 3 collectives each (21). amp_bf16 and bf16: 6 of
    them and the norms' unit, gathered once and reduced once (20). One unit per norm made 59
    units and 177 collectives."""
    precisions = ["fp32", "amp_bf16", "bf16"]  # what a CPU runs
    out = launch_workers(count_collectives, (precisions,), nprocs=2, timeout_s=300)[0]
    assert out["fp32"]["all_gather"] == 14 and out["fp32"]["reduce_scatter"] == 7, out
    for precision in ("amp_bf16", "bf16"):
        assert (out[precision]["all_gather"], out[precision]["reduce_scatter"]) == (13, 7), out
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in out.values()), out


# --- the norms' unit assumes every norm is computed from the first one's input -------------

class TwoStems(nn.Module):
    """Two stems on the image (as CrossViT's two patch sizes): the second stem's norm is not
    computed from what the first norm takes in."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4))
        self.b = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4))
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc((self.a(x) + self.b(x)).mean((2, 3)))


def test_a_norm_off_the_first_norms_path_is_refused_in_one_line(group_of_one):
    model = _wrap(TwoStems(), "amp_bf16")
    with pytest.raises(RuntimeError) as info, torch.autocast("cpu", torch.bfloat16):
        model(torch.ones(2, 3, 8, 8))
    assert str(info.value) == (
        "--variable-update fsdp under amp_bf16: normalisation layer b.1 does not run on what the first one (a.1) "
        "takes in, so FSDP2 could reduce its gradient before it exists; use --precision fp32 or another "
        "--variable-update for this model")


def test_forward_only_runs_are_not_checked(group_of_one):
    """Without backward nothing is reduced: the same model runs forward-only."""
    model = _wrap(TwoStems(), "bf16", forward_only=True)
    with torch.no_grad():
        assert model(torch.ones(2, 3, 8, 8).bfloat16()).shape == (2, 2)


def test_the_check_runs_in_the_first_forward_only(group_of_one, monkeypatch):
    calls = []
    reaches = fsdp_module._reaches
    monkeypatch.setattr(fsdp_module, "_reaches", lambda *a: calls.append(1) or reaches(*a))
    model = _wrap(torchvision.models.resnet18(num_classes=4), "bf16")
    x = torch.randn(2, 3, 32, 32).bfloat16()
    model(x).float().sum().backward()
    assert len(calls) == 19  # resnet18's 20 norms, each after the first
    model(x).float().sum().backward()
    assert len(calls) == 19


def _first_norm_behind_all(model: nn.Module, x: torch.Tensor) -> list[str]:
    """The norms (by name) not computed from the first norm's input, in one forward."""
    names = {m: n for n, m in model.named_modules()}
    first: list[Any] = []
    off: list[str] = []

    def hook(layer: nn.Module, args: tuple[Any, ...]) -> None:
        node = args[0].grad_fn
        if not first:
            first.append(node)
        elif not fsdp_module._reaches(node, first[0]):
            off.append(names[layer])

    for m in model.modules():
        if isinstance(m, NORMALIZATION) and any(True for _ in m.parameters(recurse=False)):
            m.register_forward_pre_hook(hook)
    model(x)
    return off


def test_a_blocks_first_norm_is_not_behind_its_other_norms():
    """Why the unit is the whole model's norms, not each block's: in layer1 of ResNet-50 the
    downsample's norm is not computed from what layer1.0.bn1 takes in, nor in an Inception block
    the other branches' norms from what the first branch's takes in."""
    with torch.device("meta"):
        layer1 = torchvision.models.resnet50().layer1
        assert _first_norm_behind_all(layer1, torch.empty(2, 64, 8, 8, requires_grad=True)) == ["0.downsample.1"]
        mixed = torchvision.models.inception_v3(init_weights=True).Mixed_5b
        assert _first_norm_behind_all(mixed, torch.empty(2, 192, 35, 35, requires_grad=True)) == [
            "branch5x5_1.bn", "branch5x5_2.bn", "branch3x3dbl_1.bn", "branch3x3dbl_2.bn", "branch3x3dbl_3.bn",
            "branch_pool.bn"]


@pytest.mark.parametrize("name", ["resnet50", "inception_v3", "googlenet", "densenet121", "mobilenet_v3_small",
                                  "efficientnet_b0", "convnext_tiny", "regnet_y_400mf", "shufflenet_v2_x0_5",
                                  "vit_b_16", "swin_t"])
def test_torchvisions_models_compute_every_norm_from_the_first_ones_input(name):
    """On the meta device: the assumption holds for these models (a first forward would refuse them)."""
    kwargs: dict[str, Any] = {"init_weights": True} if name in ("googlenet", "inception_v3") else {}
    size = 299 if name == "inception_v3" else 224
    with torch.device("cpu" if name.startswith("regnet") else "meta"):  # regnet's widths need values
        model = torchvision.models.get_model(name, **kwargs)
    with torch.device("meta"):
        assert _first_norm_behind_all(model.to("meta"), torch.empty(2, 3, size, size)) == []


# --- make gpu-check runs FSDP on the GPUs it finds ------------------------------------------

def _acceptance():
    spec = importlib.util.spec_from_file_location(
        "gpu_acceptance", Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_acceptance.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_acceptance"] = module
    spec.loader.exec_module(module)
    return module


def test_gpu_check_runs_fsdp_under_torchrun_on_every_gpu_in_nchw(tmp_path):
    ga = _acceptance()
    cmd = ga.fsdp_command(ga.Settings(python="/venv/bin/python"), tmp_path, 1)
    assert cmd[:6] == ["/venv/bin/python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1"]
    flags = dict(zip(cmd[9::2], cmd[10::2], strict=True))
    assert flags["--variable-update"] == "fsdp" and flags["--data-format"] == "NCHW"
    assert flags["--precision"] == "amp_bf16" and flags["--device"] == "cuda"
    assert flags["--results-dir"] == str(tmp_path)
    assert "fsdp" in ga.SECTIONS and ga.FSDP_TIMEOUT_S <= 300


def test_gpu_check_gives_the_fsdp_step_its_budget_and_its_section(tmp_path):
    ga = _acceptance()
    seen: list[tuple[list[str], float]] = []

    def runner(cmd: list[str], timeout_s: float) -> Any:
        from cnnbench.results.store import append_record

        seen.append((list(cmd), timeout_s))
        folder = cmd[cmd.index("--results-dir") + 1]
        append_record(folder, {
            "schema_version": 2, "tool_version": "test", "run_id": "r", "started_at": "2026-01-01T00:00:00",
            "status": "ok", "error": None, "config": {}, "environment": {"gpu_count": 1},
            "metrics": {"total_images_per_sec": 2500.0, "per_device_images_per_sec": [2500.0]}})
        return ga.Completed(0, "", "", 30.0)

    acc = ga.Acceptance(ga.Settings(python="py", work_dir=tmp_path), runner=runner, say=lambda _: None)
    ga.fsdp_section(acc, 1)
    ((cmd, budget),) = seen
    assert "fsdp" in cmd and budget == ga.FSDP_TIMEOUT_S
    ((title, lines),) = acc.sections
    assert title == "FSDP over NCCL, 1 GPU (torchrun)"
    assert "Total 2,500.0 img/s; per device 2,500.0" in lines[-1] and "a group of one" in lines[-1]


def test_gpu_check_without_a_gpu_says_one_line_and_runs_no_step(tmp_path):
    ga = _acceptance()
    said: list[str] = []
    code = ga.main(["--summary", str(tmp_path / "s.md")], gpus=lambda: 0,
                   runner=lambda *a: pytest.fail("a step ran"), say=said.append)
    assert code == 0 and said == [ga.NO_GPU_LINE]
