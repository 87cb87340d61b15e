"""Reading the results store: every ``*.jsonl`` file of a folder, each line checked
(:mod:`cnnbench.results.lines`); a big file through its parsed-record cache
(:mod:`cnnbench.results.cache`); later reads take only the lines appended since
(:class:`StoreReader`). See :mod:`cnnbench.results.store` for the store as a whole."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from cnnbench.results import cache, files
from cnnbench.results import lines as store_lines
from cnnbench.results.cache import StepTimesMode
from cnnbench.results.gc_pause import collector_paused
from cnnbench.results.lines import StoreProblem

log = logging.getLogger("cnnbench.results.store")  # the name its messages have always had

SUFFIX = ".jsonl"


SKIPPED_FOLDERS = frozenset({"traces", "data"})
"""Folders of a store that hold no records (profiler traces, a study's data set): not searched."""


def iter_store_files(paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], *,
                     below: bool = True) -> list[Path]:
    """The ``*.jsonl`` files named by ``paths``: files, and folders with every folder below them
    (a folder of stores is all of them: ``results/`` holds ``results/quick`` and a study's
    ``results/scaling``). Below a named folder, hidden folders (``.claims``, ``.slurm``), the
    store's own ``traces`` and ``data``, and links to folders are not followed; the same file named
    twice is read once. ``below=False``: a folder's own files only (the store a command writes in,
    whose existing runs it checks: records in a folder below it are another store's).

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
            found.extend(_files_below(p) if below else sorted(p.glob("*" + SUFFIX)))
        else:
            found.append(p)
    unique: dict[tuple[int, int] | Path, Path] = {}
    for path in found:
        try:
            st = os.stat(path)
            key: tuple[int, int] | Path = (st.st_dev, st.st_ino)
        except OSError:  # reported when it is read
            key = path
        unique.setdefault(key, path)
    return list(unique.values())


def _files_below(folder: Path) -> list[Path]:
    """The ``*.jsonl`` files of ``folder`` and of the folders below it (see :func:`iter_store_files`),
    each folder's files sorted by name, a folder's own before its subfolders' (no recursion: a
    tree of any depth)."""
    found: list[Path] = []
    pending = [folder]
    while pending:
        here = pending.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:  # unreadable: it holds nothing we can read
            continue
        below: list[Path] = []
        for entry in entries:
            if entry.name.endswith(SUFFIX):
                found.append(Path(entry.path))
            elif (not entry.name.startswith(".") and entry.name not in SKIPPED_FOLDERS
                  and entry.is_dir(follow_symlinks=False)):
                below.append(Path(entry.path))
        pending.extend(reversed(below))
    return found


def read_records(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    step_times: StepTimesMode = True,
    shared: bool = False,
    below: bool = True,
) -> tuple[list[dict[str, Any]], list[StoreProblem]]:
    """All records under ``paths``, upgraded to the current schema, plus one problem per
    line that could not be used (truncated, malformed, not UTF-8, nested too deeply, not an
    object, against the record contract, schema too new) and per ``*.jsonl`` that is no file.

    Problems are never fatal and the files are never modified; they are returned, not
    printed or logged as warnings (the caller reports each once). With
    ``step_times=False`` each record's ``metrics.step_times_s`` is left out (and not
    parsed: several times faster). With ``step_times="lazy"`` the step times of records a
    cache holds are read-only :class:`~cnnbench.results.step_summary.StepTimes` views that
    carry their summaries (no float made per step: for readers that only analyse them, as
    the report does), and records with equal ``config`` (or ``environment``) sections share
    one dict; other records keep their lists, and their own objects. ``shared=True`` shares
    such sections in every mode (for readers that change no record: an export).
    A folder is read with the folders below it (see :func:`iter_store_files`; ``below=False``:
    its own files only), and a run met twice (the same ``run_id``) is returned once.
    """
    reader = StoreReader(paths, step_times=step_times, shared=shared, below=below)
    return reader.read()


class StoreReader:
    """Reads a store, and later only what was appended to it since (a sweep checking, just
    before a case starts, whether another sweep has recorded it meanwhile).

    The first :meth:`read` reads every file; each later one reads the lines added since.
    A partial last line (being written, or left by a crash) is reported by the first read
    and otherwise waited for.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], *,
                 step_times: StepTimesMode = True, shared: bool = False, below: bool = True) -> None:
        if step_times not in (True, False, "lazy"):
            raise ValueError(f"step_times: True, False or 'lazy', not {step_times!r}")
        self.paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        self.step_times = step_times
        self.shared = shared or step_times == "lazy"
        self._positions: dict[Path, tuple[int, int]] = {}
        """Per file: the byte offset read up to and the number of the next line."""
        self._first = True
        self.below = below
        self._seen: set[str] = set()
        """The ``run_id`` of every record an earlier :meth:`read` returned."""
        self.repeated = 0
        """How many records repeated a run already read (the same ``run_id``), and were left out."""

    def read(self) -> tuple[list[dict[str, Any]], list[StoreProblem]]:
        """Records (and problems) not returned by an earlier call."""
        records: list[dict[str, Any]] = []
        problems: list[StoreProblem] = []
        current: dict[str, int] = {}  # run_id -> where in records
        files = iter_store_files(self.paths, below=self.below) if self._first else self._files()
        with collector_paused(), cache.session():  # a load makes millions of containers and no cycles
            for path in files:
                start, line = self._positions.get(path, (0, 1))
                before = len(records)
                self._positions[path] = _read_file(path, records, problems, step_times=self.step_times,
                                                   shared=self.shared, start=start, first_line=line,
                                                   partial_is_problem=self._first)
                repeats = self._drop_repeats(records, before, current)
                if repeats:
                    self.repeated += repeats
                    log.debug("%s: %d records of runs already read (the same run_id), counted once", path, repeats)
        self._first = False
        self._seen.update(current)
        for p in problems:
            log.debug("skipped %s", p)
        return records, problems

    def _drop_repeats(self, records: list[dict[str, Any]], start: int, current: dict[str, int]) -> int:
        """Drop from ``records[start:]`` each record whose ``run_id`` was met before (a run kept
        in two stores, a merged copy, a line copied twice: it counts once); how many. Of two
        copies the one with step times is kept (an imported log of a run has none)."""
        kept: list[dict[str, Any]] = []
        for record in records[start:]:
            run_id = record.get("run_id")
            if isinstance(run_id, str) and run_id:
                if run_id in self._seen:
                    continue
                at = current.get(run_id)
                if at is not None:
                    if at < start and _has_steps(record) and not _has_steps(records[at]):
                        records[at] = record
                    continue
                current[run_id] = start + len(kept)
            kept.append(record)
        dropped = len(records) - start - len(kept)
        if dropped:
            records[start:] = kept
        return dropped

    def _files(self) -> list[Path]:
        try:
            return iter_store_files(self.paths, below=self.below)
        except FileNotFoundError:
            return []


