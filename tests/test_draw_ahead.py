"""Plots drawn ahead (issue 22 item 2): the report hands the figures it knows early (scaling,
training, throughput) to the drawing processes before it builds the effect tables and the
observations; they draw them into memory meanwhile, and the report writes those whose figure
is still the same, byte for byte as drawn at the end, never drawing one twice."""

from __future__ import annotations

import os

import pytest

import cnnbench.report.tables.effects as effects_kind
import cnnbench.report.tables.throughput as throughput_kind
from cnnbench.report import ReportOptions, build_report, write_report
from cnnbench.report.render import drawing
from tests.report_fixtures import scaling_records, training_record

EARLY_KINDS = ("scaling", "training", "throughput")


def records() -> list[dict]:
    return scaling_records() + [training_record(n) for n in (1, 2)]


def early(recs: list[dict], options: ReportOptions | None = None):
    """The report, the figures its hook got, and what happened in which order."""
    seen: list[list] = []
    order: list[str] = []
    compute, sections = effects_kind.compute_effects, throughput_kind.configuration_sections

    def effects(*args, **kwargs):
        order.append("effects")
        return compute(*args, **kwargs)

    def throughput(*args, **kwargs):
        order.append("throughput")
        return sections(*args, **kwargs)

    effects_kind.compute_effects, throughput_kind.configuration_sections = effects, throughput
    try:
        report = build_report(recs, options, on_figures=lambda figs: (order.append("figures"), seen.append(figs)))
    finally:
        effects_kind.compute_effects, throughput_kind.configuration_sections = compute, sections
    for before, after in zip([[], *seen], seen, strict=False):  # each call: the last one's figures, and more
        assert len(after) > len(before) and after[:len(before)] == before
    return report, seen[-1] if seen else [], order


def as_drawn(fig) -> tuple:
    return fig.kind, fig.name, fig.title, drawing.figure_key(fig)


def test_the_figures_known_early_are_the_reports_own_before_the_effect_tables():
    report, figures, order = early(records())
    # handed over as each kind with plots is built: the scaling and training plots before the
    # throughput tables are built, theirs right after, every one before the effect tables
    assert order == ["figures", "figures", "throughput", "figures", "effects"]
    kinds = {f.kind for f in figures}
    assert {"scaling", "training", "throughput"} <= kinds
    drawn = [f for f in report.figures if f.drawn and f.kind in EARLY_KINDS]
    assert sorted(map(as_drawn, figures)) == sorted(map(as_drawn, drawn))
    # the report is the one made without the hook
    plain = build_report(records())
    assert [as_drawn(f) for f in plain.figures] == [as_drawn(f) for f in report.figures]
    assert [t.id for t in plain.tables] == [t.id for t in report.tables]


@pytest.mark.parametrize("most", [1, 3])
def test_scaling_plots_that_spend_the_budget_are_handed_over_before_the_throughput_tables(most):
    """Throughput plots come last in the budget: where scaling and training plots spend it, the
    figures are known, and handed over, before the throughput tables are built; the ids stay
    those of the report made without the hook, also where two scaling tables' would collide
    (``rep/x`` and ``rep x`` make the same file name: the second is ``...-2``, and so its plot)."""
    recs = records() + [dict(r, config={**r["config"], "variable_update": v})
                        for v in ("rep/x", "rep x") for r in scaling_records()]
    report, figures, order = early(recs, ReportOptions(max_plots=most))
    assert order == ["figures", "throughput", "effects"]
    drawn = [f for f in report.figures if f.drawn]
    assert len(figures) == most and {f.kind for f in figures} <= {"scaling", "training"}
    assert sorted(map(as_drawn, figures)) == sorted(map(as_drawn, drawn))
    plain = build_report(recs, ReportOptions(max_plots=most))
    assert [t.id for t in plain.tables] == [t.id for t in report.tables]
    assert any(f.name.endswith("-2") for f in figures) == (most == 3)
    assert [as_drawn(f) for f in plain.figures] == [as_drawn(f) for f in report.figures]


