"""The report as a list of blocks, rendered alike to markdown and HTML.

Blocks: :class:`Heading`, :class:`Paragraph`, :class:`Bullets`, :class:`TableBlock`,
:class:`Contents` (the table of contents: links to the headings after it) and
:class:`Figure` (a plot to draw: its kind, file name and data). Renderers only walk the
blocks, so both outputs say the same thing. Headings carry anchors made as GitHub makes
them from the text (lower case, punctuation dropped, spaces to hyphens, ``-1``, ``-2`` for
repeats), so the markdown's links work where it is shown and the HTML uses the same ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cnnbench.report.table import Table

if TYPE_CHECKING:
    from cnnbench.report.observations import Observation


@dataclass
class Heading:
    text: str
    level: int = 2
    anchor: str = ""
    """Set by :func:`set_anchors`."""


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class TableBlock:
    table: Table
    caption: bool = False
    """Print the table's title above it (for tables under a shared heading)."""


@dataclass
class Figure:
    """A plot: ``kind`` is ``scaling``, ``throughput`` or ``training``; ``data`` its numbers."""

    kind: str
    name: str
    title: str
    data: dict[str, Any]
    drawn: bool = True
    """False when over the plot budget: the file is not written and the block is skipped."""

    @property
    def path(self) -> str:
        return f"plots/{self.name}.svg"


@dataclass
class Contents:
    """The table of contents: the level-2 headings after it, each with its level-3 ones (at most
    ``most`` per section, then a count)."""

    most: int = 20


Block = Heading | Paragraph | Bullets | TableBlock | Figure | Contents

_NOT_IN_ANCHOR = re.compile(r"[^\w\- ]")


def github_anchor(text: str) -> str:
    """The anchor GitHub gives a heading (before making repeats unique)."""
    return _NOT_IN_ANCHOR.sub("", text.strip().lower()).replace(" ", "-")


def set_anchors(blocks: list[Block]) -> None:
    """Give every heading its unique anchor, in order (as GitHub numbers repeats)."""
    counts: dict[str, int] = {}
    for b in blocks:
        if isinstance(b, Heading):
            base = github_anchor(b.text)
            n = counts.get(base, 0)
            b.anchor = base if n == 0 else f"{base}-{n}"
            counts[base] = n + 1


def contents_entries(blocks: list[Block], at: int, most: int) -> list[tuple[Heading, list[Heading], int]]:
    """For the contents at ``blocks[at]``: each later level-2 heading, its first ``most``
    level-3 headings and how many more it has."""
    out: list[tuple[Heading, list[Heading], int]] = []
    for b in blocks[at + 1:]:
        if not isinstance(b, Heading):
            continue
        if b.level == 2:
            out.append((b, [], 0))
        elif b.level == 3 and out:
            top, subs, more = out[-1]
            if len(subs) < most:
                subs.append(b)
            else:
                out[-1] = (top, subs, more + 1)
    return out


@dataclass
class Report:
    """Everything a renderer needs."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    n_records: int = 0
    warnings: list[str] = field(default_factory=list)
    """Lines the command prints to stderr (an option that had no effect), also in the report."""

    def __repr__(self) -> str:  # what a notebook shows of it: its parts counted, not every cell
        from cnnbench.words import plural

        return (f"Report({self.title!r}: {plural(len(self.tables), 'table')}, {plural(len(self.figures), 'figure')}, "
                f"{plural(len(self.observations), 'observation')}, from {plural(self.n_records, 'record')})")

    def table(self, table_id: str) -> Table:
        for t in self.tables:
            if t.id == table_id:
                return t
        raise KeyError(table_id)
