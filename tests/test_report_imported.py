"""The tf_cnn_benchmarks fixture logs, imported, rendered as seed 000-style tables
(rows = models, columns = machines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnnbench.cli import main
from tests.report_fixtures import write_store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf_cnn_benchmarks_logs"
MODELS = {"alexnet", "inception3", "inception4", "resnet152", "resnet50", "vgg16"}
RTX3080 = "3960X-GeForce_RTX_3080_XLA"
A6000 = "LambdaCloud-RTX_A6000"


@pytest.fixture(scope="module")
def imported():
    from cnnbench.results import importers

    result = importers.get_importer("tf-cnn-benchmarks").run([FIXTURES], importers.ImportOptions())
    assert result.records
    return result.records


def _training_fp32(report, devices):
    tables = [t for t in report.tables if t.kind == "configuration" and f"fp32-{devices}gpus" in t.title
              and "inference" not in t.title]
    assert len(tables) == 1, [t.title for t in report.tables if t.kind == "configuration"]
    return tables[0]


def test_imported_logs_as_seed_000_tables(imported):
    from cnnbench.report import ReportOptions, build_report

    report = build_report(imported, ReportOptions(max_plots=0))
    t = _training_fp32(report, 2)
    assert t.title.startswith("syn-replicated")
    assert t.columns[2:] == [RTX3080, A6000]
    assert {r[0].text for r in t.rows} == MODELS
    # "total images/sec" of .../syn-replicated-fp32-2gpus/alexnet-*/throughput/1 on each machine
    assert t.cell("alexnet", RTX3080).value == pytest.approx(7324.87)
    assert t.cell("alexnet", A6000).value == pytest.approx(14605.09)
    assert t.cell("resnet50", A6000).value == pytest.approx(1080.79)
    for row in t.rows:
        assert all(c.is_number and c.value > 0 for c in row[2:])
    # the RTX 3080 machine has two GPUs: its 4-GPU column does not exist, nothing shows as 0
    four = _training_fp32(report, 4)
    assert four.columns[2:] == [A6000]
    # the precision and the mode vary, so they are in the names
    titles = {t.title for t in report.tables if t.kind == "configuration"}
    assert any(title.endswith("-inference") for title in titles)
    assert len(titles) == 12
    # imported records carry no model cost: tf names take the torchvision model of the same architecture's
    cost = report.table("model-cost")
    assert cost.cell("inception3", "input size").text == "299 x 299"
    assert cost.cell("resnet50", "param memory (MiB)").text == "97.5"
    assert cost.cell("inception4", "params").text == "—"  # timm's Inception v4: not measured


def test_imported_logs_through_the_command(imported, tmp_path):
    store = write_store(tmp_path / "results", imported)
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--where", "precision=fp32", "--max-plots", "2"]) == 0
    md = (out / "summary.md").read_text()
    assert f"| model | batch | {RTX3080} | {A6000} |" in md
    assert "| alexnet | varies | 7,325 (batch " in md
    assert "Scaling" in md
    assert len(list((out / "plots").glob("*.svg"))) == 2
