"""Issue 43, many devices true on first contact: an epoch run's untimed first step (item 2),
PowerSGD's start (item 10), and rank 0's failure watch in O(1) store round trips (item 11).

Each test fails on the code before its fix (see the closing note of issue 43).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.distributed import HashStore
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.data.generate import make_data_set
from cnnbench.distributed.replicated import Replicated, powersgd_start_iter
from cnnbench.distributed.strategy import StrategyContext
from cnnbench.distributed.world import World
from cnnbench.engine import benchmark, epochs, run_in_process
from cnnbench.engine.hooks import HookSet
from cnnbench.engine.multidevice import watchdog
from cnnbench.engine.multidevice.watchdog import ROUND_TRIPS_PER_BEAT, SILENT_S, FailureWatch

# --------------------------------------------------------------------------- item 2: epochs' first step


@pytest.fixture(scope="module")
def small_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("truth") / "set"
    make_data_set("imagefolder", root, num_classes=3, images_per_class=8, val_images_per_class=2,
                  image_size=(40, 30))
    return root


def test_an_epoch_runs_first_step_is_untimed_and_inside_the_uneven_phase(small_set, monkeypatch):
    """Before epoch 1's timed window (the measurement hooks, the timed loop) one step runs, inside
    the phase warm-up has (with several workers: the raised timeout, then the store's wait); its
    time is the record's first step; epoch 1 still trains and times every one of its batches."""
    events: list[str] = []

    @contextlib.contextmanager
    def phase(world: World, name: str, timeout_s: float) -> Any:
        events.append(f"enter {name}")
        yield
        events.append("exit")

    real_warm_up, real_loop, real_start = epochs.warm_up, epochs.timed_loop, HookSet.start
    untimed: list[float | None] = []

    moved: list[bool] = []
    state_left: list[int] = []

    def warm_up(prepared: Any, *args: Any, **kwargs: Any) -> float | None:
        events.append("untimed step")
        before = [p.detach().clone() for p in prepared.model.parameters()]
        untimed.append(real_warm_up(prepared, *args, **kwargs))
        moved.append(any(not torch.equal(a, p) for a, p in zip(before, prepared.model.parameters(), strict=True)))
        return untimed[-1]

    def timed_loop(prepared: Any, *args: Any, **kwargs: Any) -> Any:
        events.append("timed loop")
        state_left.append(len(prepared.optimizer.state))
        return real_loop(prepared, *args, **kwargs)

    def start(self: HookSet) -> None:
        events.append("hooks start")
        real_start(self)

    monkeypatch.setattr(benchmark, "uneven_phase", phase)
    monkeypatch.setattr(epochs, "warm_up", warm_up)
    monkeypatch.setattr(epochs, "timed_loop", timed_loop)
    monkeypatch.setattr(HookSet, "start", start)
    record = run_in_process(RunConfig(model="trivial", device="cpu", data_dir=str(small_set), num_epochs=2,
                                      batch_size=4, num_workers=0, display_every=1000, optimizer="momentum",
                                      num_learning_rate_warmup_epochs=1))
    assert record.status == "ok", record.error
    assert events == ["enter the first step", "untimed step", "exit", "hooks start", "timed loop", "timed loop"]
    # the untimed step trains nothing (not at the base rate before the warm-up schedule exists),
    # and leaves no momentum behind: epoch 1 trains as it would without it
    assert moved == [False] and state_left[0] == 0
    assert record.metrics["first_step_time_s"] == untimed[0] is not None
    # 24 training images, 6 batches: epoch 1 trains and times all 6, its first batch included
    assert [round(e["images_per_sec"] * e["time_s"]) for e in record.metrics["epochs"]] == [24, 24]


@pytest.mark.slow
def test_a_slow_compile_in_an_epoch_runs_first_step_trips_no_timeout(small_set, tmp_path):
    """Two Gloo workers train an epoch with --compile; rank 1 compiles for twice --timeout in
    its first step (rank 0 waits for it): the uneven phase allows that, so the run ends ok.
    Before the fix that step was epoch 1's first timed one, and rank 0's all-reduce timed out."""
    from cnnbench.engine.multidevice.launch import launch_workers
    from tests import distributed_workers as dw

    config = RunConfig(model="test_nobn", device="cpu", data_dir=str(small_set), num_epochs=1, batch_size=4,
                       image_size=16, num_devices=2, oversubscribe=True, num_workers=0, compile=True,
                       timeout=3.0, results_dir=str(tmp_path))
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    record = launch_workers(dw.uneven_run, (fields, 6.0), nprocs=2, timeout_s=120)[0]
    assert record["status"] == "ok", record["error"]
    assert record["metrics"]["first_step_time_s"] >= 6.0  # rank 0 waited for rank 1's compilation there
    assert [round(e["images_per_sec"] * e["time_s"]) for e in record["metrics"]["epochs"]] == [24]


# --------------------------------------------------------------------------- item 10: PowerSGD


@pytest.mark.parametrize("warmup", [3, 5])
def test_powersgd_compresses_from_the_last_warmup_step(warmup):
    """Torch's own PowerSGD state, stepped as DDP steps it: the first compressed step (its
    one-time set-up) is the last warm-up step, and every timed step is compressed."""
    config = RunConfig(model="trivial", device="cpu", variable_update="replicated",
                       gradient_compression="powersgd", num_warmup_batches=warmup, num_batches=4)
    state, hook = Replicated(StrategyContext(config, World.single(), torch.device("cpu")))._comm_hook()
    assert hook is powerSGD_hook.powerSGD_hook and isinstance(state, powerSGD_hook.PowerSGDState)

    class LastBucket:
        def is_last(self) -> bool:
            return True

    compressed = []
    for _ in range(warmup + 4):  # as the hook does: vanilla all-reduce while iter < start, then PowerSGD
        compressed.append(state.iter >= state.start_powerSGD_iter)
        state.maybe_increase_iter(LastBucket())
    assert compressed.index(True) == warmup - 1  # steps count from 0: the last warm-up step
    assert all(compressed[warmup:])


@pytest.mark.parametrize("warmup", [0, 1, 2])
def test_powersgd_with_fewer_than_3_warmup_steps_is_refused_in_one_line(warmup, tmp_path, capsys):
    with pytest.raises(ConfigError) as info:
        RunConfig(variable_update="replicated", gradient_compression="powersgd", num_warmup_batches=warmup)
    assert str(info.value).startswith("--num-warmup-batches: must be >= 3 with --gradient-compression powersgd")
    with pytest.raises(ValueError, match="3 or more warm-up steps"):
        powersgd_start_iter(warmup)
    code = main(["run", "--model", "trivial", "--device", "cpu", "--gradient-compression", "powersgd",
                 "--num-warmup-batches", str(warmup), "--results-dir", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--num-warmup-batches: must be >= 3" in err, err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.jsonl"))


def test_powersgd_in_an_epoch_run_is_refused_for_want_of_warm_up():
    with pytest.raises(ConfigError, match="^--gradient-compression: powersgd needs 3 or more warm-up steps, "
                                          "which a --num-epochs run does not have$"):
        RunConfig(variable_update="replicated", gradient_compression="powersgd", num_epochs=2, data_dir="x")


# --------------------------------------------------------------------------- item 11: broadcast_buffers


@pytest.mark.parametrize(("changes", "passed", "recorded"), [
    ({}, True, True),  # DDP's default, now said in the record
    ({"broadcast_buffers": False}, False, False),
])
def test_ddps_broadcast_buffers_is_the_records_and_ddps(changes, passed, recorded, monkeypatch):
    from cnnbench.distributed import replicated
    from cnnbench.engine.resolve import resolve

    config = RunConfig(model="trivial", device="cpu", variable_update="replicated", **changes)
    run = resolve(config, World.single())
    assert run.config.recorded()["broadcast_buffers"] is recorded
    seen: dict[str, Any] = {}

    class DDP:  # what the strategy gives DDP, and the hook it then registers
        def __init__(self, model: torch.nn.Module, **kwargs: Any) -> None:
            seen.update(kwargs)

        def register_comm_hook(self, state: Any, hook: Any) -> None:
            pass

    monkeypatch.setattr(replicated, "DistributedDataParallel", DDP)
    Replicated(StrategyContext(run.config, World.single(), torch.device("cpu"))).wrap(torch.nn.Linear(2, 2))
    assert seen[replicated.BUFFERS_KWARG] is passed


def test_ddp_is_given_its_buffers_switch_by_the_name_this_torch_does_not_warn_about(monkeypatch):
    """torch 2.13 renamed ``broadcast_buffers`` (a FutureWarning on every use, which a run's one-line
    stderr then carried) to ``forward_sync_buffers``."""
    import inspect
    import warnings

    from torch.nn.parallel import DistributedDataParallel

    from cnnbench.distributed import replicated

    assert replicated.BUFFERS_KWARG in inspect.signature(DistributedDataParallel).parameters
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters:
        assert replicated.BUFFERS_KWARG == "forward_sync_buffers"
    from cnnbench.engine.resolve import resolve

    config = resolve(RunConfig(model="trivial", device="cpu", variable_update="replicated", broadcast_buffers=False),
                     World.single()).config
    torch.distributed.init_process_group("gloo", store=HashStore(), rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the real DDP, no warning
            ddp = Replicated(StrategyContext(config, World.single(), torch.device("cpu"))).wrap(torch.nn.Linear(2, 2))
    finally:
        torch.distributed.destroy_process_group()
    assert ddp.forward_sync_buffers is False


@pytest.mark.parametrize("changes", [{"variable_update": "parameter_server"}, {"variable_update": "independent"},
                                     {"variable_update": "fsdp"}, {"forward_only": True}])
def test_broadcast_buffers_is_null_where_ddp_is_not_used_and_off_is_refused_there(changes):
    from cnnbench.engine.resolve import resolve

    config = RunConfig(model="trivial", device="cpu", **changes)
    assert resolve(config, World.single()).config.recorded()["broadcast_buffers"] is None
    with pytest.raises(ConfigError, match="^--broadcast-buffers: "):
        RunConfig(model="trivial", device="cpu", broadcast_buffers=False, **changes)


def test_no_broadcast_buffers_is_a_flag():
    from cnnbench.cli import build_parser
    from cnnbench.config.cli_args import config_from_args

    args = build_parser().parse_args(["run", "--model", "trivial", "--no-broadcast-buffers"])
    assert config_from_args(args).broadcast_buffers is False


# --------------------------------------------------------------------------- item 11: the failure watch


class CountingStore:
    """A real torch store (HashStore) that counts the round trips made through it."""

    def __init__(self) -> None:
        self.store = HashStore()
        self.calls = 0

    def clone(self) -> CountingStore:
        return self

    def set_timeout(self, timeout: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return method(*args, **kwargs)

        return counted


class Beats:
    """``select`` for the watch thread: each call is one beat's wait; after ``beats``, it stops."""

    def __init__(self, watch: FailureWatch, beats: int) -> None:
        self.watch, self.beats, self.waits = watch, beats, 0

    def select(self, *args: Any) -> tuple[list[int], list[int], list[int]]:
        self.waits += 1
        if self.waits >= self.beats:
            self.watch._stop.set()
        return [], [], []


def _watch(rank: int, world_size: int, store: CountingStore, recorded: list[tuple[int, str]] | None = None,
           ) -> FailureWatch:
    return FailureWatch(World(rank=rank, world_size=world_size, process_group=True),
                        (lambda r, cause: recorded.append((r, cause))) if recorded is not None else None,
                        store=lambda: store, exit_on_sigterm=False)  # type: ignore[arg-type, return-value]


@pytest.mark.parametrize("world_size", [2, 512])
def test_rank_0s_failure_watch_makes_the_same_few_round_trips_whatever_the_world_size(world_size, monkeypatch):
    store = CountingStore()
    for rank in range(1, world_size):  # every other rank beats
        store.store.set(f"cnnbench/watch/beat/{rank}", "1")
    watch = _watch(0, world_size, store, [])
    beats = Beats(watch, 10)
    monkeypatch.setattr(watchdog, "select", beats)
    watch._watch()  # the watch thread's loop, in this thread
    assert beats.waits == 10
    assert store.calls == 10 * ROUND_TRIPS_PER_BEAT  # its beat, and one look at the failure key


def test_the_first_failure_published_is_the_one_recorded(monkeypatch):
    """Rank 7 fails, then rank 3 (its error a consequence of rank 7's): rank 0 records rank 7,
    in one beat and one look at the store's failure key."""
    store, recorded = CountingStore(), []
    _watch(7, 512, store).publish("ValueError: boom on rank 7")
    _watch(3, 512, store).publish("RuntimeError: connection closed by peer")
    watch = _watch(0, 512, store, recorded)
    monkeypatch.setattr(watchdog, "select", Beats(watch, 1))
    store.calls = 0
    watch._watch()
    assert recorded == [(7, "ValueError: boom on rank 7")]
    assert store.calls == ROUND_TRIPS_PER_BEAT + 1  # its beat, the look, and reading the failure once
    assert watch.failed_peer() == (7, "ValueError: boom on rank 7")
    assert _watch(7, 512, store).failed_peer() is None  # its own failure is no peer's


def test_after_sigterm_a_rank_whose_beat_stopped_unstopped_is_named(monkeypatch):
    """After SIGTERM, rank 0 reads the beats, waits SILENT_S (a fake clock), reads them again:
    rank 2's beat stood still and nobody stopped it; rank 1 kept beating, rank 3 was stopped."""
    store, recorded = CountingStore(), []
    for rank in (1, 2, 3):
        store.store.set(f"cnnbench/watch/beat/{rank}", "5")
    store.store.set("cnnbench/watch/stopped/3", "SIGTERM")

    class Clock:
        now = 100.0

        def monotonic(self) -> float:
            return self.now

        def sleep(self, seconds: float) -> None:
            self.now += seconds
            store.store.add("cnnbench/watch/beat/1", 1)  # rank 1 is alive

    clock = Clock()
    monkeypatch.setattr(watchdog, "time", clock)
    _watch(0, 4, store, recorded)._terminated()
    assert recorded == [(2, f"died without a word (no beat for {SILENT_S:g} s; killed, or crashed)")]
    assert SILENT_S <= clock.now - 100.0 <= SILENT_S + 2 * watchdog.BEAT_S


def test_a_recorded_exception_is_the_cause_though_a_signal_ended_the_worker_after_it():
    """A worker that raised and then died of SIGABRT as Gloo tore its group down (seen under load):
    the exception it recorded is the cause; a worker killed with nothing recorded was killed."""
    import signal
    from types import SimpleNamespace

    from cnnbench.engine.multidevice.launch import _cause

    def failure(code: int, data: dict, message: str) -> SimpleNamespace:
        return SimpleNamespace(exitcode=code, error_file_data=data, message=message,
                               signal_name=lambda: signal.Signals(-code).name)

    raised = failure(-6, {"message": {"message": "ValueError: boom on rank 1"}}, "ValueError: boom on rank 1")
    assert _cause(raised) == "ValueError: boom on rank 1"
    assert _cause(failure(-9, {"message": "<NONE>"}, "Signal 9 (SIGKILL) received by PID 7")) == "killed by SIGKILL"
