"""The Python API (``import cnnbench``): run, read_results, compare, report.

Runs use the tiny ``trivial`` model on the CPU; compare and report read hand-made records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import cnnbench
from cnnbench.cli import main
from cnnbench.compare.build import CompareError
from cnnbench.config import ConfigError
from cnnbench.words import plural
from tests.report_fixtures import record, write_store

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(model="trivial", device="cpu", batch_size=2, num_batches=2, num_warmup_batches=1)
TWO_WORKERS = ("import cnnbench; r = cnnbench.run(model='trivial', device='cpu', num_devices=2, oversubscribe=True, "
               "batch_size=2, num_batches=2, num_warmup_batches=1); print(r.status, r.error)")


def python(*args: str, stdin: str | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=timeout)


# --- import -----------------------------------------------------------------------------------
def test_import_cnnbench_does_not_import_torch():
    done = python("-c", "import cnnbench, sys; assert 'torch' not in sys.modules; "
                        "cnnbench.read_results; cnnbench.compare_results; cnnbench.make_report; cnnbench.run_study; "
                        "assert 'torch' not in sys.modules, 'the API functions load torch'")
    assert done.returncode == 0, done.stderr


def test_the_api_is_exported_typed_and_documented():
    assert set(cnnbench.__all__) >= {"run", "read_results", "compare_results", "make_report", "run_study"}
    for name in ("run", "read_results", "compare_results", "make_report", "run_study"):
        fn = getattr(cnnbench, name)
        assert ">>>" in (fn.__doc__ or ""), f"{name} has no example"
        assert fn.__annotations__.get("return"), f"{name} has no return type"
    assert (ROOT / "src" / "cnnbench" / "py.typed").is_file()
    with pytest.raises(AttributeError):
        cnnbench.no_such_function  # noqa: B018


def test_no_api_function_shares_a_packages_name_and_no_package_is_callable():
    """Issue 45 item 6: the report, compare and study packages were made callable under the API
    functions' names by swapping their module class; now each name means one thing."""
    import importlib
    import types

    packages = {p.name for p in (ROOT / "src" / "cnnbench").iterdir() if (p / "__init__.py").exists()}
    assert not packages & set(cnnbench.__all__)
    for name in sorted(packages):  # nor a function a package exports: one name, one thing
        package = importlib.import_module(f"cnnbench.{name}")
        assert type(package) is types.ModuleType and not callable(package)
        assert not set(getattr(package, "__all__", ())) & set(cnnbench.__all__), name
    code = ("import cnnbench.report.build, cnnbench; import tests.report_fixtures as f; "
            "rep = cnnbench.make_report([f.record(), f.record(ips=90.0)], max_plots=0); "
            "print(type(rep).__name__, rep.n_records, type(cnnbench.report).__name__)")
    done = python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Report", "2", "module"]


