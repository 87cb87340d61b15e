"""Issue 42, item 4: a table row says each field once (no ``alexnet, batch 4 | 4``), and
``--columns gpu`` on runs that used no GPU names the device they ran on (no column headed ``—``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from cnnbench.cli import main
from cnnbench.report import ReportOptions, build_report
from cnnbench.report.table import MISSING
from tests.report_fixtures import record, write_store

CPU = "AMD EPYC 7B13"
CPU_ENV = {"gpu_model": None, "gpu_count": 0, "cpu_model": CPU}


def _cpu_sweep() -> list[dict]:
    """A store like ``cnnbench sweep suites/quick-cpu.yaml`` makes: three models on the CPU at batch 4 and 8,
    both memory layouts, two repeats."""
    recs = []
    for model in ("resnet18", "mobilenet_v2", "alexnet"):
        for batch in (4, 8):
            for layout in ("NCHW", "NHWC"):
                for repeat in range(2):
                    recs.append(record(model, CPU, 10.0 * batch + repeat, batch_size=batch, device="cpu",
                                       data_format=layout, image_size=64, cost=False, environment=CPU_ENV))
    return recs


def _kind(report, kind):
    return [t for t in report.tables if t.kind == kind]


def _nchw(folder: Path, ext: str) -> Path:
    [path] = (folder / "tables").glob(f"throughput-*NCHW.{ext}")
    return path


# --------------------------------------------------------------------------- each field once per row


def test_a_batch_sweep_row_says_the_model_and_the_batch_once_each():
    t = next(t for t in _kind(build_report(_cpu_sweep()), "configuration") if "NCHW" in t.title)
    assert t.columns[:2] == ["model", "batch"] and t.label_columns == 2
    assert [[c.text for c in r[:2]] for r in t.rows] == [
        ["alexnet", "4"], ["alexnet", "8"], ["mobilenet_v2", "4"], ["mobilenet_v2", "8"],
        ["resnet18", "4"], ["resnet18", "8"]]
    assert [r[0].value for r in t.rows[:2]] == ["alexnet", "alexnet"] and [r[1].value for r in t.rows[:2]] == [4, 8]
    # the row in a sentence, as observations name it, still finds it
    assert t.cell("alexnet, batch 8", CPU).value == 80.5
    assert t.row_names[:2] == ["alexnet, batch 4", "alexnet, batch 8"]


def test_summary_html_and_table_files_agree_on_a_batch_sweep_row(tmp_path):
    store = write_store(tmp_path / "results", _cpu_sweep())
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    md = (out / "summary.md").read_text()
    assert "| model | batch | AMD EPYC 7B13 |" in md and "| alexnet | 4 | 40.50 |" in md
    assert ", batch 4" not in md.split("## Throughput", 1)[1].split("## Effects", 1)[0]
    html = (out / "report.html").read_text()
    assert "<td>alexnet</td><td>4</td>" in html and "alexnet, batch 4</td>" not in html
    rows = list(csv.reader(_nchw(out, "csv").read_text().splitlines()))
    # the files keep a column per field: the model and the batch, each a value of its own
    assert rows[0][:3] == ["model", "batch", CPU] and rows[1][:3] == ["alexnet", "4", "40.5"]
    data = json.loads(_nchw(out, "json").read_text())
    assert data["rows"][0]["model"] == "alexnet" and data["rows"][0]["batch"] == 4


def test_a_scaling_series_that_names_its_batch_has_no_batch_column_beside_it():
    recs = [record("resnet50", "m-fast", 100.0 * n * b / 32 * (1 if n == 1 else 0.9), num_devices=n, batch_size=b)
            for n in (1, 2) for b in (32, 64)]
    report = build_report(recs)
    [summary] = _kind(report, "scaling-summary")
    assert summary.columns == ["series", "images/sec, 1 device", "2 devices"] and summary.label_columns == 1
    assert [r[0].text for r in summary.rows] == ["resnet50 · batch_size=32", "resnet50 · batch_size=64", "median"]
    assert summary.cell("median", "2 devices").value == 0.9
    [long] = _kind(report, "scaling")
    assert "batch" in long.columns  # the long table (CSV/JSON) keeps its batch column
    [obs] = [o for o in report.observations if o.text.startswith("Scaling")]
    assert "90.0% at 2 devices" in obs.text
    assert all(report.table(r.table).cell(r.row, r.column).value == 0.9 for r in obs.refs)


# --------------------------------------------------------------------------- --columns gpu without a GPU


def test_columns_gpu_on_a_store_of_cpu_runs_names_the_cpu(tmp_path, capsys):
    """The README's example, on what ``cnnbench sweep suites/quick-cpu.yaml`` writes."""
    store = write_store(tmp_path / "results", _cpu_sweep())
    out = tmp_path / "report" / "all"
    assert main(["report", str(store), "-o", str(out), "--columns", "gpu", "--where", "precision=fp32",
                 "--no-plots"]) == 0
    assert "wrote" in capsys.readouterr().out
    md = (out / "summary.md").read_text()
    assert f"| model | batch | CPU: {CPU} |" in md
    assert "| — |" not in md and "|--:|" in md
    assert "_gpu: no run here used a GPU: each is named by the CPU it ran on (CPU: …)._" in md
    assert f"<th>CPU: {CPU}</th>" in (out / "report.html").read_text()
    header = next(csv.reader(_nchw(out, "csv").read_text().splitlines()))
    assert header == ["model", "batch", f"CPU: {CPU}", f"CPU: {CPU} relative stdev"]
    for table in _kind(build_report(_cpu_sweep(), ReportOptions(columns=("gpu",))), "configuration"):
        assert MISSING not in table.columns


