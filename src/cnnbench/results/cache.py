"""The parsed-record cache of a big results file: loading without parsing JSON again.

A store file's records, once read, checked and upgraded, are kept in a file of this user's
cache folder (:func:`cache_home`; never in the store: a reader writes nothing there, so a store
it may only read gets a cache too, and a ``.<name>.jsonl.cache`` an older cnnbench left beside a
results file is never read nor touched) in a form that loads several times faster than the JSON:
``config`` and ``environment`` objects (the same for most runs of a machine) are stored
once and copied per record (or shared by the records, for readers that change none), and the
raw step times of all records are one column of float64s, beside a column of each run's
step-time summary (count, mean, variance, blocks: :mod:`cnnbench.results.step_summary`,
computed once when the cache is written and handed out with the step times; a lazy read
that writes nothing leaves the raw column in the file until asked for,
:mod:`cnnbench.results.cache_columns`). Only files of :data:`MIN_BYTES` or more get one.

The cache covers the file's first ``end`` bytes (whole lines). It is used only while that
prefix is unchanged: when the file's size, modification and change times and inode are
those seen when the cache was written, and its first 64 KiB hash as recorded; otherwise
the whole prefix is hashed again (CRC-32: :mod:`cnnbench.results.crc`) and must match, or the
cache is rebuilt. Lines appended since are parsed as usual and the cache is rewritten to cover
them. A cache written by another cnnbench (other record contract, migrations or run options) is
never used. A cache that cannot be read, is damaged (its records and each of its columns have a
CRC-32) or has an unexpected shape is ignored and rebuilt; where none can be written (no cache
folder can be made) none is built, and one that cannot be written after all (a full disk) is
skipped; a temporary file left by a writer that died is removed after an hour.
Nothing here ever changes the results file, nor anything else in its folder. No torch here.

A cache hands records to the reader, so it is kept only in a folder that is this user's and no
one else's to write in (:func:`worth_it`), readable by this user alone (0600). It is still read
as data that may be damaged: JSON (orjson) and raw float64s, never an executable format (no
``marshal``, no ``pickle``), read only from a regular file, its parts checked to fit together
before use. It is written to a unique temporary file in the same folder (``mkstemp``: readers never
collide) and renamed over the old one (a symlink there is replaced, not written through).

Lines that broke the contract are kept as their bytes and checked again at every load, so
their problems read exactly as without a cache.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import os
import stat
import struct
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import orjson

from cnnbench.results import files
from cnnbench.results import step_summary as summary
from cnnbench.results.cache_columns import DeferredColumn, defer_column, read_column
from cnnbench.results.crc import Crc32, hexdigest

log = logging.getLogger(__name__)

MIN_BYTES = 1 << 20
"""Smallest results file that gets a cache (below this, parsing is as quick as loading one)."""

_MAGIC = b"CNNBENCH-RECORD-CACHE\n"
_FORMAT = 4
_HEAD_BYTES = 1 << 16
_CHUNK = 1 << 22
_SECTIONS = ("config", "environment")
_STEPS = "step_times_s"
_HEADER = struct.Struct("<I")

StepTimesMode = bool | Literal["lazy"]
"""How a read hands out ``metrics.step_times_s``: lists (``True``), left out (``False``), or
read-only views of the cache's column that carry their summaries (``"lazy"``)."""


CACHE_DIR_VARIABLE = "CNNBENCH_CACHE_DIR"


def cache_home() -> Path | None:
    """This user's folder of parsed-record caches: ``$CNNBENCH_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/cnnbench/records``, else ``~/.cache/cnnbench/records``; each only when it
    is an absolute path (a relative one would put caches wherever the reader runs, a store
    among them; XDG says to ignore it), None when none is (no home: no cache)."""
    given = os.environ.get(CACHE_DIR_VARIABLE)
    if given and os.path.isabs(given):
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "cnnbench" / "records"
    home = os.path.expanduser("~")
    return Path(home) / ".cache" / "cnnbench" / "records" if os.path.isabs(home) else None


def cache_path(path: Path) -> Path:
    """Where the cache of results file ``path`` lives: in :func:`cache_home`, named by a hash of
    the file's real path (the same file reached through a link or a relative path has one cache).
    Machines sharing a home (a cluster's nodes reading one store) share it too, as they shared
    the cache that older cnnbench kept beside the file: one copy, not one per node; a file of
    the same path on another machine is told apart by its lines, and its cache rebuilt."""
    home = cache_home()
    if home is None:
        raise LookupError("no cache folder (no absolute CNNBENCH_CACHE_DIR, XDG_CACHE_HOME or home)")
    key = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()
    return home / f"{key[:40]}.cache"


