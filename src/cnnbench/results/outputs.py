"""Checks of where a command will write, made before it does any work.

Every command that writes calls one of these first, so that a results folder that is a
file, a folder it may not write in, a machine label too long for a file name or an export
over its own input fail in a moment with one line, instead of after the benchmark ran:

* :func:`check_results_dir` — the results store of ``cnnbench run``, ``sweep`` and ``import``,
  and the files the given machine labels name in it;
* :func:`check_output_file` — one file written whole (``cnnbench results export -o``);
* :func:`check_output_folder` — a folder of files (``cnnbench report -o``).

Each raises :class:`OutputError` (a ``ValueError``) whose message names the flag and the
cause: also a path no file system can hold (a name over 255 bytes), a FIFO, device or
socket where a file is written (which would hang or go nowhere), and a results file that is
a symlink out of the results folder (whose record would land in someone else's file).
Writability is tried, not guessed from permission bits (which say nothing for root
or for ``/proc``): a temporary entry is made and removed at once in the nearest folder
that exists. Nothing else is created. No torch here.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cnnbench.results import files
from cnnbench.results.store import SUFFIX, machine_file_name

_PROBE_PREFIX = ".cnnbench-write-check-"


class OutputError(ValueError):
    """A place a command cannot write to; the message is one line naming the flag."""


def check_results_dir(results_dir: str | os.PathLike[str], machine_labels: Iterable[str | None] = (), *,
                      flag: str = "--results-dir") -> Path:
    """The results folder, checked: a folder (or one that can be made) this process may write
    in, whose file for each machine label (``None``: the label derived later) can be made,
    and that holds no ``*.jsonl`` that is not a regular file (a FIFO, a device)."""
    folder = _folder(results_dir, flag)
    existing = _nearest_existing(folder)
    if folder.is_dir():
        _check_store_entries(folder, flag)
    for label in machine_labels:
        if label is None:
            continue
        name = machine_file_name(label)
        limit = _name_max(existing)
        if len(name.encode()) > limit:
            raise OutputError(f"--machine-label: too long for a file name ({len(name.encode())} bytes as "
                              f"{name[:24]}...; at most {limit})")
        target = folder / name
        if target.is_dir():
            raise OutputError(f"{flag} {folder}: {name} in it is a folder, not a results file")
        if os.path.lexists(target):
            _try_append(target, flag, folder)
    return folder


def _check_store_entries(folder: Path, flag: str) -> None:
    """Every ``*.jsonl`` in the store is a regular file (or a symlink to one): any other
    (a FIFO, a device) would hang or flood a reader, and may be the file a run appends to."""
    try:
        entries = list(os.scandir(folder))
    except OSError as exc:
        raise OutputError(f"{flag} {files.shown(folder)}: cannot list it: {exc.strerror or exc}") from None
    for entry in entries:
        if not entry.name.endswith(SUFFIX) or entry.name.startswith("."):
            continue
        try:
            mode = os.stat(entry.path).st_mode
        except OSError:
            continue  # a dangling link, a loop: readers report it, and no append follows it
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            raise OutputError(f"{flag} {files.shown(folder)}: {entry.name} in it is {files.kind(mode)}, not a "
                              "regular file; remove it")


def check_output_file(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = (), *,
                      flag: str = "-o") -> Path:
    """A file to write whole: not a folder, in a folder that exists and may be written in,
    and none of ``inputs`` (writing it would destroy what is being read)."""
    text = os.fspath(path)
    if not text.strip():
        raise OutputError(f"{flag}: empty; name a file")
    _check_length(text, flag)
    target = Path(text)
    if target.is_dir():
        raise OutputError(f"{flag} {target}: is a folder; name a file")
    if target.exists() and not target.is_file():
        raise OutputError(f"{flag} {target}: is {files.kind(target.stat().st_mode)}, not a regular file; name a "
                          "file")
    parent = target.parent
    if not parent.exists():
        under = _nearest_existing(parent)
        if not under.is_dir():
            raise OutputError(f"{flag} {target}: {under} is a file, not a folder")
        raise OutputError(f"{flag} {target}: folder {parent} does not exist")
    if not parent.is_dir():
        raise OutputError(f"{flag} {target}: {parent} is a file, not a folder")
    resolved = target.resolve()
    for item in inputs:
        source = Path(item)
        same = source.resolve() == resolved
        if not same and target.exists() and source.exists():
            same = os.path.samefile(source, target)
        if same:
            raise OutputError(f"{flag} {target}: is one of the inputs; writing it would overwrite what is read")
    if target.exists():
        _try_append(target, flag)
    else:
        _try_write_in(parent, flag, target)
    return target


def check_output_folder(path: str | os.PathLike[str], *, flag: str = "-o") -> Path:
    """A folder to write files in: a folder (or one that can be made) this process may write in."""
    return _folder(path, flag)


def _folder(path: str | os.PathLike[str], flag: str) -> Path:
    text = os.fspath(path)
    if not text.strip():
        raise OutputError(f"{flag}: empty; name a folder")
    _check_length(text, flag)
    folder = Path(text)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{flag} {folder}: is a file, not a folder")
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise OutputError(f"{flag} {folder}: {existing} is a file, not a folder")
    _try_write_in(existing, flag, folder)
    return folder


def _check_length(text: str, flag: str) -> None:
    why = files.path_too_long(text)
    if why is not None:
        raise OutputError(f"{flag} {files.shown(text)}: {why}")


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    current = Path(os.path.abspath(path))
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def _try_write_in(folder: Path, flag: str, target: Path) -> None:
    """Make and remove a temporary folder in ``folder``: the only sure test that we may write there."""
    try:
        probe = tempfile.mkdtemp(prefix=_PROBE_PREFIX, dir=folder)
    except OSError as exc:
        where = "" if folder == Path(os.path.abspath(target)) else f" (in {folder})"
        raise OutputError(f"{flag} {target}: cannot write there{where}: {exc.strerror or exc}") from None
    os.rmdir(probe)


def _try_append(path: Path, flag: str, folder: Path | None = None) -> None:
    """Open an existing file for appending, write nothing, close: may we write to it? Only a
    regular file (never waiting on a FIFO), and, with ``folder``, one in that folder (not
    through a symlink out of it)."""
    try:
        if folder is not None:
            os.close(files.open_for_append(path, folder))
            return
        if not path.is_file():
            raise files.NotRegularFile(path, path.stat().st_mode)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        os.close(fd)
    except files.FileProblem as exc:
        raise OutputError(f"{flag}: cannot write {exc}") from None
    except OSError as exc:
        raise OutputError(f"{flag}: cannot write {path}: {exc.strerror or exc}") from None


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255
