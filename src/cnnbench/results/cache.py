"""The parsed-record cache of a big results file: its checked records in a Parquet file that
DuckDB writes and reads, loaded without parsing or checking its lines again.

A store file's records, once read, checked and upgraded, are kept in a file of this user's
cache folder (:func:`cache_home`; never in the store: a reader writes nothing there, so a store
it may only read gets a cache too, and a ``.<name>.jsonl.cache`` an older cnnbench left beside a
results file is never read nor touched). Only files of :data:`MIN_BYTES` or more get one. One
Parquet table, a row per record, per distinct section and per problem line, then a row per value
of a column of doubles (:data:`_COLUMNS`): ``config`` and ``environment`` objects (the same for
most runs of a machine) are stored once and copied per record (or shared by the records, for
readers that change none); every record's step times, then their summaries (count, mean, variance,
blocks: :mod:`cnnbench.results.step_summary`, computed once when the cache is written), are that
column. A load takes it as one array of float64s (no Python float per step), which the lazy read's
:class:`~cnnbench.results.step_summary.StepTimes` views share.

The cache covers the file's first ``end`` bytes (whole lines). It is used only while that prefix
is unchanged: when the file's size, modification and change times and inode are those seen when
the cache was written, and its first 64 KiB hash as recorded; otherwise the whole prefix is hashed
again (:class:`ContentHash`: SHA-256 by blocks, on every core) and must match, or the cache is
rebuilt. Lines appended since are parsed as usual
and the cache is written again to cover them. A cache written by another cnnbench (other record
contract, migrations, run options or DuckDB) is never used. A cache that cannot be read or is
damaged (its metadata is hashed, and a CRC-32 of each part it loads is kept there) is ignored and
rebuilt; where none can be written (no cache folder can be made) none is built, and one that
cannot be written after all (a full disk) is skipped; a temporary file left by a writer that died
is removed after an hour. Nothing here ever changes the results file, nor anything else in its
folder. No torch here.

A cache hands records to the reader, so it is kept only in a folder that is this user's and no
one else's to write in (:func:`worth_it`), readable by this user alone (0600), and read only from
a regular file of this user's that no one else may read or write, opened once without following
a link (:func:`open_own`, as the engine's sidecars are) and handed to DuckDB as that descriptor.
It is written to a unique temporary file in the same folder (``mkstemp``: readers never collide)
and renamed over the old one (a symlink there is replaced, not written through).

Lines that broke the contract are kept as their bytes and checked again at every load, so their
problems read exactly as without a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import stat
import tempfile
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import orjson

from cnnbench.results import step_summary as summary

log = logging.getLogger(__name__)

MIN_BYTES = 1 << 20
"""Smallest results file that gets a cache (below this, parsing is as quick as loading one)."""

_FORMAT = "records-parquet-2"

ROW_GROUP = 8192
"""Rows of a Parquet file that DuckDB writes, and holds in memory as it writes, at once (its
default, 122,880, held a whole file of 100,000 records: the first read of one peaked 0.6 GB
higher); the engine's :class:`~cnnbench.results.engine.Sidecar` too."""
_HEAD_BYTES = 1 << 16
_CHUNK = 1 << 22
_SECTIONS = ("config", "environment")
_STEPS = "step_times_s"

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


def cache_path(path: Path, kind: str = "records") -> Path:
    """Where the cache of results file ``path`` lives (``kind``: its records, or the fields the
    engine read, :class:`~cnnbench.results.engine.Sidecar`): in :func:`cache_home`, named by a hash of
    the file's real path (the same file reached through a link or a relative path has one cache).
    Machines sharing a home (a cluster's nodes reading one store) share it too, as they shared
    the cache that older cnnbench kept beside the file: one copy, not one per node; a file of
    the same path on another machine is told apart by its lines, and its cache rebuilt."""
    home = cache_home()
    if home is None:
        raise LookupError("no cache folder (no absolute CNNBENCH_CACHE_DIR, XDG_CACHE_HOME or home)")
    key = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()
    return home / f"{key[:40]}.{kind}.parquet"


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
    figures no reader can compute with, the migrations, the step-time summaries and the run
    options' types (from their source), this cache's format and DuckDB's version."""
    if not _CODE_KEY:
        import duckdb

        from cnnbench.results import cleaning, migrate, record

        digest = hashlib.sha256(f"{_FORMAT}:{duckdb.__version__}".encode())
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
_FLOATS = frozenset({float})


