"""The results store: a folder of JSON Lines files, one per machine label.

Results from several machines merge by copying their files into one folder. An append
writes one whole line with a single ``write`` on a file opened for appending, under an
exclusive lock, then flushes and fsyncs: a crash can leave at most a truncated last line,
which readers report (file and line) and skip, and nothing already written is ever rewritten.
Records are written by :func:`record_line` only (NaN and infinity become null), and every
line read is checked against the record contract
(:func:`~cnnbench.results.record.check_record`): a line that breaks it is reported as
``file:line: why`` and skipped, whoever reads (``results``, ``report``, a sweep resuming,
``import``). Whoever must look before writing holds the store's lock (:func:`store_lock`).

Reading upgrades records of older ``schema_version``s (:mod:`cnnbench.results.migrate`).
Loading is the cost that grows with a store: lines are parsed with orjson (the standard
library's parser takes what orjson refuses, so every line reads as it always did); a file
of 1 MiB or more is read through its parsed-record cache (:mod:`cnnbench.results.cache`),
which holds its records already checked and upgraded and is used only while the lines it
covers are unchanged. Most of a record's bytes are its raw step times, so readers that do
not need them pass ``step_times=False`` and the arrays are skipped (not parsed, or not
read from the cache). See ``benchmarks/sweep_overhead.py`` for the figures.

This module writes; reading is :mod:`cnnbench.results.reader` and one line's checks
:mod:`cnnbench.results.lines`, whose names it also gives (``read_records``, ``StoreProblem``...).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.results import files, space
from cnnbench.results.cleaning import finite_numbers
from cnnbench.results.lines import StoreNotice, StoreProblem, problem_text
from cnnbench.results.reader import SUFFIX, StoreReader, iter_store_files, read_records
from cnnbench.words import quoted

log = logging.getLogger(__name__)

__all__ = [
    "SUFFIX", "AppendResult", "MachineLabelError", "StoreNotice", "StoreProblem", "StoreReader", "append_new_records",
    "append_record", "append_records", "existing_run_ids", "iter_store_files", "machine_file_name", "problem_text",
    "read_records", "record_line", "store_lock", "stored_run_ids",
]


class MachineLabelError(files.FileProblem):
    """A machine label whose results file no file system can hold (a name over
    :data:`~cnnbench.results.files.NAME_MAX` bytes): an ``OSError`` (``ENAMETOOLONG``, what the
    system would say) whose ``str`` is one line naming the label."""

    def __init__(self, machine: str, name: str, why: str) -> None:
        super().__init__(errno.ENAMETOOLONG, name, f"machine label {quoted(machine)}: its results file "
                         f"{name[:24]}...{SUFFIX} {why}")

    def __str__(self) -> str:
        return str(self.strerror)


def machine_file_name(machine: str) -> str:
    """A file-system-safe file name for a machine label: every character but letters, digits and
    ``._+-`` becomes ``_``, and the name begins with none of ``._`` (``../x`` would have made a
    hidden ``.._x.jsonl``, which ``ls`` does not show). A label whose name would be over 255 bytes raises
    :class:`MachineLabelError`: whoever takes labels from data (an import) calls this for every
    label before writing anything."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", machine).lstrip("._").rstrip("_") or "unknown"
    name = slug + SUFFIX
    why = files.name_problem(name)  # the slug holds no separator or control character: only its length
    if why is not None:
        raise MachineLabelError(machine, name, why)
    return name


