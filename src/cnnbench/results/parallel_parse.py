"""A big file's new lines parsed in several processes at once: the cold read of a big store.

A first read of a results file (or the first after an upgrade of cnnbench, whose cache is
then another's) parses every line: orjson, the migrations, the record contract, the cache's
columns. That is about 50 µs a line in Python, 5 s for 100,000 engine records on one core.
Where there are many new lines (at least two parts of :data:`PART_BYTES`) and more than one
of the CPUs the process may use is free (:func:`free_cpus`), they are split at line ends into
up to one part per free CPU (:data:`MAX_PARTS` at most). This process parses the first part;
forked copies of it parse the others each into the cache's form (:class:`~cnnbench.results.cache.CachedRecords`),
sum up its step times (numpy, imported here once before they are forked) and write it into a
memory file (``memfd``: no pipe to wait on) in the cache's own formats (JSON and raw float64s,
checked as a cache file is) and send its sizes through a pipe. While they finish, this process
sums up its own part's step times and reads the other parts' bytes for their CRC-32 (which also
extends the cache's, :func:`~cnnbench.results.crc.combine`); it maps each child's memory
file to read its part (no copy of its JSON). The parts are joined in file order, so the records,
problems and cache are those of one process's parse.

Each process reads its own part's bytes (``pread``, up to the line end planned: nothing the
file gained since), a piece of lines at a time (:func:`~cnnbench.results.file_ranges.line_pieces`),
so no process waits for the whole file to be read first, none holds more than a piece of it, and
this one never holds the other parts' bytes (it reads them again, from the page cache, to hash
them, into one buffer). Many lines in one part (no CPU free) are read a piece at a time too.
A file changed in place as its parts are read (cut, or written over) is found so: a part that
no longer ends where planned, or whose bytes, as its child parsed them, have another checksum
than those this process hashed (each child sends the CRC-32 of what it parsed); that raises
:class:`~cnnbench.results.file_ranges.FileChanged`, and the reader reads the file afresh, at
once. So the cache never holds a hash of other bytes than its records were parsed from.

Forked, not spawned: a child starts in milliseconds, with the parser this process has
imported. So only on Linux (with ``os.memfd_create``, which a Python built against a glibc
before 2.27 lacks), only in a process
without other Python threads (a fork copies one thread; another's locks could stay held in
the child; threads of native libraries, which hold none of the locks a child here takes, are
not counted), and only where this process reaps its own children (SIGCHLD not ignored or
handled). A child is killed with its parent (:func:`~cnnbench.lifetime.die_with_parent`), and
killed and reaped if this process stops waiting for it (^C is held back for the moments a
child is started or reaped and noted). A part whose child could not start, failed, died or
sent something that does not fit is parsed here instead, as it would have been without this
module. A child exits once its part is written; its memory file holds the part until this
process takes it in. No torch here.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import signal
import struct
import sys
import threading
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, NoReturn

import orjson

from cnnbench.lifetime import die_with_parent
from cnnbench.results import cache, file_ranges
from cnnbench.results import step_summary as summary

PART_BYTES = 16 << 20
"""Smallest part worth a process of its own (about 4,000 engine records)."""
MAX_PARTS = 8
FIRST_SHARE = 1.0
"""The first part's size against each other's: this process parses it, and then reads the others'
bytes for their CRC-32, sums up its step times and takes the others' parts in, while their
children dump their rows and write them out. Even parts were quickest once the cache's hash
became a CRC-32 (0.9, 1.0, 1.1 measured: ``benchmarks/README.md``)."""

PartParser = Callable[[cache.CachedRecords, bytes, int, int], int]
"""``parse(cached, data, end, begin)``: add the whole lines of ``data[begin:end]`` to ``cached``
(and to its digest, when it has one); returns how many lines there were."""

_SIZES = struct.Struct("<QQQQQQ")
"""What a child sends through its pipe: the sizes of its rows' JSON, step times and summaries in
its memory file, where the array of rows lies in that JSON (offset, length), its checksum."""
log = logging.getLogger("cnnbench.results.store")


def free_cpus() -> int:
    """How many of the CPUs this process may run on (its affinity: a Slurm job's, a
    ``taskset``'s) are free: at most the machine's CPUs less those the 1-minute load average
    shows busy beside this process, as ``make -l`` holds back on a loaded machine, where more
    processes would only share the same CPUs at some cost. At least 1. The load average lags
    (it decays over a minute): where fewer threads are running now (Linux: the most of a few
    readings), only those count, so that a machine busy a moment ago (a sweep just ended) reads
    as free."""
    from cnnbench.machine.host import load_average, running_now
    from cnnbench.machine.host import usable_cpus as cpus

    usable = len(cpus())
    load = load_average()
    busy = max(0.0, load[0] - 1.0) if load else 0.0
    running = running_now(readings=5)  # 8 ms: a cold read in parts takes a second or more
    if running is not None:
        busy = min(busy, max(0, running - 1))
    return max(1, min(usable, round((os.cpu_count() or usable) - busy)))


@dataclass
class NewLines:
    """What a file holds from byte ``begin`` on, as found now: whole lines up to ``whole``, then
    ``partial`` (a last line being written, or cut). Their bytes are in ``data`` where they were
    read at once; else (``data`` None) they are read a piece at a time, by each part's process
    its own: ``bounds`` are where the parts begin, then ``whole``."""

    fd: int
    begin: int
    whole: int
    partial: bytes
    data: bytes | None = None
    bounds: list[int] = field(default_factory=list)


def new_lines(f: BinaryIO, begin: int, *, parts: bool = True) -> NewLines:
    """The lines of ``f`` from byte ``begin`` to its end: where many (and ``parts``), planned to be
    read a piece at a time, in parts at once where they pay; else (or with ``parts=False``) read
    at once."""
    fd = f.fileno()
    size = os.fstat(fd).st_size
    if parts and size - begin >= 2 * PART_BYTES:
        try:
            whole = file_ranges.last_line_end(fd, begin, size)
            bounds = plan(fd, begin, whole)
            return NewLines(fd, begin, whole, os.pread(fd, size - whole, whole), None, bounds)
        except file_ranges.FileChanged:  # cut or written over meanwhile: read as it is now
            pass
    f.seek(begin)
    data = f.read()
    whole = data.rfind(b"\n") + 1  # what follows the last newline is partial (being written, or cut)
    return NewLines(fd, begin, begin + whole, data[whole:], data)


def plan(fd: int, begin: int, whole: int) -> list[int]:
    """Where the parts of the file's bytes ``begin:whole`` (whole lines) begin, then ``whole``:
    ``[begin, whole]`` for one part."""
    if (whole - begin < 2 * PART_BYTES or not sys.platform.startswith("linux") or threading.active_count() > 1
            or not hasattr(os, "memfd_create")  # a Python built against a glibc before 2.27
            or signal.getsignal(signal.SIGCHLD) not in (signal.SIG_DFL, None)):  # children reaped by another
        return [begin, whole]
    parts = min(free_cpus(), MAX_PARTS, (whole - begin) // PART_BYTES)
    if parts < 2:
        return [begin, whole]
    bounds = [begin]
    for k in range(1, parts):
        share = (FIRST_SHARE + k - 1) / (FIRST_SHARE + parts - 1)
        cut = file_ranges.line_end_after(fd, max(begin + int((whole - begin) * share), bounds[-1]), whole)
        if cut < 0 or cut >= whole:
            break
        bounds.append(cut)
    return [*bounds, whole]


def add_lines(cached: cache.CachedRecords, lines: NewLines, parse: PartParser) -> int:
    """Add the whole lines of ``lines`` to ``cached``, in parts at once where they were planned
    so; returns how many lines there were (:class:`~cnnbench.results.file_ranges.FileChanged`
    if the file was cut or written over meanwhile)."""
    if lines.data is not None:
        return parse(cached, lines.data, lines.whole - lines.begin, 0)
    bounds, fd = lines.bounds, lines.fd
    if len(bounds) < 3 or cached.steps is None or cached.summaries is None:
        return _parse_range(cached, parse, fd, lines.begin, lines.whole, checked=False)[0]
    log.debug("parsing %d bytes of lines in %d parts at once", lines.whole - lines.begin, len(bounds) - 1)
    children: list[_Child | None] = []  # per part after the first; None: not started
    digest = cached.digest
    summary.load_numpy()  # once, before the children are forked: each sums up its own part
    try:
        for begin, end in zip(bounds[1:-1], bounds[2:], strict=True):
            _start(children, parse, fd, begin, end)
        first = len(cached.rows)
        count = _parse_range(cached, parse, fd, bounds[0], bounds[1], checked=False)[0]  # hashed as parsed
        # while the children finish: this part's rows as the cache's JSON and its summaries, and
        # each other part's CRC-32, read again here, to compare with what its child (or this
        # process, where the child failed) parsed, and then to add to the cache's digest
        with contextlib.suppress(TypeError):  # a row orjson cannot write: the cache is skipped, as before
            cached.row_texts.append((first, len(cached.rows) - first, orjson.dumps(cached.rows[first:])))
        cached.complete_summaries()
        cached.digest = None
        sums = [file_ranges.hash_range(fd, begin, end) for begin, end in zip(bounds[1:-1], bounds[2:], strict=True)]
        for child, begin, end, expected in zip(children, bounds[1:-1], bounds[2:], sums, strict=True):
            part, crc = _receive(child) if child else (None, 0)
            if part is not None and part.end != end - begin:  # not the lines it was given
                part = None
            lines_here = 0
            if part is None:
                log.debug("lines %d..%d parsed by the reader: their process failed", begin, end)
                lines_here, crc = _parse_range(cached, parse, fd, begin, end)
            if crc != expected:
                raise file_ranges.FileChanged(f"bytes {begin}..{end} changed as they were read")
            count += _join(cached, part) if part else lines_here
        if digest is not None:  # the CRC-32 of the lines covered, from each part's own
            for crc, begin, end in zip(sums, bounds[1:-1], bounds[2:], strict=True):
                digest.extend(crc, end - begin)
        return count
    finally:
        cached.digest = digest
        _stop(children)


def _parse_range(cached: cache.CachedRecords, parse: PartParser, fd: int, begin: int, end: int, *,
                 checked: bool = True) -> tuple[int, int]:
    """Parse the file's lines ``begin:end`` into ``cached`` a piece at a time (so the same memory
    holds each piece in turn: no new pages per byte read); returns how many lines there were and
    the checksum of their bytes (0 unless ``checked``: a part hashed as it is parsed needs none)."""
    count = crc = 0
    for data, whole in file_ranges.line_pieces(fd, begin, end):
        count += parse(cached, data, whole, 0)
        if checked:
            crc = file_ranges.checksum(memoryview(data)[:whole], crc)
    return count, crc


@dataclass
class _Child:
    """A child parsing a part: its pid, and the end of its pipe this process reads."""

    pid: int
    fd: int
    """The pipe it ends by writing the sizes of its part (-1 once closed)."""
    part_fd: int
    """The memory file (``memfd``) it writes its part into (-1 once closed)."""
    reaped: bool = False


_HELD = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


@contextlib.contextmanager
def _signals_held() -> Iterator[set[int | signal.Signals]]:
    """^C (and SIGTERM, SIGHUP) held back until the block ends, so that it never falls between
    starting or reaping a child and noting it (a child left running, a pid killed after another
    process got it); yields the mask to restore."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a ^C raised here changed nothing
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)  # one raised here: blocked, then restored below
        yield previous
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _start(children: list[_Child | None], parse: PartParser, fd: int, begin: int, end: int) -> None:
    """Add a child parsing the file's bytes ``begin:end`` to ``children`` (None where none could start)."""
    with _signals_held() as mask:
        opened: list[int] = []
        try:
            opened.extend(os.pipe())
            opened.append(os.memfd_create("cnnbench-part", os.MFD_CLOEXEC))
        except OSError:  # out of file descriptors, no memory files: parsed here instead
            for opened_fd in opened:
                os.close(opened_fd)
            children.append(None)
            return
        r, w, part_fd = opened
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:  # no memory, no process left: parsed here instead
            for opened_fd in opened:
                os.close(opened_fd)
            children.append(None)
            return
        if pid == 0:
            others = [other for c in children if c for other in (c.fd, c.part_fd)]
            _child(parse, fd, begin, end, w, part_fd, [r, *others], parent, mask)
        os.close(w)
        children.append(_Child(pid, r, part_fd))