def worth_it(path: Path, size: int) -> bool:
    """Whether to read ``path`` (``size`` bytes) through its cache: it is big enough, and the
    cache folder is there (made, 0700, when missing), this user's, and no one else's to write
    in (a cache is records handed to the reader; building one that cannot be kept only costs
    time)."""
    if size < MIN_BYTES or cache_home() is None:
        return False
    folder = cache_path(path).parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(folder)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        log.debug("no cache: %s is not this user's alone to write in", folder)
        return False
    return os.access(folder, os.W_OK)


_CODE_KEY: list[str] = []


def code_key() -> str:
    """What the cached records depend on besides the file: the record contract, the cleaning of
    figures no reader can compute with, the migrations and the run options' types (from their
    source), and this cache's format."""
    if not _CODE_KEY:
        from cnnbench.results import cleaning, migrate, record

        digest = hashlib.sha256(f"{_FORMAT}".encode())
        for module in (record, cleaning, migrate, summary):
            digest.update(Path(str(module.__file__)).read_bytes())
        digest.update(repr(record._config_groups()).encode())
        _CODE_KEY.append(digest.hexdigest())
    return _CODE_KEY[0]


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


@dataclass
class ProblemLine:
    """A line of the covered prefix that gave no record: checked again at every load."""

    position: int
    """How many of the cached records come before it."""
    line: int
    raw: bytes


_SCALARS_ONLY = frozenset({dict, list})


def _finite(value: Any) -> bool:
    """False for a float NaN or infinity (anything else: True)."""
    return type(value) is not float or math.isfinite(value)
_FLOATS = frozenset({float})

RowText = tuple[int, int, bytes]
"""``(first row, rows, text)``: the JSON text (an array) of ``rows`` consecutive rows."""


