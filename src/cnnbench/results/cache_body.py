"""The JSON body of the parsed-record cache (:mod:`cnnbench.results.cache`) in pieces, hashed and
written one after another (never joined into one text: 70 MB for 100,000 engine records). Rows
whose JSON text is at hand, as they are now, are written as that text instead of being dumped
again: a part of a cold read parsed in a forked process (:mod:`cnnbench.results.parallel_parse`)
arrives as the text its process wrote, from which this process made its rows, and orjson writes
a value it read back to the same bytes. The body is the text ``orjson.dumps`` gives for
``[end, next_line, sections, rows, refs, step_counts, problems]``."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from cnnbench.results.cache import CachedRecords

Piece = bytes | memoryview

RowText = tuple[int, int, bytes]
"""``(first row, rows, text)``: the JSON text (an array) of ``rows`` consecutive rows."""


def pieces(cached: CachedRecords) -> tuple[list[Piece], tuple[int, int]]:
    """The body's pieces, in order, and where its rows' array lies in it (offset, length)."""
    head = orjson.dumps([cached.end, cached.next_line, cached.sections])
    tail = orjson.dumps([list(cached.refs), cached.step_counts,
                         [[p.position, p.line, base64.b64encode(p.raw).decode()] for p in cached.problems]])
    rows = rows_pieces(cached.rows, cached.row_texts)
    return ([memoryview(head)[:-1], b",", *rows, b",", memoryview(tail)[1:]],
            (len(head), sum(map(len, rows))))


def rows_pieces(rows: Sequence[dict[str, Any]], texts: Sequence[RowText]) -> list[Piece]:
    """The JSON text of the array ``rows`` in pieces: each of ``texts`` (in order, not
    overlapping) as it is, the rows before, between and after them dumped."""
    out: list[Piece] = [b"["]

    def add(array: bytes) -> None:  # an array's items, after a comma unless they are the first
        if len(array) > 2:
            if len(out) > 1:
                out.append(b",")
            out.append(memoryview(array)[1:-1])

    at = 0
    for first, count, text in texts:
        if first > at:
            add(orjson.dumps(rows[at:first]))
        add(text)
        at = first + count
    if at < len(rows):
        add(orjson.dumps(rows[at:]))
    out.append(b"]")
    return out
