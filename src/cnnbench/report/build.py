"""Assemble the report: select records, fold repeats, build every kind of table, observations and plots.

The kinds of table declare themselves (:mod:`cnnbench.report.kinds`); this module builds each
registered kind and adds its section in order. :func:`build_report` is pure computation (no
files, no matplotlib); see :mod:`cnnbench.report.output` for writing it out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.marks import MARKS_HEADING, WARNED, combined, marks_section
from cnnbench.analysis.points import build_points
from cnnbench.report.document import Bullets, Contents, Figure, Heading, Paragraph, Report, set_anchors
from cnnbench.report.facts import facts
from cnnbench.report.figures import budgeted
from cnnbench.report.kinds import Inputs, TableKind, observation_kinds, observers, register, registered
from cnnbench.report.layout import Layout
from cnnbench.report.observations import ALL_WARNED, Observation, all_warned, lead_with_warnings
from cnnbench.report.options import NoMatchingRecords, ReportError, ReportOptions, resolve_layout
from cnnbench.report.table import unique_ids
from cnnbench.report.tables.pipeline import is_pipeline_record
from cnnbench.results.gc_pause import collector_paused
from cnnbench.results.query import parse_where, select

log = logging.getLogger(__name__)


def _parse_baselines(baselines: Mapping[str, str], records: list[Mapping[str, Any]]) -> dict[str, str]:
    return {F.resolve_field(k, records): v for k, v in baselines.items()}


@dataclass
class _Scope:
    """What the flags resolve to in the records: the selection and the fields named by the flags."""

    selected: list[Mapping[str, Any]]
    layout: Layout
    effect_fields: list[str] | None
    baselines: dict[str, str]
    ignore: list[str]


FiguresHook = Callable[[list[Figure]], object]
"""Called with figures of the report before the rest of it is built (see :func:`build_report`)."""


def build_report(records: Sequence[Mapping[str, Any]], options: ReportOptions | None = None,
                 on_figures: FiguresHook | None = None) -> Report:
    """The report for ``records`` (raises :class:`ReportError` / :class:`NoMatchingRecords`).

    ``on_figures``: called as each kind with plots is built (they are built first, in the plot
    budget's order: scaling, training, throughput, bandwidth, history), with the figures of the
    budget (``max_plots``) known so far, as the report will hold them (a training figure's name may
    still change), so that a caller can start drawing each as soon as it is known
    (:meth:`cnnbench.report.render.drawing.DrawingPool.draw_ahead`, which draws a figure once): each
    call's figures are the last call's and more, all before the effect tables and the observations
    (most of the rest of the time); no call once the budget is spent, nor without a new figure."""
    with collector_paused():  # about half the CPU time otherwise (cnnbench.results.gc_pause)
        return _build_report(records, options or ReportOptions(), on_figures)


def _build_report(records: Sequence[Mapping[str, Any]], opts: ReportOptions, on_figures: FiguresHook | None) -> Report:
    records = list(records)
    if not records:
        raise NoMatchingRecords("no records to report")
    scope = _resolve(records, opts)
    selected, layout = scope.selected, scope.layout
    points = build_points([r for r in selected if not is_pipeline_record(r)],  # cnnbench data: no model
                          [*layout.rows, *layout.columns, *(scope.effect_fields or []), *scope.baselines])
    log.info("%d of %d records selected, %d points", len(selected), len(records), len(points.points))
    inputs = Inputs(selected, points, layout, opts, scope.effect_fields, scope.baselines, scope.ignore)
    kinds = registered()
    _build_kinds(kinds, inputs, on_figures)
    all_tables = [t for k in kinds for t in k.tables(inputs.built[k.id])]
    unique_ids(all_tables)
    report = Report(opts.title, tables=all_tables, observations=_observations(inputs), n_records=len(selected))
    _assemble(report, records, inputs, kinds)
    _budget_plots(report, opts.max_plots)
    set_anchors(report.blocks)
    return report


def _resolve(records: list[Mapping[str, Any]], opts: ReportOptions) -> _Scope:
    """Select with ``--where`` and resolve the fields the flags name (a :class:`ReportError` if one is unknown)."""
    try:
        selected = _select(records, opts)
        layout = resolve_layout(opts, selected)
        effect_fields = None if opts.effects is None else [F.resolve_field(e, selected) for e in opts.effects]
        baselines = _parse_baselines(opts.baselines, selected)
        ignore = [F.resolve_field(f, selected) for f in opts.ignore]
    except F.FieldError as exc:
        raise ReportError(str(exc)) from exc
    return _Scope(selected, layout, effect_fields, baselines, ignore)


def _select(records: list[Mapping[str, Any]], opts: ReportOptions) -> list[Mapping[str, Any]]:
    try:
        conditions = parse_where(opts.where, lambda name: F.resolve_field(name, records))
    except F.FieldError:
        raise
    except ValueError as exc:  # a malformed expression
        raise F.FieldError(f"--where: {exc}") from None
    selected = select(records, conditions)
    if not selected:
        raise NoMatchingRecords(
            f"no records match --where {' '.join(opts.where)} ({len(records)} records read)")
    return selected


def _build_kinds(kinds: list[TableKind], inputs: Inputs, on_figures: FiguresHook | None) -> None:
    """Build every kind into ``inputs.built``: first those with plots, in the plot budget's order,
    then the rest in the report's order. ``on_figures`` gets the plots of the budget as each kind
    with plots is built, those it got before with the new ones (their tables' ids made unique
    first: no other kind's ids start as theirs do), until the budget is spent."""
    last = max((k.plot_order for k in kinds if k.plot_order is not None), default=0) + 1
    plotted = sorted((k for k in kinds if k.plot), key=lambda k: last if k.plot_order is None else k.plot_order)
    max_plots = inputs.options.max_plots
    handed = 0
    for kind in plotted + [k for k in kinds if not k.plot]:
        inputs.built[kind.id] = kind.build(inputs)
        if on_figures is None or not kind.plot:
            continue
        done = [k for k in plotted if k.id in inputs.built]
        unique_ids([t for k in done for t in k.tables(inputs.built[k.id])])
        figures = budgeted([f for k in done if k.plot for f in k.plot(inputs.built[k.id])], max_plots)
        if len(figures) > handed:  # the budget's first figures: those of the kinds built so far
            on_figures(figures)
            handed = len(figures)
        if len(figures) >= max_plots:
            on_figures = None


def _observations(inputs: Inputs) -> list[Observation]:
    """The observations of the kinds asked (``opts.observations``), each kind of table's in the
    order of its observations (:attr:`~cnnbench.report.kinds.Observes.order`); when every figure
    is warned, those that hold with the warnings. Each that rests on warned runs begins with their
    warnings (unless its kind says otherwise: the failures)."""
    return _observed(inputs, inputs.options.include_warned or _fallback(inputs))


def _observed(inputs: Inputs, warned: bool) -> list[Observation]:
    """The observations of the kinds asked, warned figures among them or not (``warned``)."""
    opts, built = inputs.options, inputs.built
    asked = set(opts.observations if opts.observations is not None else observation_kinds())
    found: list[Observation] = []
    for kind, observes in observers():
        if observes.name in asked:
            made = observes.make(built[kind.id], inputs, warned)
            found += lead_with_warnings(made) if observes.lead_with_warnings else made
    return found


def _assemble(report: Report, records: list, inputs: Inputs, kinds: list[TableKind]) -> None:
    """The report's order: what was run and what it shows, the contents, then each kind's section
    in order (the systems, then scaling first: its summary is what most readers look for)."""
    opts = inputs.options
    b = report.blocks
    b.append(Heading(opts.title, 1))
    b += [Paragraph(line) for line in facts(records, inputs.records, opts.where, inputs.layout, inputs.points)]
    b.append(Heading("Observations"))
    if _fallback(inputs):
        b.append(Paragraph(ALL_WARNED))
    b.append(Bullets([o.text for o in report.observations]) if report.observations
             else Paragraph(_nothing_observed(inputs)))
    b += [Heading("Contents"), Contents()]
    for kind in kinds:
        kind.section(report, inputs.built[kind.id], inputs)


def _fallback(inputs: Inputs) -> bool:
    """Is every figure warned, and so the observations those that hold with the warnings?"""
    return not inputs.options.include_warned and all_warned(inputs.built["throughput"])


def _marks(report: Report, result: Any, inputs: Inputs) -> None:
    explained = marks_section(combined(p.measure for p in inputs.points.points), inputs.options.include_warned,
                              _fallback(inputs))
    if explained:
        report.blocks += [Heading(MARKS_HEADING), Bullets(explained)]


def _problems(report: Report, result: Any, inputs: Inputs) -> None:
    if inputs.options.problems:
        report.blocks += [Heading("Results that could not be read"), Bullets(list(inputs.options.problems))]


register(TableKind("marks", 90, lambda inputs: None, _marks))  # after every table, the marks explained
register(TableKind("problems", 95, lambda inputs: None, _problems))


def _nothing_observed(inputs: Inputs) -> str:
    opts = inputs.options
    if opts.observations is not None and set(opts.observations) != set(observation_kinds()):
        return f"Nothing to observe of the kinds asked (--observations {','.join(opts.observations)})."
    if not opts.include_warned and combined(p.measure for p in inputs.points.points).warned and _observed(inputs, True):
        return (f"Nothing to observe of the figures of runs that recorded no warning: the figures of runs that "
                f"did ({WARNED}, see {MARKS_HEADING}) are left out of the observations, and --include-warned "
                "keeps them.")
    return "Nothing to observe: no table has two comparable figures."


def _budget_plots(report: Report, max_plots: int) -> None:
    """Draw at most ``max_plots`` figures: scaling first, then training curves, then throughput, then bandwidth."""
    drawn = {id(f) for f in budgeted(report.figures, max_plots)}
    for fig in report.figures:
        fig.drawn = id(fig) in drawn
    skipped = sum(1 for f in report.figures if not f.drawn)
    at = next(i for i, b in enumerate(report.blocks) if isinstance(b, Heading) and b.text == "Observations")
    if skipped and max_plots == 0:
        report.blocks.insert(at, Paragraph(f"No plots drawn ({skipped} available; --no-plots or --max-plots 0)."))
    elif skipped:
        report.blocks.insert(at, Paragraph(
            f"{len(report.figures) - skipped} of {len(report.figures)} plots drawn (--max-plots {max_plots})."))
