"""Records of runs that failed outside the engine's own loop (a worker of a multi-device run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cnnbench.config import RunConfig
from cnnbench.distributed.world import World
from cnnbench.engine.resolve import resolve
from cnnbench.machine.environment import capture_environment
from cnnbench.oom import is_out_of_memory
from cnnbench.results.error_text import error_text
from cnnbench.results.record import Record
from cnnbench.results.stamps import now_iso


def failure_record(config: RunConfig, world: World, failure: BaseException, *,
                   extra: Mapping[str, Any] | None = None, started_at: str | None = None) -> Record:
    """An ``error`` (or ``oom``) record of ``config`` run in ``world`` that ended with ``failure``."""
    from cnnbench.engine.multidevice.launch import WorkerFailed

    run = resolve(config, world)
    if isinstance(failure, WorkerFailed):
        status, error = ("oom" if failure.out_of_memory else "error"), str(failure)
    else:
        status, error = ("oom" if is_out_of_memory(failure) else "error"), error_text(failure)
    environment = capture_environment(run.config.device, run.config.machine_label)
    return Record(config=run.config.recorded(), environment=environment, metrics={}, status=status,
                  error=error, started_at=started_at or now_iso(), extra=dict(extra or {}))
