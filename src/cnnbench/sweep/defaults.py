"""What a sweep runs when it is given nothing else: the engine, as ``cnnbench run`` runs it.

A worker runs one case in the case's process; a probe tells, in a process of its own,
the concrete device and the machine's environment. Both travel to those processes by
name (module-level functions, or ``functools.partial`` of them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cnnbench.config.run_config import RunConfig
from cnnbench.sweep.isolation import wait_for_server

Emit = Callable[[str], None]
Worker = Callable[[RunConfig, "Emit | None", Mapping[str, Any]], Any]
"""Runs one case in the child: ``worker(config, emit, extra)`` returns a record
(:class:`Record`, its dict, or ``(Record, path)`` as :func:`cnnbench.engine.run_and_append` does)."""
Probe = Callable[[str, "str | None"], dict[str, Any]]
"""Runs in a child: ``probe(device, machine_label)`` -> ``{"device": concrete, "environment": {...}}``."""
Resolver = Callable[[RunConfig], dict[str, Any]]
"""Runs in a child: ``resolver(config)`` -> the ``config`` section the worker's record of ``config``
would carry; raises when the configuration cannot be resolved here."""

PROBE_TIMEOUT_S = 300.0


def engine_worker(config: RunConfig, emit: Emit | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The default worker: :func:`cnnbench.engine.run_and_append`."""
    from cnnbench.engine import run_and_append
    from cnnbench.engine.log_format import closing_lines

    record, _ = run_and_append(config, emit=emit, extra=extra)
    if emit is not None and record.status == "ok":
        for line in closing_lines(record.metrics):
            emit(line)
    return record.to_dict()


def engine_resolver(config: RunConfig) -> dict[str, Any]:
    """The default worker's resolver: the configuration as :func:`engine_worker`'s record would
    carry it, resolved by the engine's own checks before any work
    (:func:`cnnbench.engine.resolve.preflight`), on the cores ``--host-cpus`` leaves it as
    :func:`cnnbench.engine.run_and_append` does. Raises :class:`~cnnbench.config.ConfigError`."""
    from cnnbench.engine.resolve import preflight
    from cnnbench.machine.affinity import host_cpus_pinned

    with host_cpus_pinned(config.host_cpus):
        return preflight(config).config.recorded()


def engine_probe(device: str, machine_label: str | None) -> dict[str, Any]:
    """The default probe: the engine's device rule (``auto`` = cuda when present) and environment."""
    from cnnbench.machine.devices import resolve_device_kind
    from cnnbench.machine.environment import capture_environment

    device = resolve_device_kind(device)
    return {"device": device, "environment": capture_environment(device, machine_label)}


def preload_engine() -> None:
    """Start the fork server and wait until it has imported torch, torchvision and the
    engine, so that no case (and no case's time limit) pays for it. Nothing touches CUDA."""
    wait_for_server()