@dataclass
class CachedRecords:
    """What a cache holds: the records of the covered prefix in their stored form."""

    end: int = 0
    """Bytes of the results file covered (whole lines)."""
    next_line: int = 1
    """Number of the first line after them."""
    sections: list[dict[str, Any]] = field(default_factory=list)
    """Distinct ``config``/``environment`` objects without nested values, each stored once."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    """Each record without its shared sections (None in their place) and its step times
    (None in their place)."""
    refs: tuple[list[int], ...] = field(default_factory=lambda: tuple([] for _ in _SECTIONS))
    """Per name of :data:`_SECTIONS`, per record: the index in :attr:`sections` (-1: kept in the row)."""
    step_counts: list[int] = field(default_factory=list)
    """Per record, how many step times it has in :attr:`steps` (-1: none there; kept in the row)."""
    steps: array | DeferredColumn | None = field(default_factory=lambda: array("d"))
    """Every record's step times, in order (None until read: a reader without step times skips
    them; a :class:`~cnnbench.results.cache_columns.DeferredColumn` where a lazy read left
    them in the file: :meth:`step_column` reads it)."""
    summaries: array | None = field(default_factory=lambda: array("d"))
    """The step-time summaries (:func:`~cnnbench.results.step_summary.summary_column`) of the
    records with step times here, but for the last ``len(means)`` (read with :attr:`steps`)."""
    means: list[float] = field(default_factory=list)
    """The means of the step times of the records added since :attr:`summaries` was made."""
    problems: list[ProblemLine] = field(default_factory=list)
    digest: Crc32 | None = field(default_factory=Crc32, repr=False)
    """A running CRC-32 of the covered bytes, when known (whoever extends :attr:`end` updates
    it); None: :func:`write` hashes them from the file."""
    row_texts: list[RowText] = field(default_factory=list, repr=False)
    """JSON texts of consecutive rows as they are (a forked part's): written, not dumped again."""
    prefix: str = field(default="", repr=False)
    """The CRC-32 of the covered bytes that the cache file records (set by :func:`load`)."""
    _section_index: dict[bytes, int] = field(default_factory=dict, repr=False)

    def add(self, record: dict[str, Any]) -> None:
        """Add a checked, current record (not changed; it may keep its own objects)."""
        row = dict(record)
        config_refs, environment_refs = self.refs
        index = self._share(row.get("config"))
        if index >= 0:
            row["config"] = None
        config_refs.append(index)
        index = self._share(row.get("environment"))
        if index >= 0:
            row["environment"] = None
        environment_refs.append(index)
        metrics = row.get("metrics")
        times = metrics.get(_STEPS) if type(metrics) is dict else None
        if type(times) is list and self.steps is not None and _FLOATS.issuperset(map(type, times)):
            metrics = row["metrics"] = dict(metrics)  # type: ignore[arg-type]
            metrics[_STEPS] = None
            self.step_counts.append(len(times))
            self.step_column().extend(times)
            self.means.append(math.fsum(times) / len(times) if times else math.nan)
        else:
            self.step_counts.append(-1)
        self.rows.append(row)

    def step_column(self) -> array:
        """:attr:`steps`, read from the file first where a lazy read left them there (a
        :class:`~cnnbench.results.cache_columns.ColumnChanged` if the file no longer holds them)."""
        steps = self.steps
        if steps is None:
            raise ValueError("step times were not read")
        if not isinstance(steps, array):
            steps = self.steps = steps.values()
        return steps

    def _share(self, section: Any) -> int:
        """The index in :attr:`sections` of an object equal to ``section`` (added if new), or
        -1 when it is kept in its row: no object, or one with nested values (records must
        not share those), an integer beyond 64 bits, or a NaN or infinity (orjson writes
        those as null, so their text is not theirs alone)."""
        if type(section) is not dict:
            return -1
        try:
            key = orjson.dumps(section)  # equal text: equal values, of equal types (but for null)
        except TypeError:
            return -1
        index = self._section_index.get(key)
        if index is not None:  # the same text: the same values, unless this one's null is a NaN
            return index if index < 0 or section == self.sections[index] else -1
        if b"null" in key and not all(map(_finite, section.values())):
            return -1
        if _SCALARS_ONLY.isdisjoint(map(type, section.values())):
            index = len(self.sections)
            self.sections.append(section)
        else:
            index = -1
        self._section_index[key] = index
        return index

    def add_problem(self, line: int, raw: bytes) -> None:
        self.problems.append(ProblemLine(len(self.rows), line, bytes(raw)))

    def take_records(self, *, step_times: StepTimesMode, shared: bool = False) -> list[dict[str, Any]]:
        """Every record, made whole; ``metrics.step_times_s`` as lists (``True``), as
        :class:`~cnnbench.results.step_summary.StepTimes` views of :attr:`steps` (``"lazy"``)
        or left out (``False``). Consumes them: call after :func:`write`.

        Each record has its own objects (callers may change them), but with ``shared`` (a
        lazy read is for reading, as are an export's): then the records whose ``config`` (or
        ``environment``) is stored once here share that one dict, as their lazy step times
        share the column (a copy per record was a fifth of a warm read of 100,000 runs, and
        170 MB)."""
        rows, sections = self.rows, self.sections
        self.row_texts = []  # the rows change now
        for row, config, environment in zip(rows, *self.refs, strict=True):
            if config >= 0:
                row["config"] = sections[config] if shared else sections[config].copy()
            if environment >= 0:
                row["environment"] = sections[environment] if shared else sections[environment].copy()
        if not step_times:
            for row in rows:
                metrics = row.get("metrics")
                if type(metrics) is dict:
                    metrics.pop(_STEPS, None)
            return rows
        if self.steps is None or self.summaries is None:
            raise ValueError("step times were not read")
        self.complete_summaries()
        lazy = step_times == "lazy"
        steps: Any = self.steps if lazy else self.step_column()
        column, width = self.summaries, summary.column_width
        flat: Any = steps if lazy else steps.tolist()
        at = pos = 0
        for row, n in zip(rows, self.step_counts, strict=True):
            if n >= 0:
                row["metrics"][_STEPS] = summary.StepTimes(steps, at, n, column, pos) if lazy else flat[at:at + n]
                at += n
                pos += width(n)
        return rows

    def complete_summaries(self) -> None:
        """Add the summaries of the records added since to :attr:`summaries`."""
        if self.means and self.steps is not None and self.summaries is not None:
            counts = [c for c in self.step_counts if c >= 0][-len(self.means):]
            steps = self.step_column()
            start = len(steps) - sum(counts)
            self.summaries.extend(summary.summary_column(steps, start, counts, self.means))
            self.means = []

    @classmethod
    def _from_payload(cls, body: bytes | memoryview) -> CachedRecords:
        end, next_line, sections, rows, refs, counts, problems = orjson.loads(body)
        if not all(type(part) is list for part in (sections, rows, refs, problems)):
            raise ValueError("parts of the cache do not fit together")
        lines = []
        for p in problems:
            position, line, text = p
            lines.append(ProblemLine(position, line, base64.b64decode(text, validate=True)))
        cached = cls(end=end, digest=None, next_line=next_line, sections=sections, rows=rows, refs=tuple(refs),
                     step_counts=counts, steps=None, summaries=None, problems=lines)
        check_shape(cached, len(_SECTIONS))
        cached._section_index = {orjson.dumps(s): i for i, s in enumerate(sections)}  # -1s are found again
        return cached


Piece = bytes | memoryview


def pieces(cached: CachedRecords) -> tuple[list[Piece], tuple[int, int]]:
    """The JSON body of the cache in pieces, in order, and where its rows' array lies in it
    (offset, length): the text ``orjson.dumps`` gives for ``[end, next_line, sections, rows,
    refs, step_counts, problems]``, hashed and written one piece after another, never joined
    into one text (70 MB for 100,000 engine records).

    Rows whose JSON text is at hand (:attr:`CachedRecords.row_texts`) are that text instead of
    being dumped again: a part of a cold read parsed in a forked process
    (:mod:`cnnbench.results.parallel_parse`) arrives as the text its process wrote, from which
    this process made its rows, and orjson writes a value it read back to the same bytes."""
    head = orjson.dumps([cached.end, cached.next_line, cached.sections])
    tail = orjson.dumps([list(cached.refs), cached.step_counts,
                         [[p.position, p.line, base64.b64encode(p.raw).decode()] for p in cached.problems]])
    rows = rows_pieces(cached.rows, cached.row_texts)
    return ([memoryview(head)[:-1], b",", *rows, b",", memoryview(tail)[1:]],
            (len(head), sum(map(len, rows))))


def rows_pieces(rows: Sequence[dict[str, Any]], texts: Sequence[RowText]) -> list[Piece]:
    """The JSON text of the array ``rows`` in pieces: each of ``texts`` (in order, not
    overlapping) as it is, the rows before, between and after them dumped."""
    out: list[Piece] = [b"["]

    def add(array: bytes) -> None:  # an array's items, after a comma unless they are the first
        if len(array) > 2:
            if len(out) > 1:
                out.append(b",")
            out.append(memoryview(array)[1:-1])

    at = 0
    for first, count, text in texts:
        if first > at:
            add(orjson.dumps(rows[at:first]))
        add(text)
        at = first + count
    if at < len(rows):
        add(orjson.dumps(rows[at:]))
    out.append(b"]")
    return out


def check_shape(cached: CachedRecords, kinds: int) -> None:
    """Raise an error unless the loaded parts fit together, before anything uses them: a cache
    is data from disk, from anyone."""
    n = len(cached.rows)
    fits = _parts_fit(cached) and _refs_fit(cached, n, kinds) and _counts_fit(cached, n) and _problems_fit(cached, n)
    with_steps = [row.get("metrics") for row, count in zip(cached.rows, cached.step_counts, strict=True)
                  if count >= 0]
    if not fits or not {dict}.issuperset(map(type, with_steps)):
        raise ValueError("parts of the cache do not fit together")


def _parts_fit(cached: CachedRecords) -> bool:
    return (type(cached.end) is int and type(cached.next_line) is int
            and {dict}.issuperset(map(type, cached.rows)) and {dict}.issuperset(map(type, cached.sections)))


def _refs_fit(cached: CachedRecords, n: int, kinds: int) -> bool:
    """A list of section indexes per section kind, one per row, each -1 or a section."""
    return len(cached.refs) == kinds and all(
        type(r) is list and len(r) == n and {int}.issuperset(map(type, r))
        and (not r or min(r) >= -1 and max(r) < len(cached.sections)) for r in cached.refs)


def _counts_fit(cached: CachedRecords, n: int) -> bool:
    return (type(cached.step_counts) is list and len(cached.step_counts) == n
            and {int}.issuperset(map(type, cached.step_counts)))


def _problems_fit(cached: CachedRecords, n: int) -> bool:
    return all(type(p.position) is int and 0 <= p.position <= n and type(p.line) is int
               and type(p.raw) is bytes for p in cached.problems)


def check_columns(cached: CachedRecords) -> None:
    """Raise an error unless the step-time column holds every record's step times, and the
    summaries column the summaries of all of them but the last ``len(cached.means)``."""
    with_steps = [n for n in cached.step_counts if n >= 0]
    summed = with_steps[:len(with_steps) - len(cached.means)]
    if (len(cached.means) > len(with_steps) or len(cached.steps or ()) != sum(with_steps)
            or len(cached.summaries or ()) != sum(map(summary.column_width, summed))):
        raise ValueError("the step times or their summaries do not fit the records")


def _hash_prefix(f: BinaryIO, size: int) -> Crc32:
    """A running CRC-32 of the first ``size`` bytes of ``f`` (``hexdigest()`` gives it)."""
    f.seek(0)
    digest = Crc32()
    left = size
    while left > 0:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)
    return digest


