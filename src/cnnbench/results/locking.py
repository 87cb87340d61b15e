"""Whether a results folder's file system gives working locks, asked once when a sweep starts.

The store's appends and the sweep's claims rest on ``flock``. A file system that refuses it
(``ENOLCK``: NFS without a lock manager; ``EOPNOTSUPP`` / ``ENOSYS``: Lustre mounted without
``-o flock``, some FUSE file systems) would let two writers interleave, so a sweep refuses such
a folder at its start with one line (:class:`LockingUnsupported`) instead of writing unprotected.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

REFUSALS = {errno.ENOLCK: "ENOLCK", errno.EOPNOTSUPP: "EOPNOTSUPP", errno.ENOSYS: "ENOSYS"}


class LockingUnsupported(RuntimeError):
    """The results folder's file system refuses ``flock``; the message says what to do."""


def check_locking(results_dir: str | os.PathLike[str]) -> None:
    """Take and drop an exclusive ``flock`` on the results folder (made if missing); raise
    :class:`LockingUnsupported` when the file system refuses it."""
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as exc:
        if exc.errno not in REFUSALS:
            raise
        raise LockingUnsupported(
            f"{folder}: the file system refuses file locks ({REFUSALS[exc.errno]}: "
            f"{os.strerror(exc.errno)}), which the store needs when several jobs append at once; use a folder "
            "on a file system with working flock (NFSv4, Lustre mounted with -o flock, a local disk)") from None
    finally:
        os.close(fd)
