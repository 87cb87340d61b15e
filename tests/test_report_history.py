"""The report's History section (issue 46, item 3): a store with series of 8 or more runs gets
a table of its changes (and outliers), one observation per change in plain words and a timeline
plot per series with a change or an outlier; a store of shorter series gets no section."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

from cnnbench.cli import main
from cnnbench.config.data_bench import DATA_MODE
from cnnbench.report import build_report
from cnnbench.report.options import ReportOptions
from cnnbench.results.store import append_record, read_records
from tests.test_store import make_record

START = dt.datetime(2026, 11, 1, 6, tzinfo=dt.timezone.utc)
NOISE = (1.004, 0.997, 1.002, 0.996, 1.003, 0.998, 1.001, 0.999)
"""A small, fixed wobble run to run (about 0.3%)."""


def _store(root: Path, values: list[float], machine: str = "box-a", batch: int = 8) -> Path:
    """One configuration on one machine, a run a day, each its own session."""
    for i, ips in enumerate(values):
        rec = make_record(0, machine=machine)
        rec["config"]["batch_size"] = batch
        rec["metrics"]["total_images_per_sec"] = ips
        rec["started_at"] = (START + dt.timedelta(days=i)).isoformat()
        rec["session_id"] = f"session-{machine}-{batch}-{i:02d}"
        rec["run_id"] = f"{machine}-{batch}-{i:02d}"
        append_record(root, rec)
    return root


def _step(n: int = 12, at: int = 8, drop: float = 0.10) -> list[float]:
    """``n`` runs at 1000 images/sec, ``drop`` slower from run ``at`` on."""
    return [1000.0 * NOISE[i % len(NOISE)] * (1.0 - drop if i >= at else 1.0) for i in range(n)]


def _report(store: Path, out: Path, *args: str) -> str:
    assert main(["report", str(store), "-o", str(out), *args]) == 0
    return (out / "summary.md").read_text()


def test_a_planted_step_gets_the_section_its_row_its_observation_and_a_timeline(tmp_path):
    store = _store(tmp_path / "store", _step())
    text = _report(store, tmp_path / "report")
    assert "\n## History\n" in text
    assert "1 series of 8 or more runs (12 runs): 1 change, 0 outliers." in text
    rows = list(csv.DictReader((tmp_path / "report" / "tables" / "history-changes.csv").open()))
    assert len(rows) == 1
    row = rows[0]
    assert (row["series"], row["machine"]) == ("resnet18 fp32 b8", "box-a")
    assert row["last run before"] == "box-a-8-07" and row["first run after"] == "box-a-8-08"
    assert -0.11 < float(row["change (95% CI)"]) < -0.09
    assert "box-a-8-08 (2026-11-09)" in text and "docs/commands/history.md" in text
    records, _ = read_records(store)
    report = build_report(records)
    [observation] = [o for o in report.observations if "resnet18" in o.text]
    assert observation.text.startswith("resnet18 fp32 b8 on box-a: -10.0% (95% CI ")
    assert observation.text.endswith("from 2026-11-09.")
    assert f"- {observation.text}" in text  # among the observations, in plain words
    plots = sorted(p.name for p in (tmp_path / "report" / "plots").glob("history-*.svg"))
    assert plots == ["history-resnet18_fp32_b8_on_box-a.svg"]
    assert f"plots/{plots[0]}" in text
    svg = (tmp_path / "report" / "plots" / plots[0]).read_text()
    assert "runs in time order" in svg and "-10.0%" in svg and "2026-11-01" in svg
    assert '<img alt="History: resnet18 fp32 b8 on box-a"' in (tmp_path / "report" / "report.html").read_text()


def test_a_lone_outlier_is_listed_and_drawn_apart_not_a_change(tmp_path):
    values = _step(14, at=99)
    values[6] *= 0.7
    text = _report(_store(tmp_path / "store", values), tmp_path / "report")
    assert "1 series of 8 or more runs (14 runs): 0 changes, 1 outlier." in text
    assert not (tmp_path / "report" / "tables" / "history-changes.csv").exists()
    [row] = list(csv.DictReader((tmp_path / "report" / "tables" / "history-outliers.csv").open()))
    assert row["run"] == "box-a-8-06" and -0.31 < float(row["off the level"]) < -0.29
    svg = next((tmp_path / "report" / "plots").glob("history-*.svg")).read_text()
    assert "outlier (not a change)" in svg


def test_series_of_five_runs_get_no_section(tmp_path):
    store = _store(tmp_path / "store", _step(5, at=3))
    _store(store, _step(5, at=3), machine="box-b")
    text = _report(store, tmp_path / "report")
    assert "History" not in text
    assert not list((tmp_path / "report" / "plots").glob("history-*"))
    assert not list((tmp_path / "report" / "tables").glob("history-*"))


def test_the_changes_are_an_observation_kind_of_their_own(tmp_path):
    records, _ = read_records(_store(tmp_path / "store", _step()))
    assert any(o.text.startswith("resnet18 fp32 b8 on box-a: -10.0%")
               for o in build_report(records, ReportOptions(observations="history")).observations)
    assert not any("resnet18 fp32 b8 on box-a" in o.text
                   for o in build_report(records, ReportOptions(observations="scaling,failures")).observations)


def test_the_timelines_come_after_every_other_plot_in_the_budget(tmp_path):
    store = _store(tmp_path / "store", _step())
    _store(store, _step(), batch=16)
    text = _report(store, tmp_path / "report", "--max-plots", "1")
    assert len(list((tmp_path / "report" / "plots").glob("history-*.svg"))) == 0
    assert "1 of " in text and "plots drawn (--max-plots 1)" in text


def test_two_changes_of_one_series_point_at_their_own_rows(tmp_path):
    values = [1000.0 * NOISE[i % len(NOISE)] * (1.0 if i < 8 else 0.9 if i < 16 else 0.8) for i in range(24)]
    records, _ = read_records(_store(tmp_path / "store", values))
    report = build_report(records)
    table = next(t for t in report.tables if t.id == "history-changes")
    observations = [o for o in report.observations if "resnet18" in o.text]
    assert len(observations) == 2 and len(table.rows) == 2
    cells = [table.row(o.refs[0].row)[table.columns.index(o.refs[0].column)].text for o in observations]
    assert cells[0] != cells[1]  # each observation names its own change's cell


def test_records_history_cannot_read_leave_the_section_out_not_the_report(tmp_path):
    store = _store(tmp_path / "store", _step())
    records, _ = read_records(store)
    for rec in records[:3]:  # fields no other table minds: history must not break the report over them
        rec["source_path"] = "a\x00b"
        rec["environment"]["gpus"] = [{"power_limit_w": [1, 2]}]
    report = build_report(records)
    assert report.tables  # the report stands, with or without the section


def test_cnnbench_data_records_make_no_history(tmp_path):
    records = []
    for i, ips in enumerate(_step()):
        rec = make_record(0)
        rec["config"] = {"mode": DATA_MODE, "data_name": "imagefolder", "batch_size": 64, "data_dir": "/d"}
        rec["kind"] = "run"
        rec["case_name"] = "data"
        rec["metrics"] = {"total_images_per_sec": ips, "loading_processes": 2}
        rec["started_at"] = (START + dt.timedelta(days=i)).isoformat()
        rec["session_id"] = f"session-{i:02d}"
        records.append(rec)
    report = build_report(records)
    assert not any(t.id.startswith("history") for t in report.tables)


def test_a_history_that_fails_leaves_its_section_out_and_says_so(tmp_path, monkeypatch, caplog):
    import cnnbench.report.tables.history as section

    def broken(records, **kwargs):
        raise ValueError("an odd field")

    monkeypatch.setattr(section, "build_history", broken)
    records, _ = read_records(_store(tmp_path / "store", _step()))
    report = build_report(records)
    assert report.tables and not any(t.id.startswith("history") for t in report.tables)
    assert "History section is left out: ValueError: an odd field" in caplog.text


def test_a_field_a_flag_compares_does_not_cut_the_series(tmp_path):
    """``--effect`` tells the report's points apart by one more field; a series is still one
    configuration on one machine, whatever else its runs differ in."""
    store = _store(tmp_path / "store", _step())
    rows = read_records(store)[0]
    for i, rec in enumerate(rows):
        rec["environment"]["torch_version"] = "2.13.0" if i % 2 else "2.14.1"
    again = tmp_path / "again"
    for rec in rows:
        append_record(again, rec)
    text = _report(again, tmp_path / "report", "--effect", "environment.torch_version")
    assert "1 series of 8 or more runs (12 runs): 1 change, 0 outliers." in text
