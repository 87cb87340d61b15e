"""Machine-readable tables: ``tables/<id>.csv`` and ``tables/<id>.json``.

Cells are written as values, not as display text: numbers as numbers, failures as their
status word (``OOM``, ``error``, ``timeout``), missing cells empty (CSV) or ``null``
(JSON). A column whose cells are medians of repeats is followed by a ``<column> relative
stdev`` column: the relative stdev of the repeats, stdev / mean
(:func:`cnnbench.analysis.repeat_stats.relative_stdev`, the ``±`` of the display text, which shows
it only above the noise threshold). The JSON also keeps the display text (in the table's own
columns, ``text_columns``) and the notes; it is written by orjson (compact, UTF-8; about three
times as quick as the standard library's encoder for a report's tables), a row per line.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import orjson

from cnnbench.analysis.repeat_stats import SPREAD_NAME
from cnnbench.report.table import Table


def _plain(value: Any) -> Any:
    if value.__class__ is float:
        return round(value, 6)
    return value


def _spread_columns(table: Table) -> list[int]:
    """Indexes of the columns with a repeat spread in some cell."""
    return [i for i in range(len(table.columns)) if any(i < len(r) and r[i].spread is not None for r in table.rows)]


def _with_spread(values: list[Any], row: list[Any], spread: list[int]) -> list[Any]:
    if not spread:
        return values
    out = []
    for i, v in enumerate(values):
        out.append(v)
        if i in spread:
            out.append(_plain(row[i].spread) if i < len(row) else None)
    return out


def _columns(table: Table, spread: list[int]) -> list[str]:
    return [name for i, c in enumerate(table.columns) for name in ((c, f"{c} {SPREAD_NAME}") if i in spread else (c,))]


def _values(table: Table, spread: list[int]) -> list[list[Any]]:
    """Each row's values as written (a float to 6 decimals), each spread after its cell's."""
    return [_with_spread([round(v, 6) if v.__class__ is float else v for v in (c.value for c in row)], row, spread)
            for row in table.rows]


def table_texts(table: Table) -> tuple[str, str]:
    """The table's CSV and its JSON, its values worked out once for both. The JSON has one row
    (and its display text) per line, so it diffs and greps well: ``columns`` are the keys of each
    row (``<column> relative stdev`` included), ``text_columns`` the display columns that each
    ``text`` row lists in order."""
    spread = _spread_columns(table)
    columns = _columns(table, spread)
    values = _values(table, spread)
    return _csv(columns, values), _json(table, columns, values)


def _csv(columns: list[str], values: list[list[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(["" if v is None else v for v in row] for row in values)
    return buf.getvalue()


def _default(value: Any) -> Any:
    """What orjson cannot write itself, as the standard library's encoder would write it: a float
    or int subclass as its number (numpy's ``float64``), anything else as its text."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    return str(value)


def _dumps(value: Any) -> bytes:
    """``value`` as compact JSON: orjson, or the standard library's encoder (ASCII, escaped) for what
    orjson refuses (an integer beyond 64 bits, a lone surrogate). A float that is not a number, or
    infinite, is ``null`` either way (JSON has no such number)."""
    try:
        return orjson.dumps(value, default=_default)
    except TypeError:
        return json.dumps(_finite(value), default=str, separators=(",", ":"), allow_nan=False).encode("ascii")


def _finite(value: Any) -> Any:
    """``value`` with each float that is not finite (in it, its lists and its dicts) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json(table: Table, columns: list[str], values: list[list[Any]]) -> str:
    head = {"id": table.id, "title": table.title, "kind": table.kind, "columns": columns,
            "text_columns": table.columns, "notes": table.notes}
    rows = [_dumps(dict(zip(columns, row, strict=False))) for row in values]
    text = [_dumps([c.text for c in row]) for row in table.rows]
    body = _dumps(head)[:-1]
    return (body + b',\n "rows": [\n  ' + b",\n  ".join(rows) + b'\n ],\n "text": [\n  '
            + b",\n  ".join(text) + b"\n ]}\n").decode("utf-8")
