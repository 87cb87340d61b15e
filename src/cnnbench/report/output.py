"""Write a report to a folder: ``summary.md``, ``report.html``, ``tables/*.csv|json``, ``plots/*.svg``.

A report never deletes what it did not write. It lists what it wrote in a manifest,
``.cnnbench-report.json``, in the folder; the next report into the same folder removes the
files of that list it does not write again (a table that no longer exists) and nothing
else, so the user's own files in ``tables/`` or ``plots/`` stay. A folder that is not
empty and holds no manifest (not a report, or one from before manifests) is refused, and
so is a file of the user's where the report would write one of its own. The manifest is
written before the report's files (listing the old and the new) and again after them, so
that a report cut off halfway is still cleaned up by the next one.

A report writes only inside its folder: ``tables/`` or ``plots/`` that is a symlink out of
it, or not a folder, is refused before any work, and every file is written to a unique
temporary file in its folder (``mkstemp``) and renamed over its name, so a symlink at a
report's file name is replaced, never written through, and no file of the user's (not even
``summary.md.tmp``) is touched.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cnnbench.report.document import Report
from cnnbench.report.render.csv_json import table_csv, table_json
from cnnbench.report.render.drawing import DrawingPool, start_drawing
from cnnbench.report.render.html import render_html
from cnnbench.report.render.markdown import render_markdown
from cnnbench.results import files
from cnnbench.results.outputs import OutputError, check_output_folder

log = logging.getLogger(__name__)

MANIFEST = ".cnnbench-report.json"
SUMMARY = "summary.md"
HTML = "report.html"
_OWN_NAME = re.compile(r"^(summary\.md|report\.html|tables/[^/\\]+\.(csv|json)|plots/[^/\\]+\.(svg|png))$")
"""The only names a report writes (and so the only ones a manifest may make it delete)."""


@dataclass
class Written:
    """What :func:`write_report` wrote."""

    outdir: Path
    summary: Path
    html: Path
    tables: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)


def check_report_folder(outdir: str | os.PathLike[str]) -> Path:
    """The report folder, checked before any work: a folder (or one that can be made) that may
    be written in, and new, empty, or holding an earlier report. Raises :class:`OutputError`."""
    out = check_output_folder(outdir, flag="-o")
    if out.is_dir() and not (out / MANIFEST).is_file() and any(out.iterdir()):
        raise OutputError(f"-o {out}: is not empty and holds no cnnbench report; name a new or empty folder "
                          "(a report deletes nothing it did not write)")
    if out.is_dir():
        for name in ("tables", "plots"):
            if os.path.lexists(out / name):
                _subfolder(out, name)
    return out


def _subfolder(out: Path, name: str) -> Path:
    """``out/name``, made if missing: a real folder in ``out`` (see :func:`files.real_folder_inside`)."""
    try:
        return files.real_folder_inside(out, name)
    except files.FileProblem as exc:
        raise OutputError(f"-o {out}: {exc}") from None


def _write(path: Path, text: str) -> None:
    files.write_replacing(path, text.encode("utf-8"))


MAX_MANIFEST_BYTES = 16 << 20


def _read_manifest(out: Path) -> set[str]:
    """The files an earlier report wrote here (only names a report writes; others are ignored)."""
    try:
        data = json.loads(files.read_regular(out / MANIFEST, MAX_MANIFEST_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return set()
    listed = data.get("files") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return set()
    return {f for f in listed if isinstance(f, str) and _OWN_NAME.match(f)}


def _write_manifest(out: Path, files: set[str]) -> None:
    _write(out / MANIFEST, json.dumps({"written_by": "cnnbench report", "files": sorted(files)}, indent=1) + "\n")


def write_report(report: Report, outdir: str | os.PathLike[str], plots: bool = True,
                 drawing_pool: DrawingPool | None = None) -> Written:
    """Write every output of ``report`` under ``outdir``; ``plots=False`` skips the plots;
    ``drawing_pool``: processes started ahead to draw them (:func:`prepare_drawing`; it is
    closed when the plots are drawn).

    Raises :class:`OutputError` (before writing anything) for a folder that cannot take a report.
    """
    out = check_report_folder(outdir)
    previous = _read_manifest(out)
    if not plots:
        for fig in report.figures:
            fig.drawn = False
    tables = {t.id: t for t in report.tables if t.written}
    planned = {SUMMARY, HTML}
    planned |= {f"tables/{tid}{suffix}" for tid in tables for suffix in (".csv", ".json")}
    planned |= {fig.path for fig in report.figures if fig.drawn}
    for name in sorted(planned - previous):
        if os.path.lexists(out / name):
            raise OutputError(f"-o {out}: {name} is there and was not written by a report; move it or name "
                              "another folder")

    out.mkdir(parents=True, exist_ok=True)
    _write_manifest(out, previous | planned)
    if any(f.drawn for f in report.figures):
        _subfolder(out, "plots")
    drawing = start_drawing([f for f in report.figures if f.drawn], out, drawing_pool)  # elsewhere, meanwhile:
    tables_dir = _subfolder(out, "tables")
    written = Written(out, out / SUMMARY, out / HTML)
    for tid, t in tables.items():
        for suffix, text in ((".csv", table_csv(t)), (".json", table_json(t))):
            path = tables_dir / f"{tid}{suffix}"
            _write(path, text)
            written.tables.append(path)
    written.plots = drawing.wait()
    _write(written.summary, render_markdown(report))
    _write(written.html, render_html(report, out))
    for name in sorted(previous - planned):  # an earlier report's files this one did not write again
        try:
            (out / name).unlink()
        except FileNotFoundError:
            pass
    _write_manifest(out, planned)
    log.info("wrote %s (%d tables, %d plots)", out, len(report.tables), len(written.plots))
    return written
