"""`cnnbench comm` true on many GPUs (issue 43, items 3 and 4), checked on CPU.

- A failure on one rank only (its allocation fails) ends the collective on every rank at once,
  with an error record naming that rank: every rank issues the same collectives, so none waits
  in one the failed rank never enters (which over NCCL hangs until ``--timeout``).
- Timing is nccl-tests': one sample is a batch of ``iters`` back-to-back calls, with no barrier
  or synchronize between them, divided by ``iters``; the slowest rank's sample is kept.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
import torch

from cnnbench.engine.comm import timing
from cnnbench.engine.comm.measure import failure_text
from cnnbench.engine.comm.spec import BATCHES

# --- item 4: a sample is a batch of back-to-back calls ------------------------------------------------------


class _FakeTimer:
    """Stands for CUDA events or the host clock: logs start/stop; each batch took ``seconds``."""

    name = "fake timer"

    def __init__(self, events: list[str], seconds: list[float]) -> None:
        self.events, self.seconds = events, list(seconds)

    def start(self) -> None:
        self.events.append("start")

    def stop(self) -> float:
        self.events.append("stop")
        return self.seconds.pop(0)


def _spy_on_waits(monkeypatch, events: list[str], other_rank: list[float] | None = None) -> list[list[float]]:
    """barrier / synchronize / the slowest-rank all-reduce of timing, logged instead of run."""
    reduced: list[list[float]] = []
    monkeypatch.setattr(timing, "barrier", lambda device: events.append("barrier"))
    monkeypatch.setattr(timing, "synchronize", lambda device: events.append("synchronize"))

    def slowest(values: list[float], device: torch.device) -> list[float]:
        reduced.append(list(values))
        return [max(a, b) for a, b in zip(values, other_rank or values, strict=True)]

    monkeypatch.setattr(timing, "max_over_workers", slowest)
    return reduced


def test_one_timing_sample_is_iters_back_to_back_calls_divided_by_iters(monkeypatch):
    events: list[str] = []
    reduced = _spy_on_waits(monkeypatch, events)
    timer = _FakeTimer(events, [8e-3, 4e-3, 6e-3])
    result = timing.time_op(lambda: events.append("op"), 2, 4, torch.device("cpu"), timer=timer, batches=3)
    batch = ["barrier", "synchronize", "start", "op", "op", "op", "op", "stop"]
    assert events == ["op", "op", "synchronize", *batch, *batch, *batch]  # warm-up, then 3 batches
    assert reduced == [[2e-3, 1e-3, 1.5e-3]]  # per call: each batch's span / iters, all in one all-reduce
    assert result.samples == [2e-3, 1e-3, 1.5e-3] and result.median == 1.5e-3
    assert result.timer == "fake timer"


def test_each_sample_kept_is_the_slowest_ranks(monkeypatch):
    events: list[str] = []
    _spy_on_waits(monkeypatch, events, other_rank=[3e-3, 0.5e-3])
    timer = _FakeTimer(events, [2e-3, 2e-3])
    result = timing.time_op(lambda: None, 0, 2, torch.device("cpu"), timer=timer, batches=2)
    assert result.samples == [3e-3, 1e-3]


def test_the_default_is_batches_timed_on_the_host_clock_on_cpu_and_cuda_events_on_a_gpu(monkeypatch):
    events: list[str] = []
    _spy_on_waits(monkeypatch, events)
    calls = []
    result = timing.time_op(lambda: calls.append(1), 1, 3, torch.device("cpu"))
    assert len(calls) == 1 + 3 * BATCHES and len(result.samples) == BATCHES and result.timer == "host clock"
    assert isinstance(timing.batch_timer(torch.device("cpu")), timing.HostTimer)
    gpu = timing.batch_timer(torch.device("cuda", 0))  # events are made lazily: no GPU needed to build it
    assert isinstance(gpu, timing.CudaEventTimer) and gpu.name == "cuda events"


def test_the_host_clock_waits_for_the_device_before_it_reads_the_clock(monkeypatch):
    events: list[str] = []
    monkeypatch.setattr(timing, "synchronize", lambda device: events.append("synchronize"))
    ticks = iter([10.0, 10.5])

    def clock() -> float:
        events.append("clock")
        return next(ticks)

    host = timing.HostTimer(torch.device("cuda", 0), clock)
    host.start()
    assert host.stop() == pytest.approx(0.5)
    assert events == ["clock", "synchronize", "clock"]


# --- item 3: one rank's failure ends the collective on every rank, naming it ----------------------------------


def test_the_failure_text_names_the_failed_ranks_and_the_first_reason():
    assert failure_text([1], ["", "CUDA out of memory"], 2) == "on rank 1: CUDA out of memory"
    every = failure_text([0, 1], ["Invalid scalar type", "Invalid scalar type"], 2)
    assert every == "on every rank: Invalid scalar type"
    assert failure_text([1, 3], ["", "", "", "out of memory"], 4) == "on ranks 1, 3: out of memory"
    assert failure_text([0], [""], 1) == "on rank 0"


_SPIED = ("all_reduce", "broadcast", "reduce", "barrier", "gather_object", "all_gather_into_tensor")


def _rank(rank: int, store: str, out: str, fail_rank: int, fail_from: int) -> None:
    """One Gloo rank of ``measure_all``; rank ``fail_rank`` cannot allocate from ``fail_from`` bytes.
    Logs every torch.distributed call it makes (name, tensor size and dtype) to ``out``."""
    import torch.distributed as dist

    from cnnbench.distributed.world import World
    from cnnbench.engine.comm import measure
    from cnnbench.engine.comm.spec import CommConfig

    calls: list[list[object]] = []
    for name in _SPIED:
        real = getattr(dist, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
            calls.append([_name] if tensor is None else [_name, tensor.numel(), str(tensor.dtype)])
            return _real(*args, **kwargs)

        setattr(dist, name, spy)
    real_make = measure.make_op

    def make_op(collective, size, *args):
        if rank == fail_rank and size >= fail_from:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {size} bytes (injected)")
        return real_make(collective, size, *args)

    measure.make_op = make_op
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    try:
        config = CommConfig(collectives=("all_reduce", "broadcast"), min_bytes=1024, max_bytes=4096, warmup=0,
                            iters=2, timeout=60)
        setting = measure.Setting(config, World(rank=rank, world_size=2, process_group=True), torch.device("cpu"),
                                  "gloo", {}, [])
        records = measure.measure_all(setting, None, None)
    finally:
        dist.destroy_process_group()
    Path(out, f"{rank}.json").write_text(json.dumps({"records": records, "calls": calls}))


def test_an_allocation_failing_on_one_rank_is_an_error_record_naming_it_and_nothing_waits(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(str(tmp_path / "store"), str(tmp_path), 1, 4096), nprocs=2, join=True)
    main, other = (json.loads((tmp_path / f"{r}.json").read_text()) for r in (0, 1))
    # every rank issued the same collectives in the same order, the failed one included: no rank
    # ever waited in a collective another did not enter (over NCCL: a hang until --timeout)
    assert main["calls"] == other["calls"]
    records = main["records"]
    assert [(r["config"]["collective"], r["config"]["bytes"], r["status"]) for r in records] == [
        ("all_reduce", 1024, "ok"), ("all_reduce", 2048, "ok"), ("all_reduce", 4096, "error"),
        ("broadcast", 1024, "ok"), ("broadcast", 2048, "ok"), ("broadcast", 4096, "error")]
    for failed in (records[2], records[5]):
        assert failed["error"].startswith(f"{failed['config']['collective']} did not run (gloo on cpu, dtype "
                                          "float32) on rank 1: OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                          "4096 bytes (injected)")
        assert "timed out" not in failed["error"].lower() and "timeout" not in failed["error"].lower()
    assert other["records"] == []  # rank 0 writes
    ok = records[0]["metrics"]
    assert len(ok["time_s_samples"]) == BATCHES and ok["timer"] == "host clock"


# --- make gpu-check: a comm step on the GPUs it finds --------------------------------------------------------


def test_gpu_check_runs_comm_over_nccl_on_one_gpu_under_torchrun_and_on_several_with_its_launcher(tmp_path):
    from tests.test_gpu_acceptance import ga

    one = ga.comm_command(ga.Settings(python="/venv/bin/python", cnnbench="/venv/bin/cnnbench"), tmp_path, 1)
    assert one[:7] == ["/venv/bin/python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                       "-m"]
    assert one[7:9] == ["cnnbench", "comm"] and "--num-devices" not in one  # a world of one
    many = ga.comm_command(ga.Settings(python="/venv/bin/python", cnnbench="/venv/bin/cnnbench"), tmp_path, 4)
    assert many[:2] == ["/venv/bin/cnnbench", "comm"] and many[many.index("--num-devices") + 1] == "4"
    for cmd in (one, many):
        flags = {cmd[i]: cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i].startswith("--")}
        assert (flags["--device"], flags["--backend"], flags["--collective"]) == ("cuda", "nccl", "all")
        assert flags["--results-dir"] == str(tmp_path)


def test_gpu_check_comm_step_has_a_budget_and_a_summary_and_fails_a_host_clock_record(tmp_path):
    from tests.test_gpu_acceptance import FakeGpuMachine, _accept, ga

    machine = FakeGpuMachine()
    budgets: list[float] = []

    def runner(cmd, timeout_s):
        if "comm" in cmd:
            budgets.append(timeout_s)
        return machine(cmd, timeout_s)

    skip = ",".join(s for s in ga.SECTIONS if s != "comm")  # the comm step alone
    _, summary, _ = _accept(tmp_path / "a", runner, "--skip", skip)
    assert budgets == [ga.COMM_TIMEOUT_S] and ga.COMM_TIMEOUT_S <= 300
    assert "## cnnbench comm, 1 GPU" in summary and "timed by cuda events" in summary
    assert "| all_reduce | 1024 |" in summary and f"| all_reduce | {1 << 30} |" in summary
    assert "None: every step exited 0" in summary
    machine.comm_timer = "host clock"  # a GPU run timed by the host clock: the step failed
    _, summary, _ = _accept(tmp_path / "b", machine, "--skip", skip)
    assert "### cnnbench comm (NCCL) (exit 0; timed by host clock, not cuda events)" in summary


def test_gpu_check_comm_step_can_be_skipped_and_without_a_gpu_nothing_runs(tmp_path):
    from tests.test_gpu_acceptance import FakeGpuMachine, _accept, ga

    machine = FakeGpuMachine()
    others = [s for s in ga.SECTIONS if s != "comm"]
    _accept(tmp_path, machine, "--skip", ",".join([*others, "comm"]))
    assert not any("comm" in c for c in machine.commands)
    said: list[str] = []
    assert ga.main(["--summary", str(tmp_path / "s.md")], gpus=lambda: 0, runner=machine, say=said.append) == 0
    assert said == [ga.NO_GPU_LINE]


def test_compare_never_pairs_comm_records_timed_two_ways():
    """A record of one call a sample (before batches of back-to-back calls: no ``metrics.timer``)
    carries launch and sync overhead in every sample: against a batched one it would read as a
    speed-up at small sizes that is only the change of method."""
    from cnnbench.compare.bandwidth import OLD_TIMING, compare_bandwidth, timing_method
    from tests.test_comm import comm

    old, new = comm(busbw=1.0), comm(busbw=2.0)
    new["metrics"]["timer"] = "host clock"
    assert timing_method(old) == OLD_TIMING and timing_method(new) == "host clock"
    assert compare_bandwidth([old], [new], noise=0.03, alpha=0.05) == []
    again = comm(busbw=2.0)
    again["metrics"]["timer"] = "host clock"
    assert len(compare_bandwidth([new], [again], noise=0.03, alpha=0.05)) == 1
