"""Per-configuration throughput tables (as in vendor tf_cnn_benchmarks reports):
rows = models, columns = a chosen field, or any other fields (:class:`~cnnbench.report.layout.Layout`).

One table per configuration: everything in a point's identity except the row fields, the
column fields and the batch size (a machine descriptor as row or column, e.g. ``gpu``, folds
machines with the same GPU together), and except fields that only follow from their parents
(``num_workers``, set for ``synthetic_location=loader`` alone: :func:`~cnnbench.analysis.labels.followers`).
Cell = median ``total_images_per_sec`` over repeats.

Batch sizes are per model (and sometimes per machine, as in tf_cnn_benchmarks runs): a
``batch`` column shows the batch of each row; where it differs across the row's cells,
each cell says its own; where one cell holds several batch sizes (a batch sweep), the
row is split into one row per batch size.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import Namer, data_set_note, followers, unique_names
from cnnbench.analysis.marks import legend_for
from cnnbench.analysis.points import Point, PointSet, combine
from cnnbench.analysis.repeat_stats import SPREAD_NAME
from cnnbench.report.document import Figure, Heading, Report, TableBlock
from cnnbench.report.fastest import fastest_observations
from cnnbench.report.kinds import Inputs, Observes, TableKind, register
from cnnbench.report.layout import Layout, gpu_notes
from cnnbench.report.observations import Observation, failure_observations
from cnnbench.report.section import Section
from cnnbench.report.table import Cell, Table, missing, throughput


def shown_fields(points: PointSet, layout: Layout) -> set[str]:
    """The identity fields a table shows rather than its configuration (rows, columns, batch)."""
    drop = {F.BATCH, *layout.shown}
    if drop & F.HARDWARE_FIELDS:
        drop.add(F.MACHINE)
    return drop


def section_key_fields(points: PointSet, layout: Layout | str,
                       follow: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Identity fields that tell configuration tables apart for a layout (or a column field);
    ``follow``: :func:`~cnnbench.analysis.labels.followers` of the points, when known."""
    if isinstance(layout, str):
        layout = Layout(columns=(layout,))
    drop = shown_fields(points, layout) | set(followers(points) if follow is None else follow)
    return [f for f in points.key_fields if f not in drop]


def _unnamed(points: PointSet, layout: Layout, follow: dict[str, tuple[str, ...]]) -> set[str]:
    """The fields configuration names leave out: those the tables show, and those that follow
    from a field the tables show (a table of device, host and loader columns is not named
    ``num_workers=2``)."""
    shown = shown_fields(points, layout)
    return {f for f in points.key_fields if f in shown} | {f for f, deps in follow.items() if shown.intersection(deps)}


def configuration_sections(points: PointSet, layout: Layout | str, noise: float) -> list[Section]:
    """One :class:`Section` per configuration, in natural order of their names (``layout``: a
    :class:`Layout`, or the column field of the default rows)."""
    if isinstance(layout, str):
        layout = Layout(columns=(layout,))
    follow = followers(points)
    key_fields = section_key_fields(points, layout, follow)
    namer = Namer(points, _unnamed(points, layout, follow))
    groups = points.group_by(key_fields)
    sections = []
    names = unique_names(namer, [g[0].values for g in groups.values()])
    for name, group in zip(names, groups.values(), strict=False):
        section = Section(name, Table("", name, "configuration", []), layout, group)
        section.table = _table(points, section, noise)
        sections.append(section)
    sections.sort(key=lambda s: F.sort_key(s.name))
    return sections


def _table(points: PointSet, s: Section, noise: float) -> Table:
    layout, group = s.layout, s.points
    columns = layout.order(list(dict.fromkeys(layout.column_key(p.values) for p in group)),
                           [points.distinct(f, group) for f in layout.columns])
    row_keys = sorted({layout.row_key(p.values) for p in group}, key=lambda k: tuple(map(F.sort_key, k)))
    cells: dict[tuple[tuple, tuple], list[Point]] = defaultdict(list)
    for p in group:
        cells[(layout.row_key(p.values), layout.column_key(p.values))].append(p)
    batch_column = F.BATCH not in layout.rows and F.BATCH not in layout.columns  # else each row or column says it
    rows: list[list[Cell]] = []
    for key in row_keys:
        by_col = {c: cells.get((key, c), []) for c in columns}
        if batch_column and any(len({p.values.get(F.BATCH) for p in ps}) > 1 for ps in by_col.values()):
            rows += _sweep_rows(points, s, key, by_col, noise)
        else:
            rows.append(_row(s, key, by_col, batch_column, noise))
    col_name = layout.column_name
    notes = [
        f"images/sec over all devices (total_images_per_sec); columns: {col_name}; batch = per device. "
        f"Cell = median of repeats; ±x% = their {SPREAD_NAME} (sample standard deviation / mean) where it "
        f"exceeds {noise * 100:g}%; OOM/error/timeout = every repeat failed that way; — = not run."
    ] + gpu_notes(layout, [p.values for p in group]) + data_set_note(group[0].values) + legend_for(
        [p.measure for p in group])
    labels = layout.row_headers + ([F.field(F.BATCH).label] if batch_column else [])
    named = any(name != row[0].text for name, row in zip(s.row_labels, rows, strict=True))
    return Table(f"throughput-{F.slug(s.name)}", s.name, "configuration",
                 labels + [layout.column_label(c) for c in columns], rows, notes, label_columns=len(labels),
                 row_names=list(s.row_labels) if named else [])


