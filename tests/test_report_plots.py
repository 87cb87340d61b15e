"""Plots show what the README says they show (issue 17 item 18): error bars on every layout of
throughput bars, one machine's included; a scaling axis whose labels reach its farthest point;
and the Marks footnote says what --include-warned did with warned cells."""

from __future__ import annotations

import io

import pytest
from matplotlib.container import ErrorbarContainer

from cnnbench.report import ReportOptions, build_report
from cnnbench.report.document import Figure
from cnnbench.report.render.markdown import render_markdown
from cnnbench.report.render.plot_scaling import _scaling
from cnnbench.report.render.plot_style import MAX_PANELS_SMALL
from cnnbench.report.render.plot_throughput import _throughput
from tests.report_fixtures import record


def _error_extents(ax) -> list[tuple[float, float]]:
    """(low, high) of every error bar drawn on ``ax`` (along the bars' value axis; none of length 0)."""
    out = []
    for c in ax.containers:
        if not isinstance(c, ErrorbarContainer):
            continue
        for coll in c.lines[2]:
            for seg in coll.get_segments():
                (x0, y0), (x1, y1) = seg[0], seg[-1]
                out.append((min(x0, x1), max(x0, x1)) if y0 == y1 else (min(y0, y1), max(y0, y1)))
    return [(lo, hi) for lo, hi in out if hi > lo]


def _throughput_figure(report, name: str = "throughput-syn-replicated-1gpus") -> Figure:
    [fig] = [f for f in report.figures if f.name == name]
    return fig


def test_one_machines_throughput_bars_carry_error_bars():
    recs = [record("resnet50", "m-fast", v) for v in (300.0, 500.0)]  # two repeats that differ: an error bar
    recs += [record("vgg16", "m-fast", 100.0)]  # one run: none
    fig = _throughput_figure(build_report(recs))
    assert fig.data["columns"] == ["m-fast"]  # one machine: the single-column layout
    [err_resnet, err_vgg] = [e[0] for e in fig.data["errors"]]
    assert err_resnet > 0 and err_vgg == 0
    drawn = _throughput(fig)
    [ax] = drawn.axes
    [(low, high)] = _error_extents(ax)
    assert low == pytest.approx(400.0 - err_resnet) and high == pytest.approx(400.0 + err_resnet)
    assert ax.get_xlim()[1] >= high  # the bar's error bar fits on the axis
    svg = io.StringIO()
    drawn.savefig(svg, format="svg")


def test_many_models_grouped_bars_carry_error_bars_too():
    models = [f"net{i}" for i in range(MAX_PANELS_SMALL + 1)]  # more models than panels: one grouped axes
    recs = [record(m, machine, v) for m in models for machine in ("m-fast", "m-slow") for v in (300.0, 330.0)]
    fig = _throughput_figure(build_report(recs, ReportOptions(max_plots=0)))
    assert all(e > 0 for row in fig.data["errors"] for e in row)
    [ax] = _throughput(fig).axes
    extents = _error_extents(ax)
    assert len(extents) == 2 * len(models)
    assert ax.get_ylim()[1] >= max(high for _, high in extents)


def test_panel_bars_keep_their_error_bars():
    recs = [record(m, machine, v) for m in ("resnet50", "vgg16") for machine in ("m-fast", "m-slow")
            for v in (300.0, 330.0)]
    axes = _throughput(_throughput_figure(build_report(recs, ReportOptions(max_plots=0)))).axes
    assert all(len(_error_extents(ax)) == 2 for ax in axes)


def _scaling_figure(models: dict, devices: list[int]) -> Figure:
    return Figure("scaling", "s", "Scaling: t", {"models": models, "devices": devices})


def _series(points, ranges=()):
    return [{"label": "m", "note": "", "points": list(points), "ranges": list(ranges)}]


def test_a_scaling_axis_and_its_labels_reach_the_farthest_point():
    recs = [record("resnet50", "m-fast", 100.0), record("resnet50", "m-fast", 1300.0, num_devices=2)]  # 13x
    [fig] = [f for f in build_report(recs).figures if f.kind == "scaling"]
    [series] = fig.data["models"]["resnet50"]
    assert series["points"][-1] == (2, pytest.approx(13.0))
    [ax] = _scaling(fig).axes
    low, high = ax.get_ylim()
    ticks = [t for t in ax.get_yticks() if low <= t <= high]
    assert high >= 13.0 and max(ticks) >= 13.0  # labelled up to (or past) the point, not stopping at 2
    assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["1", "2"]  # the ideal line's ticks stay


@pytest.mark.parametrize("n_models", [2, 8])  # panels sharing an axis, and the one-axes overview
def test_shared_scaling_axes_cover_every_panels_points_high_and_low(n_models):
    models = {f"net{i}": _series([(1, 1.0), (2, 1.8)]) for i in range(n_models)}
    models["net0"] = _series([(1, 1.0), (2, 13.0)], ranges=[(2, 12.0, 14.5)])
    models["net1"] = _series([(1, 1.0), (2, 0.2)])  # a slowdown below the ideal line's lowest tick
    for ax in _scaling(_scaling_figure(models, [1, 2])).axes:
        low, high = ax.get_ylim()
        ticks = [t for t in ax.get_yticks() if low <= t <= high]
        assert high >= 14.5 and max(ticks) >= 14.5
        assert low <= 0.2 and min(ticks) <= 0.2


def test_scaling_ticks_stay_few_for_a_wild_point():
    models = {"net": _series([(1, 1.0), (2, 1e6)])}
    [ax] = _scaling(_scaling_figure(models, [1, 2])).axes
    assert ax.get_ylim()[1] >= 1e6 and len(ax.get_yticks()) <= 2 + 7


def _warned_records():
    warned = {"warnings": ["busy CPU: other processes used 1.2 of the 2 cores"]}
    return [record("resnet50", "m-fast", 400.0, metrics=warned), record("resnet50", "m-slow", 200.0),
            record("vgg16", "m-fast", 250.0), record("vgg16", "m-slow", 120.0)]


def _marks_line(include_warned: bool) -> str:
    md = render_markdown(build_report(_warned_records(), ReportOptions(include_warned=include_warned,
                                                                       max_plots=0)))
    marks = md.split("## Marks\n", 1)[1]
    [line] = [ln for ln in marks.splitlines() if ln.startswith("- ⚠")]
    return line


def test_marks_footnote_says_warned_cells_are_left_out_by_default():
    line = _marks_line(False)
    assert "are left out of the observations (--include-warned keeps them)" in line


def test_marks_footnote_says_warned_cells_count_under_include_warned():
    line = _marks_line(True)
    assert "left out" not in line
    assert "count in the observations, as --include-warned asks" in line
