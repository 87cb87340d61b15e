"""CSV probes (issue 41): no spreadsheet formula in any CSV cnnbench writes (item 3), and
``import csv`` refuses what no reader accepts, naming the line, before writing anything
(items 7, 13 and 16)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from cnnbench.cli import main
from cnnbench.models import register_model
from cnnbench.results.csv_out import TRIGGERS, CsvWriter, csv_text, is_number_text
from cnnbench.results.store import read_records
from tests.report_fixtures import record

# --- item 3: every CSV goes through one writer that neutralises formulas ------------------------------------------

FORMULA = "=cmd|' /C calc'!A0"
"""A cell that runs a program in a spreadsheet that opens the file (OWASP's example)."""
NEUTRALISED = "'" + FORMULA


def rows_of(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def assert_no_formula(text: str) -> list[list[str]]:
    """Every cell of the CSV ``text`` that begins as a formula would is a number; returns the rows."""
    rows = rows_of(text)
    for row in rows:
        for cell in row:
            assert not cell.startswith(TRIGGERS) or is_number_text(cell), f"formula cell {cell!r} in {row}"
    return rows


def cells(rows: list[list[str]]) -> list[str]:
    return [cell for row in rows for cell in row]


def write_store(folder: Path, records: list[dict[str, Any]]) -> Path:
    """The records in one file (their labels may be no file name)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.mark.parametrize("text", ["=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1", "\r=1", "=HYPERLINK(\"x\")", "-",
                                  "-inf", "+nan", "-1_000", "- 1", "-0x10"])
def test_the_writer_puts_a_quote_before_every_text_cell_a_spreadsheet_would_run(text):
    out = csv_text(["column", text], [[text, 1]])
    assert rows_of(out) == [["column", "'" + text], ["'" + text, "1"]]
    assert_no_formula(out)


@pytest.mark.parametrize(("value", "written"), [(-1, "-1"), (-1.5, "-1.5"), ("-1.5", "-1.5"), ("+3", "+3"),
                                                ("-2e-05", "-2e-05"), (-2e-05, "-2e-05"), (".5", ".5"),
                                                ("a=1", "a=1"), ("", ""), (None, ""), (True, "True")])
def test_numbers_negative_ones_too_stay_numbers_and_other_text_is_untouched(value, written):
    out = csv_text(["c", "d"], [[value, "x"]])
    assert out == f"c,d\n{written},x\n"


def test_a_cell_with_a_delimiter_a_nul_or_a_line_break_is_still_one_safe_cell():
    out = csv_text(["a", "b"], [["x,=1", "y\x00-1"], ["=1,2", 3], ["m\r=cmd", "n\n=cmd"], ["\r\n=1", -1]])
    assert rows_of(out) == [["a", "b"], ["x,=1", "y\x00-1"], ["'=1,2", "3"], ["m\r=cmd", "n\n=cmd"],
                            ["'\r\n=1", "-1"]]
    assert out.endswith('"m\r=cmd","n\n=cmd"\n"\'\r\n=1",-1\n')  # a bare \r would start a row in a spreadsheet
    crlf = io.StringIO()
    writer = CsvWriter(crlf)
    writer.writerow(["m\r=cmd", "=x"])
    assert crlf.getvalue() == '"m\r=cmd",\'=x\r\n'


def test_results_export_csv_neutralises_a_formula_and_keeps_a_negative_number(tmp_path, capsys):
    rec = record(model=FORMULA, machine=FORMULA, metrics={"offset": -2.5})
    rec["error"] = "@SUM(1+1)*cmd|' /C calc'!A0"
    store = write_store(tmp_path / "r", [rec])
    assert main(["results", "export", str(store), "--format", "csv"]) == 0
    (header, row) = assert_no_formula(capsys.readouterr().out)
    by = dict(zip(header, row, strict=True))
    assert by["config.model"] == NEUTRALISED and by["environment.machine"] == NEUTRALISED
    assert by["error"] == "'@SUM(1+1)*cmd|' /C calc'!A0"
    assert by["metrics.offset"] == "-2.5" and by["metrics.total_images_per_sec"] == "100.0"
    out = tmp_path / "x.csv"
    assert main(["results", "export", str(store), "--format", "csv", "-o", str(out)]) == 0
    assert NEUTRALISED in cells(assert_no_formula(out.read_text()))


def test_report_tables_csv_neutralise_a_formula(tmp_path):
    store = write_store(tmp_path / "r", [record(machine=FORMULA, ips=100.0), record(machine=FORMULA, ips=110.0),
                                         record(model="vgg16", machine=FORMULA, ips=50.0)])
    out = tmp_path / "out"
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    tables = sorted((out / "tables").glob("*.csv"))
    assert tables
    found = []
    for table in tables:
        found += [c for c in cells(assert_no_formula(table.read_text())) if FORMULA in c]
    assert found and all(c.startswith("'") or not c.startswith(FORMULA) for c in found)
    assert NEUTRALISED in found


def test_compare_csv_neutralises_a_formula(tmp_path, capsys):
    a = write_store(tmp_path / "a", [record(machine=FORMULA, ips=100.0)])
    b = write_store(tmp_path / "b", [record(machine=FORMULA, ips=80.0)])
    assert main(["compare", str(a), str(b), "--format", "csv"]) == 0
    header, row = assert_no_formula(capsys.readouterr().out)
    by = dict(zip(header, row, strict=True))
    assert by["machine"] == NEUTRALISED and float(by["ratio"]) == pytest.approx(0.8)


def test_comm_bandwidth_csv_neutralises_a_formula(tmp_path, capsys):
    from tests.test_comm import comm

    a = write_store(tmp_path / "a", [comm(machine=FORMULA, busbw=1.0)])
    b = write_store(tmp_path / "b", [comm(machine=FORMULA, busbw=2.0)])
    assert main(["compare", str(a), str(b), "--format", "csv"]) == 0
    header, row = assert_no_formula(capsys.readouterr().out)
    by = dict(zip(header, row, strict=True))
    assert "baseline_busbw_gbps" in header and by["machine"] == NEUTRALISED
    assert float(by["ratio"]) == pytest.approx(2.0)


def _predict_record(n: int, ips: float) -> dict[str, Any]:
    return {"schema_version": 2, "run_id": f"p{n}", "status": "ok", "started_at": "2024-01-01T00:00:00+00:00",
            "config": {"model": "resnet50", "batch_size": 64, "num_devices": n, "precision": "fp32",
                       "device": "cuda", "variable_update": "replicated", "data_name": "synthetic"},
            "environment": {"machine": FORMULA, "gpu_model": "RTX A6000", "available_cpus": 32},
            "metrics": {"total_images_per_sec": ips, "forward_time_s": 0.05, "backward_time_s": 0.1,
                        "optimizer_time_s": 0.01},
            "model_cost": {"params": 25_557_032}}


def test_predict_csv_neutralises_a_formula_and_keeps_a_negative_error(tmp_path, capsys):
    store = write_store(tmp_path / "r", [_predict_record(1, 400.0), _predict_record(2, 2000.0)])
    assert main(["predict", str(store), "--strategy", "replicated", "--format", "csv"]) == 0
    rows = assert_no_formula(capsys.readouterr().out)
    body = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert body and all(r["machine"] == NEUTRALISED for r in body)
    measured = [r for r in body if r["measured_images_per_sec"]]
    assert any(float(r["error"]) < 0 and r["error"].startswith("-") for r in measured)  # a number, no quote


def test_models_csv_neutralises_a_formula(monkeypatch, capsys):
    from cnnbench.models import lookup
    from cnnbench.models.cost import ModelCost

    cost = ModelCost(name=FORMULA, input_size=(3, 224, 224), params=10, param_memory_mib=0.1,
                     feature_memory_mib=0.2, forward_macs=5, forward_flops=10, train_flops=30, top1_error=None,
                     top5_error=None, image_size=224, param_memory_bytes=40, feature_memory_bytes=80, method="meta")
    monkeypatch.setattr(lookup, "matching_models", lambda patterns: [FORMULA])
    monkeypatch.setattr(lookup, "model_costs", lambda names, *a, **k: lookup.ModelCosts(names, [cost], []))
    assert main(["models", "x", "--format", "csv"]) == 0
    header, row = assert_no_formula(capsys.readouterr().out)
    by = dict(zip(header, row, strict=True))
    assert by["name"] == NEUTRALISED and by["params"] == "10"


# --- items 7, 13, 16: import csv refuses, naming the line, what readers would not take -----------------------------

_COLUMNS = "config.model,config.batch_size,environment.machine,metrics.total_images_per_sec"


def _import(tmp_path: Path, body: str, *extra: str, header: str = _COLUMNS) -> tuple[int, Path, Path]:
    table = tmp_path / "t.csv"
    table.write_text(header + "\n" + body)
    results = tmp_path / "r"
    return main(["import", "csv", str(table), "--results-dir", str(results), *extra]), table, results


@pytest.mark.parametrize("status", ["error", "oom", "timeout"])
def test_a_failed_row_with_a_figure_is_refused_naming_the_line(tmp_path, capsys, status):
    body = f"resnet50,32,m,100,ok\nresnet50,64,m,123,{status}\nresnet50,128,m,,{status}\n"
    code, table, results = _import(tmp_path, body, header=_COLUMNS + ",status")
    err = capsys.readouterr().err
    assert code == 0 and len(err.strip().splitlines()) == 1
    assert f"{table}:3: status {status} with metrics.total_images_per_sec 123: a failed run has no throughput" in err
    records, problems = read_records(results)
    assert problems == [] and sorted((r["config"]["batch_size"], r["status"]) for r in records) == [
        (32, "ok"), (128, status)]
    assert main(["results", "list", str(results)]) == 0
    assert "123" not in capsys.readouterr().out


def test_set_status_error_on_rows_with_figures_refuses_each(tmp_path, capsys):
    code, table, results = _import(tmp_path, "resnet50,32,m,100\n", "--set", "status=error")
    err = capsys.readouterr().err
    assert code == 1 and f"{table}:2: status error with metrics.total_images_per_sec 100" in err
    assert not results.exists()


@pytest.mark.parametrize(("cell", "why"), [
    ("1e19", "metrics.total_images_per_sec is 1e+19: more than 1e+18"),
    ("1" + "0" * 400, "metrics.total_images_per_sec is an integer of 401 digits: more than 1e+18"),
    ("-1", "metrics.total_images_per_sec is -1: a measured figure is a finite number, 0 or more"),
])
def test_a_figure_readers_would_not_show_is_refused_naming_the_line(tmp_path, capsys, cell, why):
    code, table, results = _import(tmp_path, f"resnet50,32,m,100\nresnet50,64,m,{cell}\n")
    err = capsys.readouterr().err
    assert code == 0 and f"{table}:3: {why}" in err and "Traceback" not in err
    (rec,), problems = read_records(results)
    assert problems == [] and rec["metrics"]["total_images_per_sec"] == 100


def test_a_nested_figure_readers_would_not_show_is_refused(tmp_path, capsys):
    code, table, results = _import(tmp_path, 'resnet50,32,m,100,"{""x"": [1, 1e19]}"\n',
                                   header=_COLUMNS + ",metrics.step_series")
    err = capsys.readouterr().err
    assert code == 1 and f"{table}:2: metrics.step_series.x is 1e+19: a reader would show it as not available" in err
    assert not results.exists()


def test_every_figure_imported_reads_back_as_it_was_given(tmp_path, capsys):
    code, _, results = _import(tmp_path, "resnet50,32,m,1e18\nresnet50,64,m,0.5\n")
    assert code == 0
    records, problems = read_records(results)
    assert problems == [] and sorted(r["metrics"]["total_images_per_sec"] for r in records) == [0.5, 1e18]


LONG = "x" * 300
"""A machine label whose results file name would be over 255 bytes."""


def test_a_label_too_long_for_a_file_name_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch):
    from cnnbench.results import store

    appended: list[Path] = []
    real_append = store.append_lines
    monkeypatch.setattr(store, "append_lines", lambda path, data, *a, **k: (appended.append(path),
                                                                             real_append(path, data, *a, **k)))
    code, table, results = _import(tmp_path, f"resnet50,32,a,100\nresnet50,32,{LONG},100\nresnet50,32,b,100\n")
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"{table}:3: " in err and "255" in err and "xxxxxxxx" in err
    assert sorted(p.name for p in results.iterdir() if p.suffix == ".jsonl") == ["a.jsonl", "b.jsonl"]
    assert sorted(p.name for p in appended) == ["a.jsonl", "b.jsonl"]


def test_set_a_machine_label_too_long_is_refused_before_any_work(tmp_path, capsys):
    code, _, results = _import(tmp_path, "resnet50,32,a,100\nresnet50,32,b,100\n", "--set",
                               f"environment.machine={LONG}")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "255" in err and "Traceback" not in err
    assert not results.exists()


def test_a_long_label_from_another_importer_is_checked_before_writing(tmp_path, monkeypatch):
    from cnnbench.results import importing
    from cnnbench.results.importers import Importer, ImportOptions, ImportResult

    def _probe(paths, options: ImportOptions) -> ImportResult:
        made = [record(machine=m) for m in ("a", LONG, "b")]
        for i, r in enumerate(made):
            r.update(source_path="probe", source_line=i + 1)
        return ImportResult(records=made)

    monkeypatch.setattr(importing, "get_importer", lambda kind: Importer(kind, "labels of any length", _probe))
    warned: list[str] = []
    outcome = importing.import_into(tmp_path / "r", "probe-long-label", ["x"], warn=warned.append)
    assert len(outcome.written) == 2 and len(warned) == 1 and warned[0].startswith("skipped probe:2: ")
    assert sorted(p.name for p in (tmp_path / "r").iterdir() if p.suffix == ".jsonl") == ["a.jsonl", "b.jsonl"]


@pytest.mark.parametrize(("body", "line"), [
    ('resnet50,32,m,100\n"unterminated\n', 3),
    ('resnet50,32,m,100\n\n"multi\nline",32,m,100\nresnet50,"unterminated,m,100\nresnet50,32,m,100\n', 6),
    ('resnet50,32,m,100\nresnet50,"32"x,m,100\n', 3),
])
def test_a_table_the_csv_reader_cannot_read_through_is_refused_naming_the_line(tmp_path, capsys, body, line):
    code, table, results = _import(tmp_path, body)
    err = capsys.readouterr().err
    assert code == 2 and f"{table}:{line}: " in err and "nothing imported from it" in err
    assert "Traceback" not in err and not results.exists()


def test_an_unterminated_quote_names_its_row_and_imports_nothing_of_that_file(tmp_path, capsys):
    good = tmp_path / "good.csv"
    good.write_text(_COLUMNS + "\nresnet50,32,m,100\n")
    code, table, results = _import(tmp_path, 'resnet50,32,m,100\n"unterminated\n')
    assert code == 2
    assert main(["import", "csv", str(table), str(good), "--results-dir", str(results)]) == 0
    err = capsys.readouterr().err
    assert f"{table}:3: a quote opened in the row that starts here is never closed" in err
    (rec,), _ = read_records(results)
    assert rec["source_path"] == str(good.resolve())
    assert [r["config"]["model"] for r in read_records(results)[0]] == ["resnet50"]


@pytest.mark.parametrize("cell", ["", "  "])
def test_a_blank_started_at_is_refused_naming_the_line(tmp_path, capsys, cell):
    code, table, results = _import(tmp_path, f"resnet50,32,m,100,2024-01-31T12:00:00+00:00\nresnet50,64,m,100,{cell}\n"
                                             "resnet50,128,m,100\n", header=_COLUMNS + ",started_at")
    err = capsys.readouterr().err
    assert code == 0 and f"{table}:3: column 'started_at' is empty" in err
    assert f"{table}:4: column 'started_at' is empty" in err
    (rec,), _ = read_records(results)
    assert rec["started_at"] == "2024-01-31T12:00:00+00:00"


def test_without_a_started_at_column_the_files_time_is_taken(tmp_path, capsys):
    import os

    code, table, results = _import(tmp_path, "resnet50,32,m,100\n", "--dry-run")
    os.utime(table, (1_700_000_000, 1_700_000_000))
    assert main(["import", "csv", str(table), "--results-dir", str(results)]) == 0
    (rec,), _ = read_records(results)
    assert rec["started_at"] == "2023-11-14T22:13:20+00:00"


@pytest.mark.parametrize("text", [FORMULA, "'=x", "''@x", "'plain", "-", "-1.5", "a-b", "\t=1"])
def test_plain_text_gives_back_what_the_writer_was_given(text):
    from cnnbench.results.csv_out import plain_text

    [[cell]] = rows_of(csv_text([text], []))
    assert plain_text(cell) == text


def test_an_exported_formula_imports_back_as_it_was(tmp_path, capsys):
    rec = record(model="resnet50", machine="=box")
    rec.update(suite_name="'=quoted", offset=-2.5)
    store = write_store(tmp_path / "r", [rec])
    table = tmp_path / "x.csv"
    assert main(["results", "export", str(store), "--format", "csv", "-o", str(table)]) == 0
    assert "'=box" in table.read_text() and "''=quoted" in table.read_text()
    assert main(["import", "csv", str(table), "--results-dir", str(tmp_path / "back")]) == 0
    (back,), _ = read_records(tmp_path / "back")
    assert back["environment"]["machine"] == "=box" and back["suite_name"] == "'=quoted"
    assert back["offset"] == -2.5


def test_every_csv_goes_through_the_one_writer():
    """No module but :mod:`cnnbench.results.csv_out` makes a CSV writer of its own."""
    src = Path(__file__).resolve().parent.parent / "src" / "cnnbench"
    own = [f"{path.relative_to(src)}:{n}" for path in sorted(src.rglob("*.py")) if path.name != "csv_out.py"
           for n, line in enumerate(path.read_text().splitlines(), 1)
           if "csv.writer" in line or "DictWriter" in line]
    assert own == []


@pytest.mark.parametrize("rec", [
    {"metrics": {"a": [1, 2, 1e19]}}, {"metrics": {"a": {"b": [float("nan"), 1]}}}, {"x": 10**400},
    {"metrics": {"a": [1, None, 2e18]}}, {"metrics": {"a": [1e308, 1e308]}}, {"metrics": {"a": True}},
    {"config": {"lr": float("inf")}}, {"metrics": {"a": [[1, 2], [3, 1e30]]}}, {"metrics": {"ok": [1, 2.5]}},
    {"metrics": {"e": []}}, {"metrics": {"a": [-1e19]}}, {"y": [10**400, 1]}, {"config": {"n": 1e300}},
])
def test_the_import_check_finds_what_a_reader_drops(rec):
    import copy

    from cnnbench.results.cleaning import drop_unusable_figures, unusable_figure

    dropped = drop_unusable_figures(copy.deepcopy(rec))
    found = unusable_figure(rec)
    assert (found is None) == (not dropped) and (found is None or found in dropped)


# --- item 7 (every throughput figure) and the header of a table read back (item 3) ----------------------------------

_FAILED_COLUMNS = "config.model,config.batch_size,environment.machine,{figure},metrics.time_s,status"


@pytest.mark.parametrize(("figure", "cell"), [
    ("metrics.images_per_sec_mean", "123"),
    ("metrics.images_per_sec_median", "123"),
    ("metrics.images_per_sec_stderr", "1.5"),
    ("metrics.images_per_sec_jitter", "2"),
    ("metrics.per_device_images_per_sec", '"[61.5, 61.5]"'),
    ("metrics.images_per_sec_per_worker", "123"),
])
@pytest.mark.parametrize("status", ["error", "oom"])
def test_a_failed_row_with_any_throughput_figure_is_refused_naming_the_line(tmp_path, capsys, figure, cell, status):
    body = f"resnet50,32,m,{cell},5,ok\nresnet50,64,m,{cell},5,{status}\nresnet50,128,m,,5,{status}\n"
    code, table, results = _import(tmp_path, body, header=_FAILED_COLUMNS.format(figure=figure))
    err = capsys.readouterr().err
    assert code == 0 and len(err.strip().splitlines()) == 1, err
    assert f"{table}:3: status {status} with {figure} " in err and "a failed run has no throughput" in err
    records, problems = read_records(results)
    assert problems == [] and sorted((r["config"]["batch_size"], r["status"]) for r in records) == [
        (32, "ok"), (128, status)]
    failed = next(r for r in records if r["status"] != "ok")
    assert failed["metrics"] == {"time_s": 5}  # a failed run keeps its time, and no figure


class _Failing(nn.Module):
    """A model that fails after its warm-up steps (cnnbench's own failed record: status error or oom)."""

    def __init__(self, error: BaseException, num_classes: int) -> None:
        super().__init__()
        self.lin = nn.Linear(3, num_classes)
        self.error, self.calls = error, 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 3:
            raise self.error
        return self.lin(x.mean((2, 3)))


@register_model("probe_csv_raises", default_image_size=16)
def _raises(num_classes=1000, image_size=16):
    return _Failing(ValueError("boom in the model"), num_classes)


@register_model("probe_csv_oom", default_image_size=16)
def _oom(num_classes=1000, image_size=16):
    return _Failing(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"), num_classes)


def test_cnnbench_s_own_failed_records_import_back_from_their_export(tmp_path, capsys):
    from cnnbench.config import RunConfig
    from cnnbench.engine import run_and_append

    store = tmp_path / "r"
    for model in ("probe_csv_raises", "probe_csv_oom"):
        record, _ = run_and_append(RunConfig(model=model, batch_size=4, num_batches=6, num_warmup_batches=2,
                                             device="cpu", results_dir=str(store)))
        assert record.status in ("error", "oom")
    written, _ = read_records(store)
    assert sorted(r["status"] for r in written) == ["error", "oom"]
    table = tmp_path / "x.csv"
    assert main(["results", "export", str(store), "--format", "csv", "-o", str(table)]) == 0
    capsys.readouterr()
    assert main(["import", "csv", str(table), "--results-dir", str(tmp_path / "back")]) == 0
    assert "skipped" not in capsys.readouterr().err
    back, problems = read_records(tmp_path / "back")
    assert problems == [] and len(back) == 2
    by_status = {r["status"]: r for r in written}
    for rec in back:
        assert rec["metrics"] == {k: v for k, v in by_status[rec["status"]]["metrics"].items() if v is not None}


def test_an_exported_column_name_imports_back_as_it_was(tmp_path, capsys):
    rec = record(model="resnet50", machine="m")
    rec.update({"=x": "a", "'=y": "b", "-z": "c"})
    rec["metrics"]["=rate"] = 5.0
    store = write_store(tmp_path / "r", [rec])
    table = tmp_path / "x.csv"
    assert main(["results", "export", str(store), "--format", "csv", "-o", str(table)]) == 0
    header = rows_of(table.read_text())[0]
    assert {"'=x", "''=y", "'-z", "metrics.=rate"} <= set(header)
    assert main(["import", "csv", str(table), "--results-dir", str(tmp_path / "back")]) == 0
    assert "skipped" not in capsys.readouterr().err
    (back,), _ = read_records(tmp_path / "back")
    assert (back["=x"], back["'=y"], back["-z"]) == ("a", "b", "c")
    assert back["metrics"]["=rate"] == 5.0
    assert not any(key.startswith("'") and key != "'=y" for key in back)


def test_a_log_that_did_not_finish_keeps_its_last_progress_figures_through_an_export(tmp_path, capsys):
    logs = Path(__file__).resolve().parent / "fixtures" / "tf_cnn_benchmarks_logs"
    text = (logs / "LambdaCloud-RTX_A6000.logs/syn-replicated-fp32-4gpus/resnet50-256/throughput/1").read_text()
    lines = text.splitlines()
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("60\timages/sec"))
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines[: cut + 1]) + "\n")
    store, table, back = tmp_path / "r", tmp_path / "x.csv", tmp_path / "back"
    assert main(["import", "tf-cnn-benchmarks", str(log), "--results-dir", str(store), "--machine-label", "m"]) == 0
    assert main(["results", "export", str(store), "--format", "csv", "-o", str(table)]) == 0
    assert main(["import", "csv", str(table), "--results-dir", str(back)]) == 0
    assert "skipped" not in capsys.readouterr().err
    (rec,), _ = read_records(store)
    (again,), _ = read_records(back)
    assert rec["status"] == again["status"] == "error" and "total_images_per_sec" not in again["metrics"]
    assert again["metrics"]["images_per_sec_mean"] == rec["metrics"]["images_per_sec_mean"]  # as the log said


def test_results_list_shows_no_figure_for_a_failed_run_written_by_hand_or_merged(tmp_path, capsys):
    """Import refuses a failed row with a figure, but a line written by hand in a shared store (or merged
    from one) may still hold one: ``results list`` shows none for a run that did not end ok."""
    import json

    from cnnbench.cli import main
    from tests.report_fixtures import record

    store = tmp_path / "store"
    store.mkdir()
    failed = record(machine="box", status="error")
    failed["metrics"]["total_images_per_sec"] = 123.0
    (store / "box.jsonl").write_text(json.dumps(failed) + "\n" + json.dumps(record(machine="box", ips=77.0)) + "\n")
    assert main(["results", "merge", str(store), "--into", str(tmp_path / "merged")]) == 0
    for folder in (store, tmp_path / "merged"):
        capsys.readouterr()
        assert main(["results", "list", str(folder), "--limit", "0"]) == 0
        rows = [line for line in capsys.readouterr().out.splitlines() if " box " in f" {line} "]
        assert len(rows) == 2, rows
        error = next(line for line in rows if "error" in line)
        assert "123" not in error and "—" in error
        assert "77.00" in next(line for line in rows if " ok " in line)