def _child(parse: PartParser, fd: int, begin: int, end: int, w: int, part_fd: int, close: list[int],
           parent: int, mask: set[int | signal.Signals]) -> NoReturn:
    """Read the part and parse it into a memory file, then say how big its pieces are through the
    pipe (the parent reads the pipe to its end, so a child that died sends nothing)."""
    code = 1
    try:
        for sig in _HELD:  # not the parent's handlers: just end (or ignore it, as the parent did)
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for other in close:
            os.close(other)
        die_with_parent(parent)
        part = cache.CachedRecords(digest=None)
        _, crc = _parse_range(part, parse, fd, begin, end)
        part.complete_summaries()
        body, (rows_at, rows_size) = cache.pieces(part)
        assert part.steps is not None and part.summaries is not None and not part.means
        with open(part_fd, "wb") as out:
            for piece in body:
                out.write(piece)
            out.write(memoryview(part.step_column()).cast("B"))
            out.write(memoryview(part.summaries).cast("B"))
        with open(w, "wb") as out:
            out.write(_SIZES.pack(sum(map(len, body)), len(part.steps) * 8, len(part.summaries) * 8, rows_at, rows_size,
                                  crc))
        code = 0
    finally:
        os._exit(code)  # nothing of the parent's (buffers, exit handlers) runs here


