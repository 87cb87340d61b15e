"""What each worker process of a multi-device run does, whoever started it.

* :func:`launched_worker` is the entry point of the workers ``cnnbench run --num-devices N``
  starts (:func:`cnnbench.engine.multidevice.launch.launch_workers`): it returns rank 0's record.
* :func:`run_under_torchrun` is what ``cnnbench run`` does in a process torchrun started:
  rank 0 writes the record (an ``error``/``oom`` record when this worker failed).

Both split the host's cores among the workers of the node (torch threads per worker), so
that they do not oversubscribe the CPU, or give each ``--threads-per-worker`` threads
(:mod:`cnnbench.engine.threads`); under torchrun each worker first restricts itself to
``--host-cpus`` (our launcher's workers inherit that from the process that started them).
"""

from __future__ import annotations

import json
import logging
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cnnbench.config import ConfigError, RunConfig
from cnnbench.distributed.world import World
from cnnbench.engine.threads import set_worker_threads
from cnnbench.lifetime import die_with_parent
from cnnbench.terminal import output_dropped_from_now
from cnnbench.words import OneLineFormatter

log = logging.getLogger(__name__)


def leave_interrupts_to_the_agent() -> None:
    """Ctrl-C reaches every process of the terminal's group; the agent that started this
    worker (ours, or torchrun's) stops the workers itself, so a worker ignores SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def configure_worker_logging(world: World, level: int = logging.WARNING) -> None:
    """This worker's log lines start with ``[rank N]``: several workers write to one terminal
    (torchrun's), or to one log each (ours), and a line must say whose it is."""
    handler = logging.StreamHandler()
    handler.setFormatter(OneLineFormatter(f"[rank {world.rank}] %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def split_host_threads(world: World, fixed: int | None = None) -> int:
    """Give this worker its share of the cores it may use, or ``fixed`` threads
    (``--threads-per-worker``; :mod:`cnnbench.engine.threads`); returns the thread count."""
    return set_worker_threads(fixed, world.local_world_size)


def launched_worker(config_fields: dict[str, Any], extra: dict[str, Any], console: bool,
                    notes_dir: str | None = None, log_level: int = logging.WARNING,
                    launcher_pid: int | None = None) -> dict[str, Any] | None:
    """Entry point of one worker started by our launcher; rank 0 returns the record's dict.

    First of all, the worker asks to die with ``launcher_pid`` (the process that started it,
    where the elastic agent runs): a launcher killed with SIGKILL leaves no worker training.

    When the run fails here, this worker first leaves a note in ``notes_dir`` (its error,
    in one line), so that the launcher can name the worker that failed first even when its
    peers fail a moment later because it is gone.
    """
    from cnnbench.engine.benchmark import resolve_and_measure

    die_with_parent(launcher_pid)
    leave_interrupts_to_the_agent()
    output_dropped_from_now()  # | head: rank 0's lines go nowhere, its run goes on
    config = RunConfig.from_mapping(config_fields)
    world = World.from_env()
    if world.world_size == 1 and config.requested_devices() == 1:
        world = World.single()  # a one-device run in its own process: no process group
    configure_worker_logging(world, log_level)
    split_host_threads(world, config.threads_per_worker)
    # The process that started the workers checked the run first and printed its warnings.
    logging.getLogger("cnnbench.engine.resolve").setLevel(logging.ERROR)
    emit: Callable[[str], None] | None = (lambda line: print(line, flush=True)) if console else None
    try:
        record = resolve_and_measure(config, emit=emit, extra=extra, world=world)
    except BaseException as exc:
        if notes_dir is not None:
            write_failure_note(notes_dir, world.rank, exc)
        raise
    return record.to_dict() if world.is_main else None


def write_failure_note(notes_dir: str, rank: int, exc: BaseException) -> None:
    """Leave ``rank<rank>.json``; an error that names another worker as the one that failed
    (``failed_rank``: a worker too slow for the others) speaks for that worker, ``by`` this one."""
    from cnnbench.results.error_text import error_text

    failed = getattr(exc, "failed_rank", rank)
    note = {"rank": failed, "by": rank, "time": time.time(), "error": error_text(exc).splitlines()[0]}
    path = Path(notes_dir) / f"rank{rank}.json"
    try:
        path.write_text(json.dumps(note))
    except OSError as err:  # the note helps; its absence must not hide the failure
        log.debug("could not write %s: %s", path, err)


def run_under_torchrun(config: RunConfig, *, emit: Callable[[str], None] | None,
                       extra: Mapping[str, Any] | None = None) -> tuple[Any, Path | None]:
    """Run this torchrun worker's part; rank 0 appends the record and returns it with its file.

    Other ranks return ``(None, None)``. When this worker fails, rank 0 records the failure
    (``error``, or ``oom``) before the exception goes on. When another rank fails, rank 0
    records it, naming that rank, from its :class:`~cnnbench.engine.multidevice.watchdog.FailureWatch`
    thread, even while its main thread is blocked in a collective (NCCL) that never returns.
    """
    from cnnbench.engine.benchmark import resolve_and_measure
    from cnnbench.engine.multidevice.failure import failure_record
    from cnnbench.engine.multidevice.launch import WorkerFailed
    from cnnbench.engine.multidevice.watchdog import FailureWatch
    from cnnbench.machine.affinity import restrict_host_cpus
    from cnnbench.results.error_text import error_text
    from cnnbench.results.store import append_record

    die_with_parent()  # torchrun's agent started this process: when it is killed, so is this one
    leave_interrupts_to_the_agent()
    world = World.from_env()
    configure_worker_logging(world, logging.getLogger().getEffectiveLevel())
    restrict_host_cpus(config.host_cpus)  # every worker of the node picks the same cores
    split_host_threads(world, config.threads_per_worker)

    def record_failure(rank: int, cause: str) -> None:
        failed = failure_record(config, world, WorkerFailed(rank, cause), extra=extra)
        append_record(config.results_dir, failed.to_dict())

    with FailureWatch(world, record_failure if world.is_main else None) as watch:
        try:
            record = resolve_and_measure(config, emit=emit, extra=extra, world=world)
        except ConfigError:
            raise  # nothing ran: no record
        except Exception as exc:
            if not world.is_main:
                watch.publish(error_text(exc).splitlines()[0])
            elif (peer := watch.failed_peer()) is not None:
                watch.record_once(*peer)  # this rank's error is a consequence of that one
            elif watch.claim():  # nothing recorded yet
                append_record(config.results_dir, failure_record(config, world, exc, extra=extra).to_dict())
            raise
    if not world.is_main:
        return None, None
    return record, append_record(config.results_dir, record.to_dict())