def record_line(record: Mapping[str, Any]) -> bytes:
    """The one serialised form of a record: compact JSON on one line, newline-terminated.

    JSON has no NaN or infinity: a run whose loss diverged must keep its record, so such
    numbers are stored as null and a ``metrics.warnings`` entry names the fields
    (:func:`~cnnbench.results.cleaning.finite_numbers`). Values JSON cannot hold are written
    as their text. Nothing is rejected.
    """
    try:
        text = json.dumps(record, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:  # a NaN or an infinity somewhere
        text = json.dumps(finite_numbers(record), separators=(",", ":"), allow_nan=False, default=str)
    return (text + "\n").encode()


def _machine_of(record: Mapping[str, Any]) -> str:
    environment = record.get("environment")
    machine = environment.get("machine") if isinstance(environment, Mapping) else None
    return str(machine or "unknown")


def append_record(results_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Append one record (a JSON-able mapping) to its machine's file; returns the file."""
    folder = Path(results_dir)
    path = folder / machine_file_name(_machine_of(record))  # a label no file can be named after: nothing made
    folder.mkdir(parents=True, exist_ok=True)
    append_lines(path, record_line(record))
    log.debug("appended run %s to %s", record.get("run_id"), path)
    return path


def append_records(results_dir: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> list[Path]:
    """Append many records (importers): one locked write and one fsync per machine file.

    Each record is still one whole line; a crash can truncate only the last line written.
    """
    folder = Path(results_dir)
    by_file: dict[Path, list[bytes]] = {}
    for record in records:
        by_file.setdefault(folder / machine_file_name(_machine_of(record)), []).append(record_line(record))
    if by_file:
        folder.mkdir(parents=True, exist_ok=True)
    for path, lines in by_file.items():
        append_lines(path, b"".join(lines))
        log.debug("appended %d records to %s", len(lines), path)
    return list(by_file)


def append_lines(path: Path, data: bytes, root: Path | None = None) -> None:
    """Append whole lines under the file's exclusive lock, then fsync.

    Only to a regular file in the store's folder: a FIFO, a device or a symlink out of the
    folder raises :class:`~cnnbench.results.files.FileProblem` (an ``OSError``) and nothing
    is written (see :func:`cnnbench.results.files.open_for_append`; ``root``: the store,
    when ``path`` is in a folder of it, which must be a real one)."""
    fd = files.open_for_append(path, root=root)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        before = os.fstat(fd).st_size
        try:
            _ensure_line_start(fd)
            view = memoryview(data)
            while view:  # under the lock, so in pieces (files.WRITE_PIECE) as every big write
                view = view[os.write(fd, view[:files.WRITE_PIECE]):]
            os.fsync(fd)
        except OSError as exc:
            if not space.is_no_space(exc):
                raise
            _cut_back(fd, before)  # a full disk leaves no torn line: the file as it was
            raise space.no_space_in(path.parent, exc, f"{path.name} left as it was") from None
    finally:
        os.close(fd)


def _cut_back(fd: int, size: int) -> None:
    """The file of ``fd`` back to ``size`` bytes (under its lock), what an append that failed
    part-way had added removed; best effort (a failure here leaves the line torn, and readers
    report a torn line)."""
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        log.warning("could not cut the file back to its %d bytes after a failed append: %s", size,
                    exc.strerror or exc)
        return
    with contextlib.suppress(OSError):  # the disk that was full may refuse this too; the file is cut
        os.fsync(fd)


@dataclass
class AppendResult:
    """What :func:`append_new_records` did."""

    written: list[dict[str, Any]] = field(default_factory=list)
    already: dict[str, str] = field(default_factory=dict)
    """``run_id`` -> the machine it is already stored under, for each record not written again."""
    problems: list[StoreProblem] = field(default_factory=list)
    """Lines of the store that could not be read while looking for the records already there."""


def append_new_records(results_dir: str | os.PathLike[str], records: Iterable[Mapping[str, Any]], *,
                       write: bool = True) -> AppendResult:
    """Append the records whose ``run_id`` the store does not hold yet (each once).

    The look-up and the write happen under the store's lock (:func:`store_lock`), so two
    processes adding the same records at the same time add them once. ``write=False`` (a dry
    run) only looks: what would be written and what is there already, with no lock taken and
    nothing made or written.
    """
    result = AppendResult()
    with store_lock(results_dir) if write else contextlib.nullcontext():
        present, result.problems = stored_run_ids(results_dir)
        for record in records:
            run_id = record_key(record)
            if run_id in present:
                result.already[run_id] = present[run_id]
                continue
            present[run_id] = _machine_of(record)
            result.written.append(dict(record))
        if write:
            append_records(results_dir, result.written)
    return result


@contextlib.contextmanager
def store_lock(results_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the store's exclusive lock (a ``flock`` on the folder itself) for a read-then-write.

    Appends of single records lock only their file; whoever must look before writing
    (``cnnbench import``, a sweep deciding whether a case is done) takes this lock too.
    The folder is made if it does not exist.
    """
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:  # a file system without locks: go on, unprotected, and say so
            log.warning("cannot lock %s (%s); a concurrent writer may add a record twice", folder,
                        exc.strerror or exc)
        yield folder
    finally:
        os.close(fd)  # closing releases the lock


def _ensure_line_start(fd: int) -> None:
    """If a crash left a partial last line, start ours on a new line (the partial one stays as is).
    Where the descriptor cannot read (a file we may only write), ours starts on a new line too:
    at worst after an empty one, which every reader skips (the file is never opened again by its
    name: what is there now may be a link put in its place)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    try:
        last = os.pread(fd, 1, size - 1)
    except OSError:  # opened write-only
        last = b""
    if last != b"\n":
        os.write(fd, b"\n")


def existing_run_ids(results_dir: str | os.PathLike[str]) -> set[str]:
    """The ``run_id``s already in a store (empty when the folder does not exist yet)."""
    return set(stored_run_ids(results_dir)[0])


def stored_run_ids(results_dir: str | os.PathLike[str]) -> tuple[dict[str, str], list[StoreProblem]]:
    """``run_id`` -> machine of every record in a store, and the lines that could not be read."""
    if not Path(results_dir).is_dir():
        return {}, []
    records, problems = read_records(results_dir, step_times=False, below=False)
    return {record_key(r): _machine_of(r) for r in records}, problems


def record_key(record: Mapping[str, Any]) -> str:
    """What tells a run apart from every other: its ``run_id``; for a record without one (an old or
    hand-written line), a digest of its whole content, so that two different such records are both
    kept and the same one is kept once."""
    run_id = record.get("run_id")
    if run_id:
        return str(run_id)
    metrics = record.get("metrics")
    if isinstance(metrics, Mapping) and "step_times_s" in metrics:  # the same whether read with them or not
        record = {**record, "metrics": {k: v for k, v in metrics.items() if k != "step_times_s"}}
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str, allow_nan=True)
    return "content:" + hashlib.sha256(text.encode()).hexdigest()
