"""Checks of where a command will write, made before it does any work.

Every command that writes calls one of these first, so that a results folder that is a
file, a folder it may not write in, a machine label too long for a file name or an export
over its own input fail in a moment with one line, instead of after the benchmark ran:

* :func:`check_results_dir` — the results store of ``cnnbench run``, ``sweep`` and ``import``,
  and the files the given machine labels name in it;
* :func:`check_run_store` — the same for one run (``run``, ``data``, ``comm``), the label it will
  derive included;
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

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cnnbench.results import files
from cnnbench.results.store import SUFFIX, MachineLabelError, machine_file_name

_PROBE_PREFIX = ".cnnbench-write-check-"
STORE_FOLDERS = ((".claims",), (".slurm", "submitit"), (".slurm", "started"), (".slurm", "nodes"))
"""The folders of cnnbench's own inside a store (the sweep's claims, its Slurm files): where they
exist, each must be a real folder, never a symlink (see :func:`cnnbench.results.files.open_folder`),
whatever the command."""
TRACES = ("traces",)
"""Profiler traces' folder in a store: checked as :data:`STORE_FOLDERS` by a command that keeps
traces (``uses``), and left alone by the others (a user's own ``traces`` link to scratch)."""
DATA = ("data",)
"""A study's generated data sets' folder in a store: checked by the study (``uses``) only."""


class OutputError(ValueError):
    """A place a command cannot write to; the message is one line naming the flag."""


def check_results_dir(results_dir: str | os.PathLike[str], machine_labels: Iterable[str | None] = (), *,
                      flag: str = "--results-dir", label_flag: str = "--machine-label",
                      uses: Iterable[tuple[str, ...]] = ()) -> Path:
    """The results folder, checked: a folder (or one that can be made) this process may write
    in, whose file for each machine label (``None``: the label derived later) can be made,
    and that holds no ``*.jsonl`` that is not a regular file (a FIFO, a device), nor a symlink
    where one of its own folders belongs (:data:`STORE_FOLDERS`, and those of ``uses`` that the
    command writes in: :data:`TRACES`, :data:`DATA`). ``label_flag``: where the labels came
    from, for messages (a flag, or the records' field)."""
    folder = _folder(results_dir, flag)
    existing = _nearest_existing(folder)
    if folder.is_dir():
        _check_store_entries(folder, flag)
        for names in (*STORE_FOLDERS, *uses):
            try:
                files.check_folders(folder, *names)
            except files.FileProblem as exc:
                raise OutputError(f"{flag} {files.shown(folder)}: {exc}") from None
    for label in machine_labels:
        if label is None:
            continue
        try:
            name = machine_file_name(label)
        except MachineLabelError as exc:
            raise OutputError(f"{label_flag}: {exc}") from None
        limit = _name_max(existing)
        if len(name.encode()) > limit:
            raise OutputError(f"{label_flag}: too long for a file name ({len(name.encode())} bytes as "
                              f"{name[:24]}...; at most {limit})")
        target = folder / name
        if target.is_dir():
            raise OutputError(f"{flag} {folder}: {name} in it is a folder, not a results file")
        if os.path.lexists(target):
            _try_append(target, flag, folder)
    return folder


def check_run_store(results_dir: str | os.PathLike[str], device: str, machine_label: str | None,
                    gpu_index: int = 0, *, traces: bool = False) -> None:
    """Before a run on ``device`` (``run``, ``data``, ``comm``): ``results_dir`` can take its record,
    in the file of its machine label (``machine_label``, or the one the run will derive, from CUDA
    device ``gpu_index`` on a CUDA run); raises :class:`OutputError` naming ``--results-dir`` (or
    ``--machine-label``) in one line."""
    from cnnbench.machine.environment import expected_machine_label

    check_results_dir(results_dir, [machine_label], uses=[TRACES] if traces else ())  # the folder first: no torch
    if machine_label is None:
        check_results_dir(results_dir, [expected_machine_label(device, None, gpu_index)])


def _check_store_entries(folder: Path, flag: str) -> None:
    """Every ``*.jsonl`` in the store is a regular file (or a symlink to one) of one name: any
    other (a FIFO, a device) would hang or flood a reader, and may be the file a run appends to,
    as may a file with other names (hard links), which an append would change too."""
    try:
        entries = list(os.scandir(folder))
    except OSError as exc:
        raise OutputError(f"{flag} {files.shown(folder)}: cannot list it: {exc.strerror or exc}") from None
    for entry in entries:
        if not entry.name.endswith(SUFFIX) or entry.name.startswith("."):
            continue
        try:
            st = os.stat(entry.path)
        except OSError:
            continue  # a dangling link, a loop: readers report it, and no append follows it
        if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{flag} {files.shown(folder)}: {entry.name} in it is {files.kind(st.st_mode)}, not a "
                              "regular file; remove it")
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            raise OutputError(f"{flag} {files.shown(folder)}: {files.HardLinked(entry.name, st.st_nlink)}")