@pytest.mark.parametrize("most", [0, 1, 3])
def test_the_figures_known_early_keep_to_the_plot_budget(most):
    report, figures, _ = early(records(), ReportOptions(max_plots=most))
    drawn = [f for f in report.figures if f.drawn]
    assert len(drawn) == min(most, len(report.figures))
    assert sorted(map(as_drawn, figures)) == sorted(as_drawn(f) for f in drawn if f.kind in EARLY_KINDS)


def test_plots_drawn_ahead_are_written_as_drawn_here_and_not_drawn_again(tmp_path, monkeypatch):
    here = write_report(build_report(records()), tmp_path / "here", drawing_pool=drawing.prepare_drawing(0))

    def never(*args, **kwargs):
        raise AssertionError("drawn again")

    monkeypatch.setattr(drawing, "_draw", never)  # here and in the processes forked below
    out = tmp_path / "out"
    with drawing.prepare_drawing(2) as pool:
        assert pool.pool is not None
        report = build_report(records(), on_figures=lambda figs: pool.draw_ahead(figs, out))
        assert len(pool.ahead) == sum(f.drawn for f in report.figures) >= 3  # every plot here is known early
        written = write_report(report, out, drawing_pool=pool)
        assert pool.pool is None and not pool.ahead  # closed with the drawing
    assert [p.name for p in written.plots] == [p.name for p in here.plots]
    assert [p.read_bytes() for p in written.plots] == [p.read_bytes() for p in here.plots]
    assert not [p for p in (out / "plots").iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_figure_changed_since_it_was_drawn_ahead_is_drawn_as_it_is_now(tmp_path):
    figures = [f for f in build_report(records()).figures if f.drawn]
    here = drawing.start_drawing(figures, tmp_path / "here", drawing.prepare_drawing(0)).wait()
    stale = build_report(records()).figures
    stale[0].title += " (before)"
    with drawing.prepare_drawing(2) as pool:
        pool.draw_ahead([f for f in stale if f.drawn], tmp_path / "out")
        paths = drawing.start_drawing(figures, tmp_path / "out", pool).wait()
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in here]
    assert f"cnnbench-plot-key:{drawing.figure_key(figures[0])}".encode() in paths[0].read_bytes()


def die(*args: object) -> None:
    os._exit(9)


def test_plots_whose_drawing_process_died_are_drawn_here(tmp_path, monkeypatch):
    figures = [f for f in build_report(records()).figures if f.drawn]
    here = drawing.start_drawing(figures, tmp_path / "here", drawing.prepare_drawing(0)).wait()
    monkeypatch.setattr(drawing, "_render", die)  # in the forked processes
    with drawing.prepare_drawing(2) as pool:
        pool.draw_ahead(figures, tmp_path / "out")
        paths = drawing.start_drawing(figures, tmp_path / "out", pool).wait()
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in here]


def test_plots_already_in_the_folder_are_not_drawn_ahead(tmp_path):
    figures = [f for f in build_report(records()).figures if f.drawn]
    drawing.start_drawing(figures, tmp_path, drawing.prepare_drawing(0)).wait()
    again = drawing.prepare_drawing(2, reusing=tmp_path)
    again.draw_ahead(figures, tmp_path)
    assert again.pool is None and not again.ahead  # no process started for plots that are kept
    assert all(drawing.start_drawing(figures, tmp_path, again).reused)


def test_drawing_processes_started_for_the_plots_drawn_ahead_are_as_many_as_ahead(tmp_path, monkeypatch):
    figures = [f for f in build_report(records()).figures if f.drawn]
    drawing.start_drawing(figures, tmp_path, drawing.prepare_drawing(0)).wait()
    monkeypatch.setattr(drawing, "_cpus", lambda: 5)
    ahead = drawing.prepare_drawing(reusing=tmp_path)  # plots there: started when one needs drawing
    assert ahead.pool is None and ahead.workers == 4
    changed = build_report(records()).figures[:2]
    for f in changed:
        f.title += " (changed)"
    with ahead:
        ahead.draw_ahead(changed, tmp_path)
        assert ahead.pool is not None and ahead.processes == 4  # not 2: the report may draw more


