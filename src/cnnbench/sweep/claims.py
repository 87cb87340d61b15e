"""Claims on sweep cases, so that two sweeps writing to one results store never run the same
case at the same time.

A sweep claims a case just before running it by taking an exclusive ``flock`` on
``<results>/.claims/<case>-<machine>.lock`` and holds it until the case's record is
appended. Another sweep that finds the lock taken leaves the case to its owner. The kernel
drops the lock when its holder ends, however it ends, so a crashed sweep never leaves a
case claimed. After taking the lock, the claimant checks that the file it locked is still
the one at that path (its owner removes it when done), the usual way to make lock files
safe to delete. The lock files are opened relative to a descriptor of ``.claims/``, which
must be a real folder in the store, and never through a symlink at their name (one planted
there raises :class:`~cnnbench.results.files.LinkedFile`, a hard link
:class:`~cnnbench.results.files.HardLinked`, before anything is written in it; see
:func:`cnnbench.results.files.open_in`). No torch here.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from pathlib import Path

from cnnbench.results import files

CLAIMS_FOLDER = ".claims"

log = logging.getLogger(__name__)


class Claim:
    """A case this process holds; :meth:`release` once its record is written."""

    def __init__(self, fd: int, path: Path, folder_fd: int) -> None:
        self._fd: int | None = fd
        self._folder_fd = folder_fd
        self.path = path

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.path.name, dir_fd=self._folder_fd)  # in the folder locked in, wherever its path leads now
        except FileNotFoundError:  # pragma: no cover - removed by hand
            pass
        os.close(self._fd)  # releases the lock
        os.close(self._folder_fd)
        self._fd = None

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class CaseClaims:
    """The claims of one results store."""

    def __init__(self, results_dir: str | os.PathLike[str]) -> None:
        self.results_dir = Path(results_dir)
        self.folder = self.results_dir / CLAIMS_FOLDER

    def try_claim(self, name: str) -> Claim | None:
        """Claim ``name`` (a case key and machine); None when another process holds it.
        Raises :class:`~cnnbench.results.files.FileProblem` when ``.claims/`` is not a real
        folder or a symlink sits at the claim's name."""
        path = self.folder / f"{name}.lock"
        while True:
            try:
                folder_fd = files.open_folder(self.results_dir, CLAIMS_FOLDER, make=True)
            except FileNotFoundError:  # removed between its making and its opening (another sweep tidied it)
                continue
            try:
                fd = files.open_in(folder_fd, path.name, os.O_RDWR | os.O_CREAT, path, mode=0o644)
            except FileNotFoundError:  # the folder was removed meanwhile: make it again
                os.close(folder_fd)
                continue
            except BaseException:
                os.close(folder_fd)
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                os.close(folder_fd)
                return None
            except OSError as exc:  # a file system without locks: run the case, unprotected, and say so
                log.warning("cannot lock %s (%s); another sweep on this store could run the case too", path,
                            exc.strerror or exc)
                return Claim(fd, path, folder_fd)
            try:
                same = os.stat(path.name, dir_fd=folder_fd, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # its owner removed it between our open and our lock: try again
                os.close(fd)
                os.close(folder_fd)
                continue
            links = os.fstat(fd).st_nlink
            if links > 1:  # a hard link planted at its name: the note would overwrite the file it names too
                os.close(fd)
                os.close(folder_fd)
                raise files.HardLinked(path, links)
            note = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
            os.ftruncate(fd, 0)
            os.write(fd, note.encode())
            return Claim(fd, path, folder_fd)

    def tidy(self) -> None:
        """Remove the claims folder if it is empty (another sweep may still use it)."""
        try:
            self.folder.rmdir()
        except OSError:
            pass
