"""The terminal and the standard streams: rich tables fitted to the terminal, plain text when the
output is not one; and output dropped once its reader has gone (:class:`DroppedOnceClosed`).

On a terminal a table takes the terminal's width (``COLUMNS`` when set, as rich reads it)
and its colours and box lines (but a table of more than :data:`MANY_ROWS` rows, which is
printed plain). Piped or redirected, it is plain text: no colour codes, no
box-drawing characters (columns aligned with spaces, easy to ``grep`` and ``awk``), as wide
as ``COLUMNS`` when set, else as wide as the table needs (never wrapped). Every command
that prints a table goes through :func:`print_table`. No torch here.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


class DroppedOnceClosed:
    """A standard stream whose writes, once its reader has gone (``| head``, ``2>&1 | head``: a
    ``BrokenPipeError``), go nowhere: the command goes on and ends as it would have (a run still
    appends its record, a sweep runs its other cases), printing no traceback and blaming no file
    of its for the closed pipe."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            wrote = self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)
        return len(text) if wrote is None else int(wrote)  # a caller's stream may say nothing

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        drop_output(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def drop_output(stream: Any) -> None:
    """Send ``stream``'s descriptor, whose reader has gone, to ``/dev/null``: what is written to it
    from now on (what is left in its buffer first) goes nowhere. A stream without a descriptor is
    left as it is."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
        with contextlib.suppress(BrokenPipeError):
            stream.flush()


@contextlib.contextmanager
def output_dropped_once_its_reader_goes() -> Iterator[None]:
    """Within the block, standard output and error are :class:`DroppedOnceClosed` (flushed at its end,
    so that no closed pipe is met as the interpreter exits); the caller's own after it. The command
    line's, and each worker process's that prints (a run's rank 0, a comm worker): they write to
    the same pipe."""
    own_out, own_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = quiet_out, quiet_err = DroppedOnceClosed(own_out), DroppedOnceClosed(own_err)
    try:
        yield
    finally:
        for stream in (quiet_out, quiet_err):
            with contextlib.suppress(OSError, ValueError):  # a full disk under > file: the other still flushed
                stream.flush()
        if sys.stdout is quiet_out:  # each put back, unless the block put its own in its place
            sys.stdout = own_out
        if sys.stderr is quiet_err:
            sys.stderr = own_err


def output_dropped_from_now() -> None:
    """:func:`output_dropped_once_its_reader_goes` for the rest of a worker process's life (called
    first thing: its log handler takes the standard error it finds)."""
    if not isinstance(sys.stdout, DroppedOnceClosed):
        sys.stdout = DroppedOnceClosed(sys.stdout)
    if not isinstance(sys.stderr, DroppedOnceClosed):
        sys.stderr = DroppedOnceClosed(sys.stderr)


UNLIMITED = 10_000
"""Width of a plain console without ``COLUMNS``: tables take what they need (no wrapping)."""


def _columns() -> int | None:
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if re.fullmatch(r"[0-9]{1,9}", text) and int(text) > 0 else None  # ² is a digit to isdigit()


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or no such method
        return False


def console_for(stream: IO[str] | None = None) -> Console:
    """A rich console writing to ``stream`` (stdout by default): the terminal's, or a plain one."""
    from rich.console import Console

    out = stream or sys.stdout
    environ = rich_environ()
    if is_terminal(out):  # ":name:" stays text
        return Console(file=out, highlight=False, emoji=False, force_terminal=True, _environ=environ)
    return Console(file=out, width=_columns() or UNLIMITED, color_system=None, no_color=True, highlight=False,
                   emoji=False, force_terminal=False, force_interactive=False, _environ=environ)


def rich_environ() -> dict[str, str]:
    """The environment rich reads, without a ``COLUMNS`` or ``LINES`` (or Jupyter's) of other digits
    than 0-9 or of more than 9 (rich reads each with ``int()`` after ``str.isdigit()``: ``COLUMNS=²``
    ended every table in a ValueError); the rest as it is."""
    return {k: v for k, v in os.environ.items()
            if k not in _SIZES or re.fullmatch(r"[0-9]{1,9}", v.strip())}


_SIZES = ("COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES")


def plain(table: Table) -> Table:
    """``table`` without box lines (columns aligned with spaces) and without styles."""
    table.box = None
    table.show_edge = False
    table.pad_edge = False
    table.header_style = ""
    table.title_style = ""
    return table


MANY_ROWS = 1_000
"""Rows past which a table is printed plain, aligned here: rich lays out each cell of each row
(``results list --limit 0`` of 100,000 runs took 100 s, 10,000 runs 11 s, all of it rich's)."""


def print_table(table: Table, console: Console | None = None) -> Console:
    """Print ``table`` to ``console`` (:func:`console_for` stdout by default), plain when that
    is not a terminal, or when it has more than :data:`MANY_ROWS` rows and fits the console's
    width as it is (then aligned here, as rich aligns a plain table); returns the console, for what
    follows the table."""
    console = console or console_for()
    text = plain_text(table, console.width) if table.row_count > MANY_ROWS else None
    if text is not None:
        console.file.write(text)
        console.file.flush()
        return console
    if not console.is_terminal:
        plain(table)
    console.print(table)
    return console


def plain_text(table: Table, width: int) -> str | None:
    """``table`` as rich prints it plain (:func:`plain`) on a console ``width`` wide: each column as
    wide as its widest cell, two spaces between columns, each cell justified in its column; None
    where rich would do more (a title, a caption, a cell that is no text or holds a character that
    is not printable, a column with a width of its own or with nothing in it, a table wider than
    ``width``)."""
    columns = _laid_out(table)
    if columns is None or sum(wide for *_, wide in columns) + 2 * (len(columns) - 1) > width:
        return None
    lines = ["  ".join(_justified(texts[i], lengths[i], justify, wide) for justify, texts, lengths, wide in columns)
             for i in range(table.row_count + 1)]
    return "\n".join(lines) + "\n"


def _laid_out(table: Table) -> list[tuple[str, list[str], list[int], int]] | None:
    """Each column of ``table`` as its justification, texts, their widths and its width, where
    :func:`plain_text` knows how rich lays the table out; else None."""
    from rich.cells import cell_len

    if (table.title or table.caption or not table.show_header or table.show_lines or table.expand or table.width
            or table.min_width or table.padding != (0, 1, 0, 1) or table.show_footer):
        return None
    columns = []
    for column in table.columns:
        texts = None if column.width or column.min_width or column.max_width or column.ratio else _texts(column)
        lengths = list(map(cell_len, texts or ()))
        if not lengths or not max(lengths) or column.justify not in ("left", "right", "center"):
            return None  # not text, or a column of nothing (rich gives it a width of its own), or justified full
        columns.append((str(column.justify), texts or [], lengths, max(lengths)))
    return columns


def _texts(column: Any) -> list[str] | None:
    """The header and cells of a rich column as the text they show (markup read, no emoji made);
    None where one is no text or holds a character that is not printable (a tab, a line break, a
    joiner: rich's own way with them)."""
    from rich.text import Text

    texts = []
    for cell in (column.header, *column.cells):
        if isinstance(cell, str):
            cell = Text.from_markup(cell, emoji=False).plain if "[" in cell else cell
        elif isinstance(cell, Text):
            cell = cell.plain
        else:
            return None
        if not cell.isprintable() and not _shown_as_is(cell) or cell[-1:].isspace() and cell[-1] != " ":
            return None  # a blank other than the space at the end: rich may trim it (it counts characters there)
        texts.append(cell)
    return texts


_LAID_OUT_AS_IS = frozenset(("Zs", "Cf", "Co", "Cn"))
"""The kinds of character (Unicode's categories) that are not printable to Python but that rich lays
out by their cells alone, as :func:`plain_text` does: blanks other than the space (a no-break space),
marks of format (of direction, a zero-width space), characters for private use or not assigned."""


def _shown_as_is(text: str) -> bool:
    """Whether rich lays ``text`` out by its cells alone: no control character, line or paragraph
    separator, surrogate, nor the zero-width joiner (which rich pads by a cell more at a line's end)."""
    import unicodedata

    return "\u200d" not in text and all(c.isprintable() or unicodedata.category(c) in _LAID_OUT_AS_IS for c in text)


def _justified(text: str, length: int, justify: str, wide: int) -> str:
    """``text`` (``length`` cells) in a column ``wide`` cells wide, as rich justifies a line: a cell
    justified right or centred first loses the blanks it ends with (rich's ``Lines.justify``)."""
    if justify != "left" and text[-1:].isspace():
        from rich.cells import cell_len

        text = text.rstrip()
        length = cell_len(text)
    pad = wide - length
    if justify == "right":
        return " " * pad + text
    if justify == "center":
        return " " * (pad // 2) + text + " " * (pad - pad // 2)
    return text + " " * pad
