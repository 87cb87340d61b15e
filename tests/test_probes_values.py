"""Probes of bad values (issue 17, items 6-8): figures no reader can compute with, imported
rows and ``--set`` values ``run`` would refuse, and bounds on sizes. Each case gives one
line naming the cause (or, for a stored figure, names the record and shows the figure as not
available), never a traceback, and damages no record already written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.results import cache
from cnnbench.results.store import StoreNotice, read_records
from tests.report_fixtures import record

# --- item 6: non-finite and huge figures in stored records -------------------------------------------------------

UNUSABLE = [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e300", "1e+300"),
            ("1" + "0" * 400, "an integer of 401 digits")]


def _line(rec: dict, ips_text: str) -> str:
    """``rec`` as a store line whose ``metrics.total_images_per_sec`` is ``ips_text`` verbatim."""
    text = json.dumps(rec)
    marker = '"total_images_per_sec": 100.0'
    assert marker in text
    return text.replace(marker, f'"total_images_per_sec": {ips_text}')


def _stores(tmp_path: Path, ips_text: str) -> tuple[Path, Path, Path]:
    base, cand = tmp_path / "base", tmp_path / "cand"
    base.mkdir()
    cand.mkdir()
    (base / "m-fast.jsonl").write_text(json.dumps(record(ips=110.0)) + "\n")
    bad = cand / "m-fast.jsonl"
    bad.write_text(json.dumps(record(ips=120.0)) + "\n" + _line(record(ips=100.0), ips_text) + "\n")
    return base, cand, bad


@pytest.mark.parametrize("command", ["report", "compare", "compare-reversed", "results"])
@pytest.mark.parametrize(("ips_text", "shown"), UNUSABLE, ids=[u[1][:12] for u in UNUSABLE])
def test_an_unusable_figure_is_not_available_and_names_its_record(tmp_path, capsys, command, ips_text, shown):
    base, cand, bad = _stores(tmp_path, ips_text)
    before = bad.read_bytes()
    argv = {"report": ["report", str(cand), "-o", str(tmp_path / "out")],
            "compare": ["compare", str(base), str(cand)],
            "compare-reversed": ["compare", str(cand), str(base)],
            "results": ["results", "list", str(cand)]}[command]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert f"{bad}:2: metrics.total_images_per_sec is {shown}: shown as not available" in err
    assert "Traceback" not in err and "skipped" not in err
    assert bad.read_bytes() == before  # nothing written to the store
    if command == "report":
        summary = (tmp_path / "out" / "summary.md").read_text()
        assert f"{bad}:2: metrics.total_images_per_sec is {shown}" in summary
        assert "from 2 results" in out


def test_the_record_is_kept_with_the_figure_null_and_a_notice(tmp_path):
    _, cand, bad = _stores(tmp_path, "1e300")
    bad.write_text(bad.read_text() + _line(record(ips=100.0, metrics={"step_times_s": [0.1, 1e300]}), "5.0") + "\n")
    records, problems = read_records(cand)
    assert len(records) == 3
    assert records[1]["metrics"]["total_images_per_sec"] is None
    assert records[1]["metrics"]["images_per_sec_mean"] == 100.0  # the usable figures stay
    assert records[2]["metrics"]["step_times_s"] == [0.1, None]
    assert [type(p) for p in problems] == [StoreNotice, StoreNotice]
    assert problems[1] == f"{bad}:3: metrics.step_times_s is 1e+300: shown as not available"


def test_a_learning_rate_of_1e38_stays_a_config_value(tmp_path):
    rec = record(learning_rate=1e38, metrics={"loss_last": 1e17})
    (tmp_path / "m-fast.jsonl").write_text(json.dumps(rec) + "\n")
    (got,), problems = read_records(tmp_path)
    assert problems == [] and got["config"]["learning_rate"] == 1e38 and got["metrics"]["loss_last"] == 1e17


def test_the_notice_holds_when_the_file_is_read_through_its_cache(tmp_path):
    good = json.dumps(record(ips=120.0, metrics={"step_times_s": [0.0123456789] * 400})) + "\n"
    copies = cache.MIN_BYTES // len(good) + 2
    path = tmp_path / "m-fast.jsonl"
    path.write_text(good * 3 + _line(record(ips=100.0), "NaN") + "\n" + good * copies)
    for _ in range(2):  # the first read writes the cache, the second reads it
        records, problems = read_records(tmp_path)
        assert len(records) == copies + 4
        assert records[3]["metrics"]["total_images_per_sec"] is None
        assert problems == [f"{path}:4: metrics.total_images_per_sec is NaN: shown as not available"]
    assert cache.cache_path(path).exists()


def test_adam_overflowing_its_update_keeps_a_record_marked_diverged(tmp_path, capsys):
    results = tmp_path / "r"
    assert main(["run", "--model", "trivial", "--device", "cpu", "--image-size", "32", "--batch-size", "8",
                 "--num-batches", "4", "--num-warmup-batches", "1", "--optimizer", "adam",
                 "--learning-rate", "1e38", "--precision", "bf16", "--results-dir", str(results)]) == 0
    err = capsys.readouterr().err
    assert "training diverged" in err and "overflow" not in err
    (rec,), problems = read_records(results)
    assert problems == [] and rec["status"] == "ok" and rec["error"] is None
    assert rec["metrics"]["diverged"] is True and rec["metrics"]["total_images_per_sec"] > 0


# --- item 7: import csv and --set check what `run` and the record contract check ----------------------------------

_COLUMNS = "config.model,config.batch_size,environment.machine,metrics.total_images_per_sec"


def _import(tmp_path: Path, rows: list[str], *extra: str, header: str = _COLUMNS) -> tuple[int, Path]:
    table = tmp_path / "t.csv"
    table.write_text(header + "\n" + "".join(row + "\n" for row in rows))
    return main(["import", "csv", str(table), "--results-dir", str(tmp_path / "r"), *extra]), table


@pytest.fixture
def store_before(tmp_path):
    """A store holding one record already, which no refused import may change."""
    assert _import(tmp_path, ["resnet50,32,m,100"])[0] == 0
    path = tmp_path / "r" / "m.jsonl"
    return path, path.read_bytes()


@pytest.mark.parametrize(("column", "cell", "why"), [
    ("config.precision", "fp64", "column 'config.precision': invalid choice 'fp64'"),
    ("config.device", "tpu", "column 'config.device': invalid choice 'tpu'"),
    ("config.data_format", "NCWH", "column 'config.data_format': invalid choice 'NCWH'"),
    ("config.variable_update", "bogus", "column 'config.variable_update': invalid choice 'bogus'"),
    ("config.optimizer", "bogus", "column 'config.optimizer': invalid choice 'bogus'"),
    ("schema_version", "-1", "schema_version -1 is not a version"),
    ("schema_version", "3", "schema_version 3 is newer than this cnnbench writes"),
    ("started_at", "garbage", "started_at 'garbage' is not an ISO 8601 time"),
    ("config.image_size", "8", "column 'config.image_size': must be >= 16"),
])
def test_a_row_run_would_refuse_is_skipped_naming_the_line(tmp_path, capsys, store_before, column, cell, why):
    path, before = store_before
    code, table = _import(tmp_path, [f"resnet50,32,m2,100,{cell}"], header=f"{_COLUMNS},{column}")
    err = capsys.readouterr().err
    assert code == 1 and f"{table}:2: {why}" in err and "Traceback" not in err
    assert not (tmp_path / "r" / "m2.jsonl").exists() and path.read_bytes() == before


@pytest.mark.parametrize("model", ["", " "])
def test_a_row_without_a_model_is_skipped(tmp_path, capsys, model):
    code, table = _import(tmp_path, [f'"{model}",32,m,100'])
    assert code == 1 and f"{table}:2: config.model is missing" in capsys.readouterr().err


def test_a_table_with_a_column_named_twice_is_refused_whole(tmp_path, capsys, store_before):
    path, before = store_before
    code, table = _import(tmp_path, ["resnet50,32,m,100,vgg16"], header=f"{_COLUMNS},config.model")
    err = capsys.readouterr().err
    assert code == 2 and f"{table}: column 'config.model' appears 2 times" in err
    assert path.read_bytes() == before


@pytest.mark.parametrize(("setting", "why"), [
    ("schema_version=-1", "schema_version -1 is not a version"),
    ("schema_version=99", "schema_version 99 is newer than this cnnbench writes"),
    ("started_at=garbage", "started_at 'garbage' is not an ISO 8601 time"),
    ("config.precision=fp64", "config.precision: invalid choice 'fp64'"),
    ("config.device=tpu", "config.device: invalid choice 'tpu'"),
    ("config.data_format=NCWH", "config.data_format: invalid choice 'NCWH'"),
    ("config.variable_update=bogus", "config.variable_update: invalid choice 'bogus'"),
    ("config.optimizer=bogus", "config.optimizer: invalid choice 'bogus'"),
    ("config.model=", "config.model is missing"),
    ("metrics.total_images_per_sec=.nan", "metrics.total_images_per_sec is nan"),
])
def test_a_set_run_would_refuse_is_one_line_and_exit_2(tmp_path, capsys, store_before, setting, why):
    path, before = store_before
    code, _ = _import(tmp_path, ["resnet50,32,m,100"], "--set", setting)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"cnnbench import: error: --set {setting}: ") and why in err
    assert len(err.strip().splitlines()) == 1 and path.read_bytes() == before


def test_set_run_id_over_many_runs_is_refused(tmp_path, capsys, store_before):
    path, before = store_before
    code, _ = _import(tmp_path, [f"resnet50,{n},m,100" for n in range(1, 49)], "--set", "run_id=x")
    err = capsys.readouterr().err
    assert code == 2 and "--set run_id=x: would give 48 records one run_id" in err
    assert path.read_bytes() == before
    assert _import(tmp_path, ["resnet50,7,m,100"], "--set", "run_id=x")[0] == 0  # one run: its id
    (rec,) = [r for r in read_records(tmp_path / "r")[0] if r["run_id"] == "x"]
    assert rec["config"]["batch_size"] == 7


def test_a_set_is_checked_with_the_row_it_lands_on(tmp_path, capsys):
    """The record is checked whole, --set applied: a --set may mend a row (a time is text, not
    YAML's timestamp)."""
    code, table = _import(tmp_path, ["resnet50,32,m,100,garbage"], "--set", "started_at=2024-01-01T00:00:00",
                          header=f"{_COLUMNS},started_at")
    assert code == 0  # --set replaced the row's bad time
    code, table = _import(tmp_path, ["resnet50,32,m,100,2024-01-01T00:00:00"], "--set", "schema_version=0",
                          header=f"{_COLUMNS},started_at")
    assert code == 0
