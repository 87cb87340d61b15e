"""A report made again from what it was made from is not made again (issue 22).

``cnnbench report`` keys a report by what it is made from: the results files it reads
(their paths and ``stat``: size, modification and change times, inode, device, mode), the
command's options, and the code (cnnbench's own source, the Python version, and the versions
of matplotlib, numpy and scipy). A report folder whose manifest holds the same key and whose
files all still have the bytes it recorded is up to date: the command says so, repeats what it
said when it made the report (its warnings included), and writes nothing. Anything else, a
report cut off halfway, a file edited or removed, makes the report again; so does ``--rebuild``.

A change of any of those files (a record appended by a sweep, an import) changes its size,
times or inode, so the key; the change time cannot be set back by hand. Light to import:
nothing of the report's tables or rendering.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.report.folder import file_digest, listed_files, read_manifest, write_manifest
from cnnbench.results.reader import iter_store_files

FORMAT = 1
LIBRARIES = ("matplotlib", "numpy", "scipy")
"""Libraries a report's figures depend on (plots, statistics)."""
_SOURCES = (".py", ".yaml")


@dataclass(frozen=True)
class Said:
    """What ``cnnbench report`` said about a report it made: repeated when it is up to date."""

    done: str
    """What it wrote, in a few words (``summary.md and report.html: 12 tables ...``)."""
    more: tuple[str, ...] = ()
    """Further lines to standard output (unreadable lines skipped, ...)."""
    warnings: tuple[str, ...] = field(default=())
    """Lines to standard error (each starting ``warning:``)."""


def inputs_key(results: Iterable[str | os.PathLike[str]], options: Mapping[str, Any]) -> str:
    """The key of a report of ``results`` (folders or files, as ``read_records`` takes them)
    made with ``options`` (JSON-able) by this cnnbench. Raises ``FileNotFoundError`` as a read
    of ``results`` would."""
    digest = hashlib.sha256(f"cnnbench report inputs {FORMAT}\n".encode())
    digest.update(code_key())
    digest.update(json.dumps(options, sort_keys=True, default=repr).encode())
    for path in iter_store_files(list(results)):
        try:
            st = os.stat(path)
            seen: list[Any] = [st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        except OSError as exc:  # the read will say what is wrong; this key is never seen again
            seen = [type(exc).__name__, os.urandom(8).hex()]
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
    if any(file_digest(out / name) != outputs[name] for name in sorted(written)):
        return None
    done, more, warnings = said.get("done"), _texts(said.get("more")), _texts(said.get("warnings"))
    if not isinstance(done, str) or more is None or warnings is None:
        return None
    return Said(done, more, warnings)


def remember(out: Path, key: str, said: Said) -> None:
    """Mark the whole report just written in ``out`` as the report of ``key``, and keep what
    was said of it. Nothing happens when its manifest lacks the files' digests."""
    manifest = read_manifest(out)
    outputs = manifest.get("outputs")
    written = listed_files(manifest)
    if not isinstance(outputs, dict) or set(outputs) != written:
        return
    write_manifest(out, written, outputs=outputs, inputs=key,
                   said={"done": said.done, "more": list(said.more), "warnings": list(said.warnings)})


def _texts(value: Any) -> tuple[str, ...] | None:
    """``value`` as a tuple when it is a list of texts, else None."""
    return tuple(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None
