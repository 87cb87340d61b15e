"""Tables: cells that carry both what a reader sees and what a program reads.

A :class:`Cell` has ``text`` (as printed in markdown/HTML) and ``value`` (as written to
CSV/JSON): a number, a status word (``OOM``, ``error``, ``timeout``) or ``None`` for
a missing cell, which prints as ``—``. A missing or failed cell is never a 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cnnbench.analysis.marks import measure_marks
from cnnbench.analysis.points import Measure
from cnnbench.analysis.repeat_stats import median, spread_percent
from cnnbench.report.numbers import fixed, significant
from cnnbench.results import fields as R

MISSING = "—"


class Cell(NamedTuple):
    """One table cell (a named tuple: cheap to make by the hundred thousand)."""

    text: str
    value: Any = None
    failed_repeats: int = 0
    """For a number: how many of its repeats failed (shown as ``k/n`` in the text)."""
    status: str = ""
    """For a failed cell: the failure (``OOM``, ``error``, ``timeout``); empty otherwise."""
    marks: str = ""
    """Marks of less trustworthy figures (``†`` wide spread, ``⚠`` warned; see
    :mod:`cnnbench.analysis.marks`), also shown at the end of ``text``."""
    spread: float | None = None
    """For a median of repeats: their relative stdev (stdev / mean, :mod:`cnnbench.analysis.repeat_stats`),
    the ``±`` of ``text``, written to CSV/JSON in full."""

    @property
    def is_number(self) -> bool:
        return self.value.__class__ in (int, float)


def missing() -> Cell:
    return Cell(MISSING, None)


def failed(word: str, text: str | None = None) -> Cell:
    """A cell for a failure: shows ``text`` (default: the word), its value is the word."""
    return Cell(text or word, word, 0, word)


def label_cell(text: Any) -> Cell:
    """A label (row header) cell; its value is the label itself."""
    return Cell(MISSING if text is None else str(text), text)


def number(value: float | None, digits: int = 2, suffix: str = "") -> Cell:
    """A number with ``digits`` decimals and thousands separators, or ``—`` for ``None``."""
    if value is None:
        return missing()
    return Cell(f"{fixed(value, digits)}{suffix}", value)


def field_number(path: str, value: float | None) -> Cell:
    """A value of the registered field ``path`` in the number format the field registry declares
    for it (``metrics.total_images_per_sec``: ``1,234.6``), or ``—`` for ``None``."""
    if value is None:
        return missing()
    return Cell(R.field(path).show(value), value)


def percent(fraction: float | None, digits: int = 1) -> Cell:
    """A fraction shown as a percentage (value stays the fraction)."""
    if fraction is None:
        return missing()
    return Cell(f"{fraction * 100:.{digits}f}%", fraction)


def throughput(measure: Measure | None, noise: float, note: str = "") -> Cell:
    """An images/sec cell from the repeats of a cell.

    The median of ``ok`` repeats (four significant digits, thousands separated); ``±x%``
    (their relative stdev, stdev / mean) when it exceeds ``noise`` (the sweep's threshold,
    :data:`cnnbench.analysis.repeat_stats.REPEAT_NOISE` by default); ``(k/n OOM)`` when some repeats
    failed; the failure (``OOM``, ``error``, ``timeout``) when all did; ``—`` when none ran;
    ``†``/``⚠`` when a run has a wide spread or warnings.
    """

    if measure is None or measure.n == 0:
        return missing()
    med = measure.median
    if med is None:
        word = measure.failure_text()
        return failed(word) if word else missing()
    text = significant(med)
    spread = measure.spread
    if spread is not None and spread > noise:
        text += f" ±{spread_percent(spread)}"
    fails = measure.failures
    if fails:
        text += f" ({sum(fails.values())}/{measure.n} {measure.failure_text()})"
    if note:
        text += f" {note}"
    marks = measure_marks(measure).symbols
    if marks:
        text += f" {marks}"
    return Cell(text, round(med, 4), sum(fails.values()), "", marks, spread)


@dataclass
class Table:
    """A titled table. ``rows[i][0]`` is the row label; ``kind`` names the table family
    (``cost``, ``configuration``, ``scaling``, ``scaling-summary``, ``effect``,
    ``implementation``, ``training``)."""

    id: str
    title: str
    kind: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    label_columns: int = 1
    """How many leading columns are labels rather than data."""
    written: bool = True
    """False for a table that is only printed (its data is in another table's files)."""
    row_names: list[str] = field(default_factory=list)
    """Each row in a sentence where its label cells say more than the first does
    (``alexnet, batch 4``; ``m-a · num_devices=2``): how observations name it; empty otherwise."""

    def column_index(self, column: str) -> int:
        return self.columns.index(column)

    def row(self, label: str) -> list[Cell]:
        """The row named ``label`` in :attr:`row_names`, else the first whose label cell reads ``label``."""
        if label in self.row_names:
            return self.rows[self.row_names.index(label)]
        for r in self.rows:
            if r[0].text == label:
                return r
        raise KeyError(f"{self.id}: no row {label!r}")

    def cell(self, row_label: str, column: str) -> Cell:
        return self.row(row_label)[self.column_index(column)]

    def records(self) -> list[dict[str, Any]]:
        """Rows as ``{column: value}`` dicts (values as in CSV/JSON)."""
        return [{c: cell.value for c, cell in zip(self.columns, row, strict=False)} for row in self.rows]


def condensed(table: Table, max_columns: int) -> Table | None:
    """For a table wider than ``max_columns`` whose data columns are numbers (effects,
    scaling summaries): per row, how many values, their minimum, median and maximum (the
    table's own ``median`` column where it has one; a last ``all`` row spans every row).
    ``None`` when the table is narrow enough to print as it is."""
    if len(table.columns) <= max_columns:
        return None
    data = [i for i, c in enumerate(table.columns) if i >= table.label_columns and c != "median"]
    med_col = table.columns.index("median") if "median" in table.columns else None

    def numbers(rows: list[list[Cell]]) -> list[float]:
        return [r[i].value for r in rows for i in data if r[i].is_number]

    rows = []
    for k, row in enumerate(table.rows):
        spans_all = row[0].text == "all" and k == len(table.rows) - 1 and k > 0
        xs = numbers(table.rows[:k] if spans_all else [row])
        if not xs:
            rows.append(row[: table.label_columns] + [Cell("0", 0), missing(), missing(), missing()])
            continue
        med = row[med_col] if med_col is not None else number(median(xs))
        rows.append(row[: table.label_columns] + [Cell(str(len(xs)), len(xs)), number(min(xs)), med,
                                                  number(max(xs))])
    columns = table.columns[: table.label_columns] + ["n", "min", "median", "max"]
    note = (f"{len(data)} columns summarised per row (n = how many have a value); every column is in "
            f"tables/{table.id}.csv and tables/{table.id}.json.")
    return Table(table.id, table.title, table.kind, columns, rows, [note] + table.notes, table.label_columns)


def header_cells(values: Sequence[Any]) -> list[str]:
    return [MISSING if v is None else str(v) for v in values]


def unique_ids(tables: Sequence[Table]) -> None:
    """Make table ids unique (``x``, ``x-2``, ``x-3``...), in place."""
    seen: set[str] = set()
    for t in tables:
        base, n = t.id, 1
        while t.id in seen:
            n += 1
            t.id = f"{base}-{n}"
        seen.add(t.id)
