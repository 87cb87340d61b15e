"""Write a report to a folder: ``summary.md``, ``report.html``, ``tables/*.csv|json``, ``plots/*.svg``.

A report never deletes what it did not write. It lists what it wrote in a manifest,
``.cnnbench-report.json``, in the folder, with the SHA-256 of each file; the next report into
the same folder removes the files of that list it does not write again (a table that no longer
exists) that still hold the bytes recorded, and nothing else, so the user's own files in
``tables/`` or ``plots/`` stay, a table the user edited stays, and so does a file that a
manifest someone else wrote lists (a manifest is a file of the folder's, anyone's to write). A
folder that is not empty and holds no manifest (not a report, or one from before manifests) is
refused, and so is a file of the user's where the report would write one of its own. The
manifest is written before the report's files (listing the old and the new, with the old ones'
digests), again with the digests of what it wrote where it is cut off (^C, an error), and again
after them, so that the next report cleans up after one cut off halfway. A listed file left in
place (changed since it was written, or of a report killed before it knew its bytes) stays
listed as ``kept``: never removed, and never refused as the user's.

A report writes only inside its folder: ``tables/`` or ``plots/`` that is a symlink, or not
a folder, is refused before any work, and every file is written to a unique
temporary file in its folder (made with ``O_EXCL``, relative to the real folder) and renamed
over its name, so a symlink at a report's file name is replaced, never written through, and no
file of the user's (not even ``summary.md.tmp``) is touched; any symlink at ``tables/`` or
``plots/`` is refused, and an earlier report's files are removed relative to the real folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from cnnbench.report.document import Report
from cnnbench.report.folder import (
    DIGEST,
    HTML,
    MANIFEST,
    SUMMARY,
    check_report_folder,
    file_digest,
    listed_files,
    read_manifest,
    subfolder,
    write_manifest,
    write_text,
)
from cnnbench.report.render.csv_json import table_texts
from cnnbench.report.render.drawing import DrawingPool, start_drawing
from cnnbench.report.render.html import render_html
from cnnbench.report.render.markdown import render_markdown
from cnnbench.report.table import Table
from cnnbench.results import files
from cnnbench.results.outputs import OutputError

log = logging.getLogger(__name__)

__all__ = ["MANIFEST", "Written", "check_report_folder", "write_report"]


@dataclass
class Written:
    """What :func:`write_report` wrote."""

    outdir: Path
    summary: Path
    html: Path
    tables: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    """The SHA-256 of each file written (by name in the folder, as the manifest lists them);
    empty when one could not be read back."""


def _remove(out: Path, name: str) -> None:
    """Remove an earlier report's file ``name`` (``tables/x.csv``) in ``out``, relative to its real
    folder: a ``tables/`` or ``plots/`` swapped for a link meanwhile is refused, never followed."""
    *folders, base = name.split("/")
    try:
        fd = files.open_folder(out, *folders)
    except FileNotFoundError:
        return
    try:
        os.unlink(base, dir_fd=fd)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


def write_report(report: Report, outdir: str | os.PathLike[str], plots: bool = True,
                 drawing_pool: DrawingPool | None = None) -> Written:
    """Write every output of ``report`` under ``outdir``; ``plots=False`` skips the plots;
    ``drawing_pool``: processes started ahead to draw them (:func:`prepare_drawing`; it is
    closed when the plots are drawn).

    Raises :class:`OutputError` (before writing anything) for a folder that cannot take a report.
    """
    out = check_report_folder(outdir)
    manifest = read_manifest(out)
    own = listed_files(manifest) | listed_files(manifest, "kept")
    recorded = _recorded(manifest, own)
    if not plots:
        for fig in report.figures:
            fig.drawn = False
    tables = {t.id: t for t in report.tables if t.written}
    planned = _planned(report, tables)
    _refuse_foreign(out, planned - own)

    out.mkdir(parents=True, exist_ok=True)
    # the list (and the old files' digests) alone: until the end, this folder holds no whole report
    write_manifest(out, own | planned, removable=recorded)
    digests: dict[str, str | None] = {}  # of each file as this report writes it
    try:
        written = _write_files(report, out, tables, drawing_pool, digests)
    except BaseException:  # cut off (^C, a full disk): what it wrote, and only that, is the next report's to remove
        mine = {**_digests(out, planned - own), **_known(digests)}  # at a name new to the folder: a plot drawn
        with contextlib.suppress(OSError):
            write_manifest(out, own | planned, removable={**recorded, **mine})
        raise
    kept = set()
    for name in sorted(own - planned):  # earlier reports' files this one did not write again: as written, gone
        if name in recorded and file_digest(out / name) == recorded[name]:
            _remove(out, name)
        elif os.path.lexists(out / name):
            kept.add(name)  # changed since (the user's now), or never known: left, and never refused
    _write_final_manifest(out, planned, digests, written, kept)
    log.info("wrote %s (%d tables, %d plots)", out, len(report.tables), len(written.plots))
    return written


def _write_files(report: Report, out: Path, tables: dict[str, Table], drawing_pool: DrawingPool | None,
                 digests: dict[str, str | None]) -> Written:
    """Write the report's tables, plots, summary and page into ``out``, the digest of each file by its
    name in the folder put in ``digests`` as it is written (what a report cut off had written)."""
    if any(f.drawn for f in report.figures):
        subfolder(out, "plots")
    drawing = start_drawing([f for f in report.figures if f.drawn], out, drawing_pool)  # elsewhere, meanwhile:
    written = Written(out, out / SUMMARY, out / HTML)
    _write_tables(out, tables, written, digests)
    written.plots = drawing.wait()
    digests.update((f"plots/{path.name}", file_digest(path)) for path in written.plots)
    digests[SUMMARY] = write_text(written.summary, render_markdown(report))
    digests[HTML] = write_text(written.html, render_html(report, out))
    return written


def _digests(out: Path, names: set[str]) -> dict[str, str]:
    """The digest of each of ``names`` that is a file in ``out`` now."""
    return {name: digest for name in names if (digest := file_digest(out / name)) is not None}


def _known(digests: dict[str, str | None]) -> dict[str, str]:
    """Those of ``digests`` that are known (a file that could not be read back has none)."""
    return {name: digest for name, digest in digests.items() if digest is not None}


def _recorded(manifest: dict[str, object], listed: set[str]) -> dict[str, str]:
    """The digest an earlier report recorded of each of its ``listed`` files: its ``outputs`` once it
    ended, else (cut off) the ``removable`` ones it took over from the report before."""
    out: dict[str, str] = {}
    for key in ("removable", "outputs"):
        got = manifest.get(key)
        if isinstance(got, dict):
            out.update((name, digest) for name, digest in got.items()
                       if name in listed and isinstance(digest, str) and DIGEST.fullmatch(digest))
    return out


def _planned(report: Report, tables: dict[str, Table]) -> set[str]:
    """The names (in the folder) of every file the report writes: its summary, its HTML page, a
    ``.csv`` and a ``.json`` of each of ``tables`` and each plot it draws."""
    planned = {SUMMARY, HTML}
    planned |= {f"tables/{tid}{suffix}" for tid in tables for suffix in (".csv", ".json")}
    planned |= {fig.path for fig in report.figures if fig.drawn}
    return planned


def _refuse_foreign(out: Path, new: set[str]) -> None:
    """Raise :class:`OutputError` where one of the ``new`` files (not written by an earlier report
    into ``out``) is there: it is the user's."""
    for name in sorted(new):
        if os.path.lexists(out / name):
            raise OutputError(f"-o {out}: {name} is there and was not written by a report; move it or name "
                              "another folder")


