"""No process of a run outlives the process that started it.

A run's processes form a tree: ``cnnbench run --num-devices N`` (or a sweep's case, forked
from the sweep's fork server) starts the device workers, and each worker may fork loader
processes. When a parent is killed with SIGKILL it cannot stop its children, which would be
re-parented to init and go on training. Linux lets a child ask to be killed when its parent
dies (``prctl(PR_SET_PDEATHSIG)``); two details make it reliable:

* the request fires when the parent *thread* that started the child ends, so every caller
  here starts its children from its main thread (the elastic agent, the DataLoader, the
  fork server all do);
* it is made by the child after it starts, and the parent may already be gone by then: so
  the child then checks that its parent is still the one that started it, and leaves at
  once if not.

A process that stops a tree of its own (``benchmarks/gpu_acceptance.py``) can also ask to be
handed the orphans below it (``prctl(PR_SET_CHILD_SUBREAPER)``, :func:`become_subreaper`), so
that a process whose parent died while it was being stopped is still found below it.

Other systems have no such request: there, this does nothing.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> bool:
    """``prctl(option, arg)`` on Linux; True when it succeeded."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl
        return False


def die_with_parent(expected_parent: int | None = None) -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies; True when it could.

    ``expected_parent``: the pid of the process that started this one. When the parent is no
    longer that process (it died before the request was made), this process exits at once
    with status 1, as it would have been killed a moment later.
    """
    if not _prctl(PR_SET_PDEATHSIG, signal.SIGKILL):
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)  # orphaned already: nobody is left to use what this process would do
    return True


def loader_worker_init(parent: int, worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: a loader process dies with the process that forked it
    (bind ``parent`` with :func:`functools.partial` to that process's pid)."""
    die_with_parent(parent)


def become_subreaper() -> bool:
    """Ask the kernel to hand this process the orphans of its descendants (instead of init);
    True when it could."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)
