"""Render a report as one self-contained HTML page (``report.html``): the markdown's content,
inline CSS, plots embedded as ``data:`` URIs, nothing fetched from the network."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

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
from cnnbench.report.render.markdown import display_table, too_long
from cnnbench.report.table import MISSING, Cell, Table

CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:2em auto;max-width:78em;
padding:0 1em;color:#222;line-height:1.4;overflow-wrap:break-word}
h1{border-bottom:2px solid #ddd}h2{border-bottom:1px solid #eee;margin-top:2em}h3{margin-top:1.5em}
div.table{overflow-x:auto;max-width:100%;margin:.5em 0}
table{border-collapse:collapse;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em}th{background:#f4f4f4}
nav ul{margin:.2em 0}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td.fail{color:#b00000;font-weight:600}
td.missing{color:#999;text-align:center}
p.note{font-size:.85em;color:#555;font-style:italic;margin-top:0}
img{max-width:100%;border:1px solid #eee}
""".strip()


def _cell_class(table: Table, i: int, cell: Cell) -> str:
    if i < table.label_columns:
        return ""
    if cell.status:
        return ' class="fail"'
    if cell.value is None and cell.text == MISSING:
        return ' class="missing"'
    return ' class="num"'


def table_html(table: Table) -> str:
    pointer = too_long(table)
    if pointer:
        return f'<p class="note">{escape(pointer)}</p>'
    t = display_table(table)
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    parts = ['<div class="table"><table>', f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    for row in t.rows:
        cells = "".join(f"<td{_cell_class(t, i, c)}>{escape(c.text)}</td>" for i, c in enumerate(row))
        parts.append(f"<tr>{cells}</tr>")
    parts.append("</tbody></table></div>")
    parts += [f'<p class="note">{escape(n)}</p>' for n in t.notes]
    return "\n".join(parts)


def _image(fig: Figure, outdir: Path) -> str:
    path = outdir / fig.path
    if not path.exists():
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<p><img alt="{escape(fig.title)}" src="data:image/svg+xml;base64,{data}"></p>'


def _link(h: Heading) -> str:
    return f'<a href="#{escape(h.anchor)}">{escape(h.text)}</a>'


def _contents(report: Report, at: int, most: int) -> str:
    items = []
    for top, subs, more in contents_entries(report.blocks, at, most):
        inner = "".join(f"<li>{_link(h)}</li>" for h in subs)
        if more:
            inner += f"<li>… {more} more</li>"
        items.append(f"<li>{_link(top)}" + (f"<ul>{inner}</ul>" if inner else "") + "</li>")
    return "<nav><ul>" + "".join(items) + "</ul></nav>"


def render_html(report: Report, outdir: Path) -> str:
    """The page; plots are read from ``outdir/plots`` (draw them first)."""
    body: list[str] = []
    for i, block in enumerate(report.blocks):
        if isinstance(block, Contents):
            body.append(_contents(report, i, block.most))
        elif isinstance(block, Heading):
            anchor = f' id="{escape(block.anchor)}"' if block.anchor else ""
            body.append(f"<h{block.level}{anchor}>{escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{escape(block.text)}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, TableBlock):
            if block.caption:
                body.append(f"<p><strong>{escape(block.table.title)}</strong></p>")
            body.append(table_html(block.table))
        elif isinstance(block, Figure) and block.drawn:
            body.append(_image(block, outdir))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(report.title)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