def _finite(value: Any) -> bool:
    """False for a float NaN or infinity (anything else: True)."""
    return type(value) is not float or math.isfinite(value)


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
    steps: array | None = field(default_factory=lambda: array("d"))
    """Every record's step times, in order (None: not read; a reader without step times skips them)."""
    summaries: array | None = field(default_factory=lambda: array("d"))
    """The step-time summaries (:func:`~cnnbench.results.step_summary.summary_column`) of the
    records with step times here, but for the last ``len(means)`` (read with :attr:`steps`)."""
    means: list[float] = field(default_factory=list)
    """The means of the step times of the records added since :attr:`summaries` was made."""
    problems: list[ProblemLine] = field(default_factory=list)
    digest: ContentHash | None = field(default_factory=lambda: ContentHash(), repr=False)
    """A running :class:`ContentHash` of the covered bytes, when known (whoever extends :attr:`end` updates
    it); None: :func:`write` hashes them from the file."""
    prefix: str = field(default="", repr=False)
    """The :class:`ContentHash` of the covered bytes that the cache file records (set by :func:`load`)."""
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
        """:attr:`steps` (a :class:`ValueError` when they were not read)."""
        if self.steps is None:
            raise ValueError("step times were not read")
        return self.steps

    def _share(self, section: Any) -> int:
        """The index in :attr:`sections` of an object equal to ``section`` (added if new), or
        -1 when it is kept in its row: no object, or one with nested values (records must
        not share those), an integer beyond 64 bits, or a NaN or infinity (orjson writes
        those as null, so their text is not theirs alone)."""
        if type(section) is not dict:
            return -1
        try:
            key = _dumps(section)  # equal text: equal values, of equal types (but for null)
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
        if self.summaries is None:
            raise ValueError("step times were not read")
        self.complete_summaries()
        lazy = step_times == "lazy"
        steps = self.step_column()
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


# --- the Parquet file ----------------------------------------------------------------------------

_ROW, _SECTION, _PROBLEM, _VALUE = 0, 1, 2, 3
_COLUMNS = ("kind", "body", "a", "b", "n", "v")
"""The cache's table: per row its ``kind`` (a record, a section, a problem line, a value) and
``body`` (the record's JSON without its shared sections and step times; the section's JSON; the
line's bytes); ``a``, ``b``: a record's section indexes (-1: its own), a problem's position and
line number; ``n``: a record's count of step times (-1: none among the values). The rows of kind
:data:`_VALUE`, after all others, hold in ``v`` every record's step times, one after another, then
their summaries (:func:`~cnnbench.results.step_summary.summary_column`): a column of doubles
DuckDB writes and reads as fast as it can (a list of doubles per record, made from NumPy arrays,
cost DuckDB a look at each array's type: 0.16 s of a profiled cold read of 10,000 records)."""
_TYPES = ("UTINYINT", "BLOB", "BIGINT", "BIGINT", "BIGINT", "DOUBLE")
_META = ("code", "end", "next_line", "stat", "head", "prefix", "rows", "table", "steps", "summaries")


def _crc(parts: Any) -> str:
    """A CRC-32 of byte strings, each with its length (one moved between parts is seen)."""
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, zlib.crc32(len(part).to_bytes(8, "little"), crc))
    return f"{crc:08x}"


def _table_crc(kind: Any, body: Any, a: Any, b: Any, n: Any) -> str:
    """:func:`_crc` of the table's columns but the step times and summaries: the numbers, the
    bodies' lengths and their bytes one after another."""
    import numpy as np

    lengths = np.fromiter(map(len, body), dtype=np.int64, count=len(body))
    crc = int(_crc([np.ascontiguousarray(x, dtype=np.int64).tobytes() for x in (kind, a, b, n, lengths)]), 16)
    for text in body:  # not joined: a copy of them all costs more than their CRC
        crc = zlib.crc32(text, crc)
    return f"{crc:08x}"


def meta_hash(meta: Mapping[str, str], keys: Iterable[str]) -> str:
    """A hash of a Parquet file's metadata (the values of ``keys``), kept with it: a value damaged
    in the file is seen (this cache's, and the engine's sidecars')."""
    return hashlib.sha256("\0".join(str(meta.get(k)) for k in keys).encode()).hexdigest()