def _head_hash(f: BinaryIO, size: int) -> str:
    f.seek(0)
    return hexdigest(f.read(min(size, _HEAD_BYTES)))


def load(path: Path, f: BinaryIO, st: os.stat_result, *,
         step_times: StepTimesMode) -> tuple[CachedRecords | None, bool]:
    """The valid cache of ``path`` (open as ``f``, with stat ``st``), if any, and whether it
    needs rewriting even without new lines (the file was touched or copied, not changed).
    Without ``step_times`` they are not read, unless the cache will be written again.

    Never raises: a missing, stale, damaged or foreign cache gives ``(None, True)``.
    """
    where = cache_path(path)
    try:
        with files.open_regular(where) as c:  # never a FIFO or a device
            opened = os.fstat(c.fileno())  # before a byte is read: what a deferred column was read from
            if c.read(len(_MAGIC)) != _MAGIC:
                raise ValueError("not a cnnbench cache")
            (header_size,) = _HEADER.unpack(c.read(_HEADER.size))
            header = orjson.loads(c.read(header_size))
            if type(header) is not dict or header.get("code") != code_key():
                log.debug("cache %s was written by another cnnbench; rebuilding", where)
                return None, True
            end = header["end"]
            if st.st_size < end or _head_hash(f, end) != header["head"]:
                log.debug("cache %s is stale; rebuilding", where)
                return None, True
            touched = header["stat"] != _stat_key(st)
            digest = _hash_prefix(f, end) if touched else None
            if digest is not None and digest.hexdigest() != header["prefix"]:
                log.debug("cache %s is stale (the covered lines changed); rebuilding", where)
                return None, True
            body = c.read(header["rows_size"])
            if hexdigest(body) != header["rows"]:
                raise ValueError("damaged (checksum of the records)")
            cached = CachedRecords._from_payload(body)
            if cached.end != end:
                raise ValueError("header and records disagree")
            cached.digest, cached.prefix = digest, header["prefix"]
            if step_times or touched or st.st_size > end:  # wanted, or needed to write the cache again
                lazily = step_times == "lazy" and not touched and st.st_size == end  # nothing to write: values if asked
                cached.steps = defer_column(c, header, where, opened) if lazily else read_column(c, header, "steps")
                cached.summaries = read_column(c, header, "summaries")
                check_columns(cached)
            return cached, touched
    except FileNotFoundError:
        return None, True
    except Exception as exc:  # a cache is disposable: whatever is wrong with it, rebuild it
        log.debug("ignoring cache %s (%s: %s); rebuilding", where, type(exc).__name__, exc)
        return None, True


