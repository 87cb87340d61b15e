"""``cnnbench comm`` from the process the user started: check, start the workers (or, under
torchrun, be one), and say what was written.

On this node, :func:`measure_comm` starts ``--num-devices`` workers through the launcher of
``cnnbench run --num-devices N`` (:func:`~cnnbench.engine.multidevice.launch.launch_workers`):
the same rendezvous, orphan protection, failure notes and one-line cause when a worker dies.
Under torchrun this process is one rank of torchrun's job and measures in place; rank 0
writes the records. When a worker dies, an ``error`` record (``kind: comm``) names the rank
and the cause.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.config import ConfigError
from cnnbench.distributed.world import World, launched_by_torchrun
from cnnbench.engine.comm.spec import KIND, CommConfig, default_backend
from cnnbench.results.error_text import error_text
from cnnbench.results.record import Record
from cnnbench.results.stamps import now_iso
from cnnbench.results.store import append_record, machine_file_name
from cnnbench.words import plural

log = logging.getLogger(__name__)


@dataclass
class CommResult:
    """Rank 0's records (as stored), the store file, and the failure that ended the run, if any."""

    records: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None
    failure: str | None = None
    main: bool = True
    """False for a torchrun rank other than 0: it writes and prints nothing."""


def measure_comm(config: CommConfig, emit: Callable[[str], None] | None = None) -> CommResult:
    """Measure ``config`` on this node's workers, or as this torchrun rank (see the module)."""
    from cnnbench.results.sessions import invocation

    with invocation():  # before the workers start: every record of this measurement carries its id
        return _measure(config, emit)


def _measure(config: CommConfig, emit: Callable[[str], None] | None) -> CommResult:
    if launched_by_torchrun():
        return _under_torchrun(config, emit)
    from cnnbench.engine.comm.worker import comm_worker, device_kind, log_level
    from cnnbench.engine.multidevice.launch import WorkerFailed, launch_workers

    kind = device_kind(config)
    n = config.num_devices or _default_devices(kind)
    warnings = _check_world(config, kind, n)
    started_at = now_iso()
    with tempfile.TemporaryDirectory(prefix="cnnbench-notes-") as notes:
        args = (config, emit is not None, warnings, notes, log_level(), os.getpid())
        try:
            returned = launch_workers(comm_worker, args, nprocs=n, timeout_s=config.timeout, notes_dir=notes)
        except WorkerFailed as failure:
            world = World(world_size=n, local_world_size=n, process_group=True)
            return _failed(config, world, kind, str(failure), started_at)
    records = returned.get(0) or []
    return CommResult(records, _store_file(config, records))


def _default_devices(kind: str) -> int:
    """Every GPU torch sees (as nccl-tests is run across a node's GPUs), 2 CPU workers."""
    if kind == "cuda":
        import torch

        return max(2, torch.cuda.device_count())
    return 2


def _check_world(config: CommConfig, kind: str, n: int) -> list[str]:
    """Refuse what cannot run before a worker starts; the records' warnings."""
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device", "cuda: torch sees no GPU here; use --device cpu")
        if torch.cuda.device_count() < n:
            raise ConfigError("num_devices", f"{n} GPUs needed, torch sees {torch.cuda.device_count()} "
                                             "(a collective needs 2 ranks or more)")
        return []
    if config.backend == "nccl":  # --device auto on a machine without a GPU
        raise ConfigError("backend", "nccl needs CUDA devices, and this run is on the CPU; use gloo")
    from cnnbench.machine.affinity import cpu_count_available

    cores = cpu_count_available()
    if n > cores:
        if not config.oversubscribe:
            raise ConfigError("num_devices", f"{n} CPU workers, but this process may use {plural(cores, 'core')}: "
                                             f"use at most {cores}, or --oversubscribe to run them anyway")
        return [f"oversubscribed: {n} CPU workers shared {plural(cores, 'core')} (--oversubscribe); the "
                "figures measure their contention too"]
    return []


def _under_torchrun(config: CommConfig, emit: Callable[[str], None] | None) -> CommResult:
    from cnnbench.engine.comm.worker import comm_body, device_kind
    from cnnbench.engine.multidevice.worker import (
        configure_worker_logging,
        leave_interrupts_to_the_agent,
        split_host_threads,
    )
    from cnnbench.lifetime import die_with_parent

    die_with_parent()
    leave_interrupts_to_the_agent()
    world = World.from_env()
    configure_worker_logging(world, logging.getLogger().getEffectiveLevel())
    split_host_threads(world)
    if config.num_devices is not None and config.num_devices != world.world_size:
        raise ConfigError("num_devices", f"is {config.num_devices}, but torchrun started {world.world_size} "
                                         "workers (leave it out under torchrun)")
    started_at = now_iso()
    try:
        records = comm_body(config, world, emit if world.is_main else None, [],
                            lambda r: append_record(config.results_dir, r))
    except Exception as exc:
        if not world.is_main:
            raise
        return _failed(config, world, device_kind(config), error_text(exc).splitlines()[0], started_at)
    return CommResult(records, _store_file(config, records), main=world.is_main)


def _failed(config: CommConfig, world: World, kind: str, error: str, started_at: str) -> CommResult:
    """An ``error`` record of the whole run (a worker died): which collectives, which rank, why."""
    from cnnbench.machine.environment import capture_environment

    backend = default_backend(kind) if config.backend == "auto" else config.backend
    fields = {"collective": ",".join(config.collectives), "bytes": None, "dtype": config.dtype,
              "num_devices": world.world_size, "num_nodes": world.num_nodes, "device": kind,
              "backend": backend, "warmup": config.warmup, "iters": config.iters}
    record = Record(config=fields, environment=capture_environment(kind, config.machine_label), metrics={},
                    status="error", error=error, started_at=started_at, extra={"kind": KIND, **config.extra})
    path = append_record(config.results_dir, record.to_dict())
    return CommResult([record.to_dict()], path, failure=error)


def _store_file(config: CommConfig, records: list[dict[str, Any]]) -> Path | None:
    if not records:
        return None
    machine = (records[0].get("environment") or {}).get("machine")
    return Path(config.results_dir) / machine_file_name(machine) if machine else None
