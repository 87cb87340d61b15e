"""Printing rich tables: fitted to the terminal, plain text when the output is not one.

On a terminal a table takes the terminal's width (``COLUMNS`` when set, as rich reads it)
and its colours and box lines. Piped or redirected, it is plain text: no colour codes, no
box-drawing characters (columns aligned with spaces, easy to ``grep`` and ``awk``), as wide
as ``COLUMNS`` when set, else as wide as the table needs (never wrapped). Every command
that prints a table goes through :func:`print_table`. No torch here.
"""

from __future__ import annotations

import os
import sys
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

UNLIMITED = 10_000
"""Width of a plain console without ``COLUMNS``: tables take what they need (no wrapping)."""


def _columns() -> int | None:
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or no such method
        return False


def console_for(stream: IO[str] | None = None) -> Console:
    """A rich console writing to ``stream`` (stdout by default): the terminal's, or a plain one."""
    from rich.console import Console

    out = stream or sys.stdout
    if is_terminal(out):
        return Console(file=out, highlight=False, force_terminal=True)
    return Console(file=out, width=_columns() or UNLIMITED, color_system=None, no_color=True, highlight=False,
                   emoji=False, force_terminal=False, force_interactive=False)


def plain(table: Table) -> Table:
    """``table`` without box lines (columns aligned with spaces) and without styles."""
    table.box = None
    table.show_edge = False
    table.pad_edge = False
    table.header_style = ""
    table.title_style = ""
    return table


def print_table(table: Table, console: Console | None = None) -> Console:
    """Print ``table`` to ``console`` (:func:`console_for` stdout by default), plain when that
    is not a terminal; returns the console, for what follows the table."""
    console = console or console_for()
    if not console.is_terminal:
        plain(table)
    console.print(table)
    return console
