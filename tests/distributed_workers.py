"""Worker functions for the multi-process tests (imported by name in spawned workers).

Importing this module registers ``test_nobn``, a small convnet without batch norm (batch
statistics differ per worker, so only a model without them can equal a single process on
the concatenated batch), and ``test_dies``, a model whose forward kills or fails its worker.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import torch
from torch import nn

from cnnbench.config import RunConfig
from cnnbench.distributed.process_group import start_process_group, stop_process_group
from cnnbench.distributed.strategy import StrategyContext, make_strategy
from cnnbench.distributed.world import World
from cnnbench.engine.loop import timed_loop
from cnnbench.engine.prepare import prepare
from cnnbench.engine.resolve import resolve
from cnnbench.models import register_model
from cnnbench.models.registry import _SPECS


class NoBatchNorm(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


class Dies(NoBatchNorm):
    """Rank 1 dies at its 4th forward: killed by SIGKILL, or raising, as CNNBENCH_TEST_DEATH says."""

    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        Dies.calls += 1
        if os.environ.get("RANK") == "1" and Dies.calls == 4:
            how = os.environ.get("CNNBENCH_TEST_DEATH", "kill")
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif how == "oom":
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
            else:
                raise ValueError("boom on rank 1")
        return super().forward(x)


if "test_nobn" not in _SPECS:
    register_model("test_nobn", default_image_size=16, default_batch_size=4)(
        lambda num_classes=1000, image_size=16: NoBatchNorm(num_classes))
    register_model("test_dies", default_image_size=16, default_batch_size=4)(
        lambda num_classes=1000, image_size=16: Dies(num_classes))


def train_and_report(config_fields: dict[str, Any], steps: int) -> dict[str, Any]:
    """Run ``steps`` steps of the strategy through the engine's phases; return this worker's
    batch and its weights afterwards (full weights, also under FSDP)."""
    world = World.from_env()
    config = RunConfig.from_mapping(config_fields)
    run = resolve(config, world)
    start_process_group(world, run.config.all_reduce or "gloo", run.device, run.config.timeout)
    try:
        strategy = make_strategy(StrategyContext(run.config, world, run.device))
        prepared = prepare(run, strategy=strategy)
        images, labels = next(prepared.source)
        timed_loop(prepared, steps, run.device)
        weights = []
        for p in prepared.model.parameters():
            full = p.full_tensor() if hasattr(p, "full_tensor") else p
            weights.append(full.detach().cpu().clone())
        prepared.close()
    finally:
        stop_process_group()
    return {"images": images.cpu(), "labels": labels.cpu(), "weights": weights, "strategy": strategy.name}


def run_engine_worker(config_fields: dict[str, Any], extra: dict[str, Any], console: bool,
                      notes_dir: str | None = None, log_level: int = 30, launcher_pid: int | None = None) -> Any:
    """The real worker entry point, with this module's test models registered."""
    from cnnbench.engine.multidevice.worker import launched_worker

    return launched_worker(config_fields, extra, console, notes_dir, log_level, launcher_pid)


def train_epochs_recording_shards(config_fields: dict[str, Any]) -> dict[str, Any]:
    """Train to accuracy through the engine on this worker, noting which images of the data set
    it was given: ``{"rank", "train": [[epoch, indices], ...], "eval": [indices, ...], "record"}``."""
    from cnnbench.data.sharding import ShardPlan
    from cnnbench.engine.benchmark import resolve_and_measure

    seen: dict[str, list] = {"train": [], "eval": []}
    train, evaluation = ShardPlan.train_batches, ShardPlan.eval_batches

    def train_batches(self, epoch, *args, **kwargs):
        for key in train(self, epoch, *args, **kwargs):
            seen["train"].append([epoch, list(key.indices)])
            yield key

    def eval_batches(self, *args, **kwargs):
        for key in evaluation(self, *args, **kwargs):
            seen["eval"].append(list(key.indices))
            yield key

    ShardPlan.train_batches = train_batches  # type: ignore[method-assign]
    ShardPlan.eval_batches = eval_batches  # type: ignore[method-assign]
    world = World.from_env()
    record = resolve_and_measure(RunConfig.from_mapping(config_fields), world=world)
    return {"rank": world.rank, **seen, "record": record.to_dict() if world.is_main else None}