def _has_steps(record: dict[str, Any]) -> bool:
    metrics = record.get("metrics")
    return isinstance(metrics, dict) and bool(metrics.get("step_times_s"))


def _parser(step_times: StepTimesMode) -> Any:
    """How this reader parses a line: every field, or without ``metrics.step_times_s``."""
    return store_lines.loads if step_times else store_lines.loads_without_step_times


def _read_file(path: Path, records: list[dict[str, Any]], problems: list[StoreProblem], *,
               step_times: StepTimesMode, shared: bool = False, start: int = 0, first_line: int = 1,
               partial_is_problem: bool = True) -> tuple[int, int]:
    """Read ``path`` from byte ``start`` (line ``first_line``); returns where to go on from.

    A whole file of :data:`cache.MIN_BYTES` or more is read through its cache (when that
    exists or can be written)."""
    try:
        with files.open_regular(path) as f:  # a FIFO or a device is refused, never waited on
            st = os.fstat(f.fileno())
            if start == 0 and partial_is_problem and cache.worth_it(path, st.st_size):
                with contextlib.suppress(_LineTooLong):  # read whole, as a small file is, and not cached
                    return _read_through_cache(path, f, st, records, problems, step_times=step_times, shared=shared)
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
    consumed, complete = read_lines(path, data, records, problems, step_times=step_times, first_line=first_line,
                                    partial_is_problem=partial_is_problem)
    return start + consumed, first_line + complete


