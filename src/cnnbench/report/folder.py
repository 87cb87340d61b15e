"""A report's folder: its checks, and the manifest of what a report wrote there.

``.cnnbench-report.json`` lists the files a report wrote (``files``); once the report is
whole it also holds each file's SHA-256 (``outputs``), and the command line adds what the
report was made from and what it said (``inputs``, ``said``: :mod:`cnnbench.report.reuse`).
A report starting to write drops all but the list, so a report cut off halfway is never taken
for a whole one. Light to import (no tables, no rendering): ``cnnbench report`` checks the
folder, and whether it is up to date, before anything else is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from cnnbench.results import files
from cnnbench.results.outputs import OutputError, check_output_folder

MANIFEST = ".cnnbench-report.json"
DIGEST = re.compile(r"[0-9a-f]{64}")
"""A SHA-256 as the manifest records a file's (:func:`file_digest`)."""
SUMMARY = "summary.md"
HTML = "report.html"
OWN_NAME = re.compile(r"(summary\.md|report\.html|tables/[^/\\\x00-\x1f]+\.(csv|json)"
                      r"|plots/[^/\\\x00-\x1f]+\.(svg|png))")
"""The only names a report writes (and so the only ones a manifest may make it delete)."""
MAX_MANIFEST_BYTES = 16 << 20
_CHUNK = 1 << 20


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
                subfolder(out, name)
    return out


def subfolder(out: Path, name: str) -> Path:
    """``out/name``, made if missing: a real folder in ``out`` (see :func:`files.real_folder_inside`)."""
    try:
        return files.real_folder_inside(out, name)
    except files.FileProblem as exc:
        raise OutputError(f"-o {out}: {exc}") from None


def write_text(path: Path, text: str, root: Path | None = None) -> str:
    """Write ``text`` to ``path`` (a new file renamed over it) as UTF-8, a character UTF-8 cannot hold
    (a lone surrogate: a byte of another encoding in a file's name, as Python keeps it) as its
    escape, ``\\udcff``; returns the SHA-256 of its bytes. ``root``: the report's folder, when
    ``path`` is in a folder of it (``tables/``), which must be a real one (never a link)."""
    data = text.encode("utf-8", "backslashreplace")
    files.write_replacing(path, data, root)
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str | None:
    """The SHA-256 of the regular file ``path`` (not through a symlink), or None when it is not one."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        digest = hashlib.sha256()
        with files.open_regular(path) as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def read_manifest(out: Path) -> dict[str, Any]:
    """The manifest in ``out`` as written, or ``{}`` (none, unreadable, not an object)."""
    try:
        data = json.loads(files.read_regular(out / MANIFEST, MAX_MANIFEST_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deeply
        return {}
    return data if isinstance(data, dict) else {}


def listed_files(manifest: dict[str, Any], key: str = "files") -> set[str]:
    """The files an earlier report wrote here (only names a report writes; others are ignored);
    ``key="kept"``: those of still earlier reports it left in place (changed since they were
    written, or of a report cut off before it knew their bytes), never to be removed, nor refused."""
    listed = manifest.get(key)
    if not isinstance(listed, list):
        return set()
    return {f for f in listed if isinstance(f, str) and OWN_NAME.fullmatch(f)}


def write_manifest(out: Path, written: set[str], **more: Any) -> None:
    """The manifest of ``written`` (and ``more`` fields: ``outputs``, ``inputs``, ``said``, ``kept``;
    while a report is written, ``removable``: the digests of the files it may remove)."""
    write_text(out / MANIFEST, json.dumps({"written_by": "cnnbench report", "files": sorted(written), **more},
                                          indent=1) + "\n")