_SESSION = threading.local()
"""This thread's DuckDB database for caches while a :func:`session` lasts (made when first needed)."""


@contextlib.contextmanager
def session() -> Iterator[None]:
    """One DuckDB database for the caches read and written in the block (a database costs about
    15 ms: one per file of a store would add up), made when first needed and closed as the block
    ends, its threads with it (no thread is left behind in a process that may fork). Nested: the
    outermost one's."""
    if getattr(_SESSION, "open", False):
        yield
        return
    _SESSION.open, _SESSION.con = True, None
    try:
        yield
    finally:
        con, _SESSION.open, _SESSION.con = _SESSION.con, False, None
        if con is not None:
            con.close()


@contextlib.contextmanager
def _duckdb() -> Iterator[Any]:
    """A DuckDB connection in this process's memory only (:func:`~cnnbench.results.engine.connect`):
    a cursor of the :func:`session`'s database, else a database of its own; closed after use."""
    from cnnbench.results.engine import connect

    if getattr(_SESSION, "open", False):
        if _SESSION.con is None:
            _SESSION.con = connect()
        con = _SESSION.con.cursor()
    else:
        con = connect()
    try:
        yield con
    finally:
        con.close()


def chunks(fd: int, size: int, start: int = 0) -> Iterator[bytes]:
    """The bytes of ``fd`` from ``start`` up to ``size`` in parts (read, not mapped: a file cut
    meanwhile is no crash); fewer when it holds fewer now."""
    at = start
    while at < size:
        chunk = os.pread(fd, min(_CHUNK, size - at), at)
        if not chunk:
            return
        yield chunk
        at += len(chunk)


