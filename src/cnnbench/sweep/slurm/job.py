"""One case on its Slurm node: the function submitit runs there (:func:`run_job`).

The job first compares its environment with the submitter's (the Python executable and version,
cnnbench's and torch's versions): a node whose environment differs runs nothing and records an
``error`` naming each difference. Otherwise it runs the case as a local sweep does, with the same
machinery (:class:`~cnnbench.sweep.runner.SweepRunner`: its own process from the fork server,
the suite's time limit, oom/error/timeout records, the claim and the resume check), and appends
the record to the store; every record says where it ran (``slurm``: job id, nodes, partition,
Python executable, cnnbench version). Before the case, the job leaves a note in
``<results>/.slurm/started/`` with the machine as the node names it and the case's configuration
as the node resolves it (as the sweep's own records of failures do), which the record of a job
Slurm ends (a time-out, a lost node) carries.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.results import files
from cnnbench.results.locking import check_locking
from cnnbench.results.record import Record
from cnnbench.results.sessions import set_session_id, slurm_session_id
from cnnbench.results.stamps import now_iso
from cnnbench.results.store import append_record
from cnnbench.sweep.slurm.ledger import FOLDER, read_job_file
from cnnbench.sweep.suite import Suite
from cnnbench.version import __version__

STARTED = "started"
ENVIRONMENT_KEYS = ("python", "python_version", "cnnbench_version", "torch_version")


def environment_here() -> dict[str, str]:
    """What must be the same on the node as where the sweep was submitted."""
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "(not installed)"
    return {"python": sys.executable, "python_version": platform.python_version(), "cnnbench_version": __version__,
            "torch_version": torch_version}


def differences(submitted: dict[str, str], here: dict[str, str]) -> list[str]:
    return [f"{key} {here.get(key)} here, {submitted.get(key)} where the sweep was submitted"
            for key in ENVIRONMENT_KEYS if submitted.get(key) != here.get(key)]


@dataclass(frozen=True)
class JobSpec:
    """What one job runs: a suite of one case, where its record goes, as which machine."""

    suite: Suite
    """The suite with this job's case only."""
    results_dir: str
    label: str | None
    submitter: dict[str, str] = field(default_factory=environment_here)
    partition: str | None = None


def slurm_section(spec: JobSpec) -> dict[str, Any]:
    """The record's ``slurm`` section: which job, on which nodes, in which environment."""
    env = os.environ
    array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    job_id = f"{array}_{task}" if array and task else env.get("SLURM_JOB_ID", "")
    return {"job_id": job_id, "nodes": env.get("SLURM_JOB_NODELIST", socket.gethostname()),
            "node": env.get("SLURMD_NODENAME", socket.gethostname()),
            "partition": env.get("SLURM_JOB_PARTITION", spec.partition), "cluster": env.get("SLURM_CLUSTER_NAME"),
            "python": sys.executable, "cnnbench_version": __version__}


def run_job(spec: JobSpec) -> dict[str, Any]:
    """Run the job's case on this node (see the module documentation); what happened, for submitit."""
    # submitit asks for SIGUSR2 shortly before the time limit and would requeue the job; a case is
    # not checkpointable: it runs to the end, or Slurm ends it and --status records why.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    check_locking(spec.results_dir)  # this node's mount of the store: refused before any work
    section = slurm_section(spec)
    session = set_session_id(slurm_session_id(section["job_id"]))  # this job's records, its nodes' and workers'
    (case,) = spec.suite.cases
    diff = differences(spec.submitter, environment_here())
    if diff:
        record = refusal_record(spec, section, diff)
        append_record(spec.results_dir, record)
        return {"status": "error", "refused": diff}
    if (case.config.num_nodes or 1) > 1:
        from cnnbench.sweep.slurm.multinode import run_nodes

        return run_nodes(spec.suite, spec.results_dir, section, case_fields(spec.suite, section))
    from cnnbench.sweep import runner
    from cnnbench.sweep.outcomes import SweepOptions
    from cnnbench.sweep.progress import PlainReporter

    runner.preload_engine()
    options = SweepOptions(results_dir=Path(spec.results_dir), record_extra={"slurm": section, "session_id": session})
    sweep = runner.SweepRunner(spec.suite, options, reporter=PlainReporter(sys.stdout))
    env = sweep.machines.environment(case.config.device, case.config.machine_label)["environment"]
    config, unresolved = sweep.cases.resolved_config(case.config)  # for the record of a job Slurm ends
    write_note(spec.results_dir, section, env, config, unresolved)
    result = sweep.run()
    if result.interrupted_by is not None:
        return {"status": None, "stopped_by": result.interrupted_by}
    if result.results:
        record = result.results[0].record
        return {"status": record.get("status"), "run_id": record.get("run_id")}
    return {"status": "ok", "skipped": "already recorded ok"}


def refusal_record(spec: JobSpec, section: dict[str, Any], diff: list[str]) -> dict[str, Any]:
    from cnnbench.machine.environment import cpu_model, derive_machine_label

    (case,) = spec.suite.cases
    cpu = cpu_model()
    label = spec.label or case.config.machine_label
    env = {"machine": label or derive_machine_label(cpu, None, 0), "hostname": socket.gethostname(), "cpu_model": cpu}
    error = f"this node's environment differs from the submitter's, so nothing ran: {'; '.join(diff)}"
    return Record(config=case.config.recorded(), environment=env, metrics={}, status="error", error=error,
                  extra=case_fields(spec.suite, section)).to_dict()


def case_fields(suite: Suite, section: dict[str, Any]) -> dict[str, Any]:
    from cnnbench.results.naming import case_name

    (case,) = suite.cases
    return {"suite_name": suite.name, "case_key": case.key, "repeat": case.repeat,
            "case_name": case_name(case.config.recorded()), "slurm": section,
            "session_id": slurm_session_id(section["job_id"])}


def write_note(results_dir: str, section: dict[str, Any], environment: dict[str, Any],
               config: dict[str, Any] | None = None, unresolved: str | None = None) -> None:
    """``.slurm/started/<job id>.json``: the job started, on which machine, with the case's configuration
    as its own record would carry it (``unresolved``: why it could not be resolved), written whole, then
    renamed."""
    folder = files.real_folder_inside(Path(results_dir), FOLDER, STARTED)  # real folders, never links
    note: dict[str, Any] = {"started_at": now_iso(), "slurm": section, "environment": environment}
    if config is not None:
        note["config"] = config
    if unresolved:
        note["unresolved"] = unresolved
    files.write_replacing(folder / f"{section['job_id']}.json", json.dumps(note, default=str).encode(),
        root=Path(results_dir))


MAX_NOTE = 1 << 20
"""Longest ``started/<job id>.json`` read (a job's note is a few kilobytes)."""


def read_note(results_dir: str | os.PathLike[str], job_id: str) -> dict[str, Any] | None:
    """What :func:`write_note` wrote for ``job_id`` (a name from ``jobs.jsonl``, never a path), or None."""
    data = read_job_file(results_dir, STARTED, f"{job_id}.json", most=MAX_NOTE)
    try:
        note = json.loads(data.decode("utf-8")) if data is not None else None
    except ValueError:
        return None
    return note if isinstance(note, dict) else None
