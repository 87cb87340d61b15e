"""Each rank of ``cnnbench comm``: the process group, the device, then :func:`measure_all`.

:func:`comm_worker` is the entry of the workers ``cnnbench comm --num-devices N`` starts
through ``cnnbench run``'s launcher (:func:`cnnbench.engine.multidevice.launch.launch_workers`):
it dies with the launcher (:func:`cnnbench.lifetime.die_with_parent`), ignores Ctrl-C (the
agent stops the workers) and leaves a failure note for the launcher to name the rank that
failed. :func:`comm_body` is the same measurement in a process torchrun started.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from cnnbench.distributed.process_group import start_process_group, stop_process_group
from cnnbench.distributed.world import World
from cnnbench.engine.backend import make_current
from cnnbench.engine.comm.measure import Emit, Setting, measure_all
from cnnbench.engine.comm.spec import CommConfig, default_backend
from cnnbench.engine.multidevice.worker import (
    configure_worker_logging,
    leave_interrupts_to_the_agent,
    split_host_threads,
    write_failure_note,
)
from cnnbench.lifetime import die_with_parent
from cnnbench.terminal import output_dropped_from_now


def device_kind(config: CommConfig) -> str:
    """``cuda`` or ``cpu`` (``auto``: cuda when torch sees a GPU)."""
    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return config.device


def comm_body(config: CommConfig, world: World, emit: Emit | None, warnings: list[str],
              write: Callable[[dict[str, Any]], Path] | None) -> list[dict[str, Any]]:
    """Join the group, measure, leave; rank 0's records (``write``: appends one, on rank 0).

    Rank 0 describes the machine (seconds: sysinfo's probes) on a thread while the group
    forms, and before anything is timed, so that the probes never share the CPU with a timing."""
    from cnnbench.machine.environment import capture_environment

    kind = device_kind(config)
    device = torch.device(kind, world.local_rank) if kind == "cuda" else torch.device("cpu")
    backend = default_backend(kind) if config.backend == "auto" else config.backend
    make_current(device)  # before anything touches CUDA, the probes' thread included
    with ThreadPoolExecutor(1, thread_name_prefix="cnnbench-environment") as pool:
        future = pool.submit(capture_environment, device, config.machine_label) if world.is_main else None
        start_process_group(world, backend, device, config.timeout)
        try:
            environment = future.result() if future is not None else None
            setting = Setting(config, world, device, backend, environment, warnings)
            return measure_all(setting, emit, write if world.is_main else None)
        finally:
            stop_process_group()


def comm_worker(config: CommConfig, console: bool, warnings: list[str], notes_dir: str | None,
                log_level: int, launcher_pid: int | None) -> list[dict[str, Any]] | None:
    """Entry of one worker our launcher started; rank 0 returns its records."""
    from cnnbench.results.store import append_record

    die_with_parent(launcher_pid)
    leave_interrupts_to_the_agent()
    output_dropped_from_now()  # | head: rank 0's lines go nowhere, its run goes on
    world = World.from_env()
    configure_worker_logging(world, log_level)
    split_host_threads(world)
    emit = (lambda line: print(line, flush=True)) if console else None
    try:
        records = comm_body(config, world, emit, warnings, lambda r: append_record(config.results_dir, r))
    except BaseException as exc:
        if notes_dir is not None:
            write_failure_note(notes_dir, world.rank, exc)
        raise
    return records if world.is_main else None


def log_level() -> int:
    return logging.getLogger().getEffectiveLevel()
