"""Layouts a report can take (issue 20 item 2): any field as rows or columns, fields that only
follow from another do not split configurations, wide effect tables in markdown and HTML, the
observation kinds a report makes; and the done-check: on the Lambda fixtures,
``report --rows machine,num_devices --columns model`` gives the vendor CSV's layout and figures."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.report import ReportError, ReportOptions, build_report
from cnnbench.report.options import OBSERVATION_KINDS
from cnnbench.report.render.markdown import render_markdown
from tests.report_fixtures import record, write_store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf_cnn_benchmarks_logs"
LOCATIONS = ("device", "host", "loader")


def _configurations(report):
    return [t for t in report.tables if t.kind == "configuration"]


def _location_records():
    """Synthetic input made on the device, on the host and in loader processes at 1, 2 and 4 CPUs;
    loader runs record num_workers=2 (the default there), the others none, as `cnnbench run` does."""
    recs = []
    for loc in LOCATIONS:
        for n in (1, 2, 4):
            for repeat in range(2):
                recs.append(record("trivial", "m-fast", 100.0 * n + LOCATIONS.index(loc) + repeat, num_devices=n,
                                   device="cpu", synthetic_location=loc, num_workers=2 if loc == "loader" else None,
                                   cost=False))
    return recs


def test_options_take_comma_separated_text_and_check_observation_kinds():
    opts = ReportOptions(rows="machine, num_devices", columns="gpu")
    assert opts.rows == ("machine", "num_devices") and opts.columns == ("gpu",)
    assert ReportOptions().rows == ("model",) and ReportOptions().columns == ("machine",)
    assert ReportOptions().observations is None
    assert ReportOptions(observations="fastest,scaling").observations == ("fastest", "scaling")
    assert ReportOptions(observations=("failures",)).observations == ("failures",)
    with pytest.raises(ReportError, match="unknown kind 'speed'.*" + ", ".join(OBSERVATION_KINDS)):
        ReportOptions(observations="fastest,speed")
    with pytest.raises(ReportError, match="--rows"):
        ReportOptions(rows="model,")
    from cnnbench.cli import report_cmd

    assert str(report_cmd._ObservationKinds()) == ", ".join(OBSERVATION_KINDS)  # the --help's list, read late


def test_device_host_and_loader_share_one_table_as_columns():
    report = build_report(_location_records(), ReportOptions(rows="num_devices", columns="synthetic_location"))
    [t] = _configurations(report)
    assert t.title == "syn-replicated-Ncpus"  # no "(num_workers=2)": it comes with loader
    assert t.columns == ["num_devices", "batch", "device", "host", "loader"]
    assert [r[0].value for r in t.rows] == [1, 2, 4]
    assert [[c.value for c in r[2:]] for r in t.rows] == [[100.5, 101.5, 102.5], [200.5, 201.5, 202.5],
                                                          [400.5, 401.5, 402.5]]


def test_real_runs_at_three_input_locations_share_one_table(tmp_path, capsys):
    """`cnnbench run` at each synthetic input location (loader runs get num_workers=2 by default):
    `--rows num_devices --columns synthetic_location` gives one table with the three as columns."""
    store = tmp_path / "results"
    for loc in LOCATIONS:
        assert main(["run", "--model", "trivial", "--device", "cpu", "--batch-size", "2", "--num-batches", "2",
                     "--num-warmup-batches", "1", "--synthetic-location", loc, "--results-dir", str(store),
                     "--machine-label", "box"]) == 0
    workers = {json.loads(line)["config"]["synthetic_location"]: json.loads(line)["config"].get("num_workers")
               for f in store.glob("*.jsonl") for line in f.read_text().splitlines()}
    assert workers == {"device": None, "host": None, "loader": 2}
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--rows", "num_devices", "--columns",
                 "synthetic_location"]) == 0
    capsys.readouterr()
    [table] = [json.loads(p.read_text()) for p in (out / "tables").glob("throughput-*.json")]
    assert table["title"] == "syn-replicated-Ncpus"
    assert table["text_columns"] == ["num_devices", "batch", "device", "host", "loader"]
    [row] = table["rows"]
    assert row["num_devices"] == 1 and all(row[loc] > 0 for loc in LOCATIONS)


def test_num_workers_splits_tables_only_where_it_does_not_follow_from_the_location():
    recs = _location_records()
    # the default layout: one table per location and device count, none named after num_workers
    titles = [t.title for t in _configurations(build_report(recs))]
    assert len(titles) == 9 and not any("num_workers" in title for title in titles), titles
    # loader runs with 2 and with 4 workers: num_workers no longer follows from the location alone
    recs += [record("trivial", "m-fast", 150.0, num_devices=1, device="cpu", synthetic_location="loader",
                    num_workers=4, cost=False)]
    tables = _configurations(build_report(recs, ReportOptions(rows="num_devices", columns="synthetic_location")))
    assert [(t.title, t.columns[2:]) for t in tables] == [
        ("syn-replicated-Ncpus", ["device", "host"]), ("syn-replicated-Ncpus (num_workers=2)", ["loader"]),
        ("syn-replicated-Ncpus (num_workers=4)", ["loader"])]


def test_a_field_that_follows_a_column_field_is_not_in_the_name():
    """all_reduce applies to replicated runs alone: with variable_update as columns, one table,
    not named after the all-reduce of whichever column came first."""
    recs = [record("resnet50", ips=100.0, num_devices=2, variable_update="replicated", all_reduce="nccl"),
            record("resnet50", ips=90.0, num_devices=2, variable_update="parameter_server", all_reduce=None)]
    [t] = _configurations(build_report(recs, ReportOptions(columns="variable_update")))
    assert (t.title, t.columns[2:]) == ("syn-2gpus", ["replicated", "parameter_server"])


def test_locations_by_implementation_share_a_table_though_imports_record_fewer_fields():
    """Rows of device counts, columns of location × implementation (the input-location study): an
    imported tf_cnn_benchmarks run records no compile, data format or num_workers, which splits
    nothing and names nothing."""
    recs = []
    for n in (1, 2):
        for loc in LOCATIONS:
            recs.append(record("resnet50", ips=100.0 * n, num_devices=n, synthetic_location=loc,
                               num_workers=2 if loc == "loader" else None))
        recs.append(record("resnet50", ips=90.0 * n, num_devices=n, synthetic_location="device",
                           source="tf_cnn_benchmarks", compile=None, data_format=None))
    report = build_report(recs, ReportOptions(rows="num_devices", columns="synthetic_location,source"))
    [t] = _configurations(report)
    assert t.title == "syn-replicated-Ngpus"
    assert t.columns == ["num_devices", "batch", "device · cnnbench", "device · tf_cnn_benchmarks",
                         "host · cnnbench", "loader · cnnbench"]
    assert [c.value for c in t.rows[1][2:]] == [200.0, 180.0, 200.0, 200.0]
    # by default the implementations stay apart, each named as before
    titles = {t.title for t in _configurations(build_report(recs))}
    assert len(titles) == 8 and "syn-replicated-2gpus (synthetic_location=device, tf_cnn_benchmarks)" in titles


def test_several_fields_make_combined_row_and_column_labels():
    recs = [record(m, machine, ips, num_devices=n, precision=p)
            for m, ips in (("resnet50", 100.0), ("vgg16", 50.0))
            for machine in ("m-fast", "m-slow") for n in (1, 2) for p in ("fp32", "amp_fp16")]
    report = build_report(recs, ReportOptions(rows=("gpu", "num_devices"), columns="model,precision"))
    [t] = _configurations(report)
    assert t.columns == ["gpu", "num_devices", "batch", "resnet50 · fp32", "resnet50 · amp_fp16", "vgg16 · fp32",
                         "vgg16 · amp_fp16"]
    assert [(r[0].text, r[1].text) for r in t.rows] == [("GPU-K80", "1"), ("GPU-K80", "2"), ("GPU-P100", "1"),
                                                        ("GPU-P100", "2")]
    assert t.rows[0][t.columns.index("vgg16 · amp_fp16")].value == 50.0
    md = render_markdown(report)
    assert "(images/sec; rows: gpu × num_devices; columns: model × precision)" in md


@pytest.mark.parametrize("flags,message", [
    (["--rows", "num_devices", "--columns", "num_devices"], "num_devices: both a row"),
    (["--rows", "num_devices", "--columns", "devices,machine"], "num_devices: both a row"),
    (["--rows", "bogus_field"], "unknown field 'bogus_field'"),
    (["--columns", "machine,machin"], "unknown field 'machin'"),
    (["--rows", "model,model"], "--rows: model named twice"),
    (["--observations", "fastest,nope"], "--observations: unknown kind 'nope'"),
])
def test_a_bad_layout_is_one_line_and_writes_nothing(tmp_path, capsys, flags, message):
    store = write_store(tmp_path / "results", _location_records())
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_observations_of_the_kinds_asked_only():
    recs = _location_records()
    every = build_report(recs, ReportOptions(columns="synthetic_location")).observations
    assert any(o.text.startswith("Scaling") for o in every)
    fastest = build_report(recs, ReportOptions(columns="synthetic_location", observations="fastest")).observations
    assert fastest and all("synthetic_location is" in o.text for o in fastest), fastest
    none = build_report(recs, ReportOptions(columns="synthetic_location", observations="failures"))
    assert none.observations == []
    assert "Nothing to observe of the kinds asked (--observations failures)." in render_markdown(none)


def _wide_effect_records():
    """fp16 against fp32 for 16 models at 1 and 2 devices: rows of device counts, 16 series, a table
    wider than markdown prints whole."""
    return [record(f"net{i}", "m-fast", n * (100.0 + i if p == "fp32" else 190.0 + i), precision=p, num_devices=n,
                   cost=False)
            for i in range(16) for p in ("fp32", "amp_fp16") for n in (1, 2)]


def test_wide_effect_tables_are_whole_in_markdown_and_html(tmp_path):
    store = write_store(tmp_path / "results", _wide_effect_records())
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--effect", "precision"]) == 0
    md = (out / "summary.md").read_text()
    effects, whole = md.split("## Effects (one factor at a time)")[1].split("## Effects per series (every column)")
    assert "| n | min | median | max |" in effects  # summarised among the effects
    header = next(line for line in whole.splitlines() if line.startswith("| "))
    assert header.count("net") == 16 and header.endswith("| median |"), header
    assert "| all | 1." in whole  # the row of medians over every pair
    html = (out / "report.html").read_text()
    assert html.count("<th>net15</th>") == 1 and 'id="effects-per-series-every-column"' in html
    [effect_json] = (out / "tables").glob("effect-*.json")
    assert len(json.loads(effect_json.read_text())["columns"]) == 18  # the files hold the one wide table


def _vendor_rows(path: Path) -> dict[tuple[str, int], dict[str, int]]:
    """``{(GPU, count): {model: images/sec}}`` from a Lambda CSV (``2x RTX 3080`` -> RTX 3080, 2)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for row in rows:
        gpu = re.sub(r"^(Lambda Cloud — )?(\d+x )?", "", row.pop("name_gpu"))
        n = int(row.pop("num_gpu"))
        out[(gpu, n)] = {model: int(v) for model, v in row.items()}
    return out


