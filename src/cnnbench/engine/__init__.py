"""The engine: a run on one device or many, from its configuration to its stored record.
May import: every layer below (``distributed``, ``results``, ``models``, ``data``, ``config``, ``machine``).

Resolve a configuration, prepare, warm up, run the timed loop, store the record; a run on
several devices is :mod:`~cnnbench.engine.multidevice`'s.

``run_and_append(config, emit=print)`` is what ``cnnbench run`` and each sweep case call;
``run_in_process(config)`` runs it here, on one device, and stores nothing. The
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

__all__ = ["run_and_append", "run_in_process"]


def run_in_process(config: RunConfig, *, emit: Callable[[str], None] | None = None,
                   extra: Mapping[str, Any] | None = None) -> Record:
    """Run one benchmark on one device in this process (with ``--threads-per-worker``, that many
    torch threads while it runs) and return its record."""
    from cnnbench.engine.benchmark import resolve_and_measure
    from cnnbench.engine.threads import run_threads

    with run_threads(config.threads_per_worker):
        return resolve_and_measure(config, emit=emit, extra=extra)


def run_and_append(config: RunConfig, *, emit: Callable[[str], None] | None = None,
                   extra: Mapping[str, Any] | None = None, own_process: bool = False,
                   append: bool = True) -> tuple[Record, Path | None]:
    """Run one benchmark, here or in a worker per device when it asks for several, and append
    its record to ``config.results_dir`` (``append=False``: nothing is written, the path is None).

    ``own_process``: a run on one device runs in a worker process too, so that this process
    holds no device memory or CUDA context of it afterwards (each point of ``--scaling``).

    With ``--host-cpus N`` this process is pinned to N cores while the run lasts: the workers and
    loader processes it starts inherit that; afterwards its cores and torch threads are as they
    were (:func:`~cnnbench.machine.affinity.host_cpus_pinned`).
    """
    from cnnbench.machine.affinity import host_cpus_pinned
    from cnnbench.results.store import append_record

    with host_cpus_pinned(config.host_cpus):
        if config.requested_devices() > 1 or own_process:
            from cnnbench.engine.multidevice.workers import run_on_workers

            record = run_on_workers(config, emit=emit, extra=extra)
        else:
            record = run_in_process(config, emit=emit, extra=extra)
    if not append:
        return record, None
    return record, append_record(config.results_dir, record.to_dict())