def _receive(child: _Child) -> tuple[cache.CachedRecords | None, int]:
    """What a child sent, checked, once it has ended well (None when it did not), and the checksum
    of the bytes it parsed. Reaps it."""
    with open(child.fd, "rb", closefd=False) as f:
        sizes = f.read()
    with _signals_held():
        try:
            _, status = os.waitpid(child.pid, 0)
            ended_well = os.waitstatus_to_exitcode(status) == 0
        except ChildProcessError:  # reaped by another (SIGCHLD ignored, a handler): how it ended is not known
            ended_well = False
        child.reaped = True
        os.close(child.fd)
        child.fd = -1
    try:
        if not ended_well or len(sizes) != _SIZES.size:
            return None, 0
        body_size, steps_size, summaries_size, rows_at, rows_size, crc = _SIZES.unpack(sizes)
        return _part(child.part_fd, body_size, steps_size, summaries_size, (rows_at, rows_size)), crc
    finally:
        with _signals_held():
            os.close(child.part_fd)  # its memory is freed
            child.part_fd = -1


def _part(part_fd: int, body_size: int, steps_size: int, summaries_size: int,
          rows: tuple[int, int]) -> cache.CachedRecords | None:
    """The part a child wrote into its memory file, when it fits together (as a cache file must):
    its JSON read where it lies (the file mapped), its columns and its rows' JSON text (``rows``:
    where that lies in its JSON) copied out."""
    size = body_size + steps_size + summaries_size
    rows_at, rows_size = rows
    if (not body_size or os.fstat(part_fd).st_size != size or steps_size % 8 or summaries_size % 8
            or rows_size < 2 or rows_at + rows_size > body_size):
        return None
    try:
        steps, summaries = array("d"), array("d")
        with mmap.mmap(part_fd, size, prot=mmap.PROT_READ) as mapped, memoryview(mapped) as view:
            body, its_steps, its_summaries = (view[:body_size], view[body_size:body_size + steps_size],
                                              view[body_size + steps_size:])
            with body, its_steps, its_summaries:  # each released even when an error's traceback holds it
                part = cache.CachedRecords._from_payload(body)
                steps.frombytes(its_steps)
                summaries.frombytes(its_summaries)
                text = bytes(body[rows_at:rows_at + rows_size])
        if text[:1] != b"[" or text[-1:] != b"]":
            return None
        part.steps, part.summaries, part.row_texts = steps, summaries, [(0, len(part.rows), text)]
        cache.check_columns(part)
    except Exception:  # does not fit: parsed here instead
        return None
    return part