def read_lines(path: Path, data: bytes, records: list[dict[str, Any]], problems: list[StoreProblem], *,
               step_times: StepTimesMode, first_line: int = 1, partial_is_problem: bool = True) -> tuple[int, int]:
    """Each line of ``data`` (``path``'s, from line ``first_line``) checked: its record added to
    ``records``, or why not to ``problems`` (``file:line: why``). A last line without its newline
    is checked as torn (``partial_is_problem``) or left for later. Returns the bytes consumed and
    the whole lines met."""
    parse = _parser(step_times)
    complete = data.count(b"\n")  # the piece after the last newline is partial (empty when none)
    partial = data.rfind(b"\n") + 1
    consumed = partial if partial < len(data) and not partial_is_problem else len(data)
    find, start, index = data.find, 0, -1
    while start < consumed:  # a line at a time, not split all at once: each line's copy freed as it is read
        end = find(b"\n", start, consumed)
        stop = consumed if end < 0 else end
        begin, start, index = start, stop + 1, index + 1
        if (too_long := store_lines.too_long(stop - begin)) is not None:  # refused, not copied first
            problems.append(StoreProblem(f"{path}:{first_line + index}: {too_long}"))
            continue
        raw = data[begin:stop]
        if not raw or raw.isspace():
            continue
        rec, why = store_lines.parse_line(raw, parse, truncated=index == complete)
        if why is not None:
            problems.append(store_lines.problem(f"{path}:{first_line + index}: {why}", kept=rec is not None))
        if rec is not None:
            records.append(rec)
    return consumed, complete


def _read_through_cache(path: Path, f: BinaryIO, st: os.stat_result, records: list[dict[str, Any]],
                        problems: list[StoreProblem], *, step_times: StepTimesMode,
                        shared: bool = False) -> tuple[int, int]:
    """Read a whole file: the lines its cache covers from the cache, the others parsed (and
    added to the cache, which is then rewritten). Same records and problems as a plain read.

    Every record comes out of the cache, the new ones too: a parsed record is dropped once the
    cache holds it, so its step times' floats are freed line by line (a lazy first read of
    100,000 runs does not keep ten million of them), and a first read gives what later ones do."""
    cached, rewrite = cache.load(path, f, st, step_times=step_times)
    new = _add_new_lines(cached, f) if cached is not None else None
    if cached is None or new is None:  # no cache, or its lines changed as the file grew: afresh
        cached, rewrite = cache.CachedRecords(), True
        new = _add_new_lines(cached, f)
    assert new is not None  # a fresh cache has no lines to change
    added, partial = new
    if added or rewrite:
        cache.write(path, f, st, cached)
    out = cached.take_records(step_times=step_times, shared=shared)
    parse = _parser(step_times)
    problems.extend(_problem_lines_again(path, cached, out, parse))
    if partial and not partial.isspace():
        rec, why = store_lines.parse_line(partial, parse, truncated=True)
        if rec is not None:
            out.append(rec)
        if why is not None:
            problems.append(store_lines.problem(f"{path}:{cached.next_line}: {why}", kept=rec is not None))
    records.extend(out)
    return cached.end + len(partial), cached.next_line


def _verified_prefix(f: BinaryIO, cached: cache.CachedRecords) -> Any:
    """A running :class:`~cnnbench.results.cache.ContentHash` of the lines ``cached`` covers, read
    now, when they are still those it was made from (the hash its file records), else None. The
    lines appended since are added to it as they are parsed, so the cache written then records
    the hash of the bytes its records came from (not of the file as it is when written, which may
    have changed meanwhile)."""
    digest = cache.content_hash(f.fileno(), cached.end)
    return digest if digest is not None and digest.hexdigest() == cached.prefix else None


