"""Sweeps: suite files, case isolation (raise, crash, time-out, out of memory), resuming,
interruption (in-process and of the real command), and the engine end to end."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.results.store import read_records
from cnnbench.sweep.progress import PlainReporter, RichReporter, summary_lines
from cnnbench.sweep.runner import SweepOptions, run_suite
from cnnbench.sweep.suite import SuiteError, load_suite, parse_suite
from tests import sweep_fakes
from tests.sweep_fakes import elsewhere_probe, fake_worker, gpu_probe, probe, stopping_worker

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- helpers


def suite_of(batches, **more):
    data = {"name": "t", "base": {"model": "trivial", "device": "cpu"}, "matrix": {"batch_size": batches}}
    data.update(more)
    return parse_suite(data)


def run(suite, results, **options):
    return run_suite(suite, SweepOptions(results_dir=results, grace_s=1.0, **options),
                     worker=fake_worker, probe=probe)


# --------------------------------------------------------------------------- suite files


def test_expansion_exclude_include_repeats_and_stable_keys():
    suite = parse_suite({
        "name": "s",
        "base": {"model": "trivial", "num_batches": 3},
        "matrix": {"batch_size": [8, 16], "data_format": ["NCHW", "NHWC"]},
        "exclude": [{"batch_size": 16, "data_format": "NHWC"}],
        "include": [{"model": "resnet18", "batch_size": 4}],
        "repeats": 2,
    })
    labels = [c.label for c in suite.cases]
    assert labels == [
        "batch_size=8 data_format=NCHW #1", "batch_size=8 data_format=NHWC #1",
        "batch_size=16 data_format=NCHW #1", "model=resnet18 batch_size=4 #1",
        "batch_size=8 data_format=NCHW #2", "batch_size=8 data_format=NHWC #2",
        "batch_size=16 data_format=NCHW #2", "model=resnet18 batch_size=4 #2",
    ]
    assert suite.cases[3].config.model == "resnet18" and suite.cases[3].config.num_batches == 3
    assert len({c.key for c in suite.cases}) == 8
    again = parse_suite({"name": "s", "base": {"num_batches": 3, "model": "trivial"},
                         "matrix": {"data_format": ["NCHW"], "batch_size": [8]}})
    assert again.cases[0].key == suite.cases[0].key  # same settings, same key, whatever the order


def test_excludes_leave_out_what_each_pattern_matches_and_a_long_suite_is_read_in_one_pass():
    """The cases left are those no pattern matches (``1`` is not ``1.0``), as a pattern tried
    on each case finds them; and a suite of many values and patterns is read in about the time its cases
    take to make (a value searched in a list and each pattern tried on each case took minutes)."""
    import itertools
    import random
    import threading

    rng = random.Random(7)
    for _ in range(200):
        rates = [v if rng.random() < 0.5 else float(v) for v in (0.5, 1, 2)]  # 1 or 1.0: one case, given once
        matrix = {"learning_rate": rng.sample(rates, rng.randint(1, 3)),
                  "batch_size": rng.sample([1, 2, 3, 4], rng.randint(1, 3)), "num_batches": [1, 2]}
        combos = [dict(zip(matrix, values, strict=True)) for values in itertools.product(*matrix.values())]
        exclude = []
        for _ in range(rng.randint(0, 3)):
            case = rng.choice(combos)
            exclude.append({k: case[k] for k in rng.sample(sorted(case), rng.randint(1, 3))})
        kept = [c for c in combos if not any(all(k in c and c[k] == v and type(c[k]) is type(v)
                                                 for k, v in p.items()) for p in exclude)]
        if not kept:
            continue
        suite = parse_suite({"name": "s", "base": {"model": "trivial"}, "matrix": matrix, "exclude": exclude})
        assert [c.settings for c in suite.cases] == [{"model": "trivial", **c} for c in kept]
    big = {"name": "big", "base": {"model": "trivial"},
           "matrix": {"seed": list(range(40_000))},
           "exclude": [{"seed": i} for i in range(0, 40_000, 4)]}
    made: list[int] = []
    reading = threading.Thread(target=lambda: made.append(len(parse_suite(big).cases)), daemon=True)
    reading.start()
    reading.join(300)  # a few seconds now; the search of a list for each value alone took minutes
    assert made == [30_000]


BAD_SUITES = [
    ("matrix: [", "not valid YAML at line 1"),
    ("- a\n- b\n", "a suite is a mapping"),
    ("name: x\nmatrx: {}\n", "unknown key 'matrx'"),
    ("base: {batchsize: 8}\nmatrix: {model: [trivial]}\n", "--batchsize: unknown configuration field 'batchsize'"),
    ("matrix: {modle: [trivial]}\n", "--modle: unknown configuration field"),
    ("matrix: {batch_size: [8, 0]}\n", "case batch_size=0: --batch-size: must be >= 1"),
    ("matrix: {precision: [fp32, fp8]}\n", "--precision: invalid choice 'fp8'"),
    ("matrix: {batch_size: 8}\n", "matrix.batch_size: must be a non-empty list"),
    ("matrix: {batch_size: [8, 8]}\n", "lists 8 twice"),
    ("matrix: {learning_rate: [1, 1.0]}\n",  # two cases of one configuration, run twice and told apart by label only
     "cases learning_rate=1 and learning_rate=1.0 make the same configuration"),
    ("matrix: {learning_rate: [1]}\ninclude: [{learning_rate: 1.0}]\n", "make the same configuration"),
    ("matrix: {batch_size: [8]}\ninclude: [{batch_size: 8}]\n", "case batch_size=8 appears twice"),
    ("base: {batch_size: 8}\nmatrix: {batch_size: [8]}\n", "also set in base"),
    ("matrix: {batch_size: [8]}\nexclude: [{batch_size: 9}]\n", "exclude[1]: batch_size=9 matches no case"),
    ("matrix: {batch_size: [8]}\nexclude: [{model: x}]\n", "'model' is not a matrix field"),
    ("matrix: {batch_size: [8]}\nexclude: [{batch_size: 8}]\n", "the suite has no cases"),
    ("matrix: {batch_size: [8]}\ninclude: [{colour: red}]\n", "include[1]: --colour: unknown configuration field"),
    ("matrix: {batch_size: [8]}\nrepeats: 0\n", "repeats: must be a whole number >= 1"),
    ("matrix: {batch_size: [8]}\ntimeout_s: -1\n", "timeout_s: must be a number of seconds > 0"),
    ("base: {results_dir: /tmp/x}\nmatrix: {batch_size: [8]}\n", "'results_dir' cannot be set in a suite"),
    ("matrix: {batch_size: [[8]]}\n", "values are single numbers"),
    ("base: {variable_update: independent, all_reduce: gloo}\n",
     "--all-reduce: independent workers exchange nothing"),
]


@pytest.mark.parametrize("text,message", BAD_SUITES)
def test_malformed_suites_fail_naming_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert message in str(info.value)
    assert str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)


def test_shipped_suites_are_valid():
    for name in ("quick-cpu.yaml", "models-cpu.yaml"):
        suite = load_suite(REPO / "suites" / name)
        assert suite.cases and all(c.config.device == "cpu" for c in suite.cases)
    quick = load_suite(REPO / "suites" / "quick-cpu.yaml")
    assert quick.repeats == 2 and len({c.config.batch_size for c in quick.cases}) == 2


def test_cli_rejects_a_bad_suite_before_running_anything(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("matrix: {model: [trivial], batchsize: [1]}\n")
    assert main(["sweep", str(path), "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "batchsize" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
    path.write_text("matrix: {model: [resnet_18]}\n")
    assert main(["sweep", str(path), "--results-dir", str(tmp_path / "r")]) == 2
    assert "unknown model 'resnet_18'" in capsys.readouterr().err


def test_cli_dry_run_lists_cases(capsys):
    assert main(["sweep", str(REPO / "suites" / "quick-cpu.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "model=resnet18 batch_size=8 data_format=NCHW #1" in out and "x 2 repeats" in out


# --------------------------------------------------------------------------- isolation


def test_failures_are_recorded_and_the_sweep_goes_on(tmp_path):
    results = tmp_path / "r"
    # 15 s: the hang (batch 4) ends by it, and a loaded machine still runs the others within it
    result = run(suite_of([2, 3, 4, 5, 8], timeout_s=15.0), results)
    assert [r.status for r in result.results] == ["ok", "error", "timeout", "error", "ok"]
    records, problems = read_records(results)
    assert problems == [] and len(records) == 5
    by_batch = {r["config"]["batch_size"]: r for r in records}
    raised = by_batch[3]["error"]
    assert raised.startswith("RuntimeError: boom in the model")
    assert "Traceback" in raised and "running trivial at batch 3" in raised  # the tail of its output
    assert "time limit of 15 s" in by_batch[4]["error"]
    assert "killed by SIGSEGV" in by_batch[5]["error"]
    assert 'File "' in by_batch[5]["error"]  # faulthandler's Python traceback, from the case's output
    for rec in records:
        assert rec["suite_name"] == "t" and rec["case_name"] == "syn-replicated-1cpus"
        assert rec["environment"]["machine"] == "testbox"
    assert by_batch[8]["metrics"]["total_images_per_sec"] == 8.0
    lines = summary_lines(result, str(results))
    assert "5 cases ran" in lines[0] and "2 error" in lines[0] and "1 timeout" in lines[0]


def test_a_timed_out_case_records_its_cause_in_one_line_and_its_output_not_the_traceback(tmp_path):
    result = run_suite(suite_of([2], timeout_s=1.0), SweepOptions(results_dir=tmp_path, grace_s=5.0),
                       worker=sweep_fakes.agent_like_worker, probe=probe)
    (only,) = result.results
    error = only.record["error"]
    assert only.status == "timeout" and "Traceback" not in error and "SignalException" not in error, error
    first, _, rest = error.partition("\n")
    assert first == ("the case ran past its time limit of 1 s and was stopped (last output: "
                     "10 images/sec: 12.5 +/- 0.1 (jitter = 0.2) 6.900)")
    assert rest.startswith("--- last lines of the case's output ---\n")  # for a hang, where it stopped
    assert rest.rstrip().endswith("10\timages/sec: 12.5 +/- 0.1 (jitter = 0.2)\t6.900")


def test_out_of_memory_is_recorded_or_retried_with_smaller_batches(tmp_path):
    result = run(suite_of([128]), tmp_path / "a")
    (only,) = result.results
    assert only.status == "oom" and "auto_batch" not in only.record

    result = run(suite_of([128]), tmp_path / "b", auto_batch=True)
    (only,) = result.results
    assert only.status == "ok" and only.attempts == 3
    assert only.record["config"]["batch_size"] == 32
    assert only.record["auto_batch"] == {"requested_batch_size": 128, "tried": [128, 64, 32], "fitted_batch_size": 32}
    records, _ = read_records(tmp_path / "b")
    assert len(records) == 1  # the attempts that ran out of memory are not separate records


def test_rerun_skips_cases_recorded_ok_on_this_machine(tmp_path):
    results = tmp_path / "r"
    first = run(suite_of([2, 3, 8], repeats=2), results)
    assert first.counts() == {"ok": 4, "error": 2}
    second = run(suite_of([2, 3, 8], repeats=2), results)
    assert len(second.skipped) == 4
    assert [r.case.config.batch_size for r in second.results] == [3, 3]  # only the failed ones again
    forced = run(suite_of([2, 3, 8], repeats=2), results, rerun=True)
    assert len(forced.results) == 6 and not forced.skipped
    # Another machine's records in the same folder do not count as done here.
    other = run_suite(suite_of([2]), SweepOptions(results_dir=results), worker=fake_worker, probe=elsewhere_probe)
    assert len(other.results) == 1 and not other.skipped


def test_device_auto_is_resolved_by_the_probe_before_naming(tmp_path):
    suite = parse_suite({"name": "a", "base": {"model": "trivial"}, "matrix": {"batch_size": [2, 4]}, "timeout_s": 1})
    assert suite.cases[0].config.device == "auto"
    result = run_suite(suite, SweepOptions(results_dir=tmp_path), worker=fake_worker, probe=gpu_probe)
    timed_out = result.results[1].record  # made by the parent, not the worker
    assert timed_out["status"] == "timeout"
    assert timed_out["config"]["device"] == "cuda" and timed_out["case_name"] == "syn-replicated-1gpus"
    assert timed_out["environment"] == {"machine": "gpubox"}


def test_sigterm_mid_case_records_nothing_half_written_and_resume_finishes(tmp_path):
    results = tmp_path / "r"
    suite = suite_of([2, 8, 4, 16, 32])
    handler_before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    worker = functools.partial(stopping_worker, os.getpid())
    result = run_suite(suite, SweepOptions(results_dir=results, grace_s=1.0), worker=worker, probe=probe)
    assert time.monotonic() - started < 30
    assert result.interrupted_by == signal.SIGTERM
    assert [r.case.config.batch_size for r in result.results] == [2, 8]
    assert [c.config.batch_size for c in result.not_run] == [4, 16, 32]
    records, problems = read_records(results)
    assert problems == [] and sorted(r["config"]["batch_size"] for r in records) == [2, 8]
    assert "interrupted by SIGTERM: 3 cases not run" in "\n".join(summary_lines(result, str(results)))
    assert signal.getsignal(signal.SIGTERM) == handler_before  # the sweep's handler is gone

    resumed = run(suite_of([2, 8, 4, 16, 32], timeout_s=1.0), results)
    assert [c.config.batch_size for c in resumed.skipped] == [2, 8]
    assert [r.case.config.batch_size for r in resumed.results] == [4, 16, 32]
    assert resumed.interrupted_by is None


SCRIPT = """
import os, sys, time
from cnnbench.results.record import Record