def on_every_core(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], most: int | None = None) -> list[Any]:
    """``fn(*job)`` for each job, in threads on every core this process may use (for work that lets
    the others run: reading, hashing, DuckDB), or on ``most`` at a time; the results in order."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = min(len(jobs), cores, most or len(jobs))
    if workers < 2:
        return [fn(*job) for job in jobs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: fn(*job), jobs))


HASH_BLOCK = 1 << 24
"""Bytes of a file hashed as one block of its :class:`ContentHash`."""


class ContentHash:
    """The hash a cache records of the bytes of its file it covers: the SHA-256 of each
    :data:`HASH_BLOCK` bytes of them in turn (the last block may be shorter), and the SHA-256 of
    those digests in order (:meth:`hexdigest`). A file's blocks are hashed on every core at once
    (:func:`content_hashes`; one SHA-256 of a file is one core's stream: 0.74 s for 648 MB here,
    where its blocks on two cores took 0.35 s); a running one is extended by :meth:`update` as
    lines are parsed or appended, to the same hash."""

    __slots__ = ("_blocks", "_part", "_filled")

    def __init__(self) -> None:
        self._blocks: list[bytes] = []
        self._part = hashlib.sha256()
        self._filled = 0

    def update(self, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B")
        while len(view):
            taken = min(HASH_BLOCK - self._filled, len(view))
            self._part.update(view[:taken])
            self._filled += taken
            view = view[taken:]
            if self._filled == HASH_BLOCK:
                self._blocks.append(self._part.digest())
                self._part, self._filled = hashlib.sha256(), 0

    def copy(self) -> ContentHash:
        twin = ContentHash()
        twin._blocks, twin._part, twin._filled = list(self._blocks), self._part.copy(), self._filled
        return twin

    def hexdigest(self) -> str:
        whole = hashlib.sha256(b"".join(self._blocks))
        if self._filled:
            whole.update(self._part.digest())
        return whole.hexdigest()


def content_hashes(files: Sequence[tuple[int, int]]) -> list[ContentHash | None]:
    """The :class:`ContentHash` of the first ``size`` bytes of each ``(fd, size)``, every block of
    every file hashed on every core; None for a file that holds fewer now."""

    jobs = [(fd, at, min(at + HASH_BLOCK, size)) for fd, size in files for at in range(0, size, HASH_BLOCK)]
    done = iter(on_every_core(_hash_block, jobs))
    out: list[ContentHash | None] = []
    for _, size in files:
        whole: ContentHash | None = ContentHash()
        for at in range(0, size, HASH_BLOCK):
            digest, read = next(done)
            if whole is None or read != min(HASH_BLOCK, size - at):
                whole = None
            elif read == HASH_BLOCK:
                whole._blocks.append(digest.digest())
            else:
                whole._part, whole._filled = digest, read
        out.append(whole)
    return out


def _hash_block(fd: int, at: int, end: int) -> tuple[Any, int]:
    """The SHA-256 of the bytes of ``fd`` from ``at`` to ``end``, and how many there were."""
    digest, read = hashlib.sha256(), 0
    for chunk in chunks(fd, end, at):
        digest.update(chunk)
        read += len(chunk)
    return digest, read


def content_hash(fd: int, size: int) -> ContentHash | None:
    """:func:`content_hashes` of one file."""
    return content_hashes([(fd, size)])[0]


def _head_hash(f: BinaryIO, size: int) -> str:
    return hashlib.sha256(os.pread(f.fileno(), min(size, _HEAD_BYTES), 0)).hexdigest()


@dataclass
class _Fetched:
    """What a cache file holds, read and checked against its CRC-32s (not yet against its file)."""

    meta: dict[str, str]
    table: tuple[Any, Any, Any, Any, Any]
    """The columns ``kind``, ``body``, ``a``, ``b``, ``n``."""
    steps: array | None
    summaries: array | None


def open_own(where: Path) -> int | None:
    """The file at ``where`` in the cache folder (a parsed-record cache, an engine's sidecar)
    opened for reading (a descriptor), without following a link, when it is a regular file of this
    user's that no one else may read or write; None otherwise (missing, a link, a FIFO, another
    user's, or one that others could have written: its hashes hold no secret, so whoever can write
    it could make one that checks)."""
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        os.close(fd)
        return None
    return fd


def _fetch(where: Path, steps: bool) -> _Fetched | None:
    """The cache at ``where``, with its step times and summaries (``steps``); None when it was
    written by another cnnbench. Raises ``FileNotFoundError`` when there is none, and another
    error when it cannot be read, is damaged, or is not this user's alone (:func:`open_own`)."""
    import numpy as np

    fd = open_own(where)
    if fd is None:
        if not os.path.lexists(where):
            raise FileNotFoundError(where)
        raise ValueError("not a file of this user's alone (a link, another user's, or one others may read or write)")
    with os.fdopen(fd, "rb") as c, _duckdb() as con:
        source = f"read_parquet('/proc/self/fd/{c.fileno()}')"
        meta = dict(con.execute("SELECT key::VARCHAR, value::VARCHAR FROM parquet_kv_metadata(?)",
                                [f"/proc/self/fd/{c.fileno()}"]).fetchall())
        if meta.get("code") != code_key() or meta.get("metahash") != meta_hash(meta, _META):
            return None
        columns = con.execute(f"SELECT kind, body, a, b, n FROM {source} WHERE kind <> {_VALUE}").fetchnumpy()
        table = kind, body, a, b, n = (columns["kind"], columns["body"], columns["a"], columns["b"], columns["n"])
        if any(x.dtype.kind not in "iu" or np.ma.is_masked(x) for x in (kind, a, b, n)) or body.dtype.kind != "O":
            raise ValueError("not the cache's columns")
        if len(kind) != int(meta["rows"]) or _table_crc(*table) != meta["table"]:
            raise ValueError("damaged (CRC-32 of its records)")
        if not steps:
            return _Fetched(meta, table, None, None)
        values = con.execute(f"SELECT v FROM {source} WHERE kind = {_VALUE}").fetchnumpy()["v"]
        if isinstance(values, np.ma.MaskedArray):  # a NaN (DuckDB keeps it as null)
            values = values.filled(np.nan)
        counts = n[(kind == _ROW) & (n >= 0)].tolist()
        split = sum(counts)
        if values.dtype != np.float64 or len(values) != split + sum(map(summary.column_width, counts)):
            raise ValueError("the step times or their summaries do not fit the records")
        steps_out, summaries_out = array("d", values[:split].tobytes()), array("d", values[split:].tobytes())
        if _floats_crc(steps_out) != meta["steps"] or _floats_crc(summaries_out) != meta["summaries"]:
            raise ValueError("damaged (CRC-32 of its step times)")
        return _Fetched(meta, table, steps_out, summaries_out)


