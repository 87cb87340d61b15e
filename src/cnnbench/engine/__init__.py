"""The engine: resolve a configuration, prepare, warm up, run the timed loop, store the record.

``execute(config, emit=print)`` is what ``cnnbench run`` and each sweep case call. The
phases live in their own modules, in the order they run: :mod:`~cnnbench.engine.resolve`,
:mod:`~cnnbench.engine.prepare` (the strategy's wrap point and the input source),
:mod:`~cnnbench.engine.loop` (warm-up and timed loop), :mod:`~cnnbench.engine.hooks`
(measurements around the timed steps) and :mod:`~cnnbench.engine.metrics`;
:mod:`~cnnbench.engine.benchmark` runs them in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cnnbench.config import RunConfig
from cnnbench.results.record import Record

__all__ = ["execute", "run_benchmark"]


def run_benchmark(config: RunConfig, *, emit: Callable[[str], None] | None = None,
                  extra: Mapping[str, Any] | None = None) -> Record:
    from cnnbench.engine.benchmark import run_benchmark as _run

    return _run(config, emit=emit, extra=extra)


def execute(config: RunConfig, *, emit: Callable[[str], None] | None = None,
            extra: Mapping[str, Any] | None = None) -> tuple[Record, Path]:
    """Run one benchmark (starting a worker per device when it asks for several) and append
    its record to ``config.results_dir``."""
    from cnnbench.results.store import append_record

    if config.requested_devices() > 1:
        from cnnbench.engine.workers import run_on_workers

        record = run_on_workers(config, emit=emit, extra=extra)
    else:
        record = run_benchmark(config, emit=emit, extra=extra)
    path = append_record(config.results_dir, record.to_dict())
    return record, path
