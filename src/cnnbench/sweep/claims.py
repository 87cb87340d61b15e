"""Claims on sweep cases, so that two sweeps writing to one results store never run the same
case at the same time.

A sweep claims a case just before running it by taking an exclusive ``flock`` on
``<results>/.claims/<case>-<machine>.lock`` and holds it until the case's record is
appended. Another sweep that finds the lock taken leaves the case to its owner. The kernel
drops the lock when its holder ends, however it ends, so a crashed sweep never leaves a
case claimed. After taking the lock, the claimant checks that the file it locked is still
the one at that path (its owner removes it when done), the usual way to make lock files
safe to delete. No torch here.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from pathlib import Path

CLAIMS_FOLDER = ".claims"

log = logging.getLogger(__name__)


class Claim:
    """A case this process holds; :meth:`release` once its record is written."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink()
        except FileNotFoundError:  # pragma: no cover - removed by hand
            pass
        os.close(self._fd)  # releases the lock
        self._fd = None

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class CaseClaims:
    """The claims of one results store."""

    def __init__(self, results_dir: str | os.PathLike[str]) -> None:
        self.folder = Path(results_dir) / CLAIMS_FOLDER

    def try_claim(self, name: str) -> Claim | None:
        """Claim ``name`` (a case key and machine); None when another process holds it."""
        path = self.folder / f"{name}.lock"
        while True:
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:  # the folder was removed meanwhile: make it again
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            except OSError as exc:  # a file system without locks: run the case, unprotected, and say so
                log.warning("cannot lock %s (%s); another sweep on this store could run the case too", path,
                            exc.strerror or exc)
                return Claim(fd, path)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # its owner removed it between our open and our lock: try again
                os.close(fd)
                continue
            note = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
            os.ftruncate(fd, 0)
            os.write(fd, note.encode())
            return Claim(fd, path)

    def tidy(self) -> None:
        """Remove the claims folder if it is empty (another sweep may still use it)."""
        try:
            self.folder.rmdir()
        except OSError:
            pass
