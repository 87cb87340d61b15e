"""The session id: which invocation wrote a record (``session_id``, top level).

One id per ``cnnbench run``, ``sweep`` or ``study`` invocation: every record one invocation
writes carries it, and child processes (a sweep's cases, a run's workers) inherit it through
:data:`ENV`, which :func:`new_session` sets when an invocation begins. Inside a Slurm job the id is the job's,
``slurm-<SLURM_JOB_ID>`` (a sweep's Slurm job sets it with :func:`set_session_id`). ``history``
counts the runs of one session as one job: they share the day's conditions.
"""

from __future__ import annotations

import os
import uuid

ENV = "CNNBENCH_SESSION_ID"
"""The environment variable that carries the id to child processes."""

SLURM_PREFIX = "slurm-"


_OWN: list[str] = []
"""The ids this process made: an id in :data:`ENV` that is not one of them is a parent's."""


def session_id() -> str:
    """This invocation's id: the one in :data:`ENV` (a parent's, or this invocation's), else a new
    one (:func:`new_session`)."""
    found = os.environ.get(ENV, "").strip()
    return found or new_session()


def new_session() -> str:
    """Begin an invocation (a run from the API or the CLI, a sweep, a study): keep the id of a parent
    process (a sweep's case), else make one: the Slurm job's inside one, else a new random id. A
    notebook's runs are an invocation each: the id an earlier run of this process made is not kept."""
    found = os.environ.get(ENV, "").strip()
    if found and found not in _OWN:
        return found
    job = os.environ.get("SLURM_JOB_ID", "").strip()
    value = slurm_session_id(job) if job else uuid.uuid4().hex[:16]
    _OWN.append(value)
    return set_session_id(value)


def set_session_id(value: str) -> str:
    """Make ``value`` this process's id and its children's."""
    os.environ[ENV] = value
    return value


def slurm_session_id(job_id: object) -> str:
    """The id of the records of Slurm job ``job_id``."""
    return f"{SLURM_PREFIX}{job_id}"


__all__ = ["ENV", "new_session", "session_id", "set_session_id", "slurm_session_id"]
