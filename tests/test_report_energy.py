"""The images-per-joule tables of cnnbench report."""

from __future__ import annotations

from cnnbench.report import ReportOptions, build_report
from cnnbench.report.document import Heading, TableBlock
from cnnbench.report.render.markdown import render_markdown
from tests.report_fixtures import record


def _report(records):
    return build_report(records, ReportOptions(max_plots=0))


def test_an_energy_table_per_configuration_with_energy_figures():
    records = [
        record("resnet50", "m-fast", 100.0, metrics={"images_per_joule": 2.0}),
        record("resnet50", "m-fast", 100.0, metrics={"images_per_joule": 3.0}),  # a repeat
        record("resnet50", "m-fast", 100.0, metrics={"images_per_joule": 5.0}),
        record("vgg16", "m-slow", 50.0, metrics={"images_per_joule": 0.75}),
        record("vgg16", "m-fast", 80.0),  # no energy figure: a dash, never 0
        record("resnet50", "m-slow", None, status="oom", metrics={"images_per_joule": 9.0}),  # failed: not counted
    ]
    report = _report(records)
    (table,) = [t for t in report.tables if t.kind == "energy"]
    assert table.columns == ["model", "batch", "m-fast", "m-slow"]
    assert table.cell("resnet50", "m-fast").value == 3.0  # median of 2, 3, 5
    assert table.cell("resnet50", "m-slow").text == "—"
    assert table.cell("vgg16", "m-slow").text == "0.75"
    assert table.cell("vgg16", "m-fast").text == "—"
    headings = [b.text for b in report.blocks if isinstance(b, Heading)]
    assert "Energy efficiency (images per joule)" in headings
    assert any(isinstance(b, TableBlock) and b.table is table for b in report.blocks)
    assert "Images per joule" in render_markdown(report)


def test_no_energy_table_without_energy_figures():
    report = _report([record("resnet50", "m-fast", 100.0), record("vgg16", "m-slow", 50.0)])
    assert not [t for t in report.tables if t.kind == "energy"]
    assert "Energy efficiency (images per joule)" not in [b.text for b in report.blocks if isinstance(b, Heading)]
