"""The report as a list of blocks, rendered alike to markdown and HTML.

Blocks: :class:`Heading`, :class:`Paragraph`, :class:`Bullets`, :class:`TableBlock` and
:class:`Figure` (a plot to draw: its kind, file name and data). Renderers only walk the
blocks, so both outputs say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cnnbench.report.observations import Observation
from cnnbench.report.table import Table


@dataclass
class Heading:
    text: str
    level: int = 2


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
        return f"plots/{self.name}.png"


Block = Heading | Paragraph | Bullets | TableBlock | Figure


@dataclass
class Report:
    """Everything a renderer needs."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    n_records: int = 0

    def table(self, table_id: str) -> Table:
        for t in self.tables:
            if t.id == table_id:
                return t
        raise KeyError(table_id)
