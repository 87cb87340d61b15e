"""The one CSV writer: every CSV cnnbench writes (``results export``, ``report``'s
``tables/*.csv``, ``compare``, ``predict``, the comm bandwidth tables, ``models``) goes
through :class:`CsvWriter` or :func:`csv_text`.

Its cells may come from files someone else wrote (a model name, a machine label, an error's
text), and a spreadsheet runs a cell that begins with ``=``, ``+``, ``-`` or ``@`` as a
formula (``=cmd|' /C calc'!A0``, ``=HYPERLINK(...)``); a tab or a carriage return at the start
can hide one. So, following OWASP's guidance on CSV injection, a text cell that begins with
one of :data:`TRIGGERS` is written with a single quote before it (``'=cmd|' /C calc'!A0``),
which spreadsheets show as text; so is text that begins with quotes and then one of them
(``'=x`` is written ``''=x``), so that :func:`plain_text` reads every cell back as it was
(``cnnbench import csv``). Numbers stay numbers: an ``int`` or ``float`` cell is written as it
is, and so is text that is a finite number in plain decimal or exponent form (``-1.5``,
``+3``, ``-2e-05``). Every cell that holds the delimiter, a quote or a line break (a carriage
return too, whatever the line ending) is quoted, so no cell can spill into the next cell or
row. No torch here.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, TextIO

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
"""What a text cell may not begin with as written: a spreadsheet would read a formula."""

NUMBER_PATTERN = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
"""A finite number written plainly, as a CSV cell holds it (also in SQL: :mod:`cnnbench.results.engine`)."""
_NUMBER = re.compile(NUMBER_PATTERN)
_PREFIX = "'"
_QUOTED = re.compile(_PREFIX + "*[" + re.escape("".join(TRIGGERS)) + "]")
"""The start of text that gets a quote before it: a trigger, after any number of quotes (so
that text which already begins with a quote and a trigger keeps its own: :func:`plain_text`
gives back exactly what :func:`safe_text` was given)."""
_JOIN = "\x00"
_MAY_START = re.compile(_JOIN + _QUOTED.pattern)
"""Finds, in a row's text cells joined by NULs, one that may need a quote (a cell holding a
NUL may be a false alarm: every cell is then looked at)."""


def is_number_text(text: str) -> bool:
    """Whether ``text`` is a finite number written plainly (``-1.5``, ``+3``, ``2e-05``)."""
    return _NUMBER.fullmatch(text) is not None and math.isfinite(float(text))


def safe_text(text: str) -> str:
    """``text`` as a CSV cell: with a single quote before it when it begins with one of
    :data:`TRIGGERS` (after any quotes) and is no number."""
    if _QUOTED.match(text) and not is_number_text(text):
        return _PREFIX + text
    return text


def plain_text(cell: str) -> str:
    """The text :func:`safe_text` made ``cell`` from: without the quote it put before it
    (``cnnbench import csv`` reads an export back so)."""
    if cell.startswith(_PREFIX) and _QUOTED.match(cell, 1):
        return cell[1:]
    return cell


def safe_cell(value: Any) -> Any:
    """``value`` as a CSV cell: numbers and None as they are (None is an empty cell), text
    (and what is written as its ``str``) through :func:`safe_text`."""
    if value is None or isinstance(value, (int, float)):
        return value
    text = value if isinstance(value, str) else str(value)
    safe = safe_text(text)
    return value if safe is text else safe


def _is_text(value: Any) -> bool:
    """Whether the writer writes ``value`` as text (its ``str``): not a number, not None."""
    return value is not None and not isinstance(value, (int, float))


_Pick = Callable[[list[Any]], Sequence[str]]


def _text_picker(kinds: tuple[type, ...]) -> _Pick | None:
    """For rows of these cell classes: a function giving the text of the row's cells that are
    written as text (a cell of another class than text, number or None: its ``str``), or None
    when there are none."""
    texts = [i for i, kind in enumerate(kinds) if kind is not type(None) and not issubclass(kind, (int, float))]
    if not texts:
        return None
    if not all(issubclass(kinds[i], str) for i in texts):
        return lambda cells: [str(cells[i]) for i in texts]
    if len(texts) == 1:
        only = texts[0]
        return lambda cells: (cells[only],)
    return itemgetter(*texts)  # a tuple, in C


class CsvWriter:
    """:func:`csv.writer` whose text cells are made safe (:func:`safe_cell`).

    Rows are checked in C where they can be: the cells of a row's text columns (found once
    per set of cell classes, which the rows of one table share) are joined and searched at
    once, and only a row with a cell that may need it is rewritten cell by cell.

    A cell holding a line break is quoted whatever the line ending: the standard library's
    writer (before Python 3.12) quotes only the breaks its ``lineterminator`` holds, and a
    carriage return left bare in a file of ``\n`` lines starts a new row in a spreadsheet,
    whose first cell could be a formula."""

    def __init__(self, out: TextIO, *, lineterminator: str = "\r\n") -> None:
        self._out = out
        self._writer = csv.writer(out, lineterminator=lineterminator)
        self._lineterminator = lineterminator
        self._bare = "".join(c for c in "\r\n" if c not in lineterminator)
        """The line breaks that ``lineterminator`` lacks, which the writer would not quote."""
        self._look = re.compile(_MAY_START.pattern + (f"|[{re.escape(self._bare)}]" if self._bare else ""))
        self._pickers: dict[tuple[type, ...], _Pick | None] = {}

    def writerow(self, row: Sequence[Any], kinds: tuple[type, ...] | None = None) -> None:
        """Write one row; ``kinds``, where the caller has them, are its cells' classes."""
        cells = row if type(row) is list else list(row)
        if kinds is None:
            kinds = tuple(map(type, cells))
        try:
            pick = self._pickers[kinds]
        except KeyError:
            if len(self._pickers) > 4096:
                self._pickers.clear()
            pick = self._pickers[kinds] = _text_picker(kinds)
        if pick is not None and self._look.search(_JOIN + _JOIN.join(pick(cells))):
            cells = list(map(safe_cell, cells))
            if self._bare and any(c in str(v) for v in cells if _is_text(v) for c in self._bare):
                self._write_breaks_quoted(cells)
                return
        self._writer.writerow(cells)

    def _write_breaks_quoted(self, cells: list[Any]) -> None:
        """The row as a writer whose line ending holds both breaks writes it (every cell with
        a break quoted), with this writer's line ending."""
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\r\n").writerow(cells)
        self._out.write(buffer.getvalue()[:-2] + self._lineterminator)

    def writerows(self, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_text(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> str:
    """A whole table as CSV text (lines ending ``\\n``), header first, every cell made safe."""
    buffer = io.StringIO()
    writer = CsvWriter(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


__all__ = ["TRIGGERS", "CsvWriter", "csv_text", "is_number_text", "plain_text", "safe_cell", "safe_text"]