def run_each(configs: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Run every configuration in turn through the engine in one process group (what
    :func:`~cnnbench.engine.benchmark.resolve_and_measure` does in a worker of ``cnnbench run``,
    but joining the group once); rank 0 returns each record's status and error."""
    from cnnbench.engine import benchmark

    world = World.from_env()
    out = []
    start_process_group(world, "gloo", torch.device("cpu"), 60.0)
    try:
        for fields in configs:
            run = resolve(RunConfig.from_mapping(fields), world)
            record = benchmark._run(run, benchmark._silent, None, keep_failures=False)
            out.append({"config": fields, "status": record.status, "error": record.error})
    finally:
        stop_process_group()
    return out if world.is_main else None


def progress_on_two_workers(steps: int, print_s: float) -> dict[str, Any]:
    """The timed loop on 2 workers whose step sleeps (rank 1 longer) then all-reduces, as a
    DDP step ends; rank 0's progress line takes ``print_s``. Returns this worker's step times
    and, on rank 0, the step times each progress line was given."""
    import dataclasses
    import itertools
    import time

    import torch.distributed as dist

    from cnnbench.distributed.process_group import max_over_workers

    world = World.from_env()
    cpu = torch.device("cpu")
    start_process_group(world, "gloo", cpu, 60.0)
    try:
        prepared = prepare(resolve(RunConfig(model="trivial", device="cpu", batch_size=2, image_size=16)))
        prepared.close()

        def step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            time.sleep(0.01 if world.rank == 0 else 0.03)
            dist.all_reduce(torch.zeros(1))
            return torch.zeros(())

        shown: list[list[float]] = []

        def progress(i: int, times: list[float], loss: float) -> None:
            if world.rank == 0:
                shown.append(list(times))
                time.sleep(print_s)

        batch = (torch.zeros(2, 3, 16, 16), torch.zeros(2, dtype=torch.long))
        loop = timed_loop(dataclasses.replace(prepared, step=step, source=itertools.repeat(batch)), steps, cpu,
                          display_every=2,
                          on_progress=progress, barrier=dist.barrier,
                          slowest=lambda times: max_over_workers(times, cpu))
    finally:
        stop_process_group()
    return {"step_times": loop.step_times_s, "shown": shown}


def uneven_run(config_fields: dict[str, Any], slow_s: float) -> dict[str, Any] | None:
    """The engine on this worker, where rank 1's first step (its compilation: ``torch.compile``
    is replaced) and rank 0's profile export each take ``slow_s`` more. The process group is
    joined with a generous timeout, then set to the run's ``--timeout`` (joining is not tested)."""
    import datetime
    import time

    from cnnbench.distributed.torch_compat import set_group_timeout
    from cnnbench.engine import benchmark

    world = World.from_env()
    join = benchmark.start_process_group

    def start(world: World, backend: str, device: torch.device, timeout_s: float) -> None:
        join(world, backend, device, 120.0)
        set_group_timeout(datetime.timedelta(seconds=timeout_s))

    profile = benchmark.profile_steps

    def slow_profile(*args: Any, **kwargs: Any) -> Any:
        out = profile(*args, **kwargs)
        time.sleep(slow_s)  # writing a large trace
        return out

    def compile_slowly(model: Any, **kwargs: Any) -> Any:
        calls = []

        def first_call_slow(*args: Any, **kw: Any) -> Any:
            if world.rank == 1 and not calls:
                time.sleep(slow_s)  # compiling
            calls.append(1)
            return model(*args, **kw)

        return first_call_slow

    benchmark.start_process_group = start  # type: ignore[assignment]
    benchmark.profile_steps = slow_profile  # type: ignore[assignment]
    torch.compile = compile_slowly  # type: ignore[assignment]
    record = benchmark.resolve_and_measure(RunConfig.from_mapping(config_fields), world=world)
    return record.to_dict() if world.is_main else None


def never_finishes_a_phase(notes_dir: str, timeout_s: float) -> None:
    """Rank 0 waits at the end of a phase that rank 1 never finishes (it waits until rank 0 has
    given up, as a worker still writing a trace would); rank 0 leaves its failure note."""
    import time
    from pathlib import Path

    from cnnbench.distributed.phases import wait_for_all
    from cnnbench.engine.multidevice.worker import write_failure_note

    world = World.from_env()
    start_process_group(world, "gloo", torch.device("cpu"), 120.0)
    if world.rank == 0:
        try:
            wait_for_all(world, "profiling", timeout_s)
        except BaseException as exc:
            write_failure_note(notes_dir, world.rank, exc)
            raise
        return
    deadline = time.monotonic() + 120
    while not any(Path(notes_dir).iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)


def torchrun_rank1_fails_while_rank0_waits(config_fields: dict[str, Any], seen_file: str) -> None:
    """``cnnbench run``'s torchrun path on each worker (our launcher sets torchrun's environment).
    Rank 1 fails at its 4th forward (``test_dies``); before its process ends (which would end
    rank 0's all-reduce with an error), it waits until the record is there, and says in
    ``seen_file`` that it saw it: rank 0 had to write it while blocked in that collective."""
    import time
    from pathlib import Path

    from cnnbench.engine.multidevice.worker import run_under_torchrun

    os.environ["CNNBENCH_TEST_DEATH"] = "raise"
    config = RunConfig.from_mapping(config_fields)
    try:
        run_under_torchrun(config, emit=None)
    except ValueError:
        deadline = time.monotonic() + 60  # well within --timeout, which would end rank 0's wait
        while time.monotonic() < deadline:
            if any(f.read_text().endswith("\n") for f in Path(config.results_dir).glob("*.jsonl")):
                Path(seen_file).write_text("seen")
                break
            time.sleep(0.05)
        raise