def test_columns_gpu_puts_each_cpu_in_a_column_of_its_own_and_gpus_in_theirs():
    recs = [record("resnet50", "m-fast", 400.0), record("resnet50", "m-fast", 402.0),
            record("resnet50", "cpu-a", 20.0, device="cpu", environment=CPU_ENV),
            record("resnet50", "cpu-b", 10.0, device="cpu",
                   environment={**CPU_ENV, "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz"})]
    on_cpu, on_gpu = sorted(_kind(build_report(recs, ReportOptions(columns=("gpu",))), "configuration"),
                            key=lambda t: "cpu" not in t.title)
    assert on_cpu.columns == ["model", "batch", f"CPU: {CPU}", "CPU: Intel(R) Xeon(R) CPU @ 2.20GHz"]
    assert [c.value for c in on_cpu.rows[0][2:]] == [20.0, 10.0]  # two CPUs are not one cell
    assert "gpu: no run here used a GPU: each is named by the CPU it ran on (CPU: …)." in on_cpu.notes
    assert on_gpu.columns == ["model", "batch", "GPU-P100"] and on_gpu.rows[0][2].value == 401.0
    assert not any(n.startswith("gpu:") for n in on_gpu.notes)
    # with the device a row field, runs on GPUs and on the CPU share a table
    [both] = _kind(build_report(recs, ReportOptions(rows=("model", "device"), columns=("gpu",))), "configuration")
    assert both.columns[-3:] == ["GPU-P100", f"CPU: {CPU}", "CPU: Intel(R) Xeon(R) CPU @ 2.20GHz"]
    assert "gpu: a run on the CPU used no GPU: it is named by the CPU it ran on (CPU: …)." in both.notes


def test_rows_gpu_of_a_cpu_run_and_a_run_that_names_no_gpu():
    recs = [record("resnet50", "cpu-a", 20.0, device="cpu", environment=CPU_ENV),
            record("resnet50", "m-old", 300.0, environment={"gpu_model": None})]
    [t] = _kind(build_report(recs, ReportOptions(rows=("gpu", "device"), columns=("model",))), "configuration")
    assert sorted(r[0].text for r in t.rows) == [f"CPU: {CPU}", "m-old: no GPU recorded"]
    assert "gpu: a run on the CPU used no GPU: it is named by the CPU it ran on (CPU: …)." in t.notes
    assert "gpu: … no GPU recorded: a run whose record names no GPU, named by its machine." in t.notes


def test_columns_gpu_of_a_store_with_gpus_says_nothing_more():
    [t] = _kind(build_report([record("resnet50", "m-fast"), record("resnet50", "m-slow")],
                             ReportOptions(columns=("gpu",))), "configuration")
    assert t.columns == ["model", "batch", "GPU-P100", "GPU-K80"]
    assert not any(n.startswith("gpu:") for n in t.notes)


def test_an_unset_value_of_a_column_field_is_named_not_a_bare_dash():
    recs = [record("resnet50", "m-fast", 100.0, all_reduce=None), record("resnet50", "m-fast", 120.0,
                                                                         all_reduce="nccl")]
    [t] = _kind(build_report(recs, ReportOptions(columns=("all_reduce",))), "configuration")
    assert t.columns == ["model", "batch", "all_reduce=none", "nccl"]


def test_the_input_pipeline_table_names_the_cpu_under_columns_gpu():
    data = record("resnet50", CPU, 500.0, device="cpu", environment=CPU_ENV, mode="data", cost=False)
    tables = _kind(build_report([data], ReportOptions(columns=("gpu",))), "pipeline")
    assert tables and all(t.columns == ["pipeline", f"CPU: {CPU}"] for t in tables)


def test_a_dollar_in_a_cpu_or_machine_name_is_drawn_as_text(tmp_path, capsys):
    """Labels come from records: ``$...$`` in them once made matplotlib parse mathtext and the
    report end in a traceback."""
    odd = "CPU $\\frac{a}{$ x"
    recs = [record("resnet18", "m $x$", 10.0 + i, batch_size=4, device="cpu", image_size=64, cost=False,
                   environment={**CPU_ENV, "cpu_model": odd}) for i in range(2)]
    recs += [record("alexnet", "m $x$", 20.0 + i, batch_size=4, device="cpu", image_size=64, cost=False,
                    environment={**CPU_ENV, "cpu_model": odd}) for i in range(2)]
    store = write_store(tmp_path / "results", recs)
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--columns", "gpu"]) == 0
    svgs = list((out / "plots").glob("*.svg"))
    assert svgs and any("frac" in p.read_text() for p in svgs)