@pytest.fixture(scope="module")
def lambda_layout_tables(tmp_path_factory):
    """The tables of `report --rows machine,num_devices --columns model` on the imported Lambda logs."""
    base = tmp_path_factory.mktemp("lambda")
    store, out = base / "results", base / "report"
    assert main(["import", "tf-cnn-benchmarks", str(FIXTURES), "--results-dir", str(store)]) == 0
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--rows", "machine,num_devices",
                 "--columns", "model"]) == 0
    return [json.loads(p.read_text()) for p in (out / "tables").glob("throughput-*.json")]


@pytest.mark.parametrize("vendor_csv,precision", [("lambda-tf-train-throughput-fp32.csv", "fp32"),
                                                  ("lambda-tf-train-throughput-fp16.csv", "amp_fp16")])
def test_lambda_fixtures_give_the_vendor_csv_layout_and_figures(lambda_layout_tables, vendor_csv, precision):
    """The done-check of issue 20: rows GPU × count, columns models, the figures of Lambda's CSV
    once rounded to whole images/sec, in the training table of its precision."""
    [table] = [t for t in lambda_layout_tables if f"-{precision}-" in t["title"] and "inference" not in t["title"]]
    vendor = _vendor_rows(FIXTURES / vendor_csv)
    models = list(next(iter(vendor.values())))
    assert table["text_columns"] == ["machine", "num_devices", "batch", *models]
    ours = {}
    for row in table["rows"]:
        [gpu] = {g for g, _ in vendor if g.replace(" ", "_") in row["machine"]}
        ours[(gpu, row["num_devices"])] = row
    assert list(ours) == list(vendor)  # the same rows, in the same order
    compared = 0
    for key, figures in vendor.items():
        for model, expected in figures.items():
            assert abs(ours[key][model] - expected) <= 0.5, (key, model, ours[key][model], expected)
            compared += 1
    assert compared == 30