# --- run --------------------------------------------------------------------------------------
def test_run_returns_the_record_prints_nothing_and_writes_nothing(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    rec = cnnbench.run(**TINY)
    out = capfd.readouterr()
    assert (out.out, out.err) == ("", "")
    assert rec.status == "ok" and rec.config["model"] == "trivial" and rec.metrics["total_images_per_sec"] > 0
    assert list(tmp_path.iterdir()) == []  # no results_dir: no store


def test_run_progress_prints_the_log_or_hands_it_over(capfd):
    lines: list[str] = []
    cnnbench.run(**TINY, progress=lines.append)
    assert any("images/sec" in line for line in lines)
    assert capfd.readouterr().out == ""
    cnnbench.run(**TINY, progress=True)
    assert "images/sec" in capfd.readouterr().out


def test_run_with_results_dir_appends_the_record_as_the_cli_does(tmp_path):
    rec = cnnbench.run(**TINY, results_dir=tmp_path / "results", machine_label="box")
    assert (tmp_path / "results" / "box.jsonl").is_file()
    frame = cnnbench.read_results(tmp_path / "results")
    assert frame["run_id"].tolist() == [rec.run_id] and frame["environment.machine"].tolist() == ["box"]


def test_run_refuses_bad_options_before_running(tmp_path):
    with pytest.raises(ConfigError, match="unknown configuration field 'batchsize'"):
        cnnbench.run(model="trivial", batchsize=2)
    with pytest.raises(ConfigError, match="batch.size: must be >= 1"):
        cnnbench.run(model="trivial", device="cpu", batch_size=0)
    with pytest.raises(ConfigError, match="results_dir"):
        cnnbench.run(**TINY, profile_steps=1)


@pytest.mark.parametrize("how", ["-c", "stdin"])
def test_run_on_two_workers_from_a_script_without_a_file(how):
    """The workers never import the caller's ``__main__``: ``python -`` (a notebook's kind of
    ``__main__``, with no file to import) works as ``python -c`` does."""
    done = python("-c", TWO_WORKERS) if how == "-c" else python("-", stdin=TWO_WORKERS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok None", done.stderr
    assert "Traceback" not in done.stderr


# --- read_results -----------------------------------------------------------------------------
def test_read_results_is_the_export_as_a_dataframe(tmp_path, capsys):
    store = write_store(tmp_path / "r", [record("resnet50", ips=400.0), record("vgg16", "m-slow", ips=120.0)])
    (store / "m-fast.jsonl").open("a").write("{not json\n")
    frame = cnnbench.read_results(store)
    assert capsys.readouterr().err == ""
    assert isinstance(frame, pd.DataFrame) and frame.shape[0] == 2
    assert main(["results", "export", str(store), "--format", "json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert list(frame.columns) == list(dict.fromkeys(c for row in exported for c in row))
    assert sorted(frame["metrics.total_images_per_sec"]) == [120.0, 400.0]
    assert frame.loc[0, "config.model"] == exported[0]["config.model"]
    [problem] = frame.attrs["problems"]
    assert "m-fast.jsonl:2" in problem
    cnnbench.read_results(store, verbose=True)
    assert "m-fast.jsonl:2" in capsys.readouterr().err


def test_read_results_where_and_step_times(tmp_path):
    store = write_store(tmp_path / "r", [record("resnet50"), record("vgg16")])
    frame = cnnbench.read_results([store], where="model=vgg*", step_times=False)
    assert frame["config.model"].tolist() == ["vgg16"] and "metrics.step_times_s" not in frame.columns
    with pytest.raises(FileNotFoundError):
        cnnbench.read_results(tmp_path / "missing")


# --- compare ----------------------------------------------------------------------------------
def _repeats(ips: float, **kw) -> list[dict]:
    return [record(ips=ips * f, **kw) for f in (0.99, 1.0, 1.01)]


def test_compare_returns_rows_of_ratio_interval_p_and_verdict(tmp_path, capsys):
    a = write_store(tmp_path / "a", _repeats(400.0) + _repeats(250.0, model="vgg16"))
    b = write_store(tmp_path / "b", _repeats(300.0) + _repeats(250.0, model="vgg16"))
    table = cnnbench.compare_results(a, b)
    assert capsys.readouterr().out == ""
    assert table["model"].tolist() == ["resnet50", "vgg16"]
    assert table["verdict"].tolist() == ["slower", "not significant"]
    slow = table.iloc[0]
    assert slow["ci_low"] < slow["ratio"] < slow["ci_high"] and slow["p_value"] < 0.05
    assert slow["ratio"] == pytest.approx(0.75) and slow["fields.precision"] == "fp32"
    # the same facts as `cnnbench compare --format json`
    main(["compare", str(a), str(b), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert [p["ratio"] for p in doc["pairs"]] == table["ratio"].tolist()
    assert [p["p_value"] for p in doc["pairs"]] == table["p_value"].tolist()
    assert table.attrs["geomean_ratio"] == pytest.approx(doc["summary"]["geomean_ratio"])
    assert table.attrs["baseline"] == {"label": str(a), "results": 6}
    # records in place of folders
    again = cnnbench.compare_results(_repeats(400.0), _repeats(300.0))
    assert again["verdict"].tolist() == ["slower"] and again.attrs["baseline"]["label"] == "baseline"


def test_compare_by_a_field_and_its_errors(tmp_path):
    store = write_store(tmp_path / "r", _repeats(400.0) + _repeats(560.0, precision="amp_fp16"))
    table = cnnbench.compare_results(store, by="precision")
    assert table["verdict"].tolist() == ["faster"] and table.attrs["split_by"] == "config.precision"
    with pytest.raises(CompareError, match="no result of the baseline matches"):
        cnnbench.compare_results([record(batch_size=32)], [record(batch_size=64)])
    with pytest.raises(CompareError, match="by=FIELD"):
        cnnbench.compare_results(store)


# --- report -----------------------------------------------------------------------------------
def test_report_returns_the_report_and_writes_only_with_an_output(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    store = write_store(tmp_path / "r", [record("resnet50", ips=400.0), record("vgg16", ips=250.0)])
    rep = cnnbench.make_report(store, max_plots=0)
    assert rep.n_records == 2 and rep.tables
    # what print() and a notebook show: its parts counted (every cell, over 30,000 characters, before)
    assert repr(rep) == f"Report('cnnbench report': {plural(len(rep.tables), 'table')}, " \
        f"{plural(len(rep.figures), 'figure')}, {plural(len(rep.observations), 'observation')}, from 2 records)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]
    written = cnnbench.make_report(store, output=tmp_path / "out", max_plots=0, title="API")
    assert (tmp_path / "out" / "summary.md").read_text().startswith("# API")
    assert {t.id for t in written.tables} == {t.id for t in rep.tables}
    out = capfd.readouterr()
    assert (out.out, out.err) == ("", "")


def test_report_with_an_output_draws_its_plots_ahead_as_cnnbench_report_does(tmp_path, monkeypatch):
    from cnnbench.report import write_report
    from cnnbench.report.render import drawing
    from tests.report_fixtures import scaling_records

    store = write_store(tmp_path / "r", scaling_records())
    here = write_report(cnnbench.make_report(store), tmp_path / "here", drawing_pool=drawing.prepare_drawing(0))
    assert len(here.plots) >= 2

    def never(*args, **kwargs):
        raise AssertionError("drawn at the end")

    monkeypatch.setattr(drawing, "_cpus", lambda: 3)
    monkeypatch.setattr(drawing, "_draw", never)  # here and in the drawing processes
    cnnbench.make_report(store, output=tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out" / "plots").iterdir()) == sorted(p.name for p in here.plots)
    for p in here.plots:
        assert (tmp_path / "out" / "plots" / p.name).read_bytes() == p.read_bytes()


# --- find_changes (issue 46) ------------------------------------------------------------------
def test_find_changes_gives_each_lasting_change_as_a_row_and_outliers_in_attrs(tmp_path):
    import datetime as dt
    import json

    import numpy as np

    from tests.report_fixtures import record

    start = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    values = 1000.0 * np.exp(np.random.default_rng(3).normal(0.0, 0.01, 30))
    values[18:] *= 0.9
    values[6] *= 1.3  # a lone outlier, not a change
    recs = []
    for i, v in enumerate(values):
        rec = record(model="resnet50", machine="box-a", ips=float(v),
                     environment={"torch_version": "2.13.0" if i < 18 else "2.14.1"})
        rec.update(started_at=(start + dt.timedelta(hours=i)).isoformat(), run_id=f"r{i:02d}")
        recs.append(rec)
    recs += [record(model="vgg16", machine="box-a", ips=50.0)]
    (tmp_path / "box-a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert "find_changes" in cnnbench.__all__ and ">>>" in (cnnbench.find_changes.__doc__ or "")
    frame = cnnbench.find_changes(tmp_path)
    assert len(frame) == 1
    row = frame.iloc[0]
    assert (row.run_before, row.run_after, row.machine) == ("r17", "r18", "box-a")
    assert row.ci_low < 0.9 < row.ci_high and row.p_value < 0.001 and "torch 2.13.0 -> 2.14.1" in row.suspects
    assert row.text.startswith("resnet50 fp32 b64 on box-a: -") and "between the two runs" in row.text
    assert [o["run_id"] for o in frame.attrs["outliers"]] == ["r06"]
    assert [t["series"] for t in frame.attrs["too_short"]] == ["vgg16 fp32 b64 on box-a"]
    assert cnnbench.find_changes(recs, where="model=vgg16").empty
    assert len(cnnbench.find_changes(recs, order_by="torch_version")) == 1
    with pytest.raises(ValueError, match="where"):
        cnnbench.find_changes(recs, where=5)
