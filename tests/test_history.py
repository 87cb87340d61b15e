"""cnnbench history (issue 46): series, change points, outliers, suspects, and the command."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cnnbench.analysis.history import build_history, fit_levels, start_time
from cnnbench.cli import main
from tests.report_fixtures import record

START = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def series(values, *, jobs=None, envs=None, machine="m-fast", model="resnet50", warnings=None, first=0):
    """Records of one configuration, an hour apart; ``jobs``: each run's session id."""
    out = []
    for i, v in enumerate(values):
        env = envs[i] if envs is not None else None
        metrics = {"warnings": warnings[i]} if warnings is not None else None
        rec = record(model=model, machine=machine, ips=float(v), environment=env, metrics=metrics)
        rec["started_at"] = (START + dt.timedelta(hours=first + i)).isoformat()
        rec["run_id"] = f"{model}-{machine}-{first + i:03d}"
        if jobs is not None:
            rec["session_id"] = jobs[i]
        out.append(rec)
    return out


def noisy(n, *, sd=0.01, seed=0, level=1000.0):
    return level * np.exp(np.random.default_rng(seed).normal(0.0, sd, n))


def test_a_planted_step_is_found_where_it_happened_with_its_sign_and_size():
    values = noisy(40, seed=1)
    values[24:] *= 0.94
    history = build_history(series(values, jobs=[f"s{i // 2}" for i in range(40)]))
    (change,) = history.changes
    assert change.before.run_id.endswith("-023") and change.after.run_id.endswith("-024")
    assert change.low < 0.94 < change.high and change.ratio == pytest.approx(0.94, abs=0.01)
    assert change.high - change.low < 0.016 and change.p < 0.001  # the step is no part of the noise
    noise = history.series[0].fit.noise
    assert noise.within == pytest.approx(0.01, abs=0.004) and noise.between < 0.005
    assert change.text().startswith("resnet50 fp32 b64 on m-fast: -6.")


RETURNING = [[150] * 4 + [100] * 4 + [150] * 4 + [100] * 4, [100] * 4 + [150] * 4 + [100] * 4,
             [150] * 10 + [100] * 10 + [150] * 10, [150] * 6 + [100] * 6 + [150] * 6 + [100] * 6 + [150] * 6]


@pytest.mark.parametrize("jitter", [0.1, 0.0])
@pytest.mark.parametrize("pattern", RETURNING)
def test_a_level_that_returns_is_found_though_no_one_split_explains_it(pattern, jitter):
    """Slow, fast, slow, fast: binary segmentation finds no one split worth its place (each leaves
    the other level in its residuals); the exact partition finds every level, whole numbers that
    tie (no spread the noise model can see) too."""
    fit = fit_levels([v + (i % 3) * jitter for i, v in enumerate(pattern)])
    assert [round(level.value) for level in fit.levels] == [v for i, v in enumerate(pattern)
                                                            if i == 0 or v != pattern[i - 1]]
    assert not fit.outliers and all(s.p < 1e-6 for s in fit.shifts)


def test_the_gate_fails_on_a_slowdown_after_a_level_that_returned(tmp_path, capsys):
    pattern = RETURNING[0]
    store = tmp_path / "results"
    store.mkdir()
    (store / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in series(
        [v + (i % 3) * 0.1 for i, v in enumerate(pattern)], jobs=[f"s{i}" for i in range(len(pattern))])))
    assert main(["history", str(store), "--fail-on-regression", "5"]) == 1
    out, err = capsys.readouterr()
    assert "3 changes" in out and "-33.3% from run resnet50-m-fast-012" in err


def test_an_improvement_is_found_with_the_sign_up():
    values = noisy(30, seed=2)
    values[:12] /= 1.10
    fit = fit_levels(values)
    (shift,) = fit.shifts
    assert shift.index == 12 and shift.ratio == pytest.approx(1.10, abs=0.015)
    assert len(fit.levels) == 2 and fit.levels[0].stop == 12


