"""The float64 columns of the parsed-record cache: read now and checked, or, for the step
times of a lazy read, left in the file until a run's values are asked for.

A lazy read (``read_records(step_times="lazy")``: the report, compare, predict, study) hands
out each run's step times as a :class:`~cnnbench.results.step_summary.StepTimes` view that
carries its summary, and those readers use only the summary. So a lazy read of a cache that
needs no rewriting leaves the column of raw step times (8 bytes a step: 80 MB for 100,000 runs
of 100 steps) in the cache file, and reads it, checked against its CRC-32, when a view's
values are first asked for (``tolist``, indexing, ``numpy.asarray``).

The column is read through a descriptor of the cache file opened at the load (``pread``: no
file position shared with anyone), so a cache that was replaced (rewritten by another reader,
which renames a new file over it) or removed since still gives the values it held when the
records were read. A cache file overwritten in place meanwhile (a copy written over it) no
longer holds them: asking for the values then raises :class:`ColumnChanged`, naming the file,
and the summaries, read at the load, stay as they were. A column that was damaged in the file
already (unchanged since it was opened, but not matching its checksum) raises it too, and the
cache is removed, so that the next read makes it again (one that cannot be removed is not
deferred again in this process: the load then finds it damaged and reads the store without
it). The descriptor is closed once the column is read (or found gone), or when the last view
of it is freed; at most :data:`MAX_OPEN` are open at once, and a lazy read beyond them reads
its column at once. No torch here.
"""

from __future__ import annotations

import os
import threading
import weakref
from array import array
from pathlib import Path
from typing import Any, BinaryIO

from cnnbench.results.crc import hexdigest

_CHUNK = 1 << 26
MAX_OPEN = 64
"""Most descriptors the deferred columns of a process keep open at once; a lazy read beyond
them reads its column at once (a store of many files, several reads kept in a notebook), so
that the process keeps descriptors to spare under its limit (256 by default on macOS)."""
_OPEN: set[int] = set()
"""The descriptors open for deferred columns now."""
_DAMAGED: set[tuple[int, ...]] = set()
"""The :func:`identity` of cache files found damaged that could not be removed: their columns
are read at once from then on (so the cache is found damaged at the load, and not used)."""
_LOCK = threading.Lock()


class ColumnChanged(OSError):
    """The cache file no longer holds the step times it held when the records were read."""


def _close(fd: int) -> None:
    _OPEN.discard(fd)
    os.close(fd)


class DeferredColumn:
    """``count`` float64s at byte ``offset`` of an open cache file, read on :meth:`values`."""

    __slots__ = ("__weakref__", "_closer", "_count", "_digest", "_failure", "_fd", "_identity", "_lock", "_offset",
                 "_path", "_values")

    def __init__(self, fd: int, offset: int, count: int, digest: str, path: Path, opened: os.stat_result) -> None:
        """``fd``: the cache file, open, with ``opened`` its stat taken when it was opened (a
        copy of the descriptor is kept; raises :class:`OSError` when none can be made, or
        :data:`MAX_OPEN` are open already)."""
        self._identity = identity(opened)
        with _LOCK:
            if len(_OPEN) >= MAX_OPEN:
                raise OSError(f"{MAX_OPEN} cache files are held open for their step times already")
            self._fd = os.dup(fd)
            _OPEN.add(self._fd)
            self._closer = weakref.finalize(self, _close, self._fd)
        self._offset, self._count, self._digest, self._path = offset, count, digest, path
        self._values: array | None = None
        self._failure: str | None = None
        self._lock = threading.Lock()  # one reader of the descriptor, which is closed after it

    def __len__(self) -> int:
        return self._count

    def values(self) -> array:
        """The column, read and checked the first time (:class:`ColumnChanged` if it cannot be)."""
        with self._lock:
            if self._values is None and self._failure is None:
                if not self._closer.alive:  # closed at the interpreter's exit
                    raise ColumnChanged(f"{self._path}: closed before its step times were read")
                try:
                    self._values = self._checked()
                except ColumnChanged as exc:  # for good (an interrupt skips the close: tried again)
                    self._failure = str(exc)
                self._closer()
            if self._values is None:
                raise ColumnChanged(self._failure)  # a new one each time: no traceback that grows
            return self._values

    def _checked(self) -> array:
        data = self._read()
        if hexdigest(data) == self._digest:
            column = array("d")
            column.frombytes(data)
            return column
        try:
            now = identity(os.fstat(self._fd))
        except OSError as exc:  # ESTALE
            raise ColumnChanged(f"{self._path}: cannot check the step times of its records ({exc})") from exc
        if now != self._identity:
            raise ColumnChanged(f"{self._path}: changed since its records were read, so their step times "
                                f"are gone; read the store again")
        if self._remove():  # as it was when opened: damaged there already
            done = "removed, so that the next read makes it again"
        else:
            _DAMAGED.add(self._identity)
            done = "not removable, so this process reads the store without it from now on"
        raise ColumnChanged(f"{self._path}: damaged (its step times do not match their checksum): {done}; "
                            f"read the store again")

    def _remove(self) -> bool:
        """Remove the damaged cache (a link to it: the link), where its path still names this
        file (a cache is disposable); whether it was removed."""
        try:
            st = os.stat(self._path)
            if (st.st_ino, st.st_dev) == self._identity[:2]:
                os.unlink(self._path)
                return True
        except OSError:
            pass
        return False

    def _read(self) -> bytes:
        size = self._count * 8
        parts = []
        got = 0
        try:
            while got < size:
                part = os.pread(self._fd, min(_CHUNK, size - got), self._offset + got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
        except OSError as exc:  # ESTALE: a network file system's cache rewritten by another machine
            raise ColumnChanged(f"{self._path}: cannot read the step times of its records ({exc})") from exc
        if got != size:
            raise ColumnChanged(f"{self._path}: cut short since its records were read, so their step times "
                                f"are gone; read the store again")
        return b"".join(parts)


def identity(st: os.stat_result) -> tuple[int, ...]:
    """What tells a file and its content apart: inode, device, size, modification and change times."""
    return st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def column_size(header: dict[str, Any], name: str) -> int:
    """The byte size of column ``name`` that a cache's header gives (a ``ValueError`` if it cannot be one)."""
    size = header[f"{name}_size"]
    if type(size) is not int or size % 8 or size < 0:
        raise ValueError(f"damaged (size of the {name})")
    return size


def defer_column(c: BinaryIO, header: dict[str, Any], where: Path, opened: os.stat_result) -> DeferredColumn | array:
    """The step-time column at ``c``'s position (the cache ``where``, ``opened`` its stat when
    opened), left in the file until asked for; read now where no descriptor can be kept, or
    where this file was found damaged before. ``c`` is moved past it."""
    size = column_size(header, "steps")
    if type(header["steps"]) is not str:
        raise ValueError("damaged (checksum of the steps)")
    if identity(opened) in _DAMAGED:
        return read_column(c, header, "steps")
    try:
        deferred = DeferredColumn(c.fileno(), c.tell(), size // 8, header["steps"], where, opened)
    except OSError:  # no descriptor to spare: read it now
        return read_column(c, header, "steps")
    c.seek(size, os.SEEK_CUR)
    return deferred


def read_column(c: BinaryIO, header: dict[str, Any], name: str) -> array:
    """Column ``name`` at ``c``'s position, read now and checked against the header's CRC-32."""
    size = column_size(header, name)
    column = array("d")
    column.fromfile(c, size // 8)  # straight into the array (EOFError when short)
    if hexdigest(column) != header[name]:
        raise ValueError(f"damaged (checksum of the {name})")
    return column
