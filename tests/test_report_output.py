"""Report outputs and the command: summary.md, report.html, tables/*.csv|json, plots/*.svg."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
import sys

import pytest

from cnnbench.cli import main
from cnnbench.report import ReportOptions, build_report, report_results, write_report
from tests.report_fixtures import record, scaling_records, training_record, write_store


@pytest.fixture
def store(tmp_path):
    recs = scaling_records() + [training_record(n) for n in (1, 2)]
    recs += [record("resnet50", "m-fast", 395.0, source="tf_cnn_benchmarks", compile=None)]
    return write_store(tmp_path / "results", recs)


def test_cli_writes_every_output(store, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--title", "Lab machines"]) == 0
    printed = capsys.readouterr().out
    assert "summary.md" in printed and "plots" in printed
    md = (out / "summary.md").read_text()
    assert md.startswith("# Lab machines\n")
    assert "## Observations" in md and "## Scaling" in md and "## Training to accuracy" in md
    assert "| model | batch | m-fast | m-slow |" in md
    tables = sorted(p.name for p in (out / "tables").iterdir())
    stems = {n.rsplit(".", 1)[0] for n in tables}
    assert all(f"{s}.csv" in tables and f"{s}.json" in tables for s in stems)
    assert "model-cost" in stems and "throughput-syn-replicated-4gpus" in stems
    svgs = list((out / "plots").glob("*.svg"))
    assert svgs and all(p.read_bytes().startswith(b"<?xml") and b"<svg" in p.read_bytes()[:500] for p in svgs)
    for p in svgs:
        assert f"plots/{p.name}" in md
        assert b"<text" in p.read_bytes() and b"DejaVuSans-" not in p.read_bytes()  # text as text, no glyph paths


def test_html_has_the_same_content_and_is_self_contained(store, tmp_path):
    report, written = report_results([store], tmp_path / "out")
    html = written.html.read_text()
    assert html.startswith("<!DOCTYPE html>")
    for t in report.tables:
        assert t.title.split(": ", 1)[-1].replace("&", "&amp;") in html
    for obs in report.observations:
        assert obs.text.replace("&", "&amp;").replace("'", "&#x27;") in html
    assert html.count("data:image/svg+xml;base64,") == len(written.plots) > 0
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert '<td class="fail">OOM</td>' in html
    assert '<td class="fail">224 x 224' not in html  # only failures are marked as such


def test_csv_and_json_hold_values_status_words_and_empty_missing(tmp_path):
    recs = [record("resnet50", "m-fast", 400.0), record("resnet50", "m-slow", status="oom"),
            record("vgg16", "m-fast", 250.0)]
    report = build_report(recs, ReportOptions(max_plots=0))
    write_report(report, tmp_path)
    with open(tmp_path / "tables" / "throughput-syn-replicated-1gpus.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["model", "batch", "m-fast", "m-slow"]
    assert rows[1] == ["resnet50", "64", "400.0", "OOM"]
    assert rows[2] == ["vgg16", "64", "250.0", ""]
    doc = json.loads((tmp_path / "tables" / "throughput-syn-replicated-1gpus.json").read_text())
    assert doc["title"] == "syn-replicated-1gpus" and doc["kind"] == "configuration"
    assert doc["rows"][1] == {"model": "vgg16", "batch": 64, "m-fast": 250.0, "m-slow": None}
    assert doc["rows"][0]["m-slow"] == "OOM"
    assert doc["text"][1][3] == "—"
    assert not list((tmp_path / "plots").glob("*.svg"))


def test_rewriting_removes_the_stale_tables_it_wrote(tmp_path):
    write_report(build_report([record(machine="a", ips=1.0), record(machine="b", ips=2.0)]), tmp_path)
    mine = tmp_path / "tables" / "throughput-old.csv"  # not the report's: it stays
    mine.write_text("x\n")
    write_report(build_report([record(ips=3.0)], ReportOptions(max_plots=0)), tmp_path)
    assert mine.read_text() == "x\n"
    assert not list((tmp_path / "plots").glob("*.svg"))


def test_wide_effect_tables_print_condensed_but_files_keep_every_pair(tmp_path):
    recs = []
    for i in range(20):
        for n in (1, 2):
            recs += [record(f"model{i}", ips=(110.0 + i) * n, precision="amp_fp16", num_devices=n),
                     record(f"model{i}", ips=100.0 * n, num_devices=n)]
    report = build_report(recs, ReportOptions(effects=["precision"], max_plots=0))
    write_report(report, tmp_path)
    md = (tmp_path / "summary.md").read_text()
    assert "| num_devices | n | min | median | max |" in md
    assert "| 1 | 20 | 1.10 | 1.19 | 1.29 |" in md  # median of 1.10 ... 1.29 by 0.01
    assert "| all | 40 | 1.10 | 1.19 | 1.29 |" in md
    doc = json.loads((tmp_path / "tables" / "effect-precision-amp_fp16-vs-fp32.json").read_text())
    assert len(doc["columns"]) == 22 and len(doc["rows"]) == 3


def test_nothing_matching_where_says_so_in_one_line(store, tmp_path, capsys):
    rc = main(["report", str(store), "-o", str(tmp_path / "out"), "--where", "model=nosuchnet"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.count("\n") == 1 and "no records match --where model=nosuchnet" in err
    assert not (tmp_path / "out").exists()


def test_a_store_of_no_records_is_bad_input_as_history_says_it(tmp_path, capsys):
    """An empty results folder ended the report with exit 1, where history and compare give 2."""
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no results to read in" in err and not (tmp_path / "out").exists()


def test_where_selects_and_reports_it(store, tmp_path):
    report, _ = report_results([store], tmp_path / "out", ReportOptions(where=["model=vgg16", "machine!=m-slow"]))
    models = {c.text for t in report.tables if t.kind == "configuration" for c in (r[0] for r in t.rows)}
    assert models == {"vgg16"}
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "Selected with --where model=vgg16 machine!=m-slow: 3 of" in md


def test_cli_errors_are_one_line(store, tmp_path, capsys):
    assert main(["report", str(store), "-o", str(tmp_path / "o"), "--effect", "nosuch"]) == 2
    assert "unknown field 'nosuch'" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "o")]) == 2
    assert "no results at" in capsys.readouterr().err
    assert main(["report", str(store), "-o", str(tmp_path / "o"), "--noise", "lots"]) == 2
    assert "--noise" in capsys.readouterr().err
    assert main(["report", str(store), "-o", str(tmp_path / "o"), "--where", "model"]) == 2
    assert "FIELD=VALUE" in capsys.readouterr().err


def test_unreadable_lines_are_listed_not_fatal(store, tmp_path, capsys):
    with open(store / "m-fast.jsonl", "a") as f:
        f.write('{"truncated": ')
    assert main(["report", str(store), "-o", str(tmp_path / "out"), "--no-plots"]) == 0
    assert "skipped 1 unreadable line" in capsys.readouterr().out
    assert "## Results that could not be read" in (tmp_path / "out" / "summary.md").read_text()


def test_report_code_does_not_import_torch(store, tmp_path):
    code = (
        "import sys\n"
        "import cnnbench.report, cnnbench.report.render.plots, cnnbench.cli.report_cmd\n"
        "from cnnbench.cli import main\n"
        f"rc = main(['report', {str(store)!r}, '-o', {str(tmp_path / 'o')!r}, '--max-plots', '1'])\n"
        "assert rc == 0, rc\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout


def test_summary_then_contents_then_systems_and_scaling_near_the_top(store, tmp_path):
    report, written = report_results([store], tmp_path / "out")
    md = written.summary.read_text()
    first = md.split("\n\n")[1]
    assert first.startswith("15 results (14 ok, 1 oom) of 2 models in 3 configurations at 1, 2 and 4 devices, "
                            "on 2 machines: m-fast, m-slow.")
    order = [md.index(h) for h in ("## Observations", "## Contents", "## Systems", "## Scaling",
                                   "## Throughput by configuration", "## Model cost")]
    assert order == sorted(order)
    # every contents entry links to an anchor that a heading of the HTML carries
    html = written.html.read_text()
    contents = md[md.index("## Contents"):md.index("## Systems")]
    links = re.findall(r"\]\(#([^)]+)\)", contents)
    assert "systems" in links and "scaling" in links
    for anchor in links:
        assert f' id="{anchor}"' in html
    assert '<a href="#scaling">Scaling</a>' in html


def test_markdown_anchors_are_githubs_and_unique():
    from cnnbench.report.document import Heading, set_anchors

    hs = [Heading("Throughput by configuration (images/sec; columns: machine)"), Heading("Scaling"),
          Heading("Scaling", 3)]
    set_anchors(hs)
    assert [h.anchor for h in hs] == ["throughput-by-configuration-imagessec-columns-machine", "scaling",
                                      "scaling-1"]


def test_systems_section_lists_each_machine_from_the_environment():
    recs = [record(machine="m-fast", environment={"gpu_driver": "535.104", "cuda_version": "12.1",
                                                  "torchvision_version": "0.20.0", "cpu_threads": 32,
                                                  "memory_bytes": 64 * 2**30}),
            record(machine="m-slow", environment={"framework": "tensorflow 2.4.1", "torch_version": None})]
    t = build_report(recs).table("systems")
    assert t.columns == ["machine", "CPU", "cores", "memory", "GPUs", "driver", "CUDA", "framework"]
    assert t.cell("m-fast", "GPUs").text == "8 × GPU-P100"
    assert t.cell("m-fast", "cores").text == "16 (32 threads)"
    assert t.cell("m-fast", "framework").text == "torch 2.5.0, torchvision 0.20.0"
    assert t.cell("m-fast", "memory").text == "64 GiB"
    assert t.cell("m-slow", "framework").text == "tensorflow 2.4.1"
    assert t.cell("m-slow", "driver").text == "—"
    nameless = record(machine="", environment={"hostname": "box-7"})  # the report's fallback: the host name
    assert [r[0].text for r in build_report([nameless]).table("systems").rows] == ["box-7"]


def test_wide_tables_scroll_in_their_own_box(store, tmp_path):
    _, written = report_results([store], tmp_path / "out")
    html = written.html.read_text()
    assert "div.table{overflow-x:auto" in html
    assert html.count('<div class="table"><table>') == html.count("<table>") > 0


def test_numbers_have_separators_and_csv_keeps_full_values_and_the_spread(tmp_path):
    recs = [record(ips=12345.678), record(ips=12845.678), record("vgg16", ips=41.2345)]
    report = build_report(recs, ReportOptions(max_plots=0))
    [t] = [t for t in report.tables if t.kind == "configuration"]
    assert t.cell("resnet50", "m-fast").text == "12,596 ±2.8%"  # stdev 500/√2 over the mean
    assert t.cell("vgg16", "m-fast").text == "41.23"
    written = write_report(report, tmp_path / "out")
    with open(written.outdir / "tables" / f"{t.id}.csv") as f:
        rows = list(csv.DictReader(f))
    rel_stdev = 500 / math.sqrt(2) / 12595.678
    assert rows[0]["m-fast"] == "12595.678"
    assert float(rows[0]["m-fast relative stdev"]) == pytest.approx(rel_stdev, abs=1e-6)
    assert rows[1]["m-fast relative stdev"] == ""
    data = json.loads((written.outdir / "tables" / f"{t.id}.json").read_text())
    assert data["rows"][0]["m-fast relative stdev"] == pytest.approx(rel_stdev, abs=1e-6)
    assert data["columns"] == ["model", "batch", "m-fast", "m-fast relative stdev"] == list(data["rows"][0])
    assert data["text_columns"] == t.columns == ["model", "batch", "m-fast"]
    assert data["text"][0] == ["resnet50", "64", "12,596 ±2.8%"]


def test_table_json_is_one_row_a_line_and_each_value_as_the_standard_library_wrote_it():
    import datetime
    import enum

    import numpy as np

    from cnnbench.report.render.csv_json import table_texts
    from cnnbench.report.table import Cell, Table

    rows = [[Cell("é", "é"), Cell("1.5", 1.5), Cell("3", 3)],
            [Cell("b", "b"), Cell("—", float("nan")), Cell("big", 2**70)],
            [Cell("c\ud800", "c\ud800"), Cell("é", 0.25), Cell("", None)]]
    _, text = table_texts(Table("t", "T", "configuration", ["name", "x", "y"], rows, ["a note"]))
    data = json.loads(text)
    assert data["rows"] == [{"name": "é", "x": 1.5, "y": 3},
                            {"name": "b", "x": None, "y": 2**70},  # NaN: null; beyond 64 bits: the number itself
                            {"name": "c\ud800", "x": 0.25, "y": None}]
    assert data["text"][2] == ["c\ud800", "é", ""] and data["notes"] == ["a note"]
    lines = text.splitlines()
    assert lines[0].startswith('{"id":"t",') and lines[0].endswith('"notes":["a note"],')
    assert lines[1:5] == [' "rows": [', '  {"name":"é","x":1.5,"y":3},',
                          '  {"name":"b","x":null,"y":1180591620717411303424},',
                          '  {"name":"c\\ud800","x":0.25,"y":null}']
    assert lines[5:] == [" ],", ' "text": [', '  ["é","1.5","3"],', '  ["b","—","big"],',
                         '  ["c\\ud800","\\u00e9",""]', " ]}"]  # UTF-8, escaped where a row cannot be

    class Knob(enum.Enum):  # values of other classes (a record's, through the Python API): as json wrote them
        FAST = 1

    when = datetime.datetime(2024, 1, 1, 12, 0)
    rows = [[Cell("Knob.FAST", Knob.FAST), Cell(str(when), when)]]
    _, text = table_texts(Table("u", "U", "configuration", ["knob", "when"], rows, []))
    assert json.loads(text)["rows"] == [{"knob": "Knob.FAST", "when": "2024-01-01 12:00:00"}]
    rows = [[Cell("1.5", np.float64(1.5)), Cell("3", np.int64(3)), Cell("—", np.float64("nan"))]]
    _, text = table_texts(Table("v", "V", "configuration", ["x", "y", "z"], rows, []))
    assert json.loads(text)["rows"] == [{"x": 1.5, "y": "3", "z": None}]


def test_plots_drawn_by_worker_processes_are_the_ones_drawn_here(tmp_path, monkeypatch):
    from cnnbench.report.render import drawing

    report = build_report(scaling_records() + [training_record(n) for n in (1, 2)])
    figures = [f for f in report.figures if f.drawn]
    assert len(figures) >= 2
    here_pool = drawing.prepare_drawing(0)
    assert here_pool.pool is None
    here = drawing.start_drawing(figures, tmp_path / "here", here_pool).wait()
    prepared = drawing.prepare_drawing(2)  # started before there are figures, as cnnbench report does
    assert prepared.pool is not None  # really in other processes
    pooled = drawing.start_drawing(figures, tmp_path / "pool", prepared)
    paths = pooled.wait()
    assert prepared.pool is None  # closed with the drawing
    assert [p.name for p in paths] == [p.name for p in here] == [f"{f.name}.svg" for f in figures]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(here, paths, strict=True))

    def no_processes(*args, **kwargs):
        raise OSError("no processes here")

    monkeypatch.setattr(drawing, "ProcessPoolExecutor", no_processes)
    fallback = drawing.start_drawing(figures, tmp_path / "fallback", drawing.prepare_drawing(2)).wait()
    assert [p.read_bytes() for p in fallback] == [p.read_bytes() for p in here]


def test_report_without_o_writes_to_report_folder(store, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(store), "--no-plots"]) == 0
    assert (tmp_path / "report" / "summary.md").is_file()
    out = capsys.readouterr().out
    assert "report/summary.md" in out and "0 plots" in out and "from 15 results" in out


def test_plots_carry_error_bars_batches_and_shared_axes():
    from cnnbench.report.render.plot_scaling import _scaling
    from cnnbench.report.render.plot_throughput import _throughput

    recs = [record("resnet50", "m-fast", v) for v in (380.0, 420.0)]  # two repeats: an error bar
    recs += [record("resnet50", "m-slow", 200.0, batch_size=32), record("vgg16", "m-fast", 100.0),
             record("vgg16", "m-slow", 50.0)]
    recs += [record("resnet50", "m-fast", v, num_devices=2) for v in (700.0, 760.0)]
    recs += [record("resnet50", "m-slow", 380.0, num_devices=2, batch_size=32), record("vgg16", "m-fast", 190.0,
                                                                                     num_devices=2)]
    report = build_report(recs)
    [thr] = [f for f in report.figures if f.name == "throughput-syn-replicated-1gpus"]
    rows = thr.data["rows"]
    errors = dict(zip(rows, thr.data["errors"], strict=True))
    # one stdev of the repeats either side (the table's ±): 40 / √2
    assert errors["resnet50"][0] == pytest.approx(40 / math.sqrt(2)) and errors["vgg16"] == [0.0, 0.0]
    batches = dict(zip(rows, thr.data["batches"], strict=True))
    assert batches["resnet50"] == ["64", "32"] and batches["vgg16"] == ["", ""]  # only where machines differ
    fig = _throughput(thr)
    assert any("batch 32" in t.get_text() for ax in fig.axes for t in ax.texts)
    [sc] = [f for f in report.figures if f.kind == "scaling"]
    [fast, slow] = sc.data["models"]["resnet50"]
    assert fast["ranges"] == [(1, pytest.approx(380 / 400), pytest.approx(420 / 400)),
                              (2, pytest.approx(700 / 400), pytest.approx(760 / 400))]
    assert fast["note"] == "batch 64" and slow["note"] == "batch 32"
    drawn = _scaling(sc)
    a, b = drawn.axes[0], drawn.axes[1]
    assert a.get_shared_y_axes().joined(a, b)  # the panels compare on one axis
    assert a.collections  # the error bars
