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
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from cnnbench.results import cache, files
from cnnbench.results.migrate import migrate
from cnnbench.results.record import (
    MAX_DEPTH,
    RecordError,
    check_record,
    drop_unusable_figures,
    finite_numbers,
    may_hold_unusable_figures,
)

log = logging.getLogger(__name__)

SUFFIX = ".jsonl"


def machine_file_name(machine: str) -> str:
    """A file-system-safe file name for a machine label."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", machine).strip("_") or "unknown"
    return slug + SUFFIX


def record_line(record: Mapping[str, Any]) -> bytes:
    """The one serialised form of a record: compact JSON on one line, newline-terminated.

    JSON has no NaN or infinity: a run whose loss diverged must keep its record, so such
    numbers are stored as null and a ``metrics.warnings`` entry names the fields
    (:func:`~cnnbench.results.record.finite_numbers`). Values JSON cannot hold are written
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
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / machine_file_name(_machine_of(record))
    _append(path, record_line(record))
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
        _append(path, b"".join(lines))
        log.debug("appended %d records to %s", len(lines), path)
    return list(by_file)


def _append(path: Path, data: bytes) -> None:
    """Append whole lines under the file's exclusive lock, then fsync.

    Only to a regular file in the store's folder: a FIFO, a device or a symlink out of the
    folder raises :class:`~cnnbench.results.files.FileProblem` (an ``OSError``) and nothing
    is written (see :func:`cnnbench.results.files.open_for_append`)."""
    fd = files.open_for_append(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _ensure_line_start(fd, path)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class AppendResult:
    """What :func:`append_new_records` did."""

    written: list[dict[str, Any]] = field(default_factory=list)
    already: dict[str, str] = field(default_factory=dict)
    """``run_id`` -> the machine it is already stored under, for each record not written again."""
    problems: list[StoreProblem] = field(default_factory=list)
    """Lines of the store that could not be read while looking for the records already there."""


def append_new_records(results_dir: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> AppendResult:
    """Append the records whose ``run_id`` the store does not hold yet (each once).

    The look-up and the write happen under the store's lock (:func:`store_lock`), so two
    processes adding the same records at the same time add them once.
    """
    result = AppendResult()
    with store_lock(results_dir):
        present, result.problems = stored_run_ids(results_dir)
        for record in records:
            run_id = str(record.get("run_id"))
            if run_id in present:
                result.already[run_id] = present[run_id]
                continue
            present[run_id] = _machine_of(record)
            result.written.append(dict(record))
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


def _ensure_line_start(fd: int, path: Path) -> None:
    """If a crash left a partial last line, start ours on a new line (the partial one stays as is)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    try:
        last = os.pread(fd, 1, size - 1)
    except OSError:  # opened write-only (a file we may not read)
        with files.open_regular(path) as f:
            f.seek(size - 1)
            last = f.read(1)
    if last != b"\n":
        os.write(fd, b"\n")


class StoreProblem(str):
    """A line that could not be read: ``"<file>:<line>: <reason>"``."""


class StoreNotice(StoreProblem):
    """A line whose record was read, but with figures no reader can compute with (NaN,
    infinite, beyond :data:`~cnnbench.results.record.MAX_FIGURE`) shown as not available:
    ``"<file>:<line>: metrics.total_images_per_sec is NaN: shown as not available"``."""


def problem_text(problem: str) -> str:
    """How a reader names a problem line to the user: ``skipped <problem>``, or, for a
    :class:`StoreNotice`, the notice alone (the record was kept)."""
    return str(problem) if isinstance(problem, StoreNotice) else f"skipped {problem}"


def iter_store_files(paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]) -> list[Path]:
    """The ``*.jsonl`` files named by ``paths`` (files, or folders searched one level deep).

    Raises ``FileNotFoundError`` (one line naming the path) for a path that does not exist
    or cannot (a name over 255 bytes, a symlink loop)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: list[Path] = []
    for p in map(Path, paths):
        why = files.path_too_long(p)
        if why is not None:
            raise FileNotFoundError(f"no results at {files.shown(p)}: {why}")
        try:
            os.stat(p)
        except FileNotFoundError:
            raise FileNotFoundError(f"no results at {files.shown(p)}") from None
        except OSError as exc:
            raise FileNotFoundError(f"no results at {files.shown(p)}: {exc.strerror or exc}") from None
        if p.is_dir():
            found.extend(sorted(p.glob("*" + SUFFIX)))
        else:
            found.append(p)
    return found


def read_records(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    step_times: bool = True,
) -> tuple[list[dict[str, Any]], list[StoreProblem]]:
    """All records under ``paths``, upgraded to the current schema, plus one problem per
    line that could not be used (truncated, malformed, not UTF-8, nested too deeply, not an
    object, against the record contract, schema too new) and per ``*.jsonl`` that is no file.

    Problems are never fatal and the files are never modified; they are returned, not
    printed or logged as warnings (the caller reports each once). With
    ``step_times=False`` each record's ``metrics.step_times_s`` is left out (and not
    parsed: several times faster).
    """
    reader = StoreReader(paths, step_times=step_times)
    return reader.read()


class StoreReader:
    """Reads a store, and later only what was appended to it since (a sweep checking, just
    before a case starts, whether another sweep has recorded it meanwhile).

    The first :meth:`read` reads every file; each later one reads the lines added since.
    A partial last line (being written, or left by a crash) is reported by the first read
    and otherwise waited for.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], *,
                 step_times: bool = True) -> None:
        self.paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        self.step_times = step_times
        self._positions: dict[Path, tuple[int, int]] = {}
        """Per file: the byte offset read up to and the number of the next line."""
        self._first = True

    def read(self) -> tuple[list[dict[str, Any]], list[StoreProblem]]:
        """Records (and problems) not returned by an earlier call."""
        records: list[dict[str, Any]] = []
        problems: list[StoreProblem] = []
        files = iter_store_files(self.paths) if self._first else self._files()
        gc_was_enabled = gc.isenabled()
        gc.disable()  # a load makes millions of containers and no cycles; collections only cost time
        try:
            for path in files:
                start, line = self._positions.get(path, (0, 1))
                self._positions[path] = _read_file(path, records, problems, step_times=self.step_times,
                                                   start=start, first_line=line, partial_is_problem=self._first)
        finally:
            if gc_was_enabled:
                gc.enable()
        self._first = False
        for p in problems:
            log.debug("skipped %s", p)
        return records, problems

    def _files(self) -> list[Path]:
        try:
            return iter_store_files(self.paths)
        except FileNotFoundError:
            return []


def _read_file(path: Path, records: list[dict[str, Any]], problems: list[StoreProblem], *, step_times: bool,
               start: int = 0, first_line: int = 1, partial_is_problem: bool = True) -> tuple[int, int]:
    """Read ``path`` from byte ``start`` (line ``first_line``); returns where to go on from.

    A whole file of :data:`cache.MIN_BYTES` or more is read through its cache (when that
    exists or can be written)."""
    try:
        with files.open_regular(path) as f:  # a FIFO or a device is refused, never waited on
            st = os.fstat(f.fileno())
            if start == 0 and partial_is_problem and cache.worth_it(path, st.st_size):
                return _read_through_cache(path, f, st, records, problems, step_times=step_times)
            f.seek(start)
            data = f.read()
    except IsADirectoryError:
        if partial_is_problem:
            problems.append(StoreProblem(f"{path}: is a directory, not a results file"))
        return start, first_line
    except files.FileProblem as exc:
        if partial_is_problem:
            problems.append(StoreProblem(str(exc)))
        return start, first_line
    except OSError as exc:
        problems.append(StoreProblem(f"{path}: cannot read ({exc.strerror or exc})"))
        return start, first_line
    if not data:
        return start, first_line
    parse = _loads if step_times else _loads_without_step_times
    lines = data.split(b"\n")
    complete = len(lines) - 1  # the piece after the last newline is partial (empty when none)
    if lines[-1] and not partial_is_problem:
        consumed = len(data) - len(lines[-1])
        lines = lines[:-1]
    else:
        consumed = len(data)
    for index, raw in enumerate(lines):
        if not raw or raw.isspace():
            continue
        rec, why = _parse_line(raw, parse, truncated=index == complete)
        if why is not None:
            problems.append(_problem(f"{path}:{first_line + index}: {why}", kept=rec is not None))
        if rec is not None:
            records.append(rec)
    return start + consumed, first_line + complete


def _read_through_cache(path: Path, f: BinaryIO, st: os.stat_result, records: list[dict[str, Any]],
                        problems: list[StoreProblem], *, step_times: bool) -> tuple[int, int]:
    """Read a whole file: the lines its cache covers from the cache, the others parsed (and
    added to the cache, which is then rewritten). Same records and problems as a plain read."""
    cached, rewrite = cache.load(path, f, st, step_times=step_times)
    if cached is None:
        cached = cache.CachedRecords()
    known = len(cached.rows)
    f.seek(cached.end)
    data = f.read()
    whole = data.rfind(b"\n") + 1  # what follows the last newline is partial (being written, or cut)
    new: list[dict[str, Any]] = []
    lines = data[:whole].split(b"\n")[:-1]
    for index, raw in enumerate(lines):
        if not raw or raw.isspace():
            continue
        # the cache keeps step times, and only what orjson reads (so writes back unchanged); a
        # line that needs the standard library's parser is kept as a line and read at each load
        rec, why = _parse_line(raw, orjson.loads, truncated=False)
        if rec is None or why is not None:  # kept with a notice: read again each time, to say so
            cached.add_problem(cached.next_line + index, raw)
        else:
            cached.add(rec)
            new.append(rec)
    if cached.digest is not None:
        cached.digest.update(memoryview(data)[:whole])
    cached.end += whole
    cached.next_line += len(lines)
    if lines or rewrite:
        cache.write(path, f, st, cached)
    out = cached.take_records(known, step_times=step_times)
    if not step_times:
        for rec in new:
            metrics = rec.get("metrics")
            if isinstance(metrics, dict):
                metrics.pop("step_times_s", None)
    out.extend(new)
    parse = _loads if step_times else _loads_without_step_times
    found: list[StoreProblem] = []
    for line in reversed(cached.problems):  # checked again, in this reader's mode: as without a cache
        rec, why = _parse_line(line.raw, parse, truncated=False)
        if rec is not None:
            out.insert(line.position, rec)
        if why is not None:
            found.append(_problem(f"{path}:{line.line}: {why}", kept=rec is not None))
    problems.extend(reversed(found))
    partial = data[whole:]
    if partial and not partial.isspace():
        rec, why = _parse_line(partial, parse, truncated=True)
        if rec is not None:
            out.append(rec)
        if why is not None:
            problems.append(_problem(f"{path}:{cached.next_line}: {why}", kept=rec is not None))
    records.extend(out)
    return cached.end + len(partial), cached.next_line


def _problem(text: str, *, kept: bool) -> StoreProblem:
    return StoreNotice(text) if kept else StoreProblem(text)


def _parse_line(raw: bytes, parse: Any, *, truncated: bool) -> tuple[dict[str, Any] | None, str | None]:
    """A valid, current record from one line, or why there is none; or both: a record whose
    unusable figures were replaced by null, and what they were."""
    try:
        rec = parse(raw)
    except RecursionError:
        return None, "nested too deeply to read"
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {raw[exc.start:exc.start + 1]!r} at column {exc.start + 1})"
    except ValueError as exc:
        if truncated:
            return None, "truncated line (no newline at the end of the file)"
        return None, f"malformed line ({exc})"
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    try:
        rec = migrate(rec)
        # fewer brackets in the text than the depth allowed: no need to walk the record for it
        check_record(rec, shallow=raw.count(b"{") + raw.count(b"[") <= MAX_DEPTH)
    except RecordError as exc:
        return None, str(exc)
    if may_hold_unusable_figures(raw):
        dropped = drop_unusable_figures(rec)
        if dropped:
            return rec, "; ".join(dropped) + ": shown as not available"
    return rec, None


def _loads(raw: bytes) -> Any:
    """A JSON value from a line: orjson (several times faster), and the standard library's
    parser for what orjson refuses (NaN, integers beyond 64 bits, lone surrogates) or
    cannot read, so that a line reads, and fails with the same reason, as it always did."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)

_STEP_KEY = b'"step_times_s":['
_KEY_BEFORE = (ord("{"), ord(","), ord(" "))


def _loads_without_step_times(raw: bytes) -> Any:
    """:func:`_loads` of a record line, leaving ``metrics.step_times_s`` out.

    The array of the compact form written by :func:`append_record` is cut out of the
    bytes before parsing; anything unexpected (the key inside a string, in another
    object, a spaced separator) takes the ordinary full parse.
    """
    i = raw.find(_STEP_KEY)
    if i > 0 and raw[i - 1] in _KEY_BEFORE:
        start = i + len(_STEP_KEY)
        j = raw.find(b"]", start)
        if j > 0 and raw.find(b'"', start, j) < 0:
            rec = _loads(raw[:i] + b'"step_times_s":null' + raw[j + 1 :])
            metrics = rec.get("metrics") if isinstance(rec, dict) else None
            if isinstance(metrics, dict) and "step_times_s" in metrics and metrics["step_times_s"] is None:
                del metrics["step_times_s"]
                return rec
    rec = _loads(raw)
    if isinstance(rec, dict) and isinstance(rec.get("metrics"), dict):
        rec["metrics"].pop("step_times_s", None)
    return rec


def existing_run_ids(results_dir: str | os.PathLike[str]) -> set[str]:
    """The ``run_id``s already in a store (empty when the folder does not exist yet)."""
    return set(stored_run_ids(results_dir)[0])


def stored_run_ids(results_dir: str | os.PathLike[str]) -> tuple[dict[str, str], list[StoreProblem]]:
    """``run_id`` -> machine of every record in a store, and the lines that could not be read."""
    if not Path(results_dir).is_dir():
        return {}, []
    records, problems = read_records(results_dir, step_times=False)
    return {str(r["run_id"]): _machine_of(r) for r in records if r.get("run_id")}, problems
