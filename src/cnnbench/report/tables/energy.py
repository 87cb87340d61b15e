"""Energy efficiency tables: images per joule, for configurations whose records carry it.

A run on NVIDIA GPUs records ``metrics.images_per_joule``: the images of its timed steps
over the energy its GPUs drew meanwhile (NVML). For every configuration table that has
such records, :func:`energy_tables` makes a twin: the same rows (models, batch) and columns,
each cell the median images per joule over the ``ok`` repeats that have one (``—``
otherwise). :func:`add_energy_blocks` puts them in the report under their own heading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.repeat_stats import median
from cnnbench.report.document import Block, Heading, Report, TableBlock
from cnnbench.report.kinds import TableKind, register
from cnnbench.report.table import Cell, Table, field_number, label_cell, missing
from cnnbench.report.tables.throughput import Section

HEADING = "Energy efficiency (images per joule)"


def _per_joule(record: Mapping[str, Any]) -> float | None:
    if (record.get("status") or "ok") != "ok":
        return None
    value = (record.get("metrics") or {}).get("images_per_joule")
    return float(value) if value.__class__ in (int, float) and value > 0 else None


def energy_tables(sections: Sequence[Section]) -> list[Table]:
    """One images-per-joule table per configuration section that has any such figure."""
    tables = []
    for section in sections:
        if not any(_per_joule(r) is not None for p in section.points for r in p.records):
            continue
        tables.append(_table(section))
    return tables


def _table(section: Section) -> Table:
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
        values += [x for x in (_per_joule(r) for r in p.records) if x is not None]
    rows: list[list[Cell]] = []
    for key in sorted(rows_seen, key=lambda k: tuple(map(F.sort_key, k))):
        row = [label_cell(v) if i == 0 else Cell(F.text(v), v) for i, v in enumerate(key)]
        for c in columns:
            xs = cells.get((key, c)) or []
            row.append(field_number(F.IMAGES_PER_JOULE, median(xs)) if xs else missing())
        rows.append(row)
    notes = [f"Images per joule: images of the timed steps over the energy the GPUs drew meanwhile (NVML; "
             f"host CPU and memory not included); columns: {layout.column_name}; batch = per device. "
             "Cell = median of repeats; — = no energy figure."]
    labels = layout.row_headers + ([] if F.BATCH in layout.rows else ["batch"])
    return Table(f"energy-{F.slug(section.name)}", f"Images per joule: {section.name}", "energy",
                 labels + [layout.column_label(c) for c in columns], rows, notes, label_columns=len(labels))


def add_energy_blocks(report: Report, tables: Sequence[Table]) -> None:
    """Add the tables under their heading, before the model cost and the unreadable results if any."""
    if not tables:
        return
    blocks: list[Block] = [Heading(HEADING)]
    for t in tables:
        blocks += [Heading(t.title.split(": ", 1)[-1], 3), TableBlock(t)]
    later = ("Model cost", "Results that could not be read")
    at = next((i for i, b in enumerate(report.blocks) if isinstance(b, Heading) and b.level == 2 and b.text in later),
              len(report.blocks))
    report.blocks[at:at] = blocks


register(TableKind("energy", 100, lambda inputs: energy_tables(inputs.built["throughput"]),
                   lambda report, tables, inputs: add_energy_blocks(report, tables)))
# last in order, it places itself before the model cost and the unreadable results (add_energy_blocks)
