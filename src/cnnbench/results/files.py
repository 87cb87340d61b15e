"""Opening files safely: read and write regular files only, never write through a symlink
that leaves the folder a command owns, and refuse paths no file system can hold.

Every reader and writer of the results store, its cache, a report and an export goes
through here, so that a FIFO, a device (``/dev/zero``, ``/dev/urandom``), a socket or a
symlink loop where a file is expected is named in one line instead of hanging the command
or filling its memory:

* :func:`open_regular` / :func:`read_regular` — read a regular file (a symlink to one is
  fine). Anything else raises :class:`NotRegularFile`, before and after opening (the open
  itself never blocks: ``O_NONBLOCK``, then ``fstat``).
* :func:`open_for_append` — append to a file in a folder (the results store); a symlink
  whose target is outside that folder raises :class:`OutsideFolder`.
* :func:`write_replacing` — write a whole file through a unique temporary file in the
  same folder (``mkstemp``), then rename it over the name: a symlink at the name is
  replaced, never written through, and no file of the user's (``summary.md.tmp``) is
  touched.
* Both writers hand big buffers to the system :data:`WRITE_PIECE` bytes at a time
  (:class:`PieceWriter`).
* :func:`path_too_long` — why a path cannot name a file (a name over 255 bytes, a path of
  4096 bytes or more), checked before the system says ``ENAMETOOLONG``.

These errors are ``OSError``\\ s whose ``str`` is one line naming the path, so code that
already reports ``OSError``\\ s reports them too. No torch here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

NAME_MAX = 255
"""Longest file name (bytes) of Linux file systems."""
PATH_MAX = 4096
"""Longest path (bytes, with its terminating NUL) the kernel takes."""


def shown(path: str | os.PathLike[str], limit: int = 200) -> str:
    """A path as messages show it: shortened in the middle when longer than ``limit``
    characters (a path of 5,000 would fill the screen)."""
    text = os.fspath(path)
    if len(text) <= limit:
        return text
    return f"{text[:limit // 2]}...{text[-(limit // 4):]} ({len(text)} characters)"


def kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``a FIFO``)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


class FileProblem(OSError):
    """A path that is not what a command needs there; ``str``: one line naming it."""

    def __init__(self, code: int, path: str | os.PathLike[str], why: str) -> None:
        super().__init__(code, why, os.fspath(path))

    def __str__(self) -> str:
        return f"{shown(self.filename)}: {self.strerror}"


class NotRegularFile(FileProblem):
    """A FIFO, device, socket or folder where a regular file is expected."""

    def __init__(self, path: str | os.PathLike[str], mode: int) -> None:
        super().__init__(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, path,
                         f"is {kind(mode)}, not a regular file")


class OutsideFolder(FileProblem):
    """A symlink whose target lies outside the folder a command writes in."""

    def __init__(self, path: str | os.PathLike[str], target: str, folder: str | os.PathLike[str]) -> None:
        super().__init__(errno.EPERM, path, f"is a symlink to {shown(target)}, outside {shown(folder)}; cnnbench "
                         "writes only inside the folder it was given (replace the link by a copy)")


class TooBig(FileProblem):
    """A file larger than its reader takes."""

    def __init__(self, path: str | os.PathLike[str], limit: int) -> None:
        super().__init__(errno.EFBIG, path, f"larger than {limit >> 20} MiB; not a file cnnbench reads whole")


def path_too_long(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot name a file on Linux (a name over :data:`NAME_MAX` bytes, a path
    of :data:`PATH_MAX` bytes or more), or None."""
    raw = os.fsencode(path)
    if len(raw) >= PATH_MAX:
        return f"the path is {len(raw)} bytes long; at most {PATH_MAX - 1}"
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > NAME_MAX:
        return f"a name in the path is {longest} bytes long; at most {NAME_MAX}"
    return None


def _clear_nonblock(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)


def _require_regular(fd: int, path: str | os.PathLike[str]) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", os.fspath(path))
        raise NotRegularFile(path, st.st_mode)
    return st


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary mode; raises :class:`NotRegularFile` (or
    ``IsADirectoryError``) for anything but a regular file, or a symlink to one, without
    ever blocking on it."""
    st = os.stat(path)  # before opening: opening some devices does something
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", os.fspath(path))
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, st.st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    _require_regular(fd, path)  # it may have been swapped meanwhile
    _clear_nonblock(fd)
    return os.fdopen(fd, "rb")


def read_regular(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The whole of regular file ``path``; :class:`TooBig` when it holds more than ``max_bytes``."""
    with open_regular(path) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooBig(path, max_bytes)
    return data


