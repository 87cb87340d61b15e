"""A full disk (or a full quota) in one line, naming the folder and its free space.

A write into a store, an export or a merge that finds no space left raises ``OSError``
``ENOSPC`` (``EDQUOT`` over a quota), from the ``write`` or only from the ``fsync`` after it
(NFS). Writers turn it into :class:`NoSpace`, a :class:`~cnnbench.results.files.FileProblem`
whose ``str`` is one line (``results: no space left on its device (0 bytes free now of
9.78 GiB)``), after undoing what they wrote part of (:mod:`cnnbench.results.store` cuts its
file back to its length before the append: no torn line is left). No torch here.
"""

from __future__ import annotations

import errno
import os
import shutil

from cnnbench.results.files import FileProblem
from cnnbench.words import size

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errors of a write that found no space: the device full, or the user's quota."""


def is_no_space(exc: BaseException) -> bool:
    """Did ``exc`` say the disk (or the quota) is full?"""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


def free_text(folder: str | os.PathLike[str]) -> str:
    """``12.0 KiB free now of 9.78 GiB`` on the device of ``folder`` (for this user), or why not
    known: read once the part written was undone, so it counts what the undo freed."""
    try:
        usage = shutil.disk_usage(folder)
    except OSError as exc:
        return f"free space unknown: {exc.strerror or exc}"
    return f"{size(usage.free)} free now of {size(usage.total)}"


class NoSpace(FileProblem):
    """A write into ``folder`` that found its device (or the user's quota) full; ``str``: one
    line naming the folder and its free space, then ``what`` (what became of the write)."""

    def __init__(self, folder: str | os.PathLike[str], code: int = errno.ENOSPC, what: str = "") -> None:
        full = "over the disk quota" if code == errno.EDQUOT else "no space left on its device"
        super().__init__(code, folder, f"{full} ({free_text(folder)}){'; ' + what if what else ''}")


def no_space_in(folder: str | os.PathLike[str], exc: OSError, what: str = "") -> NoSpace:
    """:class:`NoSpace` for ``exc`` (an ``ENOSPC`` or ``EDQUOT``) met writing into ``folder``."""
    return NoSpace(folder, exc.errno or errno.ENOSPC, what)


def os_error_text(exc: OSError, folder: str | os.PathLike[str]) -> str:
    """``exc``, met writing into ``folder``, as one line: a full disk as :class:`NoSpace` says it
    (the folder and its free space), any other error as the file it names and the system's words."""
    if isinstance(exc, FileProblem):
        return str(exc)
    if is_no_space(exc):
        return str(no_space_in(folder, exc))
    where = exc.filename if exc.filename is not None else folder
    return f"{os.fsdecode(where)}: {exc.strerror or exc}"


__all__ = ["NO_SPACE", "NoSpace", "free_text", "is_no_space", "no_space_in", "os_error_text"]
