"""The session id: which invocation wrote a record (``session_id``, top level).

One id per ``cnnbench run`` (``--scaling`` included), ``sweep``, ``study``, ``comm`` or ``data``
invocation, and per ``cnnbench.run()`` of a notebook: every record one invocation writes carries it.
:func:`invocation` makes it and puts it in :data:`ENV` for as long as the invocation lasts, so the
processes it starts (a sweep's cases, a run's workers) inherit it, and an invocation inside another
(a sweep's case, the points of ``--scaling``) keeps it; when the invocation ends, :data:`ENV` is as it
was, so a process started later (``!cnnbench sweep`` in the next notebook cell) is not taken for it.
Inside a Slurm job the id is the job's, ``slurm-<SLURM_JOB_ID>``. ``history`` counts the runs of one
session as one job: they share the day's conditions.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

ENV = "CNNBENCH_SESSION_ID"
"""The environment variable that carries the id to child processes."""

SLURM_PREFIX = "slurm-"

_OUTSIDE: list[str] = []
"""The id of the records this process makes outside any invocation (made once, never exported)."""


def session_id() -> str:
    """The id of the invocation under way (:data:`ENV`); outside any, this process's own."""
    found = os.environ.get(ENV, "").strip()
    if found:
        return found
    if not _OUTSIDE:
        _OUTSIDE.append(_new_id())
    return _OUTSIDE[0]


@contextlib.contextmanager
def invocation() -> Iterator[str]:
    """An invocation (a run, a sweep, a study...): the id of the one it is part of, else a new one
    (the Slurm job's inside one), in :data:`ENV` until it ends."""
    found = os.environ.get(ENV, "").strip()
    if found:
        yield found
        return
    value = set_session_id(_new_id())
    try:
        yield value
    finally:
        if os.environ.get(ENV) == value:
            del os.environ[ENV]


def _new_id() -> str:
    job = os.environ.get("SLURM_JOB_ID", "").strip()
    return slurm_session_id(job) if job else uuid.uuid4().hex[:16]


def set_session_id(value: str) -> str:
    """Make ``value`` this process's id and its children's (a Slurm job's process: for its life)."""
    os.environ[ENV] = value
    return value


def slurm_session_id(job_id: object) -> str:
    """The id of the records of Slurm job ``job_id``."""
    return f"{SLURM_PREFIX}{job_id}"


__all__ = ["ENV", "invocation", "session_id", "set_session_id", "slurm_session_id"]
