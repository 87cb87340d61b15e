"""``--threads-per-worker N`` (issue 20 item 3): on CPU every worker of every device count runs N
torch threads, so a scaling series compares N workers x the same threads; without it the
cores are divided among the workers (a 1-device run has all of them), as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cnnbench.config import ConfigError, RunConfig

TINY = ["run", "--model", "trivial", "--device", "cpu", "--batch-size", "2", "--num-batches", "3",
        "--num-warmup-batches", "1", "--machine-label", "box", "--oversubscribe"]
FIXED_HEADER = "Scaling on cpu: 1, 2 devices; threads: 1 per worker (fixed)"
DEFAULT_HEADER = "Scaling on cpu: 1, 2 devices; threads: the host's cores divided among workers (default)"


def _cnnbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cnnbench", *args], capture_output=True, text=True, timeout=600)


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def _cores() -> int:
    """The cores this process (and the runs it starts) may use: an earlier test may have pinned it."""
    return len(os.sched_getaffinity(0))


def _threads_by_devices(folder: Path) -> dict[int, list[int]]:
    recs = _records(folder)
    assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    return {r["config"]["num_devices"]: r["metrics"]["per_device_torch_threads"] for r in recs}


def test_scaling_with_fixed_threads_runs_every_worker_at_that_count(tmp_path):
    """1 thread, unlike the default's 1-device point (all the cores); 2 where this process was
    pinned to one core earlier (the default would give 1 everywhere there)."""
    fixed = 1 if _cores() > 1 else 2
    proc = _cnnbench(*TINY, "--num-devices", "2", "--scaling", "--threads-per-worker", str(fixed),
                     "--results-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == FIXED_HEADER.replace("1 per worker", f"{fixed} per worker")
    assert f"Threads:     {fixed} per worker (--threads-per-worker; 1 worker on" in proc.stdout
    assert f"Threads:     {fixed} per worker (--threads-per-worker; 2 workers on" in proc.stdout
    assert _threads_by_devices(tmp_path) == {1: [fixed], 2: [fixed, fixed]}
    recs = _records(tmp_path)
    assert {r["config"]["threads_per_worker"] for r in recs} == {fixed}
    assert {r["environment"]["torch_num_threads"] for r in recs} == {fixed}


def test_scaling_by_default_divides_the_cores_among_the_workers(tmp_path):
    cores = _cores()
    proc = _cnnbench(*TINY, "--num-devices", "2", "--scaling", "--results-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == DEFAULT_HEADER
    assert _threads_by_devices(tmp_path) == {1: [cores], 2: [max(1, cores // 2)] * 2}
    assert {r["config"]["threads_per_worker"] for r in _records(tmp_path)} == {None}


def test_a_one_device_run_in_this_process_has_the_fixed_count_then_gives_it_back():
    """A count that differs from the default (all the cores) whatever this process may use."""
    import torch

    import cnnbench

    before = torch.get_num_threads()
    fixed = _cores() + 1  # more threads than cores: --oversubscribe, and the record says so
    record = cnnbench.run(model="trivial", device="cpu", batch_size=2, num_batches=2, num_warmup_batches=1,
                          threads_per_worker=fixed, oversubscribe=True)
    assert record.status == "ok", record.error
    assert record.metrics["per_device_torch_threads"] == [fixed]
    assert any(w.startswith(f"oversubscribed: 1 CPU worker x {fixed} threads") for w in record.metrics["warnings"])
    assert torch.get_num_threads() == before


def test_refused_on_cuda_in_one_line_before_any_work(tmp_path):
    proc = _cnnbench("run", "--model", "trivial", "--device", "cuda", "--threads-per-worker", "1",
                     "--results-dir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("cnnbench run: error: --threads-per-worker: sets each CPU worker's torch threads; "
                                   "it has no effect on a cuda run (see cnnbench run --help)")
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_refused_where_auto_finds_cuda(monkeypatch):
    """``--device auto`` is filled in before the checks that need the machine, which check again."""
    from cnnbench.engine import resolve as resolve_module

    monkeypatch.setattr(resolve_module, "resolve_device_kind", lambda kind: "cuda")
    with pytest.raises(ConfigError, match="no effect on a cuda run") as info:
        resolve_module.resolve(RunConfig(model="trivial", threads_per_worker=2))
    assert info.value.field == "threads_per_worker"


@pytest.mark.parametrize(("value", "needle"), [(0, "must be >= 1 (got 0)"), (65537, "must be <= 65536"),
                                               (1.5, "expected int"), (True, "expected a number")])
def test_bad_values_are_refused(value, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")) as info:
        RunConfig(model="trivial", device="cpu", threads_per_worker=value)
    assert info.value.field == "threads_per_worker"


def test_bad_value_on_the_command_line_is_one_line_and_exit_2(tmp_path, capsys):
    from cnnbench.cli import main

    code = main([*TINY, "--threads-per-worker", "0", "--results-dir", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err.strip().startswith("cnnbench run: error: --threads-per-worker: must be >= 1 (got 0)")


def test_more_threads_than_cores_needs_oversubscribe():
    from cnnbench.engine.resolve import resolve

    cores = _cores()
    with pytest.raises(ConfigError, match=f"1 CPU worker x {cores + 1} threads need {cores + 1} cores") as info:
        resolve(RunConfig(model="trivial", device="cpu", threads_per_worker=cores + 1))
    assert info.value.field == "threads_per_worker"
    resolve(RunConfig(model="trivial", device="cpu", threads_per_worker=cores))  # as many as the cores: fine


def test_scaling_header_names_the_rule_on_cpu_only():
    from cnnbench.cli.run_cmd import _scaling_header

    assert _scaling_header(RunConfig(model="trivial", device="cpu", threads_per_worker=1), [1, 2]) == FIXED_HEADER
    assert _scaling_header(RunConfig(model="trivial", device="cpu"), [1, 2]) == DEFAULT_HEADER
    assert _scaling_header(RunConfig(model="trivial", device="cuda"), [1, 2, 4]) == "Scaling on cuda: 1, 2, 4 devices"


def test_names_mention_it_only_when_set_and_the_report_notes_the_rule():
    from cnnbench.analysis.points import build_points
    from cnnbench.report.tables.scaling import scaling_groups
    from tests.report_fixtures import record

    recs = [record(ips=100.0 * n, num_devices=n, device="cpu", threads_per_worker=1) for n in (1, 2)]
    recs += [record(ips=100.0 * n, num_devices=n, device="cpu") for n in (1, 2)]
    groups = {g.name: g for g in scaling_groups(build_points(recs), 0.03)}
    assert set(groups) == {"syn-replicated-Ncpus", "syn-replicated-Ncpus (threads_per_worker=1)"}
    fixed, default = groups["syn-replicated-Ncpus (threads_per_worker=1)"], groups["syn-replicated-Ncpus"]
    assert "CPU threads: 1 per worker (fixed)." in fixed.summary.notes
    assert "CPU threads: 1 per worker (fixed)." in fixed.table.notes
    assert "CPU threads: the host's cores divided among workers (default)." in default.summary.notes
    gpu = scaling_groups(build_points([record(ips=100.0 * n, num_devices=n) for n in (1, 2)]), 0.03)
    assert not any(n.startswith("CPU threads") for n in gpu[0].summary.notes)