ABANDONED_S = 3600.0
"""A temporary cache file untouched for this long was left by a writer that died: removed."""


def _remove_abandoned(where: Path) -> None:
    """Remove the temporary files of writers of this cache that died while writing it."""
    try:
        for tmp in where.parent.glob(f".{where.name}.*.tmp"):
            st = tmp.lstat()
            if stat.S_ISREG(st.st_mode) and time.time() - st.st_mtime > ABANDONED_S:
                tmp.unlink()
    except OSError:
        pass


def write(path: Path, f: BinaryIO, st: os.stat_result, cached: CachedRecords) -> None:
    """Write the cache of ``path`` (open as ``f``, stat ``st`` taken before its lines were
    read). Never raises: a cache that cannot be written is skipped."""
    where = cache_path(path)
    _remove_abandoned(where)
    try:
        if cached.steps is None or cached.summaries is None:
            raise ValueError("its step times were not read")
        cached.complete_summaries()
        body, _ = pieces(cached)
        body_hash = Crc32()
        for piece in body:
            body_hash.update(piece)
        steps, summaries = memoryview(cached.step_column()).cast("B"), memoryview(cached.summaries).cast("B")
        header = orjson.dumps({
            "code": code_key(), "end": cached.end, "stat": _stat_key(st), "head": _head_hash(f, cached.end),
            "prefix": (cached.digest or _hash_prefix(f, cached.end)).hexdigest(),
            "rows_size": sum(map(len, body)), "rows": body_hash.hexdigest(),
            "steps_size": len(steps), "steps": hexdigest(steps),
            "summaries_size": len(summaries), "summaries": hexdigest(summaries),
        })
        with files.replacing(where, mode=0o600) as out:  # .<cache name>.<random>.tmp, renamed over it
            out.write(_MAGIC + _HEADER.pack(len(header)) + header)
            for piece in body:
                out.write(piece)
            out.write(steps)
            out.write(summaries)
        log.debug("wrote cache %s (%d records, %d bytes covered)", where, len(cached.rows), cached.end)
    except Exception as exc:
        log.debug("cannot write cache %s (%s: %s)", where, type(exc).__name__, exc)
