"""The float64 columns of the parsed-record cache: read now and checked, or, for the step
times of a lazy read, left in the file until a run's values are asked for.

A lazy read (``read_records(step_times="lazy")``: the report, compare, predict, study) hands
out each run's step times as a :class:`~cnnbench.results.step_summary.StepTimes` view that
carries its summary, and those readers use only the summary. So a lazy read of a cache that
needs no rewriting leaves the column of raw step times (8 bytes a step: 80 MB for 100,000 runs
of 100 steps) in the cache file, and reads it, checked against its SHA-256, when a view's
values are first asked for (``tolist``, indexing, ``numpy.asarray``).

The column is read through a descriptor of the cache file opened at the load (``pread``: no
file position shared with anyone), so a cache that was replaced (rewritten by another reader,
which renames a new file over it) or removed since still gives the values it held when the
records were read. A cache file overwritten in place meanwhile (a copy written over it) no
longer holds them: asking for the values then raises :class:`ColumnChanged`, naming the file,
and the summaries, read at the load, stay as they were. The descriptor is closed once the
column is read, or when the last view of it is freed. No torch here.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from array import array
from pathlib import Path
from typing import Any, BinaryIO

_CHUNK = 1 << 26


class ColumnChanged(OSError):
    """The cache file no longer holds the step times it held when the records were read."""


class DeferredColumn:
    """``count`` float64s at byte ``offset`` of an open cache file, read on :meth:`values`."""

    __slots__ = ("__weakref__", "_close", "_count", "_digest", "_failure", "_fd", "_lock", "_offset", "_path",
                 "_values")

    def __init__(self, fd: int, offset: int, count: int, digest: str, path: Path) -> None:
        """``fd``: the cache file, open (a copy of the descriptor is kept; raises
        :class:`OSError` when none can be made)."""
        self._fd = os.dup(fd)
        self._close = weakref.finalize(self, os.close, self._fd)
        self._offset, self._count, self._digest, self._path = offset, count, digest, path
        self._values: array | None = None
        self._failure: ColumnChanged | None = None
        self._lock = threading.Lock()  # one reader of the descriptor, which is closed after it

    def __len__(self) -> int:
        return self._count

    def values(self) -> array:
        """The column, read and checked the first time (:class:`ColumnChanged` if it cannot be)."""
        with self._lock:
            if self._values is None:
                if self._failure is None:
                    try:
                        self._values = self._checked()
                    except ColumnChanged as exc:
                        self._failure = exc
                    finally:
                        self._close()
                if self._failure is not None:
                    raise self._failure
            return self._values  # type: ignore[return-value]

    def _checked(self) -> array:
        data = self._read()
        if hashlib.sha256(data).hexdigest() != self._digest:
            raise ColumnChanged(f"{self._path}: changed since its records were read, so their step times "
                                f"are gone; read the store again")
        column = array("d")
        column.frombytes(data)
        return column

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
        except OSError as exc:
            raise ColumnChanged(f"{self._path}: cannot read the step times of its records ({exc})") from exc
        if got != size:
            raise ColumnChanged(f"{self._path}: cut short since its records were read, so their step times "
                                f"are gone; read the store again")
        return b"".join(parts)


def column_size(header: dict[str, Any], name: str) -> int:
    """The byte size of column ``name`` that a cache's header gives (a ``ValueError`` if it cannot be one)."""
    size = header[f"{name}_size"]
    if type(size) is not int or size % 8 or size < 0:
        raise ValueError(f"damaged (size of the {name})")
    return size


def defer_column(c: BinaryIO, header: dict[str, Any], where: Path) -> DeferredColumn | array:
    """The step-time column at ``c``'s position, left in the file until asked for (read now
    where no descriptor can be kept); ``c`` is moved past it."""
    size = column_size(header, "steps")
    if type(header["steps"]) is not str:
        raise ValueError("damaged (checksum of the steps)")
    try:
        deferred = DeferredColumn(c.fileno(), c.tell(), size // 8, header["steps"], where)
    except OSError:  # no descriptor to spare: read it now
        return read_column(c, header, "steps")
    c.seek(size, os.SEEK_CUR)
    return deferred


def read_column(c: BinaryIO, header: dict[str, Any], name: str) -> array:
    """Column ``name`` at ``c``'s position, read now and checked against the header's SHA-256."""
    size = column_size(header, name)
    column = array("d")
    column.fromfile(c, size // 8)  # straight into the array (EOFError when short)
    if hashlib.sha256(column).hexdigest() != header[name]:
        raise ValueError(f"damaged (checksum of the {name})")
    return column
