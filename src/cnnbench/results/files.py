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
  whose target is outside that folder raises :class:`OutsideFolder`, a file with other
  names (hard links) :class:`HardLinked`.
* :func:`write_replacing` — write a whole file through a unique temporary file in the
  same folder (``O_EXCL``), then rename it over the name: a symlink at the name is
  replaced, never written through, and no file of the user's (``summary.md.tmp``) is
  touched.
* :func:`open_folder` and :func:`open_in` — the one way a file inside a store or report
  folder is opened for writing: relative to a descriptor of the real folder, always with
  ``O_NOFOLLOW`` (a symlink planted at the name is refused, never followed), and with
  ``O_EXCL`` for a file made fresh. Every folder cnnbench uses inside the folder it was given
  (``.claims/``, ``.slurm/``, ``tables/``, ...) must be a real folder, never a link
  (:class:`LinkedFolder`). The writers above are built on them.
* Both writers hand big buffers to the system :data:`WRITE_PIECE` bytes at a time
  (:class:`PieceWriter`).
* :func:`path_too_long` — why a path cannot name a file (a name over 255 bytes, a path of
  4096 bytes or more), checked before the system says ``ENAMETOOLONG``.
* :func:`name_problem` — why a name from a file (a study's or a suite's ``name:``, a machine
  label's file) cannot be one file or folder name: a path separator, ``.``/``..``, a control
  character, more than 255 bytes.

These errors are ``OSError``\\ s whose ``str`` is one line naming the path, so code that
already reports ``OSError``\\ s reports them too. No torch here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import secrets
import stat
import unicodedata
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
    if stat.S_ISREG(mode):
        return "a regular file"
    return "not a regular file"


class FileProblem(OSError):
    """A path that is not what a command needs there; ``str``: one line naming it."""

    def __init__(self, code: int, path: str | os.PathLike[str], why: str) -> None:
        super().__init__(code, why, os.fspath(path))

    def __str__(self) -> str:
        return f"{shown(self.filename)}: {self.strerror}"

    def __reduce__(self) -> tuple[Any, ...]:  # as it was, across processes (a plot drawn in a worker)
        return _rebuilt, (type(self), self.errno, self.filename, self.strerror)


def _rebuilt(cls: type[FileProblem], code: int, path: str, why: str) -> FileProblem:
    problem = cls.__new__(cls)
    OSError.__init__(problem, code, why, path)
    return problem


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


class LinkedFolder(FileProblem):
    """A symlink where cnnbench keeps a folder of its own inside the folder it was given."""

    def __init__(self, path: str | os.PathLike[str], target: str, folder: str | os.PathLike[str]) -> None:
        inside = target.startswith(os.path.realpath(folder) + os.sep)
        super().__init__(errno.ELOOP, path, f"is a symlink to {shown(target)}{'' if inside else ', outside'}; "
                         f"cnnbench writes only in real folders inside {shown(folder)} (replace the link by a "
                         "folder)")


class LinkedFile(FileProblem):
    """A symlink at a name cnnbench writes, where a link has no business (a planted one)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(errno.ELOOP, path, "is a symlink, which cnnbench never writes through here (someone "
                         "else's? remove it)")


class HardLinked(FileProblem):
    """A file cnnbench would append to that has other names (hard links): writing to it would
    change the file those names show too (a copy kept with ``cp -l``, someone else's file)."""

    def __init__(self, path: str | os.PathLike[str], links: int) -> None:
        super().__init__(errno.EMLINK, path, f"has {links} names (hard links), so an append would change "
                         "the file the others name too; cnnbench appends only to a file of one name (make it a "
                         "copy of its own: cp FILE FILE.new && mv FILE.new FILE)")


class TooBig(FileProblem):
    """A file larger than its reader takes."""

    def __init__(self, path: str | os.PathLike[str], limit: int) -> None:
        size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
        super().__init__(errno.EFBIG, path, f"larger than {size}; not a file cnnbench reads whole")


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


NAME_RULE = f"a name holds no / or \\, no NUL or control character, is not . or .., and is at most {NAME_MAX} bytes"
"""What :func:`name_problem` asks of a name, for messages."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one file or folder name as it stands, or None: the one check of a
    name that becomes a file or folder name (a study's or a suite's ``name:``, the file of a
    machine label). A name read from a file someone else wrote must not choose where files go:
    no path separator (``/``, ``\\``), not ``.`` or ``..``, no NUL or other control character
    (nor an invisible one: a line or paragraph separator, a direction mark), at most
    :data:`NAME_MAX` bytes in UTF-8."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > NAME_MAX:
        return f"is {size} bytes long; at most {NAME_MAX}"
    if name in ("", ".", ".."):
        return "is empty" if not name else f"is {name}, a folder's name for itself or its parent"
    for separator in "/\\":
        if separator in name:
            return f"holds a path separator ({separator})"
    if not name.isprintable():  # fast for the usual name; then find the character at fault
        bad = next((c for c in name if not c.isprintable() and unicodedata.category(c) != "Zs"), None)
        if bad == "\0":
            return "holds a NUL character"
        if bad is not None:
            return f"holds a control character (U+{ord(bad):04X})"
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
    """The whole of regular file ``path``; :class:`TooBig` when it holds more than ``max_bytes``.
    Memory is taken as the file holds bytes, not by ``max_bytes`` (a read of ``n`` bytes reserves
    ``n`` at once: a limit of a gigabyte failed a small file's read under ``ulimit -v``)."""
    with open_regular(path) as f:
        pieces = [f.read(min(os.fstat(f.fileno()).st_size, max_bytes) + 1)]
        held = len(pieces[0])
        while pieces[-1] and held <= max_bytes:  # a file that grew, or one whose size says nothing (/proc)
            pieces.append(f.read(min(1 << 20, max_bytes + 1 - held)))
            held += len(pieces[-1])
    if held > max_bytes:
        raise TooBig(path, max_bytes)
    return pieces[0] if len(pieces) <= 2 and not pieces[-1] else b"".join(pieces)


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


_SAFE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""Flags of every open of a file cnnbench writes inside a folder: never through a symlink at the
name, never blocking on a FIFO, never taking a terminal, never inherited by a child."""


def _parts(path: Path, root: Path | None) -> tuple[Path, tuple[str, ...]]:
    """``root`` (default: ``path``'s folder) and the folders from it to ``path``'s folder."""
    if root is None:
        return path.parent, ()
    return root, path.parent.relative_to(root).parts


def open_folder(root: Path, *names: str, make: bool = False) -> int:
    """A descriptor (``O_DIRECTORY``) of ``root/names...``: ``root`` as given (a symlink there
    is the user's choice), each of ``names`` a real folder inside the one before it, never a
    link; with ``make``, each is made if missing (``root`` with its parents). Raises
    :class:`LinkedFolder` for a link, :class:`FileProblem` for a file or FIFO where a folder
    belongs, or another ``OSError``."""
    if make:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    path = root
    try:
        for name in names:
            if not name or "/" in name or name in (".", ".."):
                raise ValueError(f"not a folder name: {name!r}")
            path = path / name
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _SAFE, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    raise LinkedFolder(path, os.path.realpath(path), root) from None
                raise FileProblem(errno.ENOTDIR, path, f"is {kind(mode)}, not a folder") from None
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_folders(root: Path, *names: str) -> None:
    """Each of ``root/names...`` that exists is a real folder inside the one before it, never
    a link (nothing is made; see :func:`open_folder`): raises :class:`LinkedFolder` or
    :class:`FileProblem`. For folders others fill (submitit's), checked before they do."""
    path = root
    for name in names:
        path = path / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise LinkedFolder(path, os.path.realpath(path), root)
        if not stat.S_ISDIR(mode):
            raise FileProblem(errno.ENOTDIR, path, f"is {kind(mode)}, not a folder")


def open_in(dir_fd: int, name: str, flags: int, path: str | os.PathLike[str], *, fresh: bool = False,
            mode: int = 0o666) -> int:
    """``name`` in the folder open as ``dir_fd`` (:func:`open_folder`; ``path``: the file's
    path, for messages) opened with ``flags``, always with ``O_NOFOLLOW`` (a symlink at the
    name raises :class:`LinkedFile`, never followed), made fresh with ``O_CREAT | O_EXCL`` when
    ``fresh``, without blocking (``O_NONBLOCK``, cleared once open); a regular file only
    (:class:`NotRegularFile`). Every file cnnbench writes inside a store or report folder is
    opened here."""
    if "/" in name:
        raise ValueError(f"not a file name: {name!r}")
    try:
        fd = os.open(name, flags | _SAFE | (os.O_CREAT | os.O_EXCL if fresh else 0), mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkedFile(path) from None
        if exc.errno == errno.ENXIO:  # a FIFO no one reads
            raise NotRegularFile(path, stat.S_IFIFO) from None
        if exc.errno == errno.EISDIR:  # a folder, opened for writing
            raise NotRegularFile(path, stat.S_IFDIR) from None
        raise
    _require_regular(fd, path)
    _clear_nonblock(fd)
    return fd


def open_for_append(path: Path, folder: Path | None = None, *, root: Path | None = None) -> int:
    """A descriptor of regular file ``path`` (made if missing) open for appending, and
    readable when permissions allow. ``path`` may be a symlink only to a file in ``folder``
    (default: its own folder). ``root``: the folder given, of which ``path``'s folder is a
    real sub-folder (default: ``path``'s folder itself; see :func:`open_folder`). Raises
    :class:`OutsideFolder`, :class:`NotRegularFile`, :class:`LinkedFolder`, :class:`HardLinked`
    (a file of several names) or another ``OSError``; never blocks on a FIFO."""
    real = contained(path, folder)
    if real is not path and Path(os.path.realpath(path.parent)) != real.parent:
        raise OutsideFolder(path, str(real), path.parent)
    home, names = _parts(path, root)
    dir_fd = open_folder(home, *names)
    try:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            st = os.stat(real.name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):  # a link put there meanwhile
                raise OutsideFolder(path, os.path.realpath(real), folder or path.parent)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularFile(path, st.st_mode)
        flags = os.O_APPEND | os.O_CREAT
        try:
            fd = open_in(dir_fd, real.name, flags | os.O_RDWR, path, mode=0o644)
        except PermissionError:
            fd = open_in(dir_fd, real.name, flags | os.O_WRONLY, path, mode=0o644)
        except LinkedFile:  # a link put there meanwhile
            raise OutsideFolder(path, os.path.realpath(real), folder or path.parent) from None
    finally:
        os.close(dir_fd)
    links = os.fstat(fd).st_nlink
    if links > 1:
        os.close(fd)
        raise HardLinked(path, links)
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


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()
"""What a file made by ``open(path, "w")`` would get (``mkstemp`` makes its files 0600)."""


def _temporary(dir_fd: int, path: Path, mode: int = _MODE) -> tuple[str, int]:
    """A new file ``.<name>.<random>.tmp`` beside ``path`` (``O_EXCL``: never one already there,
    nor a link), open for writing; its name and descriptor."""
    for _ in range(100):
        name = f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return name, open_in(dir_fd, name, os.O_WRONLY, path.parent / name, fresh=True, mode=mode)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", os.fspath(path.parent))


@contextlib.contextmanager
def replacing(path: Path, root: Path | None = None, mode: int = _MODE) -> Iterator[BinaryIO]:
    """A new file, open for writing, that replaces ``path`` when the block ends without an
    error (renamed over it: a symlink there is replaced, not written through); on an error
    it is removed and ``path`` is left as it was (a full disk raises
    :class:`~cnnbench.results.space.NoSpace`, one line). Its temporary name is unique
    (``.<name>.<random>.tmp``, made with ``O_EXCL`` in the same folder): no other file is
    touched. ``root``: the folder given, of which ``path``'s folder is a real sub-folder (see
    :func:`open_folder`). ``mode``: its permissions (default: what ``open(path, "w")`` gives)."""
    home, names = _parts(path, root)
    dir_fd = open_folder(home, *names)
    try:
        tmp, fd = _temporary(dir_fd, path, mode)
        try:
            try:
                os.fchmod(fd, mode)
            except BaseException:
                os.close(fd)  # not yet the writer's to close
                raise
            with _writer(fd) as f:
                yield f
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            if isinstance(exc, OSError) and not isinstance(exc, FileProblem):
                from cnnbench.results import space  # it builds on this module

                if space.is_no_space(exc):  # one line: the folder and its free space
                    raise space.no_space_in(path.parent, exc, f"{path.name} left as it was") from None
            raise
    finally:
        os.close(dir_fd)


def write_replacing(path: Path, data: bytes, root: Path | None = None) -> None:
    """Write ``data`` as the whole of ``path`` (see :func:`replacing`)."""
    with replacing(path, root) as f:
        f.write(data)


def real_folder_inside(folder: Path, *names: str) -> Path:
    """``folder/names...``, folders made if missing, that must be real folders inside
    ``folder``, never symlinks (whose files would land elsewhere): raises
    :class:`LinkedFolder`, or :class:`FileProblem` for a file or FIFO there."""
    os.close(open_folder(folder, *names, make=True))
    return folder.joinpath(*names)
