"""Measurement hooks: what is measured around the timed steps, besides the steps themselves.

In the spirit of pyperf's hooks: the engine calls ``start()`` just before the first timed
step and ``stop()`` right after the last one (also when the loop failed), then merges each
hook's ``metrics()`` into the record's ``metrics``. Hooks nest: they start in their order and
stop in the reverse one, so the last to start (the telemetry sampler, which reads the energy
counter) is the first to stop, and its window is the closest to the timed steps. A hook does no work inside the timed
loop; one that samples during the steps (a telemetry sampler) does it on its own thread.
A ``warnings`` list in a hook's metrics extends the record's ``metrics.warnings``.

:func:`default_hooks` is the list every run gets: peak memory, the busy-machine guard
(:mod:`cnnbench.engine.guard`), the telemetry sampler (:mod:`cnnbench.engine.telemetry`)
and, on a GPU, the worker's own device (:class:`RunDevice`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from cnnbench.distributed.world import World
from cnnbench.engine.guard import BusyMachineGuard
from cnnbench.engine.memory import peak_device_memory, peak_host_memory, reset_device_peak
from cnnbench.engine.telemetry import DEFAULT_INTERVAL_S, TelemetrySampler
from cnnbench.machine.host import usable_cpus

log = logging.getLogger(__name__)


@runtime_checkable
class MeasurementHook(Protocol):
    def start(self) -> None:
        """Just before the first timed step."""

    def stop(self) -> None:
        """Right after the last timed step, or when the loop failed."""

    def metrics(self) -> Mapping[str, Any]:
        """Fields this hook adds to the record's ``metrics`` (called after ``stop``)."""
        ...


class PeakMemory:
    """Peak device memory over the timed steps (the allocator's high-water mark, reset at
    ``start``: weights, optimizer state and the steps' activations) and the process's peak
    resident set (over its whole life: the operating system keeps no resettable peak)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._device_peak: dict[str, int | None] = {}
        self._host_peak: int | None = None

    def start(self) -> None:
        reset_device_peak(self.device)

    def stop(self) -> None:
        self._device_peak = peak_device_memory(self.device)
        self._host_peak = peak_host_memory()

    def metrics(self) -> Mapping[str, Any]:
        return {**self._device_peak, "peak_host_memory_bytes": self._host_peak}


class RunDevice:
    """The worker's own CUDA device (name, SMs, MIG profile) as ``metrics.gpu_devices``, so
    that rank 0 learns every rank's GPU (:func:`cnnbench.engine.metrics.measured_metrics`
    tags each with its rank)."""

    def __init__(self, device: torch.device) -> None:
        from cnnbench.machine.cuda_device import describe_cuda_device

        self.described = describe_cuda_device(device).as_dict() if device.type == "cuda" else None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def metrics(self) -> Mapping[str, Any]:
        return {"gpu_devices": [self.described]} if self.described is not None else {}


def default_hooks(device: torch.device, world: World | None = None, *,
                  interval_s: float = DEFAULT_INTERVAL_S) -> list[MeasurementHook]:
    """The hooks every run measures with: peak memory, the busy-machine guard, telemetry and
    (on a GPU) the run's device.

    Each worker samples its own GPU; the host (CPU use, load, frequency, other processes)
    is sampled and judged by one worker per node (local rank 0). A run's own processes are
    this process and its children, or, with several workers on this node, the tree of the
    process that started them.
    """
    world = world or World.single()
    cpus = usable_cpus() if world.local_rank == 0 else None
    gpus = nvml_indices(device)
    several = world.process_group and world.local_world_size > 1
    roots = [os.getppid()] if several else [os.getpid()]
    sampler = TelemetrySampler(gpus, host_cpus=cpus, interval_s=interval_s)
    guard = BusyMachineGuard(cpus=cpus, run_roots=roots, gpus=gpus, sampler=sampler)
    hooks: list[MeasurementHook] = [PeakMemory(device), guard, sampler]
    if device.type == "cuda":
        hooks.append(RunDevice(device))
    return hooks


def nvml_indices(device: torch.device) -> list[int]:
    """The NVML index of a CUDA device (matched by UUID), as a list; empty for other
    devices or without NVML."""
    if device.type != "cuda":
        return []
    from cnnbench.machine.nvml import nvml_index_of_uuid, open_nvml

    index = device.index if device.index is not None else torch.cuda.current_device()
    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except Exception as exc:
        log.debug("no UUID for %s: %s", device, exc)
        return []
    nv = open_nvml()
    if nv is None:
        return []
    with nv:
        found = nvml_index_of_uuid(nv, uuid)
    if found is None:
        log.info("NVML does not see %s (UUID %s): no GPU telemetry", device, uuid)
        return []
    return [found]


def merge_hook_metrics(metrics: dict[str, Any], hooks: Sequence[MeasurementHook]) -> None:
    """Add every hook's metrics to ``metrics``; ``warnings`` lists are concatenated."""
    for hook in hooks:
        for key, value in hook.metrics().items():
            if key == "warnings":
                metrics.setdefault("warnings", []).extend(value)
            else:
                metrics[key] = value


class HookSet:
    """The hooks of one run, started in order and stopped in reverse order (``stop`` runs
    once, also when ``start`` never ran because the run failed before its timed steps)."""

    def __init__(self, hooks: Sequence[MeasurementHook]) -> None:
        self.hooks = list(hooks)
        self._stopped = False

    def start(self) -> None:
        for hook in self.hooks:
            hook.start()

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for hook in reversed(self.hooks):
            hook.stop()

    def metrics(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        merge_hook_metrics(merged, self.hooks)
        return merged
