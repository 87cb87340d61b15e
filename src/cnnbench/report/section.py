"""A configuration section: one configuration's throughput table, the points behind it and the measure behind each cell.

:mod:`cnnbench.report.tables.throughput` builds the sections; the observations over them
(:mod:`cnnbench.report.fastest`, :func:`cnnbench.report.observations.failure_observations`)
and the tables that follow them (:mod:`cnnbench.report.tables.shown`) read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cnnbench.analysis.points import Measure, Point
from cnnbench.report.layout import Layout
from cnnbench.report.table import Table


@dataclass
class Section:
    """One configuration's table and the points behind it."""

    name: str
    table: Table
    layout: Layout
    points: list[Point] = field(default_factory=list)
    measures: dict[tuple[str, str], Measure] = field(default_factory=dict)
    """The measure behind each number cell, by (row label, column): what the observations test."""
    row_labels: list[str] = field(default_factory=list)
    """Each table row in a sentence (``resnet50``, ``m-a · num_devices=2``), the key of :attr:`measures`."""

    def row_label(self, i: int) -> str:
        return self.row_labels[i] if i < len(self.row_labels) else self.table.rows[i][0].text
