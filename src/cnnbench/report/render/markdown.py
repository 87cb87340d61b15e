"""Render a :class:`~cnnbench.report.document.Report` as markdown (``summary.md``).

Every text of a block is plain text (the HTML report escapes it all), and much of it comes
from records: machine labels, models, warnings, field values. :func:`cnnbench.words.escape_markdown` is the
one place that turns such text into markdown that shows it as it is, wherever it lands
(headings, paragraphs, bullets, table cells, notes, link texts): no raw HTML, no emphasis,
code, links, headings, lists or table columns made by a character of a record.
"""

from __future__ import annotations

from cnnbench.report.document import (
    Bullets,
    Contents,
    Figure,
    Heading,
    Paragraph,
    Report,
    TableBlock,
    contents_entries,
)
from cnnbench.report.table import Table, condensed
from cnnbench.words import escape_markdown

MAX_COLUMNS = 14
"""Effect and scaling-summary tables wider than this print as per-row n/min/median/max."""
CONDENSABLE = ("effect", "scaling-summary")
MAX_LONG_ROWS = 48
"""Per-series scaling tables longer than this are left to their CSV/JSON files."""


def display_table(table: Table) -> Table:
    """The table as printed: wide effect and scaling-summary tables are condensed."""
    if table.kind in CONDENSABLE:
        return condensed(table, MAX_COLUMNS) or table
    return table


def too_long(table: Table) -> str | None:
    """For a table too long to print, the line that points to its files; else ``None``."""
    if table.kind == "scaling" and len(table.rows) > MAX_LONG_ROWS:
        return (f"{table.title}: {len(table.rows)} rows (images/sec, speedup and efficiency of every series "
                f"at every device count) in tables/{table.id}.csv and tables/{table.id}.json.")
    return None


def table_markdown(table: Table) -> str:
    pointer = too_long(table)
    if pointer:
        return f"_{escape_markdown(pointer)}_"
    t = display_table(table)
    head = "| " + " | ".join(escape_markdown(c) for c in t.columns) + " |"
    align = "|" + "|".join(":--" if i < t.label_columns else "--:" for i in range(len(t.columns))) + "|"
    lines = [head, align]
    for row in t.rows:
        lines.append("| " + " | ".join(escape_markdown(c.text) for c in row) + " |")
    for note in t.notes:
        lines.append("")
        lines.append(f"_{escape_markdown(note)}_")
    return "\n".join(lines)


def _contents(report: Report, at: int, most: int) -> str:
    lines = []
    for top, subs, more in contents_entries(report.blocks, at, most):
        lines.append(f"- [{_link_text(top.text)}](#{top.anchor})")
        lines += [f"  - [{_link_text(h.text)}](#{h.anchor})" for h in subs]
        if more:
            lines.append(f"  - … {more} more under [{_link_text(top.text)}](#{top.anchor})")
    return "\n".join(lines)


def _link_text(text: str) -> str:
    return escape_markdown(text)


def render_markdown(report: Report) -> str:
    out: list[str] = []
    for i, block in enumerate(report.blocks):
        if isinstance(block, Contents):
            out.append(_contents(report, i, block.most))
        elif isinstance(block, Heading):
            out.append("#" * block.level + " " + escape_markdown(block.text, line_start=True))
        elif isinstance(block, Paragraph):
            out.append(escape_markdown(block.text, line_start=True))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {escape_markdown(item, line_start=True)}" for item in block.items))
        elif isinstance(block, TableBlock):
            if block.caption:
                out.append(f"**{escape_markdown(block.table.title)}**")
            out.append(table_markdown(block.table))
        elif isinstance(block, Figure) and block.drawn:
            out.append(f"![{_link_text(block.title)}]({block.path})")
    return "\n\n".join(out) + "\n"
