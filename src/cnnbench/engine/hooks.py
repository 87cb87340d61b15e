"""Measurement hooks: what is measured around the timed steps, besides the steps themselves.

In the spirit of pyperf's hooks: the engine calls ``start()`` just before the first timed
step and ``stop()`` right after the last one (also when the loop failed), then merges each
hook's ``metrics()`` into the record's ``metrics``. A hook does no work inside the timed
loop; one that samples during the steps (a telemetry sampler) does it on its own thread.
A ``warnings`` list in a hook's metrics extends the record's ``metrics.warnings``.

:func:`default_hooks` is the list every run gets: peak memory today; a telemetry sampler
or a busy-machine guard joins by being added there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from cnnbench.engine.memory import peak_device_memory, peak_host_memory, reset_device_peak


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


def default_hooks(device: torch.device) -> list[MeasurementHook]:
    """The hooks every run measures with."""
    return [PeakMemory(device)]


def merge_hook_metrics(metrics: dict[str, Any], hooks: Sequence[MeasurementHook]) -> None:
    """Add every hook's metrics to ``metrics``; ``warnings`` lists are concatenated."""
    for hook in hooks:
        for key, value in hook.metrics().items():
            if key == "warnings":
                metrics.setdefault("warnings", []).extend(value)
            else:
                metrics[key] = value


class HookSet:
    """The hooks of one run, started and stopped together (``stop`` runs once, also when
    ``start`` never ran because the run failed before its timed steps)."""

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
        for hook in self.hooks:
            hook.stop()

    def metrics(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        merge_hook_metrics(merged, self.hooks)
        return merged