def load(path: Path, f: BinaryIO, st: os.stat_result, *,
         step_times: StepTimesMode) -> tuple[CachedRecords | None, bool]:
    """The valid cache of ``path`` (open as ``f``, with stat ``st``), if any, and whether it
    needs rewriting even without new lines (the file was touched or copied, not changed).
    Without ``step_times`` they are not read, unless the cache will be written again.

    Never raises: a missing, stale, damaged or foreign cache gives ``(None, True)``.
    """
    where = cache_path(path)
    try:
        fetched = _fetch(where, bool(step_times))
        if fetched is None:
            log.debug("cache %s was written by another cnnbench, or is damaged; rebuilding", where)
            return None, True
        meta = fetched.meta
        end = int(meta["end"])
        if st.st_size < end or _head_hash(f, end) != meta["head"]:
            log.debug("cache %s is stale; rebuilding", where)
            return None, True
        touched = meta["stat"] != str(_stat_key(st))
        digest = content_hash(f.fileno(), end) if touched else None
        if touched and (digest is None or digest.hexdigest() != meta["prefix"]):
            log.debug("cache %s is stale (the covered lines changed); rebuilding", where)
            return None, True
        cached = _from_table(*fetched.table, end, int(meta["next_line"]))
        cached.digest, cached.prefix = digest, meta["prefix"]
        if step_times or touched or st.st_size > end:  # wanted, or needed to write the cache again
            if fetched.steps is None:  # read without them
                fetched = _fetch(where, True)
                if fetched is None or fetched.meta != meta:
                    raise ValueError("replaced as it was read")
            cached.steps, cached.summaries = fetched.steps, fetched.summaries
        return cached, touched
    except FileNotFoundError:
        return None, True
    except Exception as exc:  # a cache is disposable: whatever is wrong with it, rebuild it
        log.debug("ignoring cache %s (%s: %s); rebuilding", where, type(exc).__name__, exc)
        return None, True


def _floats_crc(values: array) -> str:
    """:func:`_crc` of float64s, every NaN as one NaN (DuckDB keeps a NaN in a list as null)."""
    import numpy as np

    x = np.frombuffer(values, dtype=np.float64)
    nan = np.isnan(x)
    return _crc([np.where(nan, np.nan, x).tobytes() if nan.any() else memoryview(values).cast("B")])


def _from_table(kind: Any, body: Any, a: Any, b: Any, n: Any, end: int, next_line: int) -> CachedRecords:
    """The cache's records from its table's columns, checked to fit together: a cache is data
    from disk."""
    cached = CachedRecords(end=end, next_line=next_line, digest=None, steps=None, summaries=None)
    config_refs, environment_refs = cached.refs
    sections = cached.sections
    for k, text, x, y, count in zip(kind.tolist(), body, a.tolist(), b.tolist(), n.tolist(), strict=True):
        if k == _ROW:
            row = orjson.loads(text)
            if type(row) is not dict or count >= 0 and type(row.get("metrics")) is not dict:
                raise ValueError("a record that is no object")
            cached.rows.append(row)
            config_refs.append(x)
            environment_refs.append(y)
            cached.step_counts.append(count)
        elif k == _SECTION:
            section = orjson.loads(text)
            if type(section) is not dict:
                raise ValueError("a section that is no object")
            sections.append(section)
        elif k == _PROBLEM:
            cached.problems.append(ProblemLine(x, y, bytes(text)))
        else:
            raise ValueError(f"a row of kind {k}")
    rows = len(cached.rows)
    if not all(-1 <= r < len(sections) for refs in cached.refs for r in refs) or not all(
            0 <= p.position <= rows and p.line > 0 for p in cached.problems):
        raise ValueError("parts of the cache do not fit together")
    cached._section_index = {_dumps(s): i for i, s in enumerate(sections)}  # -1s are found again
    return cached


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


def _dumps(value: Any) -> bytes:
    """``orjson.dumps(value)`` copied into an object of its own size: what orjson returns keeps the
    buffer it grew (100,000 bodies of 2.3 KB held 785 MB as orjson gave them, 228 MB copied, and
    were made quicker)."""
    return bytes(memoryview(orjson.dumps(value)))


