"""Where each case of a Slurm sweep stands, from the store, the job ids and Slurm; its failures recorded.

A unit is a case as one machine label runs it. Its state, from what is surest first:

* ``done``: a record of its latest job is in the store (ok, oom, error, timeout: the job's own
  record, or one made here for a job Slurm ended), or an ``ok`` record of the case from elsewhere;
* ``pending`` / ``running``: ``squeue`` has its job;
* ``failed``: Slurm ended its job (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED, FAILED, ...) after
  it started: a record is made with that status (``timeout`` for TIMEOUT, ``oom`` for OUT_OF_MEMORY,
  ``error`` otherwise) and Slurm's words, and the unit is ``done`` from then on. A job PREEMPTED
  on its first attempt is ``preempted`` instead: the next submit submits it once more;
* ``ending``: ended, but not yet in Slurm's accounting (a moment later it is);
* ``never started``: Slurm ended it before it ran (cancelled while pending): shown, not recorded;
* ``no record``: Slurm says COMPLETED but the store has no record of it (written to node-local
  storage? ``cnnbench results merge`` folds such stores in);
* ``not submitted``.

Records made here have a run id derived from the job, appended only when the store lacks it
(under the store's lock), so ``--status`` run twice, or from two shells, records a failure once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cnnbench.results.error_text import clip
from cnnbench.results.naming import case_name
from cnnbench.results.record import Record
from cnnbench.results.stamps import now_iso
from cnnbench.results.store import StoreReader, append_new_records
from cnnbench.sweep.case import with_unresolved
from cnnbench.sweep.slurm.job import case_fields, read_note
from cnnbench.sweep.slurm.ledger import SUBMITIT, JobEntry, latest_jobs, read_job_file, read_jobs
from cnnbench.sweep.slurm.states import FAILED_STATUS, JobState, job_states
from cnnbench.sweep.suite import Case, Suite

LOG_TAIL_LINES = 15


@dataclass
class Unit:
    """One case as one machine label runs it, and where it stands."""

    case: Case
    label: str | None
    state: str = "not submitted"
    status: str | None = None
    """The record's status once ``done``."""
    job: JobEntry | None = None
    slurm: JobState | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.case.key, self.label)

    @property
    def name(self) -> str:
        return f"{self.case.label}" + (f" on {self.label}" if self.label else "")

    def settled(self) -> bool:
        """Recorded ok, or queued/running: a new submit leaves it alone."""
        return (self.state == "done" and self.status == "ok") or self.state in ("pending", "running")

    def describe(self) -> str:
        what = f"done ({self.status})" if self.state == "done" else self.state
        job = f"  job {self.job.job_id}" if self.job else ""
        slurm = f" ({self.slurm.describe()})" if self.slurm else ""
        return f"{what:<16} {self.name}{job}{slurm}"


def units_of(suite: Suite, labels_for: Any) -> list[Unit]:
    """Every case of ``suite`` once per machine label it runs as (``labels_for(label)``)."""
    out = []
    for case in suite.cases:
        for label in labels_for(case.config.machine_label):
            if label is not None and label != case.config.machine_label:
                case = dataclasses.replace(case, config=case.config.replace(machine_label=label))
            out.append(Unit(case, label))
    return out


def follow(suite: Suite, units: list[Unit], results_dir: str | os.PathLike[str], *, record: bool = True) -> list[Unit]:
    """Fill in each unit's state (see the module documentation); Slurm's failures recorded when ``record``."""
    latest = latest_jobs(read_jobs(results_dir, suite.name))
    by_job, ok = _stored(suite, results_dir)
    for unit in units:
        unit.job = latest.get(unit.key)
    open_jobs = [u.job.job_id for u in units if u.job is not None and u.job.job_id not in by_job]
    states = job_states(open_jobs) if open_jobs else {}
    failures: list[dict[str, Any]] = []
    for unit in units:
        _place(unit, by_job, ok, states, results_dir, failures)
    if failures and record:
        append_new_records(results_dir, failures)
    return units


def _stored(suite: Suite, results_dir: str | os.PathLike[str],
            ) -> tuple[dict[str, tuple[str, str]], set[tuple[str, str]]]:
    """(status, Slurm's end state or '') by Slurm job id of this suite's records, and the (case key,
    machine) recorded ok."""
    by_job: dict[str, tuple[str, str]] = {}
    ok: set[tuple[str, str]] = set()
    if not Path(results_dir).is_dir():
        return by_job, ok
    records, _ = StoreReader(Path(results_dir), step_times=False, below=False).read()
    for r in records:
        if r.get("suite_name") != suite.name:
            continue
        slurm = r.get("slurm")
        if not isinstance(slurm, dict):
            slurm = {}
        if slurm.get("job_id"):
            by_job[str(slurm["job_id"])] = (str(r.get("status")), str(slurm.get("state") or ""))
        if r.get("status") == "ok":
            ok.add((str(r.get("case_key")), str((r.get("environment") or {}).get("machine"))))
    return by_job, ok