def test_drift_between_jobs_alone_is_no_change_but_is_one_without_the_jobs():
    rng = np.random.default_rng(3)
    with_jobs = without = 0
    for _ in range(200):
        offsets = rng.normal(0.0, 0.03, 10)  # 10 jobs of 4 runs, days apart
        values = 1000 * np.exp(np.repeat(offsets, 4) + rng.normal(0.0, 0.005, 40))
        jobs = [f"job{i // 4}" for i in range(40)]
        with_jobs += len(fit_levels(values, jobs).shifts)
        without += len(fit_levels(values).shifts)
    assert with_jobs <= 2  # about the 0.5% a series that ALPHA allows
    assert without >= 100  # the runs' own spread understates the drift: it would alarm


def test_a_split_is_judged_by_the_chance_that_any_place_reaches_its_t():
    # white noise, every run a job: a change in about alpha of the series, not in fewer (Bonferroni,
    # the places times one p, would find one in 2.8% of them at alpha 5%)
    rng = np.random.default_rng(7)
    found = sum(bool(fit_levels(1000 * np.exp(rng.normal(0.0, 0.01, 40)), alpha=0.05, min_change=0.0).shifts)
                for _ in range(800))
    assert 0.04 <= found / 800 <= 0.06


def test_the_scale_of_a_split_comes_from_the_residuals_around_the_levels():
    # job means that wobble by 0.3% either side of a 4% step: their successive differences hold the
    # step, their residuals around the two levels do not
    wobble = [0.003 if i % 2 else -0.003 for i in range(12)]
    values = [1000.0 * math.exp(wobble[j] + (0.04 if j >= 6 else 0.0) + e)
              for j in range(12) for e in (-0.002, 0.002)]
    fit = fit_levels(values, [j for j in range(12) for _ in range(2)])
    (shift,) = fit.shifts
    assert shift.index == 12 and shift.p < 1e-6 and shift.high / shift.low < 1.01
    assert fit.noise.df == 10  # 12 job means less the two levels


def test_a_lone_outlier_is_an_outlier_not_a_change():
    values = noisy(30, seed=4)
    values[17] *= 0.75
    history = build_history(series(values))
    (s,) = history.series
    assert not s.changes
    (outlier,) = s.outliers
    assert outlier.run.run_id.endswith("-017") and outlier.ratio == pytest.approx(0.75, abs=0.03)


def test_a_burst_of_two_slow_runs_that_the_series_comes_back_from_is_two_outliers():
    values = noisy(30, seed=16)
    values[12:14] *= 0.8
    fit = fit_levels(values)
    assert not fit.shifts and fit.outliers == (12, 13)


def test_a_single_slow_newest_run_is_an_outlier_and_two_are_a_change():
    values = noisy(30, seed=5)
    values[-1] *= 0.85
    fit = fit_levels(values)
    assert not fit.shifts and fit.outliers == (29,)
    values[-2] *= 0.85
    fit = fit_levels(values)
    assert [s.index for s in fit.shifts] == [28] and not fit.outliers


def test_suspects_name_the_fields_that_differ_between_the_two_sides():
    values = noisy(30, seed=6)
    values[15:] *= 0.9
    envs = [{"torch_version": "2.13.0" if i < 15 else "2.14.1", "cudnn_version": 91000,
             "gpus": [{"power_limit_w": 700.0 if i < 15 else 500.0, "sm_clock_max_mhz": 1980}]} for i in range(30)]
    warnings = [[] if i < 15 else ["busy CPU: other processes used 1.20 of the 2 cores"] for i in range(30)]
    (change,) = build_history(series(values, envs=envs, warnings=warnings)).changes
    named = {s.field: (s.before, s.after) for s in change.suspects}
    assert named["environment.torch_version"] == ("2.13.0", "2.14.1")
    assert named["environment.gpus.power_limit_w"] == (700.0, 500.0)
    assert named["warnings: busy CPU"] == ("0% of runs", "100% of runs")
    assert "environment.cudnn_version" not in named and "environment.gpus.sm_clock_max_mhz" not in named
    assert "torch 2.13.0 -> 2.14.1" in change.text()