def test_the_python_api_takes_rows_columns_and_observations():
    import cnnbench

    rep = cnnbench.make_report(_location_records(), rows=["num_devices"], columns="synthetic_location",
                          observations=["fastest"], max_plots=0)
    [t] = _configurations(rep)
    assert t.columns[2:] == list(LOCATIONS) and all("synthetic_location" in o.text for o in rep.observations)
    with pytest.raises(ReportError, match="both a row"):
        cnnbench.make_report(_location_records(), rows="num_devices", columns="machine,devices", max_plots=0)


def test_rows_that_hold_the_machine_take_models_as_columns_by_default():
    from cnnbench.report import ReportOptions

    assert ReportOptions(rows="machine,num_devices").columns == ("model",)
    assert ReportOptions(rows="num_devices").columns == ("machine",)
    assert ReportOptions().columns == ("machine",) and ReportOptions(rows="machine", columns="gpu").columns == ("gpu",)


def test_effect_columns_name_the_variable_update_not_the_ddp_options_that_come_with_it():
    """input-location's effect table: replicated runs record their all-reduce, parameter_server
    runs none; the column says the variable update alone (it listed the DDP details too)."""
    recs = []
    for update, reduce in (("replicated", "gloo"), ("parameter_server", None)):
        for loc in LOCATIONS:
            for n in (1, 2):
                recs += [record("trivial", "m-fast", 100.0 * n + LOCATIONS.index(loc) + r, num_devices=n,
                                device="cpu", synthetic_location=loc, variable_update=update, all_reduce=reduce,
                                cost=False) for r in range(2)]
    report = build_report(recs, ReportOptions(rows="num_devices", columns="synthetic_location,variable_update",
                                              effects=("synthetic_location",),
                                              baselines={"synthetic_location": "device"}))
    effect_tables = [t for t in report.tables if t.kind == "effect"]
    assert effect_tables
    for t in effect_tables:
        assert not any("all_reduce" in c or "gloo" in c for c in t.columns), t.columns
        assert any("parameter_server" in c for c in t.columns) and any("replicated" in c for c in t.columns)
