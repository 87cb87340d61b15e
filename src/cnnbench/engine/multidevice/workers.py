"""A run on several devices of this node: check, start one worker per device, collect the record.

``cnnbench run --num-devices N`` comes here (:func:`cnnbench.engine.run_and_append`). Every check
``cnnbench run`` makes happens first, in this process, so a bad option is one line before
any worker starts. The workers run the same engine (:func:`cnnbench.engine.multidevice.worker.launched_worker`);
rank 0 prints the progress lines and returns the record. When a worker fails, the others
are stopped at once and the record says which rank failed and why.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from cnnbench.config import RunConfig
from cnnbench.engine.multidevice.failure import failure_record
from cnnbench.engine.multidevice.launch import WorkerFailed, launch_workers
from cnnbench.engine.resolve import preflight
from cnnbench.results.record import Record
from cnnbench.results.stamps import now_iso


def run_on_workers(config: RunConfig, *, emit: Callable[[str], None] | None = None,
                   extra: Mapping[str, Any] | None = None) -> Record:
    """Run ``config`` on ``config.requested_devices()`` worker processes and return rank 0's record.

    One device makes one worker, without a process group: the same run as in this process.
    """
    from cnnbench.engine.multidevice.worker import launched_worker

    run = preflight(config)  # every check before a worker starts: ConfigError here means nothing ran
    n, world = run.world.world_size, run.world
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    started_at = now_iso()
    with tempfile.TemporaryDirectory(prefix="cnnbench-notes-") as notes:
        try:
            level = logging.getLogger().getEffectiveLevel()
            args = (fields, dict(extra or {}), emit is not None, notes, level, os.getpid())
            returned = launch_workers(launched_worker, args, nprocs=n, timeout_s=config.timeout, notes_dir=notes)
        except WorkerFailed as failure:
            return failure_record(config, world, failure, extra=extra, started_at=started_at)
    return Record.from_dict(returned[0])
