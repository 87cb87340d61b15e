"""Write a report to a folder: ``summary.md``, ``report.html``, ``tables/*.csv|json``, ``plots/*.png``.

Files a previous report left in ``tables/`` (``*.csv``, ``*.json``) and ``plots/``
(``*.png``) are removed first, so the folder always matches the report.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from cnnbench.report.document import Report
from cnnbench.report.html import render_html
from cnnbench.report.markdown import render_markdown
from cnnbench.report.tables_io import table_csv, table_json

log = logging.getLogger(__name__)


@dataclass
class Written:
    """What :func:`write_report` wrote."""

    outdir: Path
    summary: Path
    html: Path
    tables: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _clear(folder: Path, patterns: tuple[str, ...]) -> None:
    if folder.is_dir():
        for pattern in patterns:
            for old in folder.glob(pattern):
                old.unlink()


def write_report(report: Report, outdir: str | os.PathLike[str], plots: bool = True) -> Written:
    """Write every output of ``report`` under ``outdir``; ``plots=False`` skips the PNGs."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    tables_dir, plots_dir = out / "tables", out / "plots"
    _clear(tables_dir, ("*.csv", "*.json"))
    _clear(plots_dir, ("*.png",))
    tables_dir.mkdir(exist_ok=True)
    written = Written(out, out / "summary.md", out / "report.html")
    for t in report.tables:
        for suffix, text in ((".csv", table_csv(t)), (".json", table_json(t))):
            path = tables_dir / f"{t.id}{suffix}"
            path.write_text(text, encoding="utf-8")
            written.tables.append(path)
    if not plots:
        for fig in report.figures:
            fig.drawn = False
    if any(f.drawn for f in report.figures):
        from cnnbench.report.plots import draw

        for fig in report.figures:
            if fig.drawn:
                written.plots.append(draw(fig, out))
    _write(written.summary, render_markdown(report))
    _write(written.html, render_html(report, out))
    log.info("wrote %s (%d tables, %d plots)", out, len(report.tables), len(written.plots))
    return written
