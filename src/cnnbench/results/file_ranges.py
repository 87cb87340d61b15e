"""Byte ranges of a results file read at their offsets (``pread``), without moving its position or
reading the rest: where a line ends, a range's bytes, a range hashed a piece at a time. What
:mod:`cnnbench.results.parallel_parse` plans its parts with, and each part's process reads.

Reading a file in ranges at different moments, instead of at once, sees a file changed in place
meanwhile (cut, or written over: a copy onto it, an edit) as bytes that no longer fit: a range
that ends before its end or not at a line's end, or (checked by the caller with :func:`checksum`)
other bytes than another process read there. Each raises :class:`FileChanged`. No torch here."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator


class FileChanged(OSError):
    """The file's bytes changed as its lines were read in ranges (cut, or written over in place,
    meanwhile): read it afresh, at once."""


_WINDOW = 1 << 16
"""Bytes read at a time to find a line's end."""
_HASH_CHUNK = 1 << 22
PIECE_BYTES = 16 << 20
"""About how many bytes of lines :func:`line_pieces` reads at a time: under glibc's largest
threshold for giving memory back (32 MiB), so that each piece reuses the last one's memory.
Reading a part whole (200 MB) took 0.12–0.49 s, a piece at a time 0.04–0.05 s (on a virtual
machine, where each page of memory new to the process costs a fault)."""


def read_range(fd: int, begin: int, end: int) -> bytes:
    """The file's bytes ``begin:end`` (:class:`FileChanged` if it ends before)."""
    data = os.pread(fd, end - begin, begin)
    if len(data) < end - begin:  # Linux reads at most 2 GiB at once: the rest after it
        pieces, got = [data], len(data)
        while got < end - begin:
            more = os.pread(fd, end - begin - got, begin + got)
            if not more:
                raise FileChanged(f"the file ended at byte {begin + got}, before byte {end}")
            pieces.append(more)
            got += len(more)
        data = b"".join(pieces)
    return data


def line_end_after(fd: int, pos: int, whole: int) -> int:
    """Where the line that holds byte ``pos`` ends (after its newline), or -1: none before ``whole``."""
    while pos < whole:
        chunk = read_range(fd, pos, min(whole, pos + _WINDOW))
        found = chunk.find(b"\n")
        if found >= 0:
            return pos + found + 1
        pos += len(chunk)
    return -1


def last_line_end(fd: int, begin: int, end: int) -> int:
    """Where the last whole line of the bytes ``begin:end`` ends (``begin``: none)."""
    while end > begin:
        start = max(begin, end - _WINDOW)
        found = read_range(fd, start, end).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return begin


def hash_range(fd: int, begin: int, end: int) -> int:
    """The :func:`checksum` of the file's bytes ``begin:end``, read a piece at a time into one buffer."""
    buffer = memoryview(bytearray(min(_HASH_CHUNK, end - begin)))
    crc = 0
    while begin < end:
        got = os.preadv(fd, [buffer[:min(len(buffer), end - begin)]], begin)
        if got <= 0:
            raise FileChanged(f"the file ended at byte {begin}, before byte {end}")
        crc = checksum(buffer[:got], crc)
        begin += got
    return crc


def checksum(data: bytes | memoryview, crc: int = 0) -> int:
    """A CRC-32 of bytes, continued from ``crc``: whether two processes read the same bytes."""
    return zlib.crc32(data, crc)


def line_pieces(fd: int, begin: int, end: int) -> Iterator[tuple[bytes, int]]:
    """The file's bytes ``begin:end`` (whole lines: ``end`` follows a newline) a piece of about
    :data:`PIECE_BYTES` at a time: ``(data, whole)``, where ``data[:whole]`` are whole lines (a
    line longer than a piece is read to its end). :class:`FileChanged` where no newline ends the
    range any more."""
    while begin < end:
        data = read_range(fd, begin, min(end, begin + PIECE_BYTES))
        whole = len(data) if begin + len(data) == end else data.rfind(b"\n") + 1
        if not whole:  # no line ends in the piece: read to the end of its line
            stop = line_end_after(fd, begin + len(data), end)
            if stop < 0:
                raise FileChanged(f"no line ends between bytes {begin} and {end} any more")
            data = read_range(fd, begin, stop)
            whole = len(data)
        if data[whole - 1] != 10:  # b"\n"
            raise FileChanged(f"byte {begin + whole - 1} no longer ends a line")
        yield data, whole
        begin += whole
