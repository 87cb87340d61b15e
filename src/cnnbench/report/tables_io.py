"""Machine-readable tables: ``tables/<id>.csv`` and ``tables/<id>.json``.

Cells are written as values, not as display text: numbers as numbers, failures as their
status word (``OOM``, ``error``, ``timeout``), missing cells empty (CSV) or ``null``
(JSON). The JSON also keeps the display text and the notes.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from cnnbench.report.table import Table


def _plain(value: Any) -> Any:
    if value.__class__ is float:
        return round(value, 6)
    return value


def table_csv(table: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(table.columns)
    for row in table.rows:
        w.writerow(["" if c.value is None else _plain(c.value) for c in row])
    return buf.getvalue()


def table_json(table: Table) -> str:
    """The table as JSON: one row (and its display text) per line, so it diffs and greps well."""
    dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str, separators=(", ", ": ")).encode
    head = {"id": table.id, "title": table.title, "kind": table.kind, "columns": table.columns,
            "notes": table.notes}
    rows = [dumps({col: _plain(c.value) for col, c in zip(table.columns, row, strict=False)}) for row in table.rows]
    text = [dumps([c.text for c in row]) for row in table.rows]
    body = dumps(head)[:-1]
    return (body + ',\n "rows": [\n  ' + ",\n  ".join(rows) + '\n ],\n "text": [\n  '
            + ",\n  ".join(text) + "\n ]}\n")
