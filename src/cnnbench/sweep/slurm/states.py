"""What Slurm says of a sweep's jobs: ``squeue`` for those still queued or running, ``sacct``
(Slurm's accounting, which keeps jobs after they end) for the rest.

Array tasks are asked for by their array job ids, one call each for all of them, so ``--status`` on
thousands of cases stays two commands. A state's first word is kept (``CANCELLED by 0`` ->
``CANCELLED``). A job never given a node never ran (one cancelled while pending has a start time).
Where Slurm itself cannot be used (installed but not configured, no controller reachable, no accounting,
no authentication) :func:`trouble` names the cause in one line. No torch here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                    "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})
"""States of a job still in the queue (pending) or on its nodes (running)."""
PENDING = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD"})
FAILED_STATUS = {"TIMEOUT": "timeout", "OUT_OF_MEMORY": "oom", "NODE_FAIL": "error", "PREEMPTED": "error",
                 "CANCELLED": "error", "FAILED": "error", "BOOT_FAIL": "error", "DEADLINE": "error"}
"""Slurm's end states that are failures, and the record status each becomes."""
_SACCT_FIELDS = "JobID,State,Reason,Start,NodeList,ExitCode,Elapsed,Timelimit"
COMMAND_TIMEOUT_S = 120.0


class SlurmUnavailable(RuntimeError):
    """Slurm's commands are missing or did not answer, or Slurm cannot be used here (one line)."""


_CAUSES = (
    (("could not establish a configuration source", "failed to fetch config"),
     "Slurm is installed but not configured here: no slurm.conf (SLURM_CONF, /etc/slurm/slurm.conf) "
     "and no controller found through DNS"),
    (("cannot stat file", "unable to process configuration file"),
     "Slurm's configuration cannot be read (SLURM_CONF, /etc/slurm/slurm.conf)"),
    (("unable to contact slurm controller",),
     "no Slurm controller reachable: the slurmctld that slurm.conf names does not answer"),
    (("accounting storage is disabled",),
     "Slurm has no accounting here (AccountingStorageType): following a sweep's jobs needs slurmdbd"),
    (("problem talking to the database", "persistent connection", "slurmdbd"),
     "Slurm's accounting (slurmdbd) is not reachable"),
    (("munge encode failed", "munge decode failed", "munge"),
     "Slurm cannot authenticate this host (is munged running, with the cluster's key?)"),
)
"""(words in Slurm's complaint, lower case; the cause it means), surest first."""
_PREFIX = re.compile(r"^\s*[\w.-]+: (?:error|fatal): ", re.IGNORECASE)
WORDS_LIMIT = 400


def slurm_words(text: str, limit: int = WORDS_LIMIT) -> str:
    """A Slurm command's complaint on one line: its lines without the ``sbatch: error:`` prefix, joined by
    ``; `` and cut to ``limit`` characters."""
    lines = [_PREFIX.sub("", line).strip() for line in text.strip().splitlines()]
    joined = "; ".join(line for line in lines if line)
    return joined if len(joined) <= limit else joined[:limit - 3] + "..."


