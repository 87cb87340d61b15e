"""The jobs a sweep submitted, kept in ``<results>/.slurm/`` beside submitit's own files.

``jobs.jsonl`` holds one line per submitted case: the suite, the case key, the machine label
it runs as (or null: taken on the node), the Slurm job id (``<array>_<task>``), which attempt
it is (a preempted case is submitted again once) and submitit's folder. Lines are appended
under an exclusive ``flock``, so ``--status``, ``--cancel`` and a new submit work from any login
shell and never see half a line. The latest line of a case is its job. No torch here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from cnnbench.results import files
from cnnbench.results.store import append_lines

FOLDER = ".slurm"
JOBS_FILE = "jobs.jsonl"
SUBMITIT = "submitit"
"""submitit's folder in ``.slurm/``: one folder per job, made by submitit."""


@dataclass(frozen=True)
class JobEntry:
    """One submitted case."""

    suite: str
    key: str
    """The case's key (:attr:`cnnbench.sweep.suite.Case.key`)."""
    label: str | None
    """The machine label it runs as; None when the node names itself."""
    job_id: str
    """``<array job id>_<task>``, as ``squeue -r`` and ``sacct`` name it."""
    attempt: int = 1
    submitted_at: str = ""
    folder: str = ""
    """submitit's folder of the job (its logs and pickles)."""

    @property
    def unit(self) -> tuple[str, str | None]:
        return (self.key, self.label)


def slurm_folder(results_dir: str | os.PathLike[str]) -> Path:
    return Path(results_dir) / FOLDER


def read_job_file(results_dir: str | os.PathLike[str], *names: str, most: int, tail: bool = False) -> bytes | None:
    """The bytes of ``.slurm/<names...>`` of the store, read as its files are read: each folder a
    real one inside the one before it, the file a regular one, never through a link, never waited on
    (a FIFO); each of ``names`` a name, never a path (job ids and folders come from ``jobs.jsonl``,
    which anyone who writes in the store may have written). At most ``most`` bytes: the last of them
    with ``tail``, else None for a longer file; None where there is no such file to read so."""
    *folders, name = names
    path = slurm_folder(results_dir).joinpath(*names)
    try:
        folder = files.open_folder(Path(results_dir), FOLDER, *folders)
    except (OSError, ValueError):
        return None
    try:
        fd = files.open_in(folder, name, os.O_RDONLY, path)
    except (OSError, ValueError):
        return None
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as f:
        if tail:
            f.seek(max(0, os.fstat(fd).st_size - most))
            return f.read(most)
        data = f.read(most + 1)
    return data if len(data) <= most else None


def check_submitit_folder(results_dir: str | os.PathLike[str]) -> None:
    """Before submitit writes its pickles and job scripts in ``.slurm/submitit/<job id>/``
    (by path: it makes its own files): ``.slurm/`` and ``submitit/`` are real folders of the
    store where they exist, and no symlink out of ``submitit/`` waits there for a job id to
    come (submitit's own links, ``.submission_file_*.sh``, lead to its files inside). Raises
    :class:`~cnnbench.results.files.FileProblem`."""
    root = Path(results_dir)
    files.check_folders(root, FOLDER, SUBMITIT)
    home = os.path.realpath(root / FOLDER / SUBMITIT)
    try:
        entries = list(os.scandir(home))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.is_symlink() and not os.path.realpath(entry.path).startswith(home + os.sep):
            raise files.LinkedFolder(entry.path, os.path.realpath(entry.path), root)


def append_jobs(results_dir: str | os.PathLike[str], entries: Iterable[JobEntry]) -> None:
    lines = b"".join((json.dumps(asdict(e), separators=(",", ":")) + "\n").encode() for e in entries)
    if not lines:
        return
    files.real_folder_inside(Path(results_dir), FOLDER)  # never a link
    # as the store appends: locked, a regular file only, fsynced, in the real .slurm/
    append_lines(slurm_folder(results_dir) / JOBS_FILE, lines, root=Path(results_dir))


def check_ledger(results_dir: str | os.PathLike[str]) -> None:
    """The job ledger, where there is one, can take entries (a regular file of one name in the real
    ``.slurm/``): checked before jobs are submitted, so no job runs that the ledger then refuses.
    Raises :class:`~cnnbench.results.files.FileProblem`."""
    path = slurm_folder(results_dir) / JOBS_FILE
    if os.path.lexists(path):
        files.real_folder_inside(Path(results_dir), FOLDER)
        os.close(files.open_for_append(path, root=Path(results_dir)))


def read_jobs(results_dir: str | os.PathLike[str], suite: str | None = None) -> list[JobEntry]:
    """Every entry (of ``suite``), in submission order; a line that cannot be read is passed over.
    Read in the real ``.slurm/`` of the store, never through a link (a ledger found through one
    would have ``--status`` record failures of jobs someone else listed): raises
    :class:`~cnnbench.results.files.FileProblem` for a link or a special file."""
    path = slurm_folder(results_dir) / JOBS_FILE
    try:
        folder = files.open_folder(Path(results_dir), FOLDER)
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        fd = files.open_in(folder, JOBS_FILE, os.O_RDONLY, path)
    except FileNotFoundError:
        return []
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    out = []
    for line in text.splitlines():
        try:
            data = json.loads(line)
            entry = JobEntry(**data)
        except (ValueError, TypeError):
            continue
        if suite is None or entry.suite == suite:
            out.append(entry)
    return out


def latest_jobs(entries: Iterable[JobEntry]) -> dict[tuple[str, str | None], JobEntry]:
    """The latest job of each (case key, label)."""
    latest: dict[tuple[str, str | None], JobEntry] = {}
    for entry in entries:
        latest[entry.unit] = entry
    return latest