def contained(path: Path, folder: Path | None = None) -> Path:
    """``path`` itself, or, when it is a symlink, its target, which must be in ``folder``
    (default: the link's own folder); raises :class:`OutsideFolder` otherwise."""
    folder = path.parent if folder is None else folder
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    home = Path(os.path.realpath(folder))
    if target.parent != home:
        raise OutsideFolder(path, str(target), folder)
    return target


def open_for_append(path: Path, folder: Path | None = None) -> int:
    """A descriptor of regular file ``path`` (made if missing) open for appending, and
    readable when permissions allow. ``path`` may be a symlink only to a file in ``folder``
    (default: its own folder). Raises :class:`OutsideFolder`, :class:`NotRegularFile` or
    another ``OSError``; never blocks on a FIFO."""
    real = contained(path, folder)
    flags = os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
        st = os.lstat(real)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, st.st_mode)
    try:
        fd = os.open(real, flags | os.O_RDWR, 0o644)
    except PermissionError:
        fd = os.open(real, flags | os.O_WRONLY, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link put there meanwhile
            raise OutsideFolder(path, os.path.realpath(real), folder or path.parent) from None
        if exc.errno == errno.ENXIO:  # a FIFO without a reader, put there meanwhile
            raise NotRegularFile(path, stat.S_IFIFO) from None
        raise
    _require_regular(fd, path)
    _clear_nonblock(fd)
    return fd


WRITE_PIECE = 1 << 20
"""Most bytes handed to one ``write`` call. On this project's virtual machine (Linux 6.18, ext4)
writing a new 160 MiB file took 0.29–0.42 s in calls of 2 MiB (the size of a huge page) or more,
and 0.04–0.06 s in calls of 2044 KiB or less (``benchmarks/read_floor.py --only writes``); since
Linux 6.16 ext4 caches a file's pages in folios as large as each write, and a 2 MiB one is most
likely what costs there. Calls of 1 MiB cost no more than of 256 KiB here."""


class PieceWriter(io.BufferedWriter):
    """A buffered binary file whose :meth:`write` of a big buffer goes to the system
    :data:`WRITE_PIECE` bytes at a time, never in one call (its buffer is no bigger)."""

    def __init__(self, raw: Any) -> None:
        super().__init__(raw, buffer_size=min(io.DEFAULT_BUFFER_SIZE, WRITE_PIECE))

    def write(self, data: Any) -> int:
        with memoryview(data) as given, given.cast("B") as view:  # released even on an error
            if len(view) <= WRITE_PIECE:
                return super().write(view)
            for at in range(0, len(view), WRITE_PIECE):
                with view[at:at + WRITE_PIECE] as piece:
                    super().write(piece)
            return len(view)


def _writer(fd: int) -> BinaryIO:
    return PieceWriter(io.FileIO(fd, "wb"))


def open_for_writing(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` (made if missing) opened to be written whole, in place: a regular file only
    (a FIFO, a device raises :class:`NotRegularFile`, without blocking). Truncated once
    found to be one."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO no one reads
            raise NotRegularFile(path, stat.S_IFIFO) from None
        raise
    _require_regular(fd, path)
    _clear_nonblock(fd)
    os.ftruncate(fd, 0)
    return _writer(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()
"""What a file made by ``open(path, "w")`` would get (``mkstemp`` makes its files 0600)."""


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A new file, open for writing, that replaces ``path`` when the block ends without an
    error (renamed over it: a symlink there is replaced, not written through); on an error
    it is removed and ``path`` is left as it was. Its temporary name is unique (``mkstemp``
    in the same folder, ``.<name>.<random>.tmp``): no other file is touched."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _MODE)
        with _writer(fd) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_replacing(path: Path, data: bytes) -> None:
    """Write ``data`` as the whole of ``path`` (see :func:`replacing`)."""
    with replacing(path) as f:
        f.write(data)


def real_folder_inside(folder: Path, name: str) -> Path:
    """``folder/name``, a folder made if missing, that must be a real folder inside
    ``folder``: a symlink out of it (whose files would land elsewhere) raises
    :class:`OutsideFolder`, a file or FIFO there :class:`FileProblem`."""
    sub = folder / name
    with contextlib.suppress(FileExistsError):
        sub.mkdir()
    st = os.lstat(sub)
    if stat.S_ISLNK(st.st_mode):
        target, home = os.path.realpath(sub), os.path.realpath(folder)
        if not (target.startswith(home + os.sep) and os.path.isdir(target)):
            raise OutsideFolder(sub, target, folder)
    elif not stat.S_ISDIR(st.st_mode):
        raise FileProblem(errno.ENOTDIR, sub, f"is {kind(st.st_mode)}, not a folder")
    return sub
