"""A report made again from what it was made from is not made again (issue 22).

``cnnbench report`` keys a report by what it is made from: the results files it reads
(their paths and ``stat``: size, modification and change times, inode, device, mode), the
command's options as given, and the code (cnnbench's own source, the Python version, and the
versions of orjson, matplotlib, numpy and scipy). A report folder whose manifest holds the same
key and whose files all still have the bytes it recorded is up to date: the command says so,
repeats what it said when it made the report (its warnings included), and writes nothing.
Anything else, a report cut off halfway, a file edited or removed, makes the report again; so
does ``--rebuild``.

A change of any of those files (a record appended by a sweep, an import) changes its size,
times or inode, so the key; the change time cannot be set back by hand. A file changed in the
last :data:`SETTLE_S` seconds gives no key (as git treats "racy" files): a file system's
timestamps are coarse (milliseconds on ext4, seconds on some network and FAT file systems), so
an edit of the same size made just after the key was taken could leave them as they were. The
report is then made, and not kept as up to date. Plot styles from a ``matplotlibrc`` and the
installed fonts are not in the key (nor in each plot's own key). Light to import: nothing of
the report's tables or rendering.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cnnbench.report.folder import DIGEST, file_digest, listed_files, read_manifest, write_manifest
from cnnbench.results.reader import iter_store_files

FORMAT = 1
LIBRARIES = ("orjson", "matplotlib", "numpy", "scipy")
"""Libraries a report's content depends on (reading the records, plots, statistics)."""
SETTLE_S = 2.0
"""A results file modified less than this long ago gives no key (see the module's docstring)."""
_SOURCES = (".py", ".yaml")


@dataclass(frozen=True)
class Said:
    """What ``cnnbench report`` said about a report it made: repeated when it is up to date."""

    tables: int
    plots: int
    results: int
    more: tuple[str, ...] = ()
    """Further lines to standard output (unreadable lines skipped, ...)."""
    warnings: tuple[str, ...] = ()
    """Lines to standard error (each starting ``warning:``)."""


def inputs_key(results: Iterable[str | os.PathLike[str]], options: Mapping[str, Any]) -> str | None:
    """The key of a report of ``results`` (folders or files, as ``read_records`` takes them)
    made with ``options`` (JSON-able) by this cnnbench; None while a results file has changed
    in the last :data:`SETTLE_S` seconds. Raises ``FileNotFoundError`` as a read of
    ``results`` would."""
    settled_before = time.time_ns() - int(SETTLE_S * 1e9)
    digest = hashlib.sha256(f"cnnbench report inputs {FORMAT}\n".encode())
    digest.update(code_key())
    digest.update(json.dumps(options, sort_keys=True, default=repr).encode())
    for path in iter_store_files(list(results)):
        try:
            st = os.stat(path)
        except OSError:  # the read will say what is wrong
            return None
        if st.st_mtime_ns > settled_before:
            return None
        seen = [st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        digest.update(json.dumps([os.path.abspath(path), *seen]).encode())
    return digest.hexdigest()


@functools.cache
def code_key(package: Path | None = None) -> bytes:
    """What a report depends on besides its inputs and options: the source of cnnbench
    (``package``: its folder), the Python version and :data:`LIBRARIES`' versions."""
    from importlib.metadata import PackageNotFoundError, version

    root = package if package is not None else Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(p for p in root.rglob("*") if p.suffix in _SOURCES and "__pycache__" not in p.parts):
        digest.update(f"\n{path.relative_to(root).as_posix()}\n".encode())
        digest.update(path.read_bytes())
    for name in LIBRARIES:
        try:
            digest.update(f"\n{name} {version(name)}".encode())
        except PackageNotFoundError:
            digest.update(f"\n{name} absent".encode())
    return digest.digest()


def up_to_date(out: Path, key: str) -> Said | None:
    """What was said of the report in ``out`` when it was made, if it is the report of ``key``
    and whole (every file it wrote there still has the bytes written); else None."""
    manifest = read_manifest(out)
    said, outputs = manifest.get("said"), manifest.get("outputs")
    if manifest.get("inputs") != key or not isinstance(said, dict) or not isinstance(outputs, dict):
        return None
    written = listed_files(manifest)
    if not written or set(outputs) != written:
        return None
    for name in sorted(written):
        digest = outputs[name]
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest) or file_digest(out / name) != digest:
            return None
    counts = [n for n in (said.get(name) for name in ("tables", "plots", "results")) if type(n) is int and n >= 0]
    more, warnings = _texts(said.get("more")), _texts(said.get("warnings"))
    if len(counts) != 3 or more is None or warnings is None:
        return None
    return Said(counts[0], counts[1], counts[2], more, warnings)


def remember(out: Path, key: str, said: Said, outputs: Mapping[str, str]) -> bool:
    """Mark the report just written in ``out`` (whose files have the digests ``outputs``) as
    the report of ``key``, keeping what was said of it. Nothing happens, and False is returned,
    when the folder's manifest lists other files or digests (another report was written there
    meanwhile) or none, or when it cannot be written (the report stands; the next one is made again)."""
    manifest = read_manifest(out)
    written = listed_files(manifest)
    if not outputs or manifest.get("outputs") != dict(outputs) or set(outputs) != written:
        return False
    try:
        kept = listed_files(manifest, "kept")
        write_manifest(out, written, outputs=dict(outputs), inputs=key,
                       said={"tables": said.tables, "plots": said.plots, "results": said.results,
                             "more": list(said.more), "warnings": list(said.warnings)},
                       **({"kept": sorted(kept)} if kept else {}))
    except OSError:
        return False
    return True


def _texts(value: Any) -> tuple[str, ...] | None:
    """``value`` as a tuple when it is a list of texts, else None."""
    return tuple(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None