def trouble(command: str, text: str) -> str | None:
    """One line naming why Slurm cannot be used at all (not configured, no controller reachable, no
    accounting, no authentication), with the line of ``command``'s complaint that says so; None for
    any other complaint (a partition that does not exist, a job id Slurm has forgotten)."""
    lines = [_PREFIX.sub("", line).strip() for line in text.strip().splitlines()]
    for words, cause in _CAUSES:
        for word in words:  # (the first word is the surest, its line quoted)
            for line in lines:
                if word in line.lower():
                    return f"{cause} ({command}: {slurm_words(line, 200)})"
    return None


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str
    reason: str = ""
    started: bool = True
    nodes: str = ""
    exit_code: str = ""
    elapsed: str = ""
    time_limit: str = ""
    accounted: bool = True
    """False for an ended job that ``sacct`` does not have yet (slurmdbd hears of it a moment later)."""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def describe(self) -> str:
        """Slurm's own words: state, reason, node, exit code, elapsed of the limit."""
        parts = [self.state]
        if self.reason and self.reason not in ("None", "(null)"):
            parts.append(f"reason {self.reason}")
        if self.nodes and self.nodes not in ("None assigned", "(null)"):
            parts.append(f"on {self.nodes}")
        if self.exit_code and self.exit_code != "0:0":
            parts.append(f"exit code {self.exit_code}")
        if self.elapsed and self.time_limit:
            parts.append(f"ran {self.elapsed} of {self.time_limit}")
        return ", ".join(parts)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    if shutil.which(args[0]) is None:
        raise SlurmUnavailable(f"{args[0]} not found: Slurm's commands must be on PATH (run this on a login node)")
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"{args[0]} did not answer within {COMMAND_TIMEOUT_S:g} s") from None


def _arrays(job_ids: Iterable[str]) -> list[str]:
    return sorted({j.split("_", 1)[0] for j in job_ids})


def job_states(job_ids: Iterable[str]) -> dict[str, JobState]:
    """The state of each job id (``<array>_<task>`` or plain), ``squeue`` over ``sacct``; a job neither
    knows is left out."""
    arrays = _arrays(job_ids)
    if not arrays:
        return {}
    queue = _queued(arrays)  # first: a controller that does not answer is named before the accounting
    states = _accounted(arrays)
    for job_id, queued in queue.items():
        if queued.active or job_id not in states:
            states[job_id] = queued
    return states


def _queued(arrays: list[str]) -> dict[str, JobState]:
    out = _run(["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%r|%N", "-j", ",".join(arrays)])
    cause = trouble("squeue", out.stderr) if out.returncode != 0 else None
    if cause:  # (other complaints, such as job ids Slurm has forgotten, leave the rest to sacct)
        raise SlurmUnavailable(cause)
    states = {}
    for line in out.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 4:
            job_id, state, reason, nodes = parts
            started = state not in PENDING and _ran(nodes)  # (a job cancelled while pending gets a start time)
            states[job_id] = JobState(job_id, state, reason, started=started, nodes=nodes,
                                      accounted=state in ACTIVE)
    return states


def _accounted(arrays: list[str]) -> dict[str, JobState]:
    out = _run(["sacct", "-n", "-P", "-X", "-o", _SACCT_FIELDS, "-j", ",".join(arrays)])
    if out.returncode != 0:
        words = out.stderr.strip() or out.stdout.strip()
        raise SlurmUnavailable(trouble("sacct", words) or f"sacct failed: {slurm_words(words)} "
                               "(the sweep's states after its jobs end need Slurm's accounting, slurmdbd)")
    states = {}
    for line in out.stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 8 or "[" in parts[0]:  # a range of array tasks not started: squeue has them
            continue
        job_id, state, reason, start, nodes, exit_code, elapsed, limit = parts
        started = _ran(nodes) and start not in ("", "Unknown", "None")
        states[job_id] = JobState(job_id, state.split()[0] if state else "UNKNOWN", reason, started=started,
                                  nodes=nodes, exit_code=exit_code, elapsed=elapsed, time_limit=limit)
    return states


def _ran(nodes: str) -> bool:
    """Whether a job was given nodes (one that never ran has none, whatever its start time says)."""
    return nodes.strip() not in ("", "None assigned", "(null)", "N/A")


def cancel(job_ids: Iterable[str]) -> Mapping[str, str]:
    """``scancel`` these jobs (only these); ``{job id: scancel's complaint}`` for those it refused."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    out = _run(["scancel", *ids])
    if out.returncode == 0:
        return {}
    cause = trouble("scancel", out.stderr)
    if cause:
        raise SlurmUnavailable(cause)
    lines = out.stderr.splitlines()
    return {i: slurm_words("\n".join(line for line in lines if i in line)) for i in ids if i in out.stderr}
