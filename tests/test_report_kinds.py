"""Report tables declare themselves (issue 45 item 2): a kind registered in one declaration shows
in a built report, in its order and with its note, and observations rest on the numbers and the
verdicts behind the tables, never on the text of their cells."""

from __future__ import annotations

import pytest

from cnnbench.analysis.points import build_points
from cnnbench.report import ReportOptions, build_report
from cnnbench.report.document import Figure, Heading
from cnnbench.report.kinds import KINDS, Observes, TableKind, observation_kinds, register, table_section
from cnnbench.report.observations import Observation
from cnnbench.report.render.markdown import render_markdown
from cnnbench.report.table import Table, label_cell, number
from cnnbench.report.tables.implementations import Implementations, implementation_observations, implementation_tables
from cnnbench.report.tables.scaling import scaling_groups, scaling_observations
from tests.report_fixtures import record, scaling_records

FAKE = TableKind("fake", 25, lambda inputs: Table("fake", "Fake table", "fake", ["model", "records"],
                                                  [[label_cell("all"), number(len(inputs.records), 0)]],
                                                  ["A note of the fake kind."]),
                 table_section("Fake kind"))
"""Between scaling (20) and throughput (30), both registered before it."""


@pytest.fixture
def fake_kind():
    register(FAKE)
    yield FAKE
    del KINDS[FAKE.id]


def _fake_section(report, table, inputs) -> None:
    table_section("Plotted fake kind")(report, table, inputs)
    figure = _fake_figure(table)
    report.blocks.append(figure)
    report.figures.append(figure)


def _fake_figure(table) -> Figure:
    return Figure("plotted-fake", "plotted-fake", "A fake plot", {"y": [1.0, table.rows[0][1].value]})


def draw_fake(figure: Figure):
    """The fake kind's renderer (named by its ``draw``, as a kind's plot module's is)."""
    from cnnbench.report.render.plot_style import _figure

    fig = _figure(2.0, 2.0)
    fig.add_subplot(1, 1, 1).plot(figure.data["y"])
    return fig


PLOTTED = TableKind("plotted-fake", 26, lambda inputs: Table("plotted-fake", "Plotted fake", "plotted-fake",
                                                            ["model", "records"],
                                                            [[label_cell("all"), number(len(inputs.records), 0)]]),
                    _fake_section, plot=lambda table: [_fake_figure(table)],
                    plot_order=-1, draw=f"{__name__}:draw_fake",
                    observes=(Observes("fake-count", 35, lambda table, inputs, warned: [
                        Observation(f"The fake kind counted {table.rows[0][1].value} records.")]),))
"""A kind with a plot (first in the plot budget) and observations (between fastest, 30, and implementations, 40)."""


@pytest.fixture
def plotted_kind():
    register(PLOTTED)
    yield PLOTTED
    del KINDS[PLOTTED.id]


def test_a_kind_with_a_plot_and_observations_needs_nothing_but_its_declaration(plotted_kind):
    report = build_report(scaling_records(), ReportOptions(max_plots=1))
    texts = [o.text for o in report.observations]
    fake = f"The fake kind counted {len(scaling_records())} records."
    assert fake in texts
    assert texts.index(fake) < next(i for i, t in enumerate(texts) if "failed" in t)  # failures stay last
    [drawn] = [f for f in report.figures if f.drawn]  # first in the budget: its plot_order
    assert drawn.kind == "plotted-fake" and len(report.figures) > 1
    from cnnbench.report.render.plots import render

    assert b"<svg" in render(drawn)  # drawn by its own renderer
    assert "fake-count" in observation_kinds()
    only = build_report(scaling_records(), ReportOptions(observations="fake-count", max_plots=0))
    assert [o.text for o in only.observations] == [fake]
    import argparse

    from cnnbench.cli import report_cmd

    sub = argparse.ArgumentParser().add_subparsers()
    report_cmd.register(sub)
    assert "fastest, fake-count, implementations" in " ".join(sub.choices["report"].format_help().split())


def test_an_unregistered_kind_makes_no_observation_kind():
    assert "fake-count" not in observation_kinds()
    with pytest.raises(ValueError, match="unknown kind 'fake-count'"):
        ReportOptions(observations="fake-count")


def _headings(report) -> list[str]:
    return [b.text for b in report.blocks if isinstance(b, Heading) and b.level == 2]


def test_a_registered_kind_shows_in_the_report_in_its_order_with_its_note(fake_kind):
    report = build_report(scaling_records())
    headings = _headings(report)
    assert headings[headings.index("Scaling") + 1] == "Fake kind"
    assert headings[headings.index("Fake kind") + 1].startswith("Throughput by configuration")
    assert report.table("fake").rows[0][1].value == len(scaling_records())
    text = render_markdown(report)
    assert "A note of the fake kind." in text
    assert text.index("## Scaling") < text.index("## Fake kind") < text.index("## Throughput")


def test_an_unregistered_kind_is_not_in_the_report():
    assert "Fake kind" not in _headings(build_report(scaling_records()))


def _implementations() -> Implementations:
    recs = [record(ips=228.0), record(ips=300.0, source="tf_cnn_benchmarks", compile=None),
            record(ips=427.0, num_devices=2), record(ips=600.0, num_devices=2, source="tf_cnn_benchmarks",
                                                     compile=None)]
    found = Implementations([])
    found.tables = implementation_tables(build_points(recs), 0.05, 0.03, measures=found.measures,
                                         significant=found.significant)
    return found


def test_an_implementation_verdict_rests_on_the_test_not_on_the_cell_text():
    found = _implementations()
    [before] = implementation_observations(found)
    assert "2 of 2 significant" in before.text and "no significant difference" not in before.text
    for t in found.tables:  # the rendered text says "not significant": the verdict stays the test's
        t.rows = [r[:-1] + [r[-1]._replace(text=r[-1].text + " n.s. (no samples)")] for r in t.rows]
    assert [o.text for o in implementation_observations(found)] == [before.text]
    for key in found.significant:  # the verdicts are what it rests on
        found.significant[key] = False
    [after] = implementation_observations(found)
    assert "0 of 2 significant" in after.text and "no significant difference" in after.text


def test_the_scaling_median_row_is_known_from_the_series_not_from_its_label():
    recs = [record(machine=m, ips=100.0 * n * (eff if n == 2 else 1.0), num_devices=n)
            for m, eff in (("a", 0.5), ("b", 0.7), ("c", 0.95)) for n in (1, 2)]
    groups = scaling_groups(build_points(recs), 0.05)
    before = [o.text for o in scaling_observations(groups)]
    assert "median efficiency 70.0% at 2 devices (range 50.0%–95.0% over 3 series)" in before[0]
    for g in groups:  # a series labelled "median", the median row labelled otherwise
        t = g.summary
        t.rows[0] = [t.rows[0][0]._replace(text="median")] + t.rows[0][1:]
        t.rows[-1] = [t.rows[-1][0]._replace(text="all series")] + t.rows[-1][1:]
    assert [o.text for o in scaling_observations(groups)] == before
