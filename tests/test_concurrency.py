"""Concurrency: two imports of the same logs into one store add each run once (the
"already there?" look happens under the store's lock, with the write), and two sweeps of
one suite into one store never both run a case (each claims a case before running it and
then looks at what the store gained)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from pathlib import Path

import cnnbench
from cnnbench.cli import main
from cnnbench.results.importers import ImportOptions, get_importer
from cnnbench.results.record import Record
from cnnbench.results.store import append_records, read_records
from cnnbench.sweep.progress import summary_lines
from cnnbench.sweep.runner import SweepOptions, run_suite
from cnnbench.sweep.suite import parse_suite
from tests.sweep_fakes import fake_worker, finishing_worker, probe, slow_worker

REPO = Path(__file__).resolve().parents[1]
SRC = Path(cnnbench.__file__).resolve().parents[1]  # the code under test, wherever it is
LOGS = REPO / "tests" / "fixtures" / "tf_cnn_benchmarks_logs"\
    / "LambdaCloud-RTX_A6000.logs" / "syn-replicated-fp32-1gpus"


def test_import_looks_for_existing_records_under_the_stores_lock(tmp_path, capsys):
    from cnnbench.results.store import store_lock

    results = tmp_path / "r"
    same_runs = get_importer("tf-cnn-benchmarks").run([LOGS], ImportOptions()).records
    codes: list[int] = []
    with store_lock(results):  # another import, between its look and its write
        worker = threading.Thread(target=lambda: codes.append(
            main(["import", "tf-cnn-benchmarks", str(LOGS), "--results-dir", str(results)])))
        worker.start()
        worker.join(timeout=5)
        assert worker.is_alive(), "the import did not wait for the store's lock"
        append_records(results, same_runs)
    worker.join(timeout=60)
    assert codes == [0]
    assert "imported 0 records (none new) into" in capsys.readouterr().out
    records, problems = read_records(results)
    assert problems == [] and len(records) == 6


def test_simultaneous_imports_of_the_same_logs_add_each_run_once(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for attempt in range(3):
        results = tmp_path / f"r{attempt}"
        cmd = [sys.executable, "-m", "cnnbench", "import", "tf-cnn-benchmarks", str(LOGS),
               "--results-dir", str(results)]
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
        for p in procs:
            assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
            for stream in (p.stdout, p.stderr):
                if stream:
                    stream.close()
        records, problems = read_records(results)
        assert problems == [] and len(records) == 6, f"attempt {attempt}: {len(records)} records"


def suite_of(batches):
    return parse_suite({"name": "c", "base": {"model": "trivial", "device": "cpu"}, "matrix": {"batch_size": batches}})


def test_two_sweeps_of_one_suite_run_each_case_once(tmp_path):
    results = tmp_path / "r"
    outcomes = []

    def sweep() -> None:
        outcomes.append(run_suite(suite_of([2, 6, 7, 8, 9, 10]), SweepOptions(results_dir=results),
                                  worker=slow_worker, probe=probe))

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(outcomes) == 2
    records, problems = read_records(results)
    assert problems == []
    assert sorted(r["config"]["batch_size"] for r in records) == [2, 6, 7, 8, 9, 10]  # each case once
    assert sum(len(o.results) for o in outcomes) == 6
    assert not (results / ".claims").exists() or not list((results / ".claims").iterdir())


def test_a_case_another_sweep_holds_is_left_to_it(tmp_path):
    from cnnbench.sweep.claims import CaseClaims

    suite = suite_of([2, 8])
    held = suite.cases[0]
    results = tmp_path / "r"
    with CaseClaims(results).try_claim(f"{held.key}-testbox") as claim:
        assert claim is not None
        result = run_suite(suite, SweepOptions(results_dir=results), worker=fake_worker, probe=probe)
    assert [r.case.config.batch_size for r in result.results] == [8]
    assert [c.config.batch_size for c in result.elsewhere] == [2]
    assert "1 case left to another sweep" in "\n".join(summary_lines(result, str(results)))
    records, _ = read_records(results)
    assert [r["config"]["batch_size"] for r in records] == [8]


def test_a_case_recorded_meanwhile_by_another_sweep_is_not_run_again(tmp_path):
    suite = suite_of([2, 8])
    results = tmp_path / "r"
    later = suite.cases[1]
    done_elsewhere = Record(config=later.config.recorded(), environment={"machine": "testbox", "hostname": "h"},
                            metrics={"total_images_per_sec": 8.0},
                            extra={"suite_name": "c", "case_key": later.key, "repeat": 1}).to_dict()
    worker = functools.partial(finishing_worker, str(results), done_elsewhere)
    result = run_suite(suite, SweepOptions(results_dir=results), worker=worker, probe=probe)
    assert [r.case.config.batch_size for r in result.results] == [2]
    assert [c.config.batch_size for c in result.skipped] == [8]
    records, _ = read_records(results)
    assert sorted(r["config"]["batch_size"] for r in records) == [2, 8]  # not two of batch 8


def test_a_claims_folder_tidied_away_as_it_is_opened_is_made_again(tmp_path, monkeypatch):
    """Another sweep removes the empty ``.claims/`` (its tidy) between this one's making it and
    opening it: the claim is tried again, not a crash of the sweep."""
    from cnnbench.sweep import claims as claims_module
    from cnnbench.sweep.claims import CaseClaims

    results = tmp_path / "r"
    real = claims_module.files.open_folder
    calls = []

    def tidied_first(root, *names, make=False):
        calls.append(names)
        if len(calls) == 1:
            real(root, *names, make=True)
            os.close(real(root, *names))
            (root / names[0]).rmdir()  # the other sweep's tidy
            return real(root, *names)  # the open that finds it gone
        return real(root, *names, make=make)

    monkeypatch.setattr(claims_module.files, "open_folder", tidied_first)
    with CaseClaims(results).try_claim("case-testbox") as claim:
        assert claim is not None and len(calls) == 2