def _join(cached: cache.CachedRecords, part: cache.CachedRecords) -> int:
    """Add ``part``, the lines right after those of ``cached``, parsed apart with their summaries
    (the caller hashes their bytes); returns how many lines it had."""
    assert cached.steps is not None and cached.summaries is not None
    assert part.steps is not None and part.summaries is not None and not part.means
    cached.complete_summaries()  # those of lines parsed here before (a part whose child failed)
    rows, first_line = len(cached.rows), cached.next_line
    shared = [cached._share(section) for section in part.sections]
    changed = False
    for name, refs, theirs in zip(("config", "environment"), cached.refs, part.refs, strict=True):
        for row, ref in zip(part.rows, theirs, strict=True):
            index = shared[ref] if ref >= 0 else -1
            if ref >= 0 and index < 0:  # not shared here: kept in its row, its own object
                row[name] = dict(part.sections[ref])
                changed = True
            refs.append(index)
    if not changed:  # its rows' JSON text is theirs still: written as it is
        cached.row_texts.extend((first + rows, count, text) for first, count, text in part.row_texts)
    cached.rows.extend(part.rows)
    cached.step_counts.extend(part.step_counts)
    cached.step_column().extend(part.step_column())
    cached.summaries.extend(part.summaries)
    cached.problems.extend(cache.ProblemLine(p.position + rows, p.line + first_line - 1, p.raw) for p in part.problems)
    cached.end += part.end
    cached.next_line += part.next_line - 1
    return part.next_line - 1


def _stop(children: list[_Child | None]) -> None:
    """Kill and reap the children not received, close what is open (this process stopped
    waiting: an error, ^C)."""
    with _signals_held():
        for child in children:
            if child is not None and not child.reaped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(child.pid, 0)
                child.reaped = True
            if child is not None and child.fd >= 0:
                os.close(child.fd)
                child.fd = -1
            if child is not None and child.part_fd >= 0:
                os.close(child.part_fd)
                child.part_fd = -1
