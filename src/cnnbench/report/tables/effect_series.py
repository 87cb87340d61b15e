"""Effect tables in full: one column per series and the median column, as the official-numbers
study prints "speedup from X vs Y".

Among the effects, a table wider than :data:`~cnnbench.report.render.markdown.MAX_COLUMNS`
columns is summarised per row (n, min, median, max: :func:`cnnbench.report.table.condensed`).
:func:`series_blocks` makes the section that shows those tables whole, in markdown and HTML
alike (HTML scrolls a wide table inside its box), after the report's main sections.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from cnnbench.report.document import Block, Heading, Paragraph, Report, TableBlock
from cnnbench.report.kinds import Inputs, TableKind, register
from cnnbench.report.render.markdown import MAX_COLUMNS
from cnnbench.report.table import Table, condensed

SERIES_HEADING = "Effects per series (every column)"
SERIES_KIND = "effect-series"
"""The kind of the printed copies (never condensed, never written: their data is the effect table's files)."""


def series_blocks(tables: Sequence[Table]) -> list[Block]:
    """The section of the effect tables too wide to print whole among the effects; empty if none."""
    wide = [t for t in tables if t.kind == "effect" and condensed(t, MAX_COLUMNS) is not None]
    if not wide:
        return []
    blocks: list[Block] = [Heading(SERIES_HEADING), Paragraph(
        f"Effect tables with more than {MAX_COLUMNS} columns are summarised per row among the effects; here "
        f"each is whole: a column per series, then the median of each row.")]
    for t in wide:
        blocks += [Heading(f"{t.title}, every series", 3),
                   TableBlock(dataclasses.replace(t, kind=SERIES_KIND, written=False))]
    return blocks


def _series_section(report: Report, result: Any, inputs: Inputs) -> None:
    report.blocks += series_blocks([e.table for e in inputs.built["effects"].effects])


register(TableKind("effect-series", 85, lambda inputs: None, _series_section))