def test_training_plots_whose_tables_share_an_id_are_final_when_drawn_ahead():
    recs = records() + [training_record(n, machine=m) for n in (1, 2) for m in ("m fast", "m:fast")]
    report, figures, _ = early(recs)
    drawn = [f for f in report.figures if f.drawn and f.kind in EARLY_KINDS]
    assert [f.name for f in drawn if f.kind == "training" and f.name.endswith("-2")]  # made unique
    assert sorted(map(as_drawn, figures)) == sorted(map(as_drawn, drawn))


def test_drawing_processes_started_while_a_report_is_built_collect_their_cycles():
    """A pool started inside the report's build (where the folder's plots may all be kept, the
    processes start only when a figure needs drawing: ``draw_ahead``) is forked while the
    collector is paused; its processes collect again, or each figure's cycles stay."""
    import gc

    from cnnbench.results.gc_pause import collector_paused

    with collector_paused():
        pool = drawing._fork_pool(1)
    if pool is None:
        pytest.skip("no drawing process can be started here")
    try:
        assert pool.submit(gc.isenabled).result(timeout=120) is True
    finally:
        pool.shutdown(wait=True)


def test_starting_drawing_processes_leaves_a_callers_freeze_alone():
    """A caller that froze its objects (as a server does before it forks) keeps them frozen:
    the pool's own freeze and unfreeze are for a heap where nothing is frozen yet."""
    import gc

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        pool = drawing._fork_pool(1)
        if pool is not None:
            pool.shutdown(wait=True)
        assert frozen and gc.get_freeze_count() > frozen // 2  # (a few frozen objects die meanwhile)
    finally:
        gc.unfreeze()


def test_figures_drawn_here_in_a_paused_command_are_freed_as_they_are_drawn(tmp_path):
    """A reading command pauses the cycle collector; a figure drawn in this process is a web of
    cycles, so the collector runs while it is drawn and its garbage is gone when the drawing ends
    (kept to the end otherwise: thousands of objects a figure); paused again after it."""
    import gc

    from cnnbench.results.gc_pause import collector_paused

    figures = [f for f in build_report(records()).figures if f.drawn]
    assert len(figures) >= 2
    gc.collect()
    with collector_paused():
        drawing.start_drawing(figures, tmp_path, drawing.prepare_drawing(0)).wait()
        assert not gc.isenabled()
        left = gc.collect()
    assert left < 1000 * len(figures), (left, len(figures))  # over 4,000 a figure otherwise


@pytest.mark.parametrize("entry", ["command", "api"])
def test_the_drawing_processes_are_started_before_the_store_is_read(tmp_path, monkeypatch, entry):
    """Forked after the read, a drawing process makes the parent copy every page of the records it
    then writes to; forked first, it imports matplotlib while the store is read."""
    import cnnbench
    import cnnbench.results.store as store_module
    from cnnbench.cli import main
    from tests.report_fixtures import write_store

    store = write_store(tmp_path / "results", records())
    order: list[str] = []
    prepare, read = drawing.prepare_drawing, store_module.read_records
    monkeypatch.setattr(drawing, "prepare_drawing",
                        lambda *a, **k: order.append("processes") or prepare(0, **{n: v for n, v in k.items()
                                                                                   if n == "reusing"}))
    monkeypatch.setattr(store_module, "read_records", lambda *a, **k: order.append("read") or read(*a, **k))
    if entry == "command":
        assert main(["report", str(store), "-o", str(tmp_path / "out")]) == 0
    else:
        cnnbench.make_report(str(store), output=tmp_path / "out")
    assert order[:2] == ["processes", "read"]
