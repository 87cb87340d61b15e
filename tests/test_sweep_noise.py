"""Sweeps notice repeats that disagree, and keep the profiler traces of their cases."""

from __future__ import annotations

import io

from cnnbench.sweep.progress import PlainReporter, summary_lines
from cnnbench.sweep.runner import SweepOptions, run_suite
from cnnbench.sweep.suite import parse_suite
from tests.sweep_fakes import fake_worker, probe, repeat_worker


def suite_of(batches, **more):
    data = {"name": "n", "base": {"model": "trivial", "device": "cpu"}, "matrix": {"batch_size": batches}}
    data.update(more)
    return parse_suite(data)


def test_repeats_that_disagree_get_one_warning_line(tmp_path):
    out = io.StringIO()
    result = run_suite(suite_of([2, 8], repeats=3), SweepOptions(results_dir=tmp_path), worker=repeat_worker,
                       probe=probe, reporter=PlainReporter(out))
    warned = [(r.case.label, r.warnings) for r in result.results if r.warnings]
    # one line per configuration, when its last repeat has run: 2.0, 2.2, 2.4 images/sec, stdev 0.2
    assert warned == [
        ("batch_size=2 #3", ["repeats of batch_size=2 disagree: relative stdev 9.1% (2.0 to 2.4 images/sec, "
                             "mean 2.2; noise threshold 2%)"]),
        ("batch_size=8 #3", ["repeats of batch_size=8 disagree: relative stdev 9.1% (8.0 to 9.6 images/sec, "
                             "mean 8.8; noise threshold 2%)"]),
    ]
    assert "  warning: repeats of batch_size=2 disagree: relative stdev 9.1%" in out.getvalue()
    lines = summary_lines(result, str(tmp_path))
    assert "  2 configurations whose repeats disagree: relative stdev over the noise threshold" in lines
    assert any(line.startswith("  6 cases recorded warnings") for line in lines)


def test_repeats_within_the_noise_or_alone_say_nothing(tmp_path):
    within = run_suite(suite_of([2], repeats=2), SweepOptions(results_dir=tmp_path / "a", noise=0.10),
                       worker=repeat_worker, probe=probe)
    assert [r.warnings for r in within.results] == [[], []]  # 2.0 and 2.2: relative stdev 6.7% < 10%
    same = run_suite(suite_of([2], repeats=2), SweepOptions(results_dir=tmp_path / "b"), worker=fake_worker,
                     probe=probe)
    assert [r.warnings for r in same.results] == [[], []]
    lines = summary_lines(same, str(tmp_path / "b"))
    assert not any("disagree" in line or "recorded warnings" in line for line in lines)


def test_a_resumed_sweep_compares_with_the_repeats_recorded_before(tmp_path):
    first = run_suite(suite_of([2], repeats=1), SweepOptions(results_dir=tmp_path), worker=repeat_worker,
                      probe=probe)
    assert first.results[0].warnings == []
    second = run_suite(suite_of([2], repeats=2), SweepOptions(results_dir=tmp_path), worker=repeat_worker,
                       probe=probe)
    assert len(second.skipped) == 1
    (ran,) = second.results
    assert ran.warnings
    assert ran.warnings[0].startswith("repeats of batch_size=2 disagree: relative stdev 6.7% (2.0 to 2.2")


def test_profiler_traces_of_cases_land_in_the_results_folder(tmp_path):
    from cnnbench.sweep.runner import preload_engine

    preload_engine()
    suite = parse_suite({"name": "p", "base": {"model": "trivial", "device": "cpu", "num_batches": 2,
                                               "num_warmup_batches": 1, "image_size": 16, "profile_steps": 1},
                         "matrix": {"batch_size": [2]}, "timeout_s": 120})
    result = run_suite(suite, SweepOptions(results_dir=tmp_path / "r"))
    (case,) = result.results
    assert case.status == "ok", case.record.get("error")
    trace = case.record["metrics"]["profile_trace"]
    assert (tmp_path / "r" / trace).is_file()