def _label_cells(key: tuple) -> list[Cell]:
    """The row's label cells: each row field's value, once (the batch has a column of its own)."""
    return [Cell(F.text(v), v) for v in key]


def _sweep_rows(points: PointSet, s: Section, key: tuple, by_col: dict[tuple, list[Point]],
                noise: float) -> list[list[Cell]]:
    """A row whose cells hold several batch sizes (a batch sweep): one row per batch size, its
    label cells the row's values and its batch cell the batch (each said once; ``s.row_labels``
    says the row in a sentence, ``alexnet, batch 4``; ``s.measures``: filled with each cell's measure)."""
    rows = []
    for batch in points.distinct(F.BATCH, [p for ps in by_col.values() for p in ps]):
        row_text = F.text(key[0]) if len(key) == 1 else s.layout.row_label(key)
        label = f"{row_text}, batch {F.text(batch)}"
        row = _label_cells(key) + [Cell(F.text(batch), batch)]
        for col, ps in by_col.items():
            at = [p for p in ps if p.values.get(F.BATCH) == batch]
            if not at:
                row.append(missing())
                continue
            m = s.measures[(label, s.layout.column_label(col))] = combine(at)
            row.append(throughput(m, noise))
        rows.append(row)
        s.row_labels.append(label)
    return rows


def _row(s: Section, key: tuple, by_col: dict[tuple, list[Point]], batch_column: bool,
         noise: float) -> list[Cell]:
    """A row; where its batch differs across the row, each cell says its own
    (``s.measures``: filled with each cell's measure)."""
    layout = s.layout
    row = _label_cells(key)
    batches = {p.values.get(F.BATCH) for ps in by_col.values() for p in ps}
    varies = batch_column and len(batches) > 1
    if batch_column:
        row.append(Cell("varies", None) if len(batches) > 1
                   else Cell(F.text(next(iter(batches))), next(iter(batches))))
    label = layout.row_label(key)
    for col, ps in by_col.items():
        if not ps:
            row.append(missing())
            continue
        note = f"(batch {F.text(ps[0].values.get(F.BATCH))})" if varies else ""
        m = s.measures[(label, layout.column_label(col))] = combine(ps)
        row.append(throughput(m, noise, note))
    s.row_labels.append(label)
    return row


def throughput_figure(s: Section) -> Figure | None:
    """The bar chart of a configuration section (``None`` for a table of one cell or row)."""
    t = s.table
    cols = t.columns[t.label_columns:]
    if not t.rows or (len(cols) < 2 and len(t.rows) < 2):
        return None
    values = [[c.value if c.is_number else None for c in row[t.label_columns:]] for row in t.rows]
    status = [[c.status for c in row[t.label_columns:]] for row in t.rows]
    # error bars: one relative stdev of the repeats either side (the table's ±), where there are repeats
    errors = [[c.value * c.spread if c.is_number and c.spread else 0.0 for c in row[t.label_columns:]]
              for row in t.rows]
    data = {"rows": [s.row_label(i) for i in range(len(t.rows))], "columns": cols, "values": values,
            "status": status, "errors": errors, "column_name": s.layout.column_name, "batches": _batches(s, cols)}
    return Figure("throughput", t.id, f"{F.field(F.IPS).label}: {s.name}", data)


def _batches(s: Section, cols: list[str]) -> list[list[str]]:
    """Per row, the batch of each column's cell; a row's batches are blanked when they are all alike."""
    batch_of: dict[tuple[str, str], Any] = {}
    layout = s.layout
    for p in s.points:
        cell = (layout.row_label(layout.row_key(p.values)), layout.column_label(layout.column_key(p.values)))
        batch_of.setdefault(cell, p.values.get(F.BATCH))
    labels = [s.row_label(i) for i in range(len(s.table.rows))]
    batches = [[F.text(batch_of.get((label, c))) if batch_of.get((label, c)) is not None else ""
                for c in cols] for label in labels]
    return [b if len({x for x in b if x}) > 1 else [""] * len(b) for b in batches]


def _throughput_section(report: Report, sections: list[Section], inputs: Inputs) -> None:
    b = report.blocks
    layout = inputs.layout
    if sections or not inputs.built.get("pipeline"):
        rows = "" if layout.is_default else f"rows: {layout.row_name}; "
        b.append(Heading(f"Throughput by configuration (images/sec; {rows}columns: {layout.column_name})"))
    for s in sections:
        b += [Heading(s.name, 3), TableBlock(s.table)]
        fig = throughput_figure(s)
        if fig:
            b.append(fig)
            report.figures.append(fig)


def _observe_fastest(sections: list[Section], inputs: Inputs, warned: bool) -> list[Observation]:
    return fastest_observations(sections, inputs.layout, warned, inputs.options.noise)


def _observe_failures(sections: list[Section], inputs: Inputs, warned: bool) -> list[Observation]:
    """The failed cells: after every other observation, as they are (no warnings before them)."""
    return failure_observations(sections)


register(TableKind("throughput", 30,
                   lambda inputs: configuration_sections(inputs.points, inputs.layout, inputs.options.repeat_noise),
                   _throughput_section, lambda sections: [s.table for s in sections],
                   plot=lambda sections: [f for f in map(throughput_figure, sections) if f],
                   plot_order=2, draw="cnnbench.report.render.plot_throughput:_throughput",
                   observes=(Observes("fastest", 30, _observe_fastest),
                             Observes("failures", 100, _observe_failures, lead_with_warnings=False))))