def check_output_file(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = (), *,
                      flag: str = "-o") -> Path:
    """A file to write whole: not a folder, in a folder that exists and may be written in,
    and none of ``inputs`` (writing it would destroy what is being read)."""
    text = os.fspath(path)
    if not text.strip():
        raise OutputError(f"{flag}: empty; name a file")
    _check_length(text, flag)
    target = Path(text)
    st = _look(target, flag, target, dangling_ok=True)  # a dangling link is replaced, as any link there
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{flag} {target}: is a folder; name a file")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{flag} {target}: is {files.kind(st.st_mode)}, not a regular file; name a file")
    parent = target.parent
    under = _nearest_existing(parent, flag, target)
    if not under.is_dir():
        raise OutputError(f"{flag} {target}: {under} is a file, not a folder")
    if under != Path(os.path.abspath(parent)):
        raise OutputError(f"{flag} {target}: folder {parent} does not exist")
    try:
        resolved = target.resolve()
        for item in inputs:
            source = Path(item)
            same = source.resolve() == resolved
            if not same and st is not None and source.exists():
                same = os.path.samefile(source, target)
            if same:
                raise OutputError(f"{flag} {target}: is one of the inputs; writing it would overwrite what is read")
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python 3.11)
        raise OutputError(f"{flag} {target}: cannot follow its path: {getattr(exc, 'strerror', None) or exc}") from None
    _try_write_in(parent, flag, target)  # a new file is renamed over it: the folder is what must take it
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
    st = _look(folder, flag, folder)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        what = "a file" if stat.S_ISREG(st.st_mode) else files.kind(st.st_mode)
        raise OutputError(f"{flag} {folder}: is {what}, not a folder")
    existing = _nearest_existing(folder, flag, folder)
    if not existing.is_dir():
        raise OutputError(f"{flag} {folder}: {existing} is a file, not a folder")
    _try_write_in(existing, flag, folder)
    return folder


def _check_length(text: str, flag: str) -> None:
    why = files.path_too_long(text)
    if why is not None:
        raise OutputError(f"{flag} {files.shown(text)}: {why}")


def _look(path: Path, flag: str, target: Path, *, dangling_ok: bool = False) -> os.stat_result | None:
    """The status of what ``path`` names (through symlinks), None when nothing is there (or a
    file stands where a folder of its path should: its ancestors tell); a symlink loop, a
    dangling symlink (unless ``dangling_ok``) or a path that cannot be looked at raises
    :class:`OutputError` naming ``flag`` and ``target``, where a writer would otherwise stop
    with a traceback after its work."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        if not dangling_ok and os.path.islink(path):
            raise OutputError(f"{flag} {files.shown(target)}: {files.shown(path)} is a symlink to "
                              f"{files.shown(os.readlink(path))}, which does not exist; make it or name "
                              "another") from None
        return None
    except OSError as exc:
        why = "a symlink loop (its links lead back to themselves)" if exc.errno == errno.ELOOP else \
            f"cannot look at it: {exc.strerror or exc}"
        where = "" if path == target else f"{files.shown(path)}: "
        raise OutputError(f"{flag} {files.shown(target)}: {where}{why}") from None


def _nearest_existing(path: Path, flag: str = "", target: Path | None = None) -> Path:
    """``path`` or its nearest ancestor that exists (:func:`_look`: a loop on the way raises
    :class:`OutputError`)."""
    current = Path(os.path.abspath(path))
    while _look(current, flag, target or path) is None and current != current.parent:
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


def _try_append(path: Path, flag: str, folder: Path) -> None:
    """Open an existing file for appending, write nothing, close: may we write to it? Only a
    regular file (never waiting on a FIFO) in ``folder`` (not through a symlink out of it)."""
    try:
        os.close(files.open_for_append(path, folder))
    except files.FileProblem as exc:
        raise OutputError(f"{flag}: cannot write {exc}") from None
    except OSError as exc:
        raise OutputError(f"{flag}: cannot write {path}: {exc.strerror or exc}") from None


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255