def _place(unit: Unit, by_job: dict[str, tuple[str, str]], ok: set[tuple[str, str]], states: dict[str, JobState],
           results_dir: str | os.PathLike[str], failures: list[dict[str, Any]]) -> None:
    job = unit.job
    if job is not None and job.job_id in by_job:
        unit.state, unit.status = "done", by_job[job.job_id][0]
        if by_job[job.job_id][1]:
            unit.slurm = JobState(job.job_id, by_job[job.job_id][1])
        return
    if any(key == unit.case.key and (unit.label is None or machine == unit.label) for key, machine in ok):
        unit.state, unit.status = "done", "ok"
        return
    if job is None:
        return
    state = unit.slurm = states.get(job.job_id)
    if state is None:
        unit.state = "unknown to Slurm"
    elif state.active:
        unit.state = "running" if state.started else "pending"
    elif not state.started:
        unit.state = "never started"
    elif not state.accounted:
        unit.state = "ending"  # Slurm's accounting has not heard of its end yet: the next look records it
    elif state.state == "COMPLETED":
        unit.state = "no record"
    elif state.state == "PREEMPTED" and job.attempt < 2:
        unit.state = "preempted"
    else:
        unit.state, unit.status = "done", FAILED_STATUS.get(state.state, "error")
        failures.append(failure_record(unit, state, results_dir))


def failure_record(unit: Unit, state: JobState, results_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The record of a job Slurm ended: its status, Slurm's words, the end of the job's output."""
    assert unit.job is not None
    note = read_note(results_dir, unit.job.job_id) or {}
    section = {**(note.get("slurm") or {}), "job_id": unit.job.job_id, "state": state.state,
               "reason": state.reason, "nodes": state.nodes, "exit_code": state.exit_code, "elapsed": state.elapsed,
               "time_limit": state.time_limit}
    env = dict(note.get("environment") or {})
    if not env:
        env = {"machine": unit.label or unit.case.config.machine_label or "unknown", "hostname": state.nodes}
    suite_one = Suite(name=unit.job.suite, base={}, matrix={}, cases=(unit.case,))
    # the configuration as the node resolved it before the case (the engine's rules, that machine's cores)
    config = note["config"] if isinstance(note.get("config"), dict) else unit.case.config.recorded()
    unresolved = note.get("unresolved") if isinstance(note.get("unresolved"), str) else None
    record = Record(config=config, environment=env, metrics={},
                    status=FAILED_STATUS.get(state.state, "error"),
                    error=with_unresolved(_words(state, unit.job, results_dir), unresolved),
                    extra={**case_fields(suite_one, section), "case_name": case_name(config)}).to_dict()
    record["run_id"] = "slurm-" + hashlib.sha1(f"{unit.job.job_id}/{unit.case.key}".encode()).hexdigest()[:24]
    record["started_at"] = note.get("started_at") or now_iso()
    return record


_MEANING = {
    "TIMEOUT": "ran past its Slurm time limit and was stopped by Slurm",
    "OUT_OF_MEMORY": "ran out of the memory Slurm gave it and was killed",
    "NODE_FAIL": "lost its node (it went down or stopped answering)",
    "PREEMPTED": "was preempted by Slurm (a job of higher priority took its resources), twice",
    "CANCELLED": "was cancelled (scancel, or an administrator)",
    "FAILED": "failed before the case could be recorded (its output's last lines follow)",
    "BOOT_FAIL": "could not start: its node failed to boot",
    "DEADLINE": "reached its deadline",
}


def _words(state: JobState, job: JobEntry, results_dir: str | os.PathLike[str]) -> str:
    meaning = _MEANING.get(state.state, "was ended by Slurm")
    tail = log_tail(results_dir, job)
    return clip(f"Slurm job {job.job_id} {meaning} (Slurm: {state.describe()})"
                + (f"\n--- last lines of the job's output ---\n{tail}" if tail else ""))


LOG_TAIL_BYTES = 64 << 10
"""Bytes read from the end of each of a job's logs."""


def log_tail(results_dir: str | os.PathLike[str], job: JobEntry, lines: int = LOG_TAIL_LINES) -> str:
    """The end of the job's output as submitit kept it in the store's ``.slurm/submitit/<job>/``
    ('' when there is none). The job's folder in ``jobs.jsonl`` is taken as a name there, never
    as a path (the file is anyone's who writes in the store)."""
    texts = []
    folder = Path(job.folder).name if isinstance(job.folder, str) else ""  # a line may hold anything there
    for name in (f"{job.job_id}_0_log.out", f"{job.job_id}_0_log.err"):
        data = read_job_file(results_dir, SUBMITIT, folder, name, most=LOG_TAIL_BYTES, tail=True)
        if data is not None:
            texts += data.decode("utf-8", errors="replace").splitlines()
    return "\n".join(t for t in texts[-lines:] if t.strip())


def active_jobs(units: Iterable[Unit]) -> list[str]:
    """The job ids of the units still pending or running (what ``--cancel`` cancels)."""
    return [u.job.job_id for u in units if u.job is not None and u.state in ("pending", "running")]