_PIECE = 1 << 24
"""Bytes of a file read at once after its cache's lines (a cold read of 600 MB holds no more)."""


class _LineTooLong(Exception):
    """A line longer than :data:`~cnnbench.results.lines.MAX_LINE`: its file is read without its cache."""


def _add_new_lines(cached: cache.CachedRecords, f: BinaryIO) -> tuple[int, bytes] | None:
    """Parse the whole lines of ``f`` after those ``cached`` covers into it, a piece of the file
    at a time; how many lines there were, and the bytes after the last newline (a line being
    written, or torn). None when there are lines after those ``cached`` covers, which changed
    since it was loaded without hashing them (the file was as it was then). The pieces of a line
    longer than a piece are joined once, when it ends (joined again at every piece, a line of 1 GB
    was copied 60 times); past :data:`~cnnbench.results.lines.MAX_LINE`, no more are gathered."""
    fd, at, added = f.fileno(), cached.end, 0
    pending: list[bytes] = []  # a line's pieces, before its newline
    gathered = 0
    while chunk := os.pread(fd, _PIECE, at):
        at += len(chunk)
        ends = chunk.rfind(b"\n") + 1
        if not ends:
            pending.append(chunk)
            gathered += len(chunk)
            if gathered > store_lines.MAX_LINE:  # a line no reader reads
                raise _LineTooLong
            continue
        if gathered and gathered + chunk.find(b"\n") > store_lines.MAX_LINE:  # the pending line ends here
            raise _LineTooLong
        data = b"".join([*pending, chunk]) if pending else chunk
        whole = gathered + ends
        if cached.digest is None:  # whole lines after those covered (the file grew since it was opened)
            cached.digest = _verified_prefix(f, cached)  # not for a torn last line alone: nothing to add
            if cached.digest is None:
                return None
        added += _parse_lines(cached, data, whole)
        pending = [data[whole:]] if whole < len(data) else []
        gathered = len(data) - whole
    return added, b"".join(pending)


def _parse_lines(cached: cache.CachedRecords, data: bytes, whole: int) -> int:
    """Parse the whole lines of ``data[:whole]`` into the cache; returns how many there were.

    One line at a time, not split all at once: each line's bytes are freed once it is parsed."""
    find, start, index = data.find, 0, 0
    while start < whole:
        end = find(b"\n", start, whole)
        if end < 0:  # whole lines are asked for; a last line without its newline is taken to the end
            end = whole
        raw = data[start:end]
        start = end + 1
        index += 1
        if not raw or raw.isspace():
            continue
        # the cache keeps step times, and only what orjson reads (so writes back unchanged); a
        # line that needs the standard library's parser is kept as a line and read at each load
        rec, why = store_lines.parse_line(raw, orjson.loads, truncated=False)
        if rec is None or why is not None:  # kept with a notice: read again each time, to say so
            cached.add_problem(cached.next_line + index - 1, raw)
        else:
            cached.add(rec)
    if cached.digest is not None:
        cached.digest.update(memoryview(data)[:whole])
    cached.end += whole
    cached.next_line += index
    return index


def _problem_lines_again(path: Path, cached: cache.CachedRecords, out: list[dict[str, Any]],
                         parse: Any) -> list[StoreProblem]:
    """The cache's problem lines, checked again in this reader's mode (as without a cache): their
    records go into ``out`` where they stood; their problems are returned in file order."""
    found: list[StoreProblem] = []
    for line in reversed(cached.problems):
        rec, why = store_lines.parse_line(line.raw, parse, truncated=False)
        if rec is not None:
            out.insert(line.position, rec)
        if why is not None:
            found.append(store_lines.problem(f"{path}:{line.line}: {why}", kept=rec is not None))
    return list(reversed(found))
