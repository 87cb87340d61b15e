"""The results store: a folder of JSON Lines files, one per machine label.

Results from several machines merge by copying their files into one folder. An append
writes one whole line with a single ``write`` on a file opened for appending, under an
exclusive lock, then flushes and fsyncs: a crash can leave at most a truncated last line,
which readers report (file and line) and skip, and nothing already written is ever rewritten.

Reading upgrades records of older ``schema_version``s (:mod:`cnnbench.results.migrate`).
Loading is the cost that grows with a store: most of a record's bytes are its raw step
times, and turning them into Python floats costs most of the parse, so readers that do
not need them (tables, reports) pass ``step_times=False`` and the arrays are skipped
without being parsed. See ``benchmarks/sweep_overhead.py`` for the figures.
"""

from __future__ import annotations

import fcntl
import gc
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cnnbench.results.migrate import SchemaTooNewError, migrate

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


def append_records(results_dir: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> list[Path]:
    """Append many records (importers): one locked write and one fsync per machine file.

    Each record is still one whole line; a crash can truncate only the last line written.
    """
    folder = Path(results_dir)
    by_file: dict[Path, list[bytes]] = {}
    for record in records:
        machine = str(record.get("environment", {}).get("machine") or "unknown")
        line = json.dumps(record, separators=(",", ":"), allow_nan=False, default=str) + "\n"
        by_file.setdefault(folder / machine_file_name(machine), []).append(line.encode())
    if by_file:
        folder.mkdir(parents=True, exist_ok=True)
    for path, lines in by_file.items():
        data = b"".join(lines)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _ensure_line_start(fd, path)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        log.debug("appended %d records to %s", len(lines), path)
    return list(by_file)


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


def iter_store_files(paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]) -> list[Path]:
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
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    step_times: bool = True,
) -> tuple[list[dict[str, Any]], list[StoreProblem]]:
    """All records under ``paths``, upgraded to the current schema, plus one problem per
    line that could not be used (truncated, malformed, not an object, schema too new).

    Problems are never fatal and the files are never modified. With ``step_times=False``
    each record's ``metrics.step_times_s`` is left out (and not parsed: several times faster).
    """
    records: list[dict[str, Any]] = []
    problems: list[StoreProblem] = []
    parse = _loads if step_times else _loads_without_step_times
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a load makes millions of containers and no cycles; collections only cost time
    try:
        for path in iter_store_files(paths):
            _read_file(path, parse, records, problems)
    finally:
        if gc_was_enabled:
            gc.enable()
    for p in problems:
        log.warning("skipped %s", p)
    return records, problems


def _read_file(path: Path, parse: Any, records: list[dict[str, Any]], problems: list[StoreProblem]) -> None:
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    last = len(lines) - 1
    for index, raw in enumerate(lines):
        if not raw or raw.isspace():
            continue
        lineno = index + 1
        try:
            rec = parse(raw)
        except ValueError as exc:
            what = "truncated line (no newline at the end of the file)" if index == last else f"malformed line ({exc})"
            problems.append(StoreProblem(f"{path}:{lineno}: {what}"))
            continue
        if not isinstance(rec, dict):
            problems.append(StoreProblem(f"{path}:{lineno}: not a JSON object"))
            continue
        try:
            rec = migrate(rec)
        except SchemaTooNewError as exc:
            problems.append(StoreProblem(f"{path}:{lineno}: {exc}"))
            continue
        records.append(rec)


_loads = json.loads

_STEP_KEY = b'"step_times_s":['
_KEY_BEFORE = (ord("{"), ord(","), ord(" "))


def _loads_without_step_times(raw: bytes) -> Any:
    """``json.loads`` of a record line, leaving ``metrics.step_times_s`` out.

    The array of the compact form written by :func:`append_record` is cut out of the
    bytes before parsing; anything unexpected (the key inside a string, in another
    object, a spaced separator) takes the ordinary full parse.
    """
    i = raw.find(_STEP_KEY)
    if i > 0 and raw[i - 1] in _KEY_BEFORE:
        start = i + len(_STEP_KEY)
        j = raw.find(b"]", start)
        if j > 0 and raw.find(b'"', start, j) < 0:
            rec = json.loads(raw[:i] + b'"step_times_s":null' + raw[j + 1 :])
            metrics = rec.get("metrics") if isinstance(rec, dict) else None
            if isinstance(metrics, dict) and "step_times_s" in metrics and metrics["step_times_s"] is None:
                del metrics["step_times_s"]
                return rec
    rec = json.loads(raw)
    if isinstance(rec, dict) and isinstance(rec.get("metrics"), dict):
        rec["metrics"].pop("step_times_s", None)
    return rec


def existing_run_ids(results_dir: str | os.PathLike[str]) -> set[str]:
    """The ``run_id``s already in a store (empty when the folder does not exist yet)."""
    if not Path(results_dir).is_dir():
        return set()
    records, _ = read_records(results_dir, step_times=False)
    return {str(r.get("run_id")) for r in records if r.get("run_id")}
