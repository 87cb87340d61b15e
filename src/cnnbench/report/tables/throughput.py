"""Per-configuration throughput tables (as in vendor tf_cnn_benchmarks reports):
rows = models, columns = a chosen field.

One table per configuration (everything in a point's identity except the model, its batch
size and the column field; a machine descriptor as column, e.g. ``gpu``, folds machines
with the same GPU together). Cell = median ``total_images_per_sec`` over repeats.

Batch sizes are per model (and sometimes per machine, as in tf_cnn_benchmarks runs): a
``batch`` column shows the batch of each row; where it differs across the row's cells,
each cell says its own; where one cell holds several batch sizes (a batch sweep), the
model gets one row per batch size.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import Namer, data_set_note, unique_names
from cnnbench.analysis.marks import legend_for
from cnnbench.analysis.points import Measure, Point, PointSet, combine
from cnnbench.analysis.repeat_stats import SPREAD_NAME
from cnnbench.report.table import Cell, Table, label_cell, missing, throughput


@dataclass
class Section:
    """One configuration's table and the points behind it."""

    name: str
    table: Table
    column_field: str
    points: list[Point] = field(default_factory=list)
    measures: dict[tuple[str, str], Measure] = field(default_factory=dict)
    """The measure behind each number cell, by (row label, column): what the observations test."""


def section_key_fields(points: PointSet, column_field: str) -> list[str]:
    """Identity fields that tell configuration tables apart for a column field."""
    drop = {F.MODEL, F.BATCH, column_field}
    if column_field in F.HARDWARE_FIELDS:
        drop.add(F.MACHINE)
    return [f for f in points.key_fields if f not in drop]


def configuration_sections(points: PointSet, column_field: str, noise: float) -> list[Section]:
    """One :class:`Section` per configuration, in natural order of their names."""
    key_fields = section_key_fields(points, column_field)
    exclude = set(points.key_fields) - set(key_fields)
    namer = Namer(points, exclude)
    groups = points.group_by(key_fields)
    sections = []
    names = unique_names(namer, [g[0].values for g in groups.values()])
    for name, group in zip(names, groups.values(), strict=False):
        measures: dict[tuple[str, str], Measure] = {}
        table = _table(points, group, name, column_field, noise, measures)
        sections.append(Section(name, table, column_field, group, measures))
    sections.sort(key=lambda s: F.sort_key(s.name))
    return sections


def _table(points: PointSet, group: list[Point], name: str, column_field: str, noise: float,
           measures: dict[tuple[str, str], Measure]) -> Table:
    columns = points.distinct(column_field, group)
    models = sorted(points.distinct(F.MODEL, group), key=F.sort_key)  # resnet18 before resnet101
    cells: dict[tuple[Any, Any], list[Point]] = defaultdict(list)
    for p in group:
        cells[(p.values.get(F.MODEL), p.values.get(column_field))].append(p)
    rows: list[list[Cell]] = []
    for model in models:
        by_col = {c: cells.get((model, c), []) for c in columns}
        if any(len({p.values.get(F.BATCH) for p in ps}) > 1 for ps in by_col.values()):
            rows += _sweep_rows(points, model, by_col, noise, measures)
        else:
            rows.append(_row(model, by_col, column_field, noise, measures))
    col_name = F.short_name(column_field)
    notes = [
        f"images/sec over all devices (total_images_per_sec); columns: {col_name}; batch = per device. "
        f"Cell = median of repeats; ±x% = their {SPREAD_NAME} (sample standard deviation / mean) where it "
        f"exceeds {noise * 100:g}%; OOM/error/timeout = every repeat failed that way; — = not run."
    ] + data_set_note(group[0].values) + legend_for([p.measure for p in group])
    return Table(f"throughput-{F.slug(name)}", name, "configuration",
                 ["model", "batch"] + [F.text(c) for c in columns], rows, notes, label_columns=2)


def _sweep_rows(points: PointSet, model: Any, by_col: dict[Any, list[Point]], noise: float,
                measures: dict[tuple[str, str], Measure]) -> list[list[Cell]]:
    """A model whose cells hold several batch sizes (a batch sweep): one row per batch size
    (``measures``: filled with each cell's measure)."""
    rows = []
    for batch in points.distinct(F.BATCH, [p for ps in by_col.values() for p in ps]):
        label = f"{model}, batch {F.text(batch)}"
        row = [label_cell(label), Cell(F.text(batch), batch)]
        for col, ps in by_col.items():
            at = [p for p in ps if p.values.get(F.BATCH) == batch]
            if not at:
                row.append(missing())
                continue
            m = measures[(label, F.text(col))] = combine(at)
            row.append(throughput(m, noise))
        rows.append(row)
    return rows


def _row(model: Any, by_col: dict[Any, list[Point]], column_field: str, noise: float,
         measures: dict[tuple[str, str], Measure]) -> list[Cell]:
    """A model's one row; where its batch differs across the row, each cell says its own
    (``measures``: filled with each cell's measure)."""
    batches = {p.values.get(F.BATCH) for ps in by_col.values() for p in ps}
    varies = len(batches) > 1 and column_field != F.BATCH  # batch columns say it already
    batch_cell = (Cell("varies", None) if len(batches) > 1
                  else Cell(F.text(next(iter(batches))), next(iter(batches))))
    row = [label_cell(model), batch_cell]
    for col, ps in by_col.items():
        if not ps:
            row.append(missing())
            continue
        note = f"(batch {F.text(ps[0].values.get(F.BATCH))})" if varies else ""
        m = measures[(row[0].text, F.text(col))] = combine(ps)
        row.append(throughput(m, noise, note))
    return row
