"""Registered fields shown in reports (issue 45): a field declared with ``shown=Shown(...)`` gets a
table per configuration with nothing else written for it; images per joule is one, and reads as
the energy tables did before they were folded into the generic kind."""

from __future__ import annotations

import dataclasses

from cnnbench.report import ReportOptions, build_report
from cnnbench.report.document import Heading
from cnnbench.report.render.markdown import render_markdown
from cnnbench.report.tables.shown import shown_fields
from cnnbench.results import fields as R
from tests.report_fixtures import record

ENERGY_SECTION = """## Energy efficiency (images per joule)

### syn-replicated-1gpus

| model | batch | m-fast | m-slow |
|:--|:--|--:|--:|
| alexnet | 64 | — | — |
| googlenet | 64 | — | — |
| resnet50 | 64 | 3.00 | — |
| resnet101 | 64 | 1,234,567.89 | 4.00 |
| vgg16 | 64 | — | 0.75 |

_Images per joule: images of the timed steps over the energy the GPUs drew meanwhile (NVML; host CPU and \
memory not included); columns: machine; batch = per device. Cell = median of repeats; — = no energy figure._

## Model cost
"""
"""The energy section as the energy table kind wrote it before the fold (captured from it)."""


def _report(records):
    return build_report(records, ReportOptions(max_plots=0))


def _energy_records():
    return [
        record("resnet50", "m-fast", 100.0, metrics={"images_per_joule": 2.0}),
        record("resnet50", "m-fast", 100.0, metrics={"images_per_joule": 3.0}),
        record("resnet50", "m-fast", 100.0, metrics={"images_per_joule": 5.0}),
        record("vgg16", "m-slow", 50.0, metrics={"images_per_joule": 0.75}),
        record("vgg16", "m-fast", 80.0),
        record("resnet50", "m-slow", None, status="oom", metrics={"images_per_joule": 9.0}),
        record("alexnet", "m-fast", 90.0, metrics={"images_per_joule": 0}),  # only positive figures count
        record("alexnet", "m-slow", 90.0, metrics={"images_per_joule": -1.5}),
        record("googlenet", "m-fast", 90.0, metrics={"images_per_joule": True}),  # a flag is no figure
        record("googlenet", "m-slow", 90.0, metrics={"images_per_joule": "3"}),
        record("resnet101", "m-fast", 90.0, metrics={"images_per_joule": 1234567.891}),
        record("resnet101", "m-slow", 90.0, metrics={"images_per_joule": 4}),
    ]


def test_images_per_joule_is_a_shown_field():
    assert R.IMAGES_PER_JOULE in [f.path for f in shown_fields()]
    assert R.field(R.IMAGES_PER_JOULE).shown == R.Shown(
        heading="Energy efficiency (images per joule)", name="energy", absent="no energy figure", positive=True,
        means="images of the timed steps over the energy the GPUs drew meanwhile (NVML; host CPU and memory "
              "not included)")


def test_images_per_joule_reads_as_the_energy_tables_did():
    report = _report(_energy_records())
    (table,) = [t for t in report.tables if t.kind == "energy"]
    assert (table.id, table.title) == ("energy-syn-replicated-1gpus", "Images per joule: syn-replicated-1gpus")
    text = render_markdown(report)
    assert ENERGY_SECTION in text
    assert "- [Energy efficiency (images per joule)](#energy-efficiency-images-per-joule)\n" \
           "  - [syn-replicated-1gpus](#syn-replicated-1gpus-1)\n- [Model cost](#model-cost)\n" in text


SLOWEST = "metrics.slowest_step_s"
"""A field no record carries but these tests' (declared only here, last in the registry)."""


def _declare(monkeypatch, **shown):
    monkeypatch.setitem(R.FIELDS, SLOWEST, R.Field(SLOWEST, unit="s", direction="lower", combine="max",
                                                    label="slowest step", format=".3f", shown=R.Shown(**shown)))


def _slowest_records():
    return [
        record("resnet50", "m-fast", 100.0, metrics={"slowest_step_s": 0.5, "images_per_joule": 2.0}),
        record("resnet50", "m-fast", 100.0, metrics={"slowest_step_s": 0.25}),
        record("resnet50", "m-fast", 100.0, metrics={"slowest_step_s": 0.75}),
        record("vgg16", "m-slow", 50.0, metrics={"slowest_step_s": 0}),  # a 0 counts: not only positive ones
        record("vgg16", "m-fast", 80.0, metrics={"slowest_step_s": False}),
        record("resnet50", "m-slow", None, status="oom", metrics={"slowest_step_s": 9.0}),
    ]


def test_a_declared_shown_field_has_tables_in_its_label_unit_format_and_direction(monkeypatch):
    _declare(monkeypatch)
    report = _report(_slowest_records())
    (table,) = [t for t in report.tables if t.kind == "slowest-step-s"]
    assert table.id == "slowest-step-s-syn-replicated-1gpus"
    assert table.title == "Slowest step: syn-replicated-1gpus"
    assert table.columns == ["model", "batch", "m-fast", "m-slow"]
    assert (table.cell("resnet50", "m-fast").text, table.cell("resnet50", "m-fast").value) == ("0.500", 0.5)
    assert table.cell("vgg16", "m-slow").text == "0.000"
    assert table.cell("vgg16", "m-fast").text == "—" and table.cell("resnet50", "m-slow").text == "—"
    assert table.notes == ["Slowest step: in s, lower is better; columns: machine; batch = per device. "
                           "Cell = median of repeats; — = no value."]
    headings = [b.text for b in report.blocks if isinstance(b, Heading) and b.level == 2]
    at = headings.index("Slowest step (s)")  # after the fields declared before it, before the model cost
    assert headings[at - 1] == "Energy efficiency (images per joule)" and headings[at + 1] == "Model cost"
    assert "## Slowest step (s)\n\n### syn-replicated-1gpus\n" in render_markdown(report)


def test_a_shown_field_words_its_tables_as_declared(monkeypatch):
    _declare(monkeypatch, heading="Step time spikes", name="spikes", means="the slowest timed step",
                      absent="no step times", positive=True)
    report = _report(_slowest_records())
    (table,) = [t for t in report.tables if t.kind == "spikes"]
    assert table.id == "spikes-syn-replicated-1gpus" and "Step time spikes" in [
        b.text for b in report.blocks if isinstance(b, Heading)]
    assert table.notes[0].startswith("Slowest step: the slowest timed step; columns: machine;")
    assert table.notes[0].endswith("— = no step times.")
    assert table.cell("vgg16", "m-slow").text == "—"  # positive: a 0 is no figure


def test_no_table_of_a_shown_field_that_no_record_carries(monkeypatch):
    _declare(monkeypatch)
    report = _report([record("resnet50", "m-fast", 100.0), record("vgg16", "m-slow", 50.0)])
    assert [t for t in report.tables if t.kind in ("energy", "slowest-step-s")] == []
    headings = [b.text for b in report.blocks if isinstance(b, Heading)]
    assert "Slowest step (s)" not in headings and "Energy efficiency (images per joule)" not in headings


def test_a_field_without_shown_is_in_no_table_of_its_own(monkeypatch):
    _declare(monkeypatch)
    monkeypatch.setitem(R.FIELDS, SLOWEST, dataclasses.replace(R.FIELDS[SLOWEST], shown=None))
    assert not [t for t in _report(_slowest_records()).tables if t.kind == "slowest-step-s"]