def _table(cached: CachedRecords) -> dict[str, Any]:
    """The cache's table (:data:`_COLUMNS`) as arrays, for DuckDB to write."""
    import numpy as np

    kind: list[int] = []
    body: list[bytes] = []
    a: list[int] = []
    b: list[int] = []
    n: list[int] = []
    def put(k: int, text: bytes, x: int, y: int, count: int) -> None:
        kind.append(k)
        body.append(text)
        a.append(x)
        b.append(y)
        n.append(count)

    for section in cached.sections:
        put(_SECTION, _dumps(section), -1, -1, -1)
    for p in cached.problems:
        put(_PROBLEM, p.raw, p.position, p.line, -1)
    for row, config, environment, count in zip(cached.rows, *cached.refs, cached.step_counts, strict=True):
        put(_ROW, _dumps(row), config, environment, count)
    texts = np.empty(len(body), dtype=object)
    texts[:] = body
    return {"kind": np.array(kind, dtype=np.uint8), "body": texts, "a": np.array(a, dtype=np.int64),
            "b": np.array(b, dtype=np.int64), "n": np.array(n, dtype=np.int64)}


def write(path: Path, f: BinaryIO, st: os.stat_result, cached: CachedRecords) -> None:
    """Write the cache of ``path`` (open as ``f``, stat ``st`` taken before its lines were
    read). Never raises: a cache that cannot be written is skipped."""
    where = cache_path(path)
    _remove_abandoned(where)
    tmp = None
    try:
        if cached.steps is None or cached.summaries is None:
            raise ValueError("its step times were not read")
        cached.complete_summaries()
        table = _table(cached)
        digest = cached.digest or content_hash(f.fileno(), cached.end)
        if digest is None:
            raise ValueError("the file was cut as it was read")
        meta = {"code": code_key(), "end": str(cached.end), "next_line": str(cached.next_line),
                "stat": str(_stat_key(st)), "head": _head_hash(f, cached.end),
                "prefix": digest.hexdigest(), "rows": str(len(table["kind"])),
                "table": _table_crc(*(table[name] for name in _COLUMNS[:5])),
                "steps": _floats_crc(cached.step_column()), "summaries": _floats_crc(cached.summaries)}
        meta["metahash"] = meta_hash(meta, _META)
        import numpy as np

        from cnnbench.results.engine import literal

        columns = ", ".join(f"{name}::{kind} AS {name}" for name, kind in zip(_COLUMNS[:5], _TYPES[:5], strict=True))
        values = {"v": np.concatenate([np.frombuffer(cached.step_column(), dtype=np.float64),
                                       np.frombuffer(cached.summaries, dtype=np.float64)])}
        kv = ", ".join(f"{literal(k)}: {literal(v)}" for k, v in meta.items())
        fd, tmp = tempfile.mkstemp(prefix=f".{where.name}.", suffix=".tmp", dir=where.parent)  # 0600
        os.close(fd)
        with _duckdb() as con:  # the values after the rows, in their order (checked by their CRC-32 when read)
            # on one thread (the database's setting, so reset after): 2.8 GB at most beside the records
            # of a file of 100,000 instead of 3.3, in the same time
            con.execute("SET threads = 1")
            try:
                con.register("cache_table", table)
                con.register("cache_values", values)
                # into the file mkstemp made, 0600 (with a temporary file of its own, DuckDB would make a
                # new one by the umask, others' to read until a chmod; and one the clean-up does not know)
                con.execute(f"COPY (SELECT {columns}, NULL::DOUBLE AS v FROM cache_table UNION ALL "
                            f"SELECT {_VALUE}, NULL, NULL, NULL, NULL, v FROM cache_values) TO {literal(tmp)} "
                            f"(FORMAT parquet, USE_TMP_FILE false, ROW_GROUP_SIZE {ROW_GROUP}, "
                            f"DICTIONARY_SIZE_LIMIT 1, KV_METADATA {{{kv}}})")  # no two bodies alike
            finally:
                con.execute("RESET threads")
        os.replace(tmp, where)
        tmp = None
        log.debug("wrote cache %s (%d records, %d bytes covered)", where, len(cached.rows), cached.end)
    except Exception as exc:
        log.debug("cannot write cache %s (%s: %s)", where, type(exc).__name__, exc)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
