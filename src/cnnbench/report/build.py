"""Assemble the report: select records, fold repeats, build every table, observations and plots.

:func:`build_report` is pure computation (no files, no matplotlib); see
:mod:`cnnbench.report.output` for writing it out.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.marks import MARKS_HEADING, combined, marks_section
from cnnbench.analysis.points import PointSet, build_points
from cnnbench.analysis.repeat_stats import REPEAT_NOISE
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
from cnnbench.report.observations import (
    effect_observations,
    failure_observations,
    fastest_observations,
    implementation_observations,
    scaling_observations,
)
from cnnbench.report.table import Table, unique_ids
from cnnbench.report.tables.cost import cost_table
from cnnbench.report.tables.effects import Effect, compute_effects, default_effect_fields
from cnnbench.report.tables.energy import add_energy_blocks, energy_tables
from cnnbench.report.tables.implementations import implementation_tables
from cnnbench.report.tables.pipeline import is_pipeline_record, pipeline_tables
from cnnbench.report.tables.scaling import ScalingGroup, overview, scaling_groups
from cnnbench.report.tables.systems import systems_table
from cnnbench.report.tables.throughput import Section, configuration_sections
from cnnbench.report.tables.training import TrainingResult, training_results
from cnnbench.results.query import parse_where, select
from cnnbench.words import plural

log = logging.getLogger(__name__)


class ReportError(ValueError):
    """A report that cannot be made as asked (one line, for the user)."""


class NoMatchingRecords(ReportError):
    """Nothing left to report after ``--where``."""


@dataclass
class ReportOptions:
    """What to report and how (the ``cnnbench report`` flags)."""

    columns: str = "machine"
    effects: Sequence[str] | None = None
    """Fields to show effects of; ``None``: every field with exactly two values."""
    baselines: Mapping[str, str] = field(default_factory=dict)
    """``{field: value}``: the value others are compared with in effect tables."""
    where: Sequence[str] = ()
    title: str = "cnnbench report"
    noise: float = 0.03
    """The smallest relative difference called significant (the test's minimum effect)."""
    repeat_noise: float = REPEAT_NOISE
    """A cell shows the relative stdev of its repeats (``±x%``) when it exceeds this: the
    threshold above which the sweep warns that repeats disagree (``cnnbench sweep --noise``)."""
    ignore: Sequence[str] = ()
    """Fields results may differ in and still pair in effect tables (``--ignore``)."""
    include_warned: bool = False
    """Let cells whose runs recorded warnings (or were throttled) into the observations."""
    max_plots: int = 8
    problems: Sequence[str] = ()
    """Lines the store could not read, listed at the end."""


def _parse_baselines(baselines: Mapping[str, str], records: list[Mapping[str, Any]]) -> dict[str, str]:
    return {F.resolve_field(k, records): v for k, v in baselines.items()}


def build_report(records: Sequence[Mapping[str, Any]], options: ReportOptions | None = None) -> Report:
    """The report for ``records`` (raises :class:`ReportError` / :class:`NoMatchingRecords`)."""
    opts = options or ReportOptions()
    records = list(records)
    if not records:
        raise NoMatchingRecords("no records to report")
    try:
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
        column = F.resolve_field(opts.columns, selected)
        if column == F.MODEL:
            raise F.FieldError("--columns model: the rows are the models already; choose another field "
                               "(machine, gpu, cpu, num_devices, precision, ...)")
        effect_fields = None if opts.effects is None else [F.resolve_field(e, selected) for e in opts.effects]
        baselines = _parse_baselines(opts.baselines, selected)
        ignore = [F.resolve_field(f, selected) for f in opts.ignore]
    except F.FieldError as exc:
        raise ReportError(str(exc)) from exc
    pipelines = pipeline_tables(selected, column, opts.repeat_noise)  # cnnbench data: no model, tables of their own
    points = build_points([r for r in selected if not is_pipeline_record(r)],
                          [column, *(effect_fields or []), *baselines])
    log.info("%d of %d records selected, %d points", len(selected), len(records), len(points.points))

    cost = cost_table(points)
    sections = configuration_sections(points, column, opts.repeat_noise)
    groups = scaling_groups(points, opts.repeat_noise)
    names = effect_fields if effect_fields is not None else default_effect_fields(points)
    try:
        effects, effect_notes = compute_effects(points, names, baselines, opts.noise,
                                                explain=effect_fields is not None, ignore=ignore)
    except F.FieldError as exc:
        raise ReportError(str(exc)) from exc
    baseline_warnings = _unused_baselines(baselines, names, effects, points)
    effect_notes += baseline_warnings
    inert = [F.short_name(f) for f in ignore if f not in points.key_fields]
    if inert:
        effect_notes.append(f"--ignore {', '.join(inert)}: not part of what pairs results (it never kept two "
                            f"results apart), so ignoring it changes nothing.")
    impls = implementation_tables(points, opts.repeat_noise)
    trainings = training_results(points)
    energies = energy_tables(sections)

    systems = systems_table(selected)
    glance = overview(groups)
    all_tables: list[Table] = [t for t in (systems, glance, cost) if t] + [s.table for s in sections]
    for g in groups:
        all_tables += [g.summary, g.table]
    all_tables += [e.table for e in effects] + impls + [r.table for r in trainings] + pipelines + energies
    unique_ids(all_tables)

    warned = opts.include_warned
    observations = (scaling_observations(groups, warned) + effect_observations(effects, warned)
                    + fastest_observations(sections, column, warned) + implementation_observations(impls, warned)
                    + failure_observations(sections))

    report = Report(opts.title, tables=all_tables, observations=observations, n_records=len(selected),
                    warnings=baseline_warnings)
    _assemble(report, opts, records, selected, points, column, cost, sections, groups, effects,
              effect_notes, impls, trainings, pipelines, systems, glance)
    add_energy_blocks(report, energies)
    _budget_plots(report, opts.max_plots)
    set_anchors(report.blocks)
    return report


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


def _listed(values: list[Any], most: int = 6) -> str:
    shown = ", ".join(F.text(v) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def _facts(records: list, selected: list, opts: ReportOptions, points: PointSet, column: str) -> list[str]:
    """What was run: results, machines, models, configurations, device counts."""
    statuses = Counter(str(r.get("status") or "ok") for r in selected)
    failed = ", ".join(f"{n} {s}" for s, n in statuses.most_common() if s != "ok")
    machines = sorted(points.distinct(F.MACHINE), key=F.sort_key)
    models = sorted((m for m in points.distinct(F.MODEL) if m is not None), key=F.sort_key)
    config_fields = [f for f in points.key_fields if f not in (F.MODEL, F.BATCH, F.MACHINE, F.DEVICES)]
    n_configs = len(points.group_by(config_fields)) if points.points else 0
    devices = sorted({int(d) for d in points.distinct(F.DEVICES) if isinstance(d, (int, float))})
    what = f"{plural(len(selected), 'result')} ({statuses.get('ok', 0):,} ok{', ' + failed if failed else ''})"
    if points.points:
        what += (f" of {plural(len(models), 'model')} in {plural(n_configs, 'configuration')}"
                 + (f" at {_device_range(devices)}" if devices else "")
                 + f", on {plural(len(machines), 'machine')}: {_listed(machines)}.")
    else:
        what += f", on {plural(len(machines), 'machine')}."
    lines = [what]
    if opts.where:
        lines.append(f"Selected with --where {' '.join(opts.where)}: {len(selected):,} of {len(records):,} results.")
    constant = [f for f in points.key_fields if len(points.distinct(f)) == 1 and points.distinct(f)[0] is not None
                and f != F.MACHINE]
    if constant:
        lines.append("Common to all results: " + ", ".join(_common_label(f, points.distinct(f)[0]) for f in constant)
                     + ".")
    lines.append(f"Tables by {F.short_name(column)}; images/sec are medians of repeats over all devices.")
    return lines


def _device_range(devices: list[int]) -> str:
    if len(devices) == 1:
        return plural(devices[0], "device")
    return f"{', '.join(map(str, devices[:-1]))} and {devices[-1]} devices"


def _common_label(field: str, value: Any) -> str:
    if field in (F.MACHINE, F.SOURCE):
        return f"{F.short_name(field)} {value}"
    return F.label(field, value)


def _assemble(report: Report, opts: ReportOptions, records: list, selected: list, points: PointSet,
              column: str, cost: Table | None, sections: list[Section], groups: list[ScalingGroup],
              effects: list[Effect], effect_notes: list[str], impls: list[Table],
              trainings: list[TrainingResult], pipelines: list[Table], systems: Table | None,
              glance: Table | None) -> None:
    """The report's order: what was run and what it shows, the contents, the systems, then the
    sections, scaling first (its summary is what most readers look for)."""
    b = report.blocks
    b.append(Heading(opts.title, 1))
    b += [Paragraph(line) for line in _facts(records, selected, opts, points, column)]
    b.append(Heading("Observations"))
    b.append(Bullets([o.text for o in report.observations]) if report.observations
             else Paragraph("Nothing to observe: no table has two comparable figures."))
    b += [Heading("Contents"), Contents()]
    if systems:
        b += [Heading("Systems"), TableBlock(systems)]
    if groups:
        b.append(Heading("Scaling"))
        if glance and len(groups) > 1:
            b.append(TableBlock(glance, caption=True))
        for g in groups:
            scaling_fig = _scaling_figure(g)
            b += [Heading(g.name, 3), TableBlock(g.summary), scaling_fig]
            report.figures.append(scaling_fig)
    if sections or not pipelines:
        b.append(Heading(f"Throughput by configuration (images/sec; columns: {F.short_name(column)})"))
    for s in sections:
        b += [Heading(s.name, 3), TableBlock(s.table)]
        fig = _throughput_figure(s)
        if fig:
            b.append(fig)
            report.figures.append(fig)
    if effects or effect_notes:
        b.append(Heading("Effects (one factor at a time)"))
        for e in effects:
            b += [Heading(e.table.title, 3), TableBlock(e.table)]
        if effect_notes:
            b.append(Bullets(effect_notes))
    if impls:
        b.append(Heading("Implementations side by side"))
        for t in impls:
            b += [Heading(t.title.split(": ", 1)[-1], 3), TableBlock(t)]
    if trainings:
        b.append(Heading("Training to accuracy"))
        for r in trainings:
            b += [Heading(r.table.title.split(": ", 1)[-1], 3), TableBlock(r.table)]
            if r.curves:
                fig = Figure("training", f"training-{r.table.id[len('training-'):]}",
                             r.table.title, {"curves": r.curves})
                b.append(fig)
                report.figures.append(fig)
    if pipelines:
        b.append(Heading("Input pipeline alone (cnnbench data)"))
        b += [TableBlock(t, caption=True) for t in pipelines]
    if cost:
        b += [Heading("Model cost"), TableBlock(cost)]
    explained = marks_section(combined(p.measure for p in points.points), opts.include_warned)
    if explained:
        b += [Heading(MARKS_HEADING), Bullets(explained)]
    if opts.problems:
        b.append(Heading("Results that could not be read"))
        b.append(Bullets(list(opts.problems)))


def _throughput_figure(s: Section) -> Figure | None:
    t = s.table
    cols = t.columns[t.label_columns:]
    if not t.rows or (len(cols) < 2 and len(t.rows) < 2):
        return None
    values = [[c.value if c.is_number else None for c in row[t.label_columns:]] for row in t.rows]
    status = [[c.status for c in row[t.label_columns:]] for row in t.rows]
    # error bars: one relative stdev of the repeats either side (the table's ±), where there are repeats
    errors = [[c.value * c.spread if c.is_number and c.spread else 0.0 for c in row[t.label_columns:]]
              for row in t.rows]
    batch_of: dict[tuple[str, str], Any] = {}
    for p in s.points:
        batch_of.setdefault((F.text(p.values.get(F.MODEL)), F.text(p.values.get(s.column_field))),
                            p.values.get(F.BATCH))
    batches = [[F.text(batch_of.get((row[0].text, c))) if batch_of.get((row[0].text, c)) is not None else ""
                for c in cols] for row in t.rows]
    data = {"rows": [r[0].text for r in t.rows], "columns": cols, "values": values, "status": status,
            "errors": errors, "column_name": F.short_name(s.column_field),
            "batches": [b if len({x for x in b if x}) > 1 else [""] * len(b) for b in batches]}
    return Figure("throughput", t.id, f"images/sec: {s.name}", data)


def _scaling_figure(g: ScalingGroup) -> Figure:
    by_model: dict[str, list[Any]] = {}
    for s in g.series:
        by_model.setdefault(str(s.values.get(F.MODEL)), []).append(s)
    models: dict[str, list[dict[str, Any]]] = {}
    for model, series in by_model.items():
        machines = [str(s.values.get(F.MACHINE)) for s in series]
        batches = {s.values.get(F.BATCH) for s in series}
        # the batch joins the label when the machines ran different batches (or one machine several)
        plain = len(set(machines)) == len(machines) and len(batches) == 1
        models[model] = [{"label": m, "note": "" if plain else f"batch {F.text(s.values.get(F.BATCH))}",
                          "points": sorted(s.speedup.items()), "ranges": _speedup_ranges(s)}
                         for m, s in zip(machines, series, strict=False)]
    return Figure("scaling", g.table.id, f"Scaling: {g.name}", {"models": models, "devices": g.devices})


def _speedup_ranges(s: Any) -> list[tuple[int, float, float]]:
    """(devices, lowest, highest speedup) over the repeats at each device count that has two or more."""
    base = s.measures[s.base].median if s.base is not None else None
    if not base:
        return []
    return [(n, min(m.ips) / base, max(m.ips) / base) for n, m in sorted(s.measures.items()) if len(m.ips) > 1]


def _budget_plots(report: Report, max_plots: int) -> None:
    """Draw at most ``max_plots`` figures: scaling first, then training curves, then throughput."""
    order = {"scaling": 0, "training": 1, "throughput": 2}
    ranked = sorted(report.figures, key=lambda f: order[f.kind])
    for i, fig in enumerate(ranked):
        fig.drawn = i < max_plots
    skipped = sum(1 for f in report.figures if not f.drawn)
    at = next(i for i, b in enumerate(report.blocks) if isinstance(b, Heading) and b.text == "Observations")
    if skipped and max_plots == 0:
        report.blocks.insert(at, Paragraph(f"No plots drawn ({skipped} available; --no-plots or --max-plots 0)."))
    elif skipped:
        report.blocks.insert(at, Paragraph(
            f"{len(report.figures) - skipped} of {len(report.figures)} plots drawn (--max-plots {max_plots})."))