def probe(device, label):
    return {"device": "cpu", "environment": {"machine": "box", "hostname": "h"}}


def worker(config, emit, extra):
    marker = os.environ["SWEEP_TEST_MARKER"]
    if config.batch_size == 4 and not os.path.exists(marker + ".resume"):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)
    return Record(config=config.recorded(), environment={"machine": "box", "hostname": "h"},
                  metrics={"total_images_per_sec": 1.0}, extra=extra)


if __name__ == "__main__":  # case processes import this file too
    import cnnbench.sweep.runner as runner
    from cnnbench.cli import main

    import cnnbench.sweep.isolation as isolation

    isolation.SERVER_PRELOAD = ("__main__",)  # these fake cases need no torch
    runner.check_cases = lambda suite: []
    runner.engine_probe = probe
    runner.engine_worker = worker
    sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_the_sweep_command_killed_mid_case_and_resumed(tmp_path, sig, code):
    script = tmp_path / "sweep_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    suite = tmp_path / "s.yaml"
    suite.write_text("name: k\nbase: {model: trivial, device: cpu}\nmatrix: {batch_size: [2, 4, 8]}\n")
    results = tmp_path / "r"
    marker = tmp_path / "in-flight"
    cmd = [sys.executable, str(script), "sweep", str(suite), "--results-dir", str(results), "--plain"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SWEEP_TEST_MARKER": str(marker)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() or not marker.read_text():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the case never started"
            time.sleep(0.05)
        child = int(marker.read_text())
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, (out, err)
    assert "interrupted by" in out and "2 cases not run" in out
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the case in flight was stopped with the sweep
    records, problems = read_records(results)
    assert problems == [] and [r["config"]["batch_size"] for r in records] == [2]

    (tmp_path / "in-flight.resume").write_text("")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done
    assert "1 case skipped (already recorded ok; --rerun runs it again)" in done.stdout
    records, problems = read_records(results)
    assert problems == [] and sorted(r["config"]["batch_size"] for r in records) == [2, 4, 8]


def test_strict_exit_status_and_reporters(tmp_path, monkeypatch, capsys):
    import cnnbench.sweep.runner as runner

    monkeypatch.setattr(runner, "engine_worker", fake_worker)
    monkeypatch.setattr(runner, "engine_probe", probe)
    monkeypatch.setattr(runner, "preload_engine", lambda: None)
    suite = tmp_path / "s.yaml"
    suite.write_text("name: x\nbase: {model: trivial, device: cpu}\nmatrix: {batch_size: [2, 3]}\n")
    args = ["sweep", str(suite), "--results-dir", str(tmp_path / "r"), "--plain"]
    assert main(args) == 0  # every case ran, whatever its status
    out, err = capsys.readouterr()
    assert "1 error, 1 ok" in out and "[2/2] error" in err
    assert main(args + ["--strict"]) == 1  # the error case ran again and failed again

    import io

    stream = io.StringIO()
    result = run_suite(suite_of([2, 3]), SweepOptions(results_dir=tmp_path / "q"), worker=fake_worker,
                       probe=probe, reporter=RichReporter(stream))
    assert result.counts() == {"ok": 1, "error": 1}
    assert "boom in the model" in stream.getvalue()
    # every case leaves its line above the bar, ok ones too: they stay after the bar ends
    assert len([ln for ln in stream.getvalue().splitlines() if ln.startswith(("[1/2] ", "[2/2] "))]) == 2
    assert "[1/2] ok      batch_size=2" in stream.getvalue() or "[2/2] ok      batch_size=2" in stream.getvalue()
    plain = io.StringIO()
    run_suite(suite_of([2]), SweepOptions(results_dir=tmp_path / "q", rerun=True), worker=fake_worker,
              probe=probe, reporter=PlainReporter(plain))
    assert "[1/1] ok" in plain.getvalue()


# --------------------------------------------------------------------------- the real engine


def test_a_sweep_through_the_engine(tmp_path):
    from cnnbench.sweep.runner import check_cases, preload_engine

    preload_engine()
    suite = parse_suite({
        "name": "engine",
        # cpu, not auto: a test session that has touched CUDA cannot use it in forked children
        "base": {"model": "trivial", "device": "cpu", "num_batches": 2, "num_warmup_batches": 1,
                 "display_every": 1, "image_size": 32},
        "matrix": {"batch_size": [2, 4]},
        "timeout_s": 120,
    })
    assert check_cases(suite) == []
    lines: list[str] = []

    class Collect(PlainReporter):
        def case_output(self, line):
            lines.append(line)

    result = run_suite(suite, SweepOptions(results_dir=tmp_path / "r"), reporter=Collect())
    assert [r.status for r in result.results] == ["ok", "ok"], [r.record.get("error") for r in result.results]
    records, problems = read_records(tmp_path / "r")
    assert problems == [] and len(records) == 2
    for rec in records:
        assert rec["config"]["device"] == "cpu" and rec["case_name"] == "syn-replicated-1cpus"
        assert rec["suite_name"] == "engine" and rec["metrics"]["total_images_per_sec"] > 0
        assert rec["environment"]["machine"]
    assert any("total images/sec" in line for line in lines)
    assert json.dumps(records)  # plain JSON all the way


def test_a_failed_case_records_its_configuration_as_the_engine_resolves_it(tmp_path):
    from cnnbench.data.generate import make_data_set
    from cnnbench.report.build import build_report
    from cnnbench.sweep.runner import SweepRunner, engine_resolver, preload_engine

    preload_engine()
    data = tmp_path / "data"
    make_data_set("imagefolder", data, num_classes=2, images_per_class=4, val_images_per_class=1,
                  image_size=(40, 40))
    suite = parse_suite({
        "name": "real", "timeout_s": 120,
        "base": {"model": "trivial", "device": "cpu", "num_batches": 2, "num_warmup_batches": 1,
                 "image_size": 32, "data_dir": str(data)},
        "matrix": {"batch_size": [2]},
    })
    assert suite.cases[0].config.data_name is None and suite.cases[0].config.num_workers is None
    results = tmp_path / "r"
    ok = run_suite(suite, SweepOptions(results_dir=results))
    assert [r.status for r in ok.results] == ["ok"], ok.results[0].record.get("error")
    # the same case again, failing in its process: the record is the sweep's own
    assert SweepRunner(suite, SweepOptions(results_dir=results)).resolver is engine_resolver
    assert SweepRunner(suite, SweepOptions(), worker=fake_worker).resolver is None  # its records are its own
    failed = run_suite(suite, SweepOptions(results_dir=results, rerun=True), worker=sweep_fakes.failing_worker,
                       resolver=engine_resolver)
    assert [r.status for r in failed.results] == ["error"]
    records, problems = read_records(results)
    assert problems == [] and [r["status"] for r in records] == ["ok", "error"]
    done, error = records
    assert "the loader died" in error["error"] and "unresolved" not in error["error"]
    assert error["config"]["data_name"] == done["config"]["data_name"] == "imagefolder"
    assert error["config"]["num_workers"] == done["config"]["num_workers"] is not None
    assert error["config"] == done["config"]  # every resolved field: the failure sits beside the success
    assert error["case_name"] == done["case_name"] and error["case_key"] == done["case_key"]
    report = build_report(records)  # one table, one cell: the failure is a repeat of the success's configuration
    tables = [t for t in report.tables if t.kind == "configuration"]
    machine = done["environment"]["machine"]
    assert error["environment"]["machine"] == machine
    assert [(t.title, len(t.rows), t.columns[2:]) for t in tables] == [("real-replicated-1cpus", 1, [machine])]


def test_a_failed_case_whose_configuration_cannot_be_resolved_keeps_it_as_given(tmp_path):
    from cnnbench.sweep.runner import preload_engine

    preload_engine()
    missing = tmp_path / "no-such-data"
    suite = parse_suite({
        "name": "gone", "timeout_s": 120,
        "base": {"model": "trivial", "device": "cpu", "num_batches": 2, "data_dir": str(missing)},
        "matrix": {"batch_size": [2]},
    })
    result = run_suite(suite, SweepOptions(results_dir=tmp_path / "r"))  # the engine refuses it in the case
    assert [r.status for r in result.results] == ["error"]
    record = result.results[0].record
    assert record["config"] == suite.cases[0].config.recorded()
    first, second = record["error"].splitlines()[:2]
    assert "no-such-data" in first
    assert second.startswith("(its configuration is recorded as the suite gave it, unresolved: ConfigError: ")


def test_the_progress_bar_shows_a_suites_and_a_warnings_text_as_it_is(tmp_path):
    """A case's label (a suite file's, anyone's) and a warning's text are text, never rich's markup:
    ``[/b]`` in one ended the sweep's progress output in rich's MarkupError."""
    import io
    from types import SimpleNamespace

    from cnnbench.sweep.outcomes import CaseResult

    stream = io.StringIO()
    reporter = RichReporter(stream)
    reporter.sweep_started(SimpleNamespace(name="s :rocket: [v2]"), [SimpleNamespace(label="a")] * 2, [])
    case = SimpleNamespace(label="tag=evil[/b] :smile:")
    reporter.case_skipped(case, "claimed by [/i] another")
    reporter.case_finished(CaseResult(case, {"status": "ok", "metrics": {}}, 1.0, warnings=["repeats [/b] disagree"]))
    reporter.progress.stop()
    text = stream.getvalue()
    assert "s :rocket: [v2]" in text and "tag=evil[/b] :smile:" in text
    assert "claimed by [/i] another" in text and "repeats [/b] disagree" in text