def _write_tables(out: Path, tables: dict[str, Table], written: Written, digests: dict[str, str | None]) -> None:
    """Write the ``.csv`` and the ``.json`` of each table in ``out/tables`` (listed in ``written``),
    each one's digest by its name in the folder into ``digests`` as it is written."""
    tables_dir = subfolder(out, "tables")
    for tid, t in tables.items():
        for suffix, text in zip((".csv", ".json"), table_texts(t), strict=True):
            path = tables_dir / f"{tid}{suffix}"
            digests[f"tables/{path.name}"] = write_text(path, text, out)
            written.tables.append(path)


def _write_final_manifest(out: Path, planned: set[str], digests: dict[str, str | None], written: Written,
                          kept: set[str]) -> None:
    """The manifest of the whole report: the ``planned`` files with their digests (also kept in
    ``written.outputs``), or the list alone where a file could not be read back; and the ``kept``
    files of earlier reports."""
    more: dict[str, object] = {"kept": sorted(kept)} if kept else {}
    if all(digests.values()):
        written.outputs = {name: digest for name, digest in digests.items() if digest}
        write_manifest(out, planned, outputs=written.outputs, **more)
    else:  # a plot could not be read back: the list alone (such a report is never taken as up to date)
        write_manifest(out, planned, removable=_known(digests), **more)