def test_short_series_are_listed_and_failed_runs_counted():
    recs = series(noisy(20, seed=7)) + series(noisy(5, seed=8), model="vgg16")
    recs.append(record(model="vgg16", status="oom"))
    history = build_history(recs)
    assert [s.label for s in history.series] == ["resnet50 fp32 b64 on m-fast"]
    assert [(t.label, t.points) for t in history.too_short] == [("vgg16 fp32 b64 on m-fast", 5)]
    assert history.not_ok == 1


def test_imported_records_without_a_real_start_time_are_left_out_and_counted(tmp_path, monkeypatch):
    """An import's filled-in start time (marked) is left out; a record's ``source_path`` is a name it
    holds, never a path looked at (a shared store's record could name any path: a stalled network
    mount, a device): a record imported before the mark keeps the start time it holds."""
    source = tmp_path / "old.csv"
    source.write_text("x\n")
    mtime = dt.datetime(2026, 10, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
    os.utime(source, (mtime.timestamp(), mtime.timestamp()))
    looked_at = []
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        looked_at.append(os.fspath(path) if isinstance(path, (str, os.PathLike)) else path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    recs = series(noisy(12, seed=9))
    filled = series(noisy(3, seed=10), first=100)
    for rec in filled:  # what import csv writes when the table has no started_at column
        rec["started_at"] = mtime.isoformat(timespec="seconds")
        rec["source_path"] = str(source)
        rec["started_at_source"] = "import"
    older = series(noisy(1, seed=13), first=400)[0]
    older["started_at"] = mtime.isoformat(timespec="seconds")  # imported before the mark, at the file's time
    older["source_path"] = str(source)
    blank = series(noisy(1, seed=11), first=200)[0]
    blank["started_at"] = ""
    real = series(noisy(1, seed=12), first=300)[0]
    real["source_path"] = str(source)  # imported, with a start time of its own
    history = build_history(recs + filled + [blank, real, older])
    assert history.no_start_time == 4
    assert len(history.series[0].runs) == 14
    assert start_time(filled[0]) is None and start_time(real) is not None and start_time(older) == mtime
    assert str(source) not in looked_at


def test_the_first_line_counts_runs_without_a_start_time_as_such(tmp_path, capsys):
    recs = series(noisy(10, seed=9))
    recs[3]["started_at"] = "last tuesday"
    recs[4]["started_at"] = ""
    store = tmp_path / "results"
    store.mkdir()
    (store / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["history", str(store)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "2 runs without a real start time (none, one that is no time, or an import's) left out" in first


def test_the_import_marker_leaves_a_start_time_out_without_looking_at_the_file(tmp_path):
    marked = series(noisy(1, seed=14))[0]
    marked["started_at_source"] = "import"  # what import writes now when it fills started_at in
    marked["source_path"] = str(tmp_path / "gone.csv")  # no such file: the marker alone decides
    assert start_time(marked) is None
    source = tmp_path / "new.csv"
    source.write_text("x\n")
    real = series(noisy(1, seed=15))[0]
    real["source_path"] = str(source)
    real["started_at_source"] = "log"  # any other marker: a start time of its own, even at the file's mtime
    when = dt.datetime.fromisoformat(real["started_at"]).timestamp()
    os.utime(source, (when, when))
    assert start_time(real) is not None


def test_import_csv_marks_the_start_time_it_fills_in(tmp_path):
    from cnnbench.results.importers import ImportOptions
    from cnnbench.results.importers.csv_table import import_csv

    table = tmp_path / "runs.csv"
    table.write_text("config.model,metrics.total_images_per_sec\nresnet50,100\n")
    (rec,) = import_csv([table], ImportOptions(machine_label="m")).records
    assert rec["started_at_source"] == "import" and start_time(rec) is None
    table.write_text("config.model,metrics.total_images_per_sec,started_at\nresnet50,100,2026-11-02T10:00:00\n")
    (rec,) = import_csv([table], ImportOptions(machine_label="m")).records
    assert "started_at_source" not in rec and start_time(rec) is not None
    table.write_text("config.model,metrics.total_images_per_sec,session_id\nresnet50,100,0123456789012345\n")
    (rec,) = import_csv([table], ImportOptions(machine_label="m", overrides={"started_at": "2024-03-01T10:00:00"})
                        ).records  # --set started_at=...: the user's own time
    assert "started_at_source" not in rec and start_time(rec) is not None
    assert rec["session_id"] == "0123456789012345"  # an exported id comes back as the text it was


def test_order_by_a_version_then_time():
    values = noisy(24, seed=13)
    values[12:] *= 0.9
    envs = [{"torch_version": "2.9.0" if i < 12 else "2.10.0"} for i in range(24)]
    recs = series(values, envs=envs)
    for rec in recs[12:]:  # the newer version's runs were made first
        rec["started_at"] = (START - dt.timedelta(days=1, hours=-int(rec["run_id"][-3:]))).isoformat()
    by_time = build_history(recs)
    by_version = build_history(recs, order_by="environment.torch_version")
    assert by_version.series[0].runs[0].order == "2.9.0"
    (change,) = by_version.changes
    assert change.after.order == "2.10.0" and change.ratio < 0.95
    assert by_time.series[0].runs[0].order is None and by_time.changes[0].ratio > 1.05


# --- the command ---------------------------------------------------------------------------

@pytest.fixture()
def store(tmp_path) -> Path:
    values = noisy(40, seed=14)
    values[30:] *= 0.92
    envs = [{"torch_version": "2.13.0" if i < 30 else "2.14.1"} for i in range(40)]
    path = tmp_path / "runs.jsonl"
    recs = series(values, envs=envs, jobs=[f"s{i // 2}" for i in range(40)]) + series(noisy(4, seed=15), model="vgg16")
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_the_table_names_the_change_and_its_suspect(store, capsys):
    assert main(["history", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 series (40 runs); 1 change; 0 outliers; 1 series too short.")
    assert "change -7.9%" in out and "suspects: torch 2.13.0 -> 2.14.1" in out
    assert "too short: vgg16 fp32 b64 on m-fast (4 runs; a series needs 8)" in out


def test_json_keys_are_stable(store, capsys):
    assert main(["history", str(store), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"order_by", "series", "too_short", "left_out"}
    (s,) = data["series"]
    assert set(s) == {"series", "machine", "identity", "points", "jobs", "noise", "levels", "changes", "outliers"}
    (c,) = s["changes"]
    assert set(c) == {"before", "after", "level_before", "level_after", "ratio", "ratio_low", "ratio_high", "p",
                      "suspects", "text"}
    assert c["after"]["run_id"].endswith("-030") and s["jobs"] == 20
    assert c["suspects"] == [{"field": "environment.torch_version", "before": "2.13.0", "after": "2.14.1"}]
    assert data["too_short"] == [{"series": "vgg16 fp32 b64 on m-fast", "machine": "m-fast", "points": 4}]


def test_csv_has_a_row_per_change(store, capsys):
    assert main(["history", str(store), "--format", "csv"]) == 0
    (row,) = csv.DictReader(io.StringIO(capsys.readouterr().out))
    assert row["kind"] == "change" and row["series"] == "resnet50 fp32 b64 on m-fast" and row["machine"] == "m-fast"
    assert row["run_before"].endswith("-029") and row["run_after"].endswith("-030")
    assert float(row["level_before"]) > float(row["level_after"])
    assert float(row["change_pct"]) == pytest.approx(-7.9, abs=0.05)
    assert float(row["ci_low_pct"]) < float(row["change_pct"]) < float(row["ci_high_pct"]) < 0
    assert row["suspects"] == "torch 2.13.0 -> 2.14.1"


def test_the_gate_fails_on_a_regression_beyond_its_threshold(store, capsys):
    assert main(["history", str(store), "--fail-on-regression", "5"]) == 1
    err = capsys.readouterr().err
    assert ("cnnbench history: 1 significant regression beyond 5% (worst: resnet50 fp32 b64 on m-fast, -7.9% "
            "from run resnet50-m-fast-030)") in err
    assert main(["history", str(store), "--fail-on-regression", "15"]) == 0
    assert main(["history", str(store), "--where", "model=vgg16", "--fail-on-regression", "1"]) == 0


def test_bad_input_is_one_line(store, capsys):
    assert main(["history", str(store), "--order-by", "bogus_field"]) == 2
    assert main(["history", str(store), "--fail-on-regression", "x"]) == 2
    assert main(["history", str(store), "--where", "model=nothing"]) == 2
    assert main(["history", str(store), "--order-by", ""]) == 2
    err = capsys.readouterr().err
    assert "--order-by: unknown field 'bogus_field'" in err and "no results to read" in err
    assert "--order-by: empty field name" in err


def test_history_never_imports_torch_or_matplotlib(store):
    probe = ("import contextlib, io, sys\nfrom cnnbench.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    code = main(sys.argv[1:])\n"
             "print(code, sorted(m for m in ('torch', 'torchvision', 'matplotlib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, "history", str(store)], capture_output=True, text=True,
                          timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stderr


def test_series_come_in_the_same_order_however_the_stores_lines_lie():
    import random

    recs = series(noisy(10), machine="m-b") + series(noisy(10, seed=1), machine="m-a", model="vgg16") + \
        series(noisy(3, seed=2), machine="m-c") + series(noisy(3, seed=3), machine="m-a", model="alexnet")
    first = build_history(recs)
    random.Random(5).shuffle(recs)
    again = build_history(recs)
    assert [(s.machine, s.label) for s in first.series] == [(s.machine, s.label) for s in again.series]
    assert [s.machine for s in first.series] == sorted(s.machine for s in first.series)
    assert [(s.machine, s.label) for s in first.too_short] == [(s.machine, s.label) for s in again.too_short]


def test_the_outliers_medians_are_numpys_medians_of_the_runs_each_side():
    from cnnbench.analysis.history import _median_of_sorted

    rng = np.random.default_rng(9)
    rows = rng.normal(size=(200, 4))
    rows[rng.random((200, 4)) < 0.4] = np.nan  # the runs before the first and after the last
    rows[0] = np.nan
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        expected = np.nanmedian(rows, axis=1)
    assert np.array_equal(_median_of_sorted(np.sort(rows, axis=1)), expected, equal_nan=True)


def test_the_last_run_before_a_change_is_never_an_outlier_and_its_environment_is_no_suspect():
    values = noisy(40, seed=1)
    values[20:] *= 0.94
    values[19] *= 0.6  # an outlier just before the step, on a machine of its own
    envs = [{"torch_version": "2.13.0" if i != 19 else "9.9.9"} for i in range(40)]
    history = build_history(series(values, jobs=[f"s{i // 2}" for i in range(40)], envs=envs))
    (change,) = history.changes
    assert change.before.run_id.endswith("-018") and change.after.run_id.endswith("-020")
    assert [o.run.run_id[-3:] for o in history.series[0].outliers] == ["019"]
    assert not [s for s in change.suspects if s.field == "environment.torch_version"]


def test_a_split_of_three_jobs_is_judged_against_both_places_it_could_take():
    """With 1 degree of freedom (3 jobs, a first split) the chance that either place reaches t is
    not the one place's (the exact sum vanished there): here Bonferroni's bound, 0.10 for 0.05."""
    from cnnbench.analysis.history import _adjusted, _p_values

    w, cnt = np.ones(3), np.array([3, 3, 2])
    one = float(_p_values(np.array([12.7]), 1)[0])  # t of 12.7 on 1 degree of freedom: p 0.05
    assert one == pytest.approx(0.05, abs=0.001)
    assert _adjusted(12.7, w, cnt, 1) == pytest.approx(2 * one)  # two places: Bonferroni's bound
    assert _adjusted(12.7, w, cnt, 1) > one


def test_a_history_without_a_change_imports_no_scipy():
    """Most series of a store hold no change: their splits are judged by the normal's tail alone
    (Student's is heavier), and an interval is made only for a shift, so scipy (0.13 s to import,
    a report's every time) is loaded only where a split comes near the level."""
    code = ("import sys, numpy as np\n"
            "from cnnbench.analysis.history import build_history\n"
            "from tests.test_history import noisy, series\n"
            "recs = [r for s in range(20) for r in series(noisy(40, seed=s), model=f'm{s}')]\n"
            "h = build_history(recs)\n"
            "print(len(h.series), len(h.changes), 'scipy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.split() == ["20", "0", "False"]
    values = noisy(40, seed=1)
    values[24:] *= 0.94
    (change,) = build_history(series(values, jobs=[f"s{i // 2}" for i in range(40)])).changes  # with its interval
    assert change.low < change.ratio < change.high


def test_a_series_label_names_its_fields_in_the_store_order_whichever_runs_are_left_out():
    """The configuration fields a label names come in the order the store first holds them, whether
    or not a run is left out of the series (a failed one here): the same series, the same label."""
    def rec(i, cfg):
        return {**record(model=cfg["model"], machine="box", ips=100.0), "config": cfg, "run_id": f"r{i:02d}",
                "started_at": (START + dt.timedelta(hours=i)).isoformat()}

    recs = [rec(0, {"model": "a", "batch_size": 8})]
    recs += [rec(i, {"model": "b", "batch_size": 8, "z": 1}) for i in range(1, 10)]
    recs += [rec(i, {"model": "a", "batch_size": 8, "y": None}) for i in range(10, 19)]
    recs += [rec(i, {"model": "c", "batch_size": 8, "y": 2, "z": 3}) for i in range(19, 28)]
    failed = {**rec(99, {"model": "a", "batch_size": 8}), "status": "failed"}
    labels = [s.label for s in build_history(recs).series]
    assert labels == [s.label for s in build_history([*recs, failed]).series]
    assert labels[-1].startswith("c b8 z=3 y=2")  # z came first in the store
    # a field a series lacks is not named (=— for each of an imported log's many fields, before)
    assert [label.split(" on ")[0] for label in labels] == ["a b8", "b b8 z=1", "c b8 z=3 y=2"], labels


def test_whole_number_throughputs_whose_ties_hide_the_noise_get_no_changes_from_the_exact_partition(monkeypatch):
    """About 10 images/sec written as whole numbers: runs tie, the noise model sees no spread, and
    a level of three equal runs fits exactly; the exact partition must add nothing there."""
    from cnnbench.analysis import history

    rng = np.random.default_rng(1)
    runs = [[float(v) for v in np.round(10 * np.exp(rng.normal(0, 0.04, 80)))] for _ in range(40)]
    rng = np.random.default_rng(5)  # about 100, 0.5%: 99s among 100s, a step of the writing apart
    runs += [[float(v) for v in np.round(100 * np.exp(rng.normal(0, 0.005, 80)))] for _ in range(300)]
    found = [[s.index for s in fit_levels(v).shifts] for v in runs]
    monkeypatch.setattr(history, "_more_levels", lambda m, w, cnt, cuts, *rest: cuts)
    assert found == [[s.index for s in fit_levels(v).shifts] for v in runs]


@pytest.mark.parametrize("high", [12.0, 13.0])
def test_a_level_that_returns_in_whole_numbers_a_few_steps_apart_is_found(high):
    """About 10 images/sec written as whole numbers, 12 or 13 for ten runs in the middle: two or
    three steps of the writing apart, beyond the rounding (a level of 11s among 10s would not be)."""
    assert [s.index for s in fit_levels([10.0] * 10 + [high] * 10 + [10.0] * 10).shifts] == [10, 20]
    rng = np.random.default_rng(2)
    found = 0
    for _ in range(20):
        level = np.r_[np.full(30, 10.0), np.full(10, high), np.full(30, 10.0)]
        fit = fit_levels([float(v) for v in np.round(level * np.exp(rng.normal(0, 0.02, 70)))])
        found += [s.index for s in fit.shifts] == [30, 40]
    assert found >= 16


def test_a_series_label_never_writes_a_records_control_characters(tmp_path, capsys):
    recs = series(noisy(10, seed=3), machine="box\r\x1b[2Jevil", model="res\x1b[31mnet\nX")
    store = tmp_path / "results"
    store.mkdir()
    (store / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["history", str(store)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "res\\x1b[31mnet\\nX fp32 b64 on box\\r\\x1b[2Jevil" in out


def test_whole_number_runs_one_step_from_their_neighbours_are_no_outliers_and_no_change(tmp_path, capsys):
    """About 50 images/sec written as whole numbers: 49 and 51 among 50s are the step of the writing,
    not outliers (the outliers' scale took no account of it: five outliers, their spread removed,
    then a change of -2% that failed the gate)."""
    values = [50, 50, 50, 49, 51, 51] + [50] * 18 + [49, 50, 51, 49, 49, 49]
    fit = fit_levels([float(v) for v in values])
    assert fit.outliers == () and fit.shifts == ()
    row = [50.0] * 6 + [49.0] + [50.0] * 6 + [51.0] + [50.0] * 6  # at any level of the series: not judged by
    assert fit_levels([100.0] * 30 + row).outliers == ()  # the median of all (a level of 100s before them)
    for far in ([2.0] * 15 + [4.0] + [2.0] * 14, [1.0] * 15 + [3.0] + [1.0] * 14, [10.0] * 15 + [13.0] + [10.0] * 14):
        assert fit_levels(far).outliers == (15,), far  # two steps and more from whole neighbours: an outlier
    tens = np.round(10 * np.exp(np.random.default_rng(2).normal(0, 0.03, 40)))
    hundreds = [100.0] * 8 + [88.0] + [100.0] * 5 + [113.0] + [100.0] * 5
    assert fit_levels([*map(float, tens), *hundreds]).outliers == (48, 54)  # the 10s' step is not the 100s'
    store = tmp_path / "r.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in series(values)))
    assert main(["history", str(store), "--fail-on-regression", "1"]) == 0
    assert capsys.readouterr().out.startswith("1 series (30 runs); 0 changes; 0 outliers.")
    rng = np.random.default_rng(3)  # pure noise, written whole: no change, and outliers only of its tails
    fits = [fit_levels([float(v) for v in np.round(rng.normal(50, 0.5, 40))]) for _ in range(50)]
    assert sum(len(f.shifts) for f in fits) == 0 and sum(len(f.outliers) for f in fits) <= 10  # were 209 of 2,000


@pytest.mark.parametrize(("low", "high"), [(1e-300, 0.8e-300), (1e-300, 1e17), (1e-17, 0.8e-17)])
def test_throughputs_of_any_size_the_store_takes_are_fitted(low, high):
    """A store takes any positive figure below 1e18: 1e-300 images/sec ended history in a
    ZeroDivisionError, a step from it to 1e17 in an OverflowError, and a 20% step at 1e-17 was
    none (such figures looked like whole numbers)."""
    values = noisy(20, sd=0.001, seed=4, level=1.0)
    values = [v * (low if i < 10 else high) for i, v in enumerate(values)]
    (shift,) = fit_levels(values).shifts
    assert shift.index == 10 and math.isfinite(shift.ratio) and (shift.ratio < 1) == (high < low)


def test_a_series_is_ordered_by_the_moment_a_time_names_and_by_any_digits_as_text():
    """--order-by started_at ordered the text, so times of two zones interleaved (six outliers, a
    change in the wrong place); a version holding a digit int() cannot read (2.1², 5,000 nines)
    ended in a ValueError."""
    values = noisy(20, sd=0.002, seed=5)
    values[10:] *= 0.8
    recs = series(values)
    for rec in recs[1::2]:  # every other run written in another zone, the same moment
        when = dt.datetime.fromisoformat(rec["started_at"]).astimezone(dt.timezone(dt.timedelta(hours=-11)))
        rec["started_at"] = when.isoformat()
    for order_by in (None, "started_at"):
        (change,) = build_history(recs, order_by=order_by).changes
        assert change.after.run_id.endswith("-010") and not build_history(recs, order_by=order_by).outliers
    for i, rec in enumerate(recs):
        rec["environment"]["torch_version"] = ["2.1²", "2.10", "9" * 5000, "2.9", None][i % 5]
    assert len(build_history(recs, order_by="environment.torch_version").series) == 1


def test_series_of_one_configuration_from_two_sources_are_named_apart(tmp_path, capsys):
    """The source is part of a series' identity: cnnbench's runs and imported ones were two
    series of one name, in the table, the CSV and the JSON alike."""
    own = series(noisy(10, seed=6))
    imported = series(noisy(10, seed=7, level=500.0), first=10)
    for rec in imported:
        rec["source"] = "tf_cnn_benchmarks"
    store = tmp_path / "r.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in own + imported))
    assert main(["history", str(store), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = [s["series"] for s in data["series"]]
    assert len(set(names)) == 2 and any("source=tf_cnn_benchmarks" in n for n in names), names
    assert {s["identity"].get("source") for s in data["series"]} >= {"tf_cnn_benchmarks"}


def test_order_by_a_field_under_one_of_single_values_is_unknown(store, capsys):
    """config.model.nosuch ordered nothing, in silence: a name below a field that holds no object
    in any run is unknown (one below an object, metrics.step_series.loss, is a field)."""
    assert main(["history", str(store), "--order-by", "config.model.nosuch"]) == 2
    assert "unknown field 'config.model.nosuch'" in capsys.readouterr().err


def test_json_csv_and_the_gate_stay_valid_for_any_figure_and_name(tmp_path, capsys):
    """Figures of 1e-300 then 1e17 wrote Infinity into the JSON (no JSON), the CSV wrote a level
    of 0.0004 as 0.0, and the gate's line quoted a 100 KB model name whole."""
    values = [1e-300 * (1 + 0.001 * (i % 3)) for i in range(19)] + [1e17]
    store = tmp_path / "r.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in series(values)))
    assert main(["history", str(store), "--format", "json"]) == 0
    json.loads(capsys.readouterr().out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    tiny = noisy(20, sd=0.002, seed=8, level=0.0004)
    tiny[10:] *= 0.8
    recs = series(tiny, model="m" * 100_000)
    store.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["history", str(store), "--format", "csv", "--fail-on-regression", "5"]) == 1
    out, err = capsys.readouterr()
    (row,) = csv.DictReader(io.StringIO(out))
    assert 0.0003 < float(row["level_before"]) < 0.0005 and 0.0002 < float(row["level_after"]) < 0.0004, row
    assert len(err) < 5200 and "characters left out" in err and len(err.strip().splitlines()) == 1


def test_versions_order_as_pep_440_has_them_nightlies_and_release_candidates_first():
    """A nightly and a release candidate come before the release (they sorted after it, by their
    longer text), a post-release after; a local part (+cu130) is no newer version."""
    values = noisy(24, sd=0.002, seed=9)
    versions = ["2.10.0", "2.10.0rc1", "2.10.0.dev20260101+cu130", "2.9.1+cu124", "2.10.0.post1", "v2.11",
                "2.10.0a2", "2.10.0+cu130"] * 3
    recs = series(values, envs=[{"torch_version": v} for v in versions])
    (s,) = build_history(recs, order_by="environment.torch_version").series
    order = list(dict.fromkeys(r.order for r in s.runs))
    assert order == ["2.9.1+cu124", "2.10.0.dev20260101+cu130", "2.10.0a2", "2.10.0rc1", "2.10.0", "2.10.0+cu130",
                     "2.10.0.post1", "v2.11"], order


def test_versions_order_part_by_part_whatever_digits_they_hold():
    values = noisy(24, sd=0.002, seed=9)
    versions = ["2.10", "2.9", "2.1²", "9" * 5000, "2.10.1", "10"] * 4
    recs = series(values, envs=[{"torch_version": v} for v in versions])
    (s,) = build_history(recs, order_by="environment.torch_version").series
    order = list(dict.fromkeys(r.order for r in s.runs))
    assert order == ["2.1²", "2.9", "2.10", "2.10.1", "10", "9" * 5000], [o[:8] for o in order]
