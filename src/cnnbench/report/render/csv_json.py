"""Machine-readable tables: ``tables/<id>.csv`` and ``tables/<id>.json``.

Cells are written as values, not as display text: numbers as numbers, failures as their
status word (``OOM``, ``error``, ``timeout``), missing cells empty (CSV) or ``null``
(JSON); in CSV, text a spreadsheet would run as a formula gets a quote before it
(:mod:`cnnbench.results.csv_out`, the writer of every CSV). A column whose cells are medians
of repeats is followed by a ``<column> relative stdev`` column: the relative stdev of the repeats, stdev / mean
(:func:`cnnbench.analysis.repeat_stats.relative_stdev`, the ``±`` of the display text, which shows
it only above the noise threshold). The JSON also keeps the display text (in the table's own
columns, ``text_columns``) and the notes, a row per line, compact JSON: by orjson (about three times
as quick as the standard library's encoder for a report's tables) where every value is a string,
number, boolean or null, else by the standard library's encoder as before (``str`` of anything
else: an enum, a datetime). A float that is not a number, or infinite, is ``null``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from cnnbench.analysis.repeat_stats import SPREAD_NAME
from cnnbench.report.table import Table
from cnnbench.results.cleaning import finite_values
from cnnbench.results.csv_out import csv_text


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
    return csv_text(columns, values)  # None as an empty cell; text that a spreadsheet would run, made safe


_NATIVE = frozenset({str, int, float, bool, type(None)})
"""The classes orjson writes as the standard library's encoder does (but for a float that is not a
number, or infinite: ``null``, where that encoder refuses it)."""


def _only_native(rows: list[list[Any]]) -> bool:
    return {v.__class__ for row in rows for v in row} <= _NATIVE


def _orjson(value: Any) -> bytes:
    """``value`` (of :data:`_NATIVE` classes, in lists and dicts) as compact JSON: orjson, or
    :func:`_standard` for what orjson refuses (an integer beyond 64 bits, a lone surrogate)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return _standard(value)


def _standard(value: Any) -> bytes:
    """``value`` as compact JSON by the standard library's encoder, as it wrote any value before
    (``str`` of what it cannot write: an enum, a datetime, numpy's ``int64``), a float that is not
    finite as ``null``; UTF-8, or ASCII (escaped) where a lone surrogate cannot be UTF-8."""
    plain = finite_values(value)
    text = json.dumps(plain, ensure_ascii=False, default=str, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(plain, default=str, separators=(",", ":"), allow_nan=False).encode("ascii")


def _json(table: Table, columns: list[str], values: list[list[Any]]) -> str:
    head = {"id": table.id, "title": table.title, "kind": table.kind, "columns": columns,
            "text_columns": table.columns, "notes": table.notes}
    texts = [[c.text for c in row] for row in table.rows]
    native = _only_native([[table.id, table.title, table.kind], columns, table.columns, table.notes, *values, *texts])
    dumps = _orjson if native else _standard  # orjson writes some other classes its own way (an enum by its value)
    rows = [dumps(dict(zip(columns, row, strict=False))) for row in values]
    text = [dumps(row) for row in texts]
    body = dumps(head)[:-1]
    return (body + b',\n "rows": [\n  ' + b",\n  ".join(rows) + b'\n ],\n "text": [\n  '
            + b",\n  ".join(text) + b"\n ]}\n").decode("utf-8")
