"""Assemble the report: select records, fold repeats, build every table, observations and plots.

:func:`build_report` is pure computation (no files, no matplotlib); see
:mod:`cnnbench.report.output` for writing it out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.marks import MARKS_HEADING, combined, marks_section
from cnnbench.analysis.points import Measure, PointSet, build_points
from cnnbench.report.document import (
    Bullets,
    Contents,
    Figure,
    Heading,
    Paragraph,
    Report,
    TableBlock,
    set_anchors,
)
from cnnbench.report.facts import facts
from cnnbench.report.fastest import fastest_observations
from cnnbench.report.figures import budgeted, figures_ahead, scaling_figure, throughput_figure, training_figure
from cnnbench.report.layout import Layout
from cnnbench.report.observations import (
    ALL_WARNED,
    Observation,
    all_warned,
    effect_observations,
    failure_observations,
    implementation_observations,
    lead_with_warnings,
    scaling_observations,
)
from cnnbench.report.options import (
    OBSERVATION_KINDS,
    NoMatchingRecords,
    ReportError,
    ReportOptions,
    resolve_layout,
)
from cnnbench.report.table import Table, unique_ids
from cnnbench.report.tables.bandwidth import add_bandwidth_blocks
from cnnbench.report.tables.cost import cost_table
from cnnbench.report.tables.effect_series import series_blocks
from cnnbench.report.tables.effects import Effect, compute_effects, default_effect_fields
from cnnbench.report.tables.energy import add_energy_blocks, energy_tables
from cnnbench.report.tables.implementations import implementation_tables
from cnnbench.report.tables.pipeline import is_pipeline_record, pipeline_tables
from cnnbench.report.tables.predicted import prediction_observations
from cnnbench.report.tables.scaling import ScalingGroup, overview, scaling_groups
from cnnbench.report.tables.systems import systems_table
from cnnbench.report.tables.throughput import Section, configuration_sections
from cnnbench.report.tables.training import TrainingResult, training_results
from cnnbench.results.gc_pause import collector_paused
from cnnbench.results.query import parse_where, select
from cnnbench.results.record import record_kind

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


@dataclass
class _Parts:
    """Every table of the report and the notes beside the effect tables."""

    pipelines: list[Table]
    cost: Table | None
    sections: list[Section]
    groups: list[ScalingGroup]
    effects: list[Effect]
    effect_notes: list[str]
    baseline_warnings: list[str]
    impls: list[Table]
    trainings: list[TrainingResult]
    energies: list[Table]
    systems: Table | None
    glance: Table | None
    impl_measures: dict[tuple[str, str], list[Measure]]
    """The measures behind each row of :attr:`impls`, by (table title, row label)."""

    def tables(self) -> list[Table]:
        """All tables, in the order their ids are made unique."""
        return (_leading_tables(self.systems, self.glance, self.cost, self.sections, self.groups)
                + [e.table for e in self.effects] + self.impls + [r.table for r in self.trainings]
                + self.pipelines + self.energies)


def _leading_tables(systems: Table | None, glance: Table | None, cost: Table | None, sections: list[Section],
                    groups: list[ScalingGroup]) -> list[Table]:
    """The tables that come first where ids are made unique: their ids are final once these exist."""
    out: list[Table] = [t for t in (systems, glance, cost) if t] + [s.table for s in sections]
    for g in groups:
        out += [g.summary, g.table]
    return out


FiguresHook = Callable[[list[Figure]], object]
"""Called with figures of the report before the rest of it is built (see :func:`build_report`)."""


def build_report(records: Sequence[Mapping[str, Any]], options: ReportOptions | None = None,
                 on_figures: FiguresHook | None = None) -> Report:
    """The report for ``records`` (raises :class:`ReportError` / :class:`NoMatchingRecords`).

    ``on_figures``: called once, with the scaling, training and throughput figures that the
    report will draw, as it will hold them (a training figure's name may still change), so that a
    caller can start drawing them meanwhile (:meth:`cnnbench.report.render.drawing.DrawingPool.draw_ahead`):
    as soon as the scaling and training tables are built where their plots spend the plot budget
    (``max_plots``; throughput plots come after them in it), else once the throughput tables are
    built too; either way before the effect tables and the observations (most of the rest of the time)."""
    with collector_paused():  # about half the CPU time otherwise (cnnbench.results.gc_pause)
        return _build_report(records, options or ReportOptions(), on_figures)


def _build_report(records: Sequence[Mapping[str, Any]], opts: ReportOptions, on_figures: FiguresHook | None) -> Report:
    records = list(records)
    if not records:
        raise NoMatchingRecords("no records to report")
    scope = _resolve(records, opts)
    selected, layout = scope.selected, scope.layout
    # cnnbench data: no model, tables of their own (by the first column field)
    pipelines = pipeline_tables(selected, layout.columns[0], opts.repeat_noise)
    points = build_points([r for r in selected if not is_pipeline_record(r)],
                          [*layout.rows, *layout.columns, *(scope.effect_fields or []), *scope.baselines])
    log.info("%d of %d records selected, %d points", len(selected), len(records), len(points.points))
    parts = _build_parts(points, scope, opts, pipelines, on_figures)
    all_tables = parts.tables()
    unique_ids(all_tables)
    report = Report(opts.title, tables=all_tables, observations=_observations(parts, layout, opts),
                    n_records=len(selected), warnings=parts.baseline_warnings)
    _assemble(report, opts, records, scope, points, parts)
    add_energy_blocks(report, parts.energies)
    add_bandwidth_blocks(report, selected, opts.repeat_noise)  # cnnbench comm: busbw against size
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


def _build_parts(points: PointSet, scope: _Scope, opts: ReportOptions, pipelines: list[Table],
                 on_figures: FiguresHook | None) -> _Parts:
    cost = cost_table(points)
    comm = [r for r in scope.selected if record_kind(r) == "comm"] if opts.predict else []
    groups = scaling_groups(points, opts.repeat_noise, predict=opts.predict, comm=comm)
    trainings = training_results(points)
    systems, glance = systems_table(scope.selected), overview(groups)
    if on_figures is not None:  # the ids of these tables made unique now: they are final (those of
        # the throughput tables, which come between, all start with "throughput-")
        unique_ids(_leading_tables(systems, glance, cost, [], groups))
        unique_ids([r.table for r in trainings])  # no other table's id starts with "training-"
        early = figures_ahead([], groups, trainings, opts.max_plots)
        if len(early) >= opts.max_plots:  # the budget is spent before the throughput plots: drawn now
            on_figures(early)
            on_figures = None
    sections = configuration_sections(points, scope.layout, opts.repeat_noise)
    if on_figures is not None:
        unique_ids(_leading_tables(systems, glance, cost, sections, groups))
        on_figures(figures_ahead(sections, groups, trainings, opts.max_plots))
    effects, effect_notes, baseline_warnings = _effects(points, scope, opts)
    impl_measures: dict[tuple[str, str], list[Measure]] = {}
    impls = implementation_tables(points, opts.repeat_noise, opts.noise, measures=impl_measures)
    energies = energy_tables(sections)
    return _Parts(pipelines=pipelines, cost=cost, sections=sections, groups=groups, effects=effects,
                  effect_notes=effect_notes, baseline_warnings=baseline_warnings, impls=impls,
                  impl_measures=impl_measures,
                  trainings=trainings, energies=energies, systems=systems, glance=glance)


def _effects(points: PointSet, scope: _Scope, opts: ReportOptions) -> tuple[list[Effect], list[str], list[str]]:
    """The effect tables, the notes under them, and the warnings about unused ``--baseline`` values."""
    names = scope.effect_fields if scope.effect_fields is not None else default_effect_fields(points)
    try:
        effects, effect_notes = compute_effects(points, names, scope.baselines, opts.noise,
                                                explain=scope.effect_fields is not None, ignore=scope.ignore)
    except F.FieldError as exc:
        raise ReportError(str(exc)) from exc
    baseline_warnings = _unused_baselines(scope.baselines, names, effects, points)
    effect_notes += baseline_warnings
    inert = [F.short_name(f) for f in scope.ignore if f not in points.key_fields]
    if inert:
        effect_notes.append(f"--ignore {', '.join(inert)}: not part of what pairs results (it never kept two "
                            f"results apart), so ignoring it changes nothing.")
    return effects, effect_notes, baseline_warnings


def _observations(parts: _Parts, layout: Layout, opts: ReportOptions) -> list[Observation]:
    """The observations of the kinds asked (``opts.observations``); when every figure is warned,
    those that hold with the warnings. Each that rests on warned runs begins with their warnings."""
    fallback = not opts.include_warned and all_warned(parts.sections)
    warned = opts.include_warned or fallback
    kinds = set(opts.observations if opts.observations is not None else OBSERVATION_KINDS)
    found = ((scaling_observations(parts.groups, warned) if "scaling" in kinds else [])
             + (effect_observations(parts.effects, warned) if "effects" in kinds else [])
             + (fastest_observations(parts.sections, layout, warned, opts.noise) if "fastest" in kinds else [])
             + (implementation_observations(parts.impls, warned, opts.noise, parts.impl_measures)
                if "implementations" in kinds else [])
             + (prediction_observations(parts.groups, opts.noise) if opts.predict and "scaling" in kinds else []))
    failures = failure_observations(parts.sections) if "failures" in kinds else []
    return lead_with_warnings(found) + failures


def _unused_baselines(baselines: Mapping[str, str], names: Sequence[str], effects: list[Effect],
                      points: PointSet) -> list[str]:
    """One line for each ``--baseline`` that no effect table uses, saying why."""
    used = {e.field for e in effects}
    lines = []
    for f, value in baselines.items():
        if f in used:
            continue
        short = F.short_name(f)
        if len(points.distinct(f)) < 2:
            why = f"{short} takes one value in these results"
        elif f not in names:
            why = f"no effect table compares {short} (add --effect {short})"
        else:
            why = f"no two results differ in {short} alone"
        lines.append(f"--baseline {short}={value} is not used: {why}.")
    return lines


def _assemble(report: Report, opts: ReportOptions, records: list, scope: _Scope, points: PointSet,
              parts: _Parts) -> None:
    """The report's order: what was run and what it shows, the contents, the systems, then the
    sections, scaling first (its summary is what most readers look for)."""
    b = report.blocks
    b.append(Heading(opts.title, 1))
    b += [Paragraph(line) for line in facts(records, scope.selected, opts.where, scope.layout, points)]
    b.append(Heading("Observations"))
    fallback = not opts.include_warned and all_warned(parts.sections)
    if fallback:
        b.append(Paragraph(ALL_WARNED))
    b.append(Bullets([o.text for o in report.observations]) if report.observations
             else Paragraph(_nothing_observed(opts)))
    b += [Heading("Contents"), Contents()]
    if parts.systems:
        b += [Heading("Systems"), TableBlock(parts.systems)]
    _scaling_blocks(report, parts)
    _throughput_blocks(report, parts, scope.layout)
    _effect_blocks(report, parts)
    _training_blocks(report, parts)
    if parts.pipelines:
        b.append(Heading("Input pipeline alone (cnnbench data)"))
        b += [TableBlock(t, caption=True) for t in parts.pipelines]
    if parts.cost:
        b += [Heading("Model cost"), TableBlock(parts.cost)]
    b += series_blocks([e.table for e in parts.effects])
    explained = marks_section(combined(p.measure for p in points.points), opts.include_warned, fallback)
    if explained:
        b += [Heading(MARKS_HEADING), Bullets(explained)]
    if opts.problems:
        b.append(Heading("Results that could not be read"))
        b.append(Bullets(list(opts.problems)))


def _nothing_observed(opts: ReportOptions) -> str:
    if opts.observations is not None and set(opts.observations) != set(OBSERVATION_KINDS):
        return f"Nothing to observe of the kinds asked (--observations {','.join(opts.observations)})."
    return "Nothing to observe: no table has two comparable figures."


def _scaling_blocks(report: Report, parts: _Parts) -> None:
    if not parts.groups:
        return
    b = report.blocks
    b.append(Heading("Scaling"))
    if parts.glance and len(parts.groups) > 1:
        b.append(TableBlock(parts.glance, caption=True))
    for g in parts.groups:
        fig = scaling_figure(g)
        b += [Heading(g.name, 3), TableBlock(g.summary), fig]
        report.figures.append(fig)


def _throughput_blocks(report: Report, parts: _Parts, layout: Layout) -> None:
    b = report.blocks
    if parts.sections or not parts.pipelines:
        rows = "" if layout.is_default else f"rows: {layout.row_name}; "
        b.append(Heading(f"Throughput by configuration (images/sec; {rows}columns: {layout.column_name})"))
    for s in parts.sections:
        b += [Heading(s.name, 3), TableBlock(s.table)]
        fig = throughput_figure(s)
        if fig:
            b.append(fig)
            report.figures.append(fig)


def _effect_blocks(report: Report, parts: _Parts) -> None:
    b = report.blocks
    if parts.effects or parts.effect_notes:
        b.append(Heading("Effects (one factor at a time)"))
        for e in parts.effects:
            b += [Heading(e.table.title, 3), TableBlock(e.table)]
        if parts.effect_notes:
            b.append(Bullets(parts.effect_notes))
    if parts.impls:
        b.append(Heading("Implementations side by side"))
        for t in parts.impls:
            b += [Heading(t.title.split(": ", 1)[-1], 3), TableBlock(t)]


def _training_blocks(report: Report, parts: _Parts) -> None:
    if not parts.trainings:
        return
    b = report.blocks
    b.append(Heading("Training to accuracy"))
    for r in parts.trainings:
        b += [Heading(r.table.title.split(": ", 1)[-1], 3), TableBlock(r.table)]
        fig = training_figure(r)
        if fig:
            b.append(fig)
            report.figures.append(fig)


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
