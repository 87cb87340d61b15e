"""The results store: a folder of JSON Lines files, one per machine label.

Results from several machines merge by copying their files into one folder. An append
writes one whole line with a single ``write`` on a file opened for appending, under an
exclusive lock, then flushes and fsyncs: a crash can leave at most a truncated last line,
which readers report and skip, and nothing already written is ever rewritten.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger(__name__)

SUFFIX = ".jsonl"


def machine_file_name(machine: str) -> str:
    """A file-system-safe file name for a machine label."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", machine).strip("_") or "unknown"
    return slug + SUFFIX


def append_record(results_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Append one record (a JSON-able mapping) to its machine's file; returns the file."""
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    machine = str(record.get("environment", {}).get("machine") or "unknown")
    path = folder / machine_file_name(machine)
    line = (json.dumps(record, separators=(",", ":"), allow_nan=False, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _ensure_line_start(fd, path)
        written = os.write(fd, line)
        if written != len(line):  # pragma: no cover - a full disk
            raise OSError(f"short write to {path}: {written} of {len(line)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)
    log.debug("appended run %s to %s", record.get("run_id"), path)
    return path


def _ensure_line_start(fd: int, path: Path) -> None:
    """If a crash left a partial last line, start ours on a new line (the partial one stays as is)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    with open(path, "rb") as f:
        f.seek(size - 1)
        if f.read(1) != b"\n":
            os.write(fd, b"\n")


class StoreProblem(str):
    """A line that could not be read: ``"<file>:<line>: <reason>"``."""


def iter_store_files(paths: "list[str | os.PathLike[str]] | str | os.PathLike[str]") -> list[Path]:
    """The ``*.jsonl`` files named by ``paths`` (files, or folders searched one level deep)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.glob("*" + SUFFIX)))
        elif p.exists():
            files.append(p)
        else:
            raise FileNotFoundError(f"no results at {p}")
    return files


def read_records(
    paths: "list[str | os.PathLike[str]] | str | os.PathLike[str]",
) -> tuple[list[dict[str, Any]], list[StoreProblem]]:
    """All records under ``paths``, plus one problem per unreadable line (never fatal)."""
    records: list[dict[str, Any]] = []
    problems: list[StoreProblem] = []
    for path in iter_store_files(paths):
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    rec = json.loads(raw)
                except ValueError as exc:
                    what = "truncated line" if not raw.endswith(b"\n") else f"malformed line ({exc})"
                    problems.append(StoreProblem(f"{path}:{lineno}: {what}"))
                    continue
                if not isinstance(rec, dict):
                    problems.append(StoreProblem(f"{path}:{lineno}: not a JSON object"))
                    continue
                records.append(rec)
    for p in problems:
        log.warning("skipped %s", p)
    return records, problems
