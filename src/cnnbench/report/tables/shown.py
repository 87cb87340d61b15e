"""Shown fields: a table per configuration of each registered field that the registry says a report shows.

A field declared with ``shown=Shown(...)`` in :mod:`cnnbench.results.fields` (images per joule,
``metrics.images_per_joule``, is one) gets, for every configuration table that has records
carrying it, a twin: the same rows (models, batch) and columns, each cell the median of the
field over the ``ok`` repeats that have a number for it (``—`` otherwise), in the field's
format. Each field's tables come under its own heading, in the order the registry declares the
fields; the wording is the field's :class:`~cnnbench.results.fields.Shown`, its defaults made
of the field's label, unit and direction. A new field in a report is its declaration, and
nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.repeat_stats import median
from cnnbench.report.document import Block, Heading, Report, TableBlock
from cnnbench.report.kinds import Inputs, TableKind, register
from cnnbench.report.section import Section
from cnnbench.report.table import Cell, Table, field_number, label_cell, missing
from cnnbench.results.fields import Shown

LATER = ("Model cost", "Results that could not be read")
"""The sections that stay after the shown fields' (the report's last)."""


def shown_fields() -> list[F.Field]:
    """The registered fields a report shows, in declaration order."""
    return [f for f in F.FIELDS.values() if f.shown is not None]


def _shown(field: F.Field) -> Shown:
    assert field.shown is not None
    return field.shown


def title(field: F.Field) -> str:
    """The field's label with a capital (``Images per joule``)."""
    return field.label[:1].upper() + field.label[1:]


def heading(field: F.Field) -> str:
    """The heading of the field's tables (default: ``Label (unit)``)."""
    return _shown(field).heading or title(field) + (f" ({field.unit})" if field.unit else "")


def table_name(field: F.Field) -> str:
    """The kind of the field's tables and the start of their ids (default: its key, ``-`` for ``_``)."""
    return _shown(field).name or field.name.replace("_", "-").replace(".", "-")


def _means(field: F.Field) -> str:
    said = _shown(field).means
    if said:
        return said
    parts = ([f"in {field.unit}"] if field.unit else []) + ([f"{field.direction} is better"] if field.direction else [])
    return ", ".join(parts)


def value(field: F.Field, record: Mapping[str, Any]) -> float | None:
    """The field's number in an ``ok`` record (``None``: failed, absent, not a number, NaN, or
    not above 0 where only positive values count)."""
    if (record.get("status") or "ok") != "ok":
        return None
    found = F.get_value(record, field.path)
    if found.__class__ not in (int, float) or found != found:  # bools are no figure; NaN is none
        return None
    if _shown(field).positive and found <= 0:
        return None
    return float(found)


def shown_tables(field: F.Field, sections: Sequence[Section]) -> list[Table]:
    """One table of ``field`` per configuration section that has any figure of it."""
    return [_table(field, s) for s in sections if any(value(field, r) is not None for p in s.points for r in p.records)]


def _table(field: F.Field, section: Section) -> Table:
    layout = section.layout
    cells: dict[tuple[Any, ...], list[float]] = {}
    rows_seen: dict[tuple[Any, ...], None] = {}
    columns: dict[tuple[Any, ...], None] = {}
    for p in section.points:
        key = layout.row_key(p.values) + (() if F.BATCH in layout.rows else (p.values.get(F.BATCH),))
        rows_seen.setdefault(key, None)
        col = layout.column_key(p.values)
        columns.setdefault(col, None)
        values = cells.setdefault((key, col), [])
        values += [x for x in (value(field, r) for r in p.records) if x is not None]
    rows: list[list[Cell]] = []
    for key in sorted(rows_seen, key=lambda k: tuple(map(F.sort_key, k))):
        row = [label_cell(v) if i == 0 else Cell(F.text(v), v) for i, v in enumerate(key)]
        for c in columns:
            xs = cells.get((key, c)) or []
            row.append(field_number(field.path, median(xs)) if xs else missing())
        rows.append(row)
    means = _means(field)
    notes = [f"{title(field) + ': ' + means + '; ' if means else ''}columns: {layout.column_name}; "
             f"batch = per device. Cell = median of repeats; — = {_shown(field).absent}."]
    labels = layout.row_headers + ([] if F.BATCH in layout.rows else [F.field(F.BATCH).label])
    name = table_name(field)
    return Table(f"{name}-{F.slug(section.name)}", f"{title(field)}: {section.name}", name,
                 labels + [layout.column_label(c) for c in columns], rows, notes, label_columns=len(labels))


def build(inputs: Inputs) -> list[tuple[F.Field, list[Table]]]:
    """Each shown field with its tables (none where no record carries it)."""
    sections = inputs.built["throughput"]
    return [(f, tables) for f in shown_fields() if (tables := shown_tables(f, sections))]


def add_shown_blocks(report: Report, built: Sequence[tuple[F.Field, list[Table]]]) -> None:
    """Each field's tables under its heading, before the model cost and the unreadable results if any."""
    blocks: list[Block] = []
    for field, tables in built:
        blocks.append(Heading(heading(field)))
        for t in tables:
            blocks += [Heading(t.title.split(": ", 1)[-1], 3), TableBlock(t)]
    if not blocks:
        return
    at = next((i for i, b in enumerate(report.blocks) if isinstance(b, Heading) and b.level == 2 and b.text in LATER),
              len(report.blocks))
    report.blocks[at:at] = blocks


register(TableKind("shown", 100, build, lambda report, built, inputs: add_shown_blocks(report, built),
                   tables=lambda built: [t for _, tables in built for t in tables]))
# last in order, it places itself before the model cost and the unreadable results (add_shown_blocks)
