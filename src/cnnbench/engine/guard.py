"""The busy-machine guard: notices when the machine was not quiet enough to trust a figure.

:class:`BusyMachineGuard` is a measurement hook. It takes a first look when it is made (the
engine makes the hooks before it builds the model and warms up), a second at ``start()``
(just before the timed steps) and a last at ``stop()``; it does nothing in between, and
nothing in the timed loop. Its findings are short texts in ``metrics.warnings``, each
starting with what it is about:

- ``busy CPU``: processes that are not part of this run took CPU time on the cores this
  run may use. Measured, not guessed: the CPU time spent on those cores (``/proc/stat``:
  user, nice, system, interrupts, steal) minus the CPU time of this run's own processes
  (this process and its children, or with several workers on this node every worker and
  its children), over the warm-up and over the timed steps; warned when the others used
  10% or more of those cores (e.g. 0.2 of 2 cores). Windows shorter than 1 s are not
  judged (CPU time is counted in 10 ms ticks). The load average is not the trigger: it
  counts this run's own threads and lags by a minute (in a sweep it still holds the
  previous case), so it is only quoted.
- ``busy GPU``: another process holds memory on this run's GPU (NVML's process lists,
  before and after the timed steps), with its SM use where NVML samples it.
- ``CPU frequency``: the scaling governor of the run's cores is not ``performance``; or,
  with ``performance``, the cores ran below 80% of their base (else maximum) frequency on
  average during the timed steps (from the telemetry sampler).

The step-time spread check lives with the step times (:mod:`cnnbench.engine.stability`),
and throttling with the telemetry (:mod:`cnnbench.engine.telemetry`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.engine.telemetry import TelemetrySampler
from cnnbench.machine import host
from cnnbench.machine.nvml import GpuProcess, Nvml, open_nvml
from cnnbench.words import plural

log = logging.getLogger(__name__)

BUSY_CPU_SHARE = 0.10
"""Warn when other processes used this share of the run's cores, or more."""
MIN_WINDOW_S = 1.0
"""Shorter windows are not judged for CPU use."""
LOW_FREQUENCY_SHARE = 0.80
"""Warn when the cores' mean frequency was below this share of their base (or maximum)."""


@dataclass(frozen=True)
class CpuSnapshot:
    t: float
    busy_s: float
    """CPU time spent on the run's cores by anyone."""
    own_s: Mapping[int, float]
    """CPU time of each of this run's processes."""


def other_cpu_cores(a: CpuSnapshot, b: CpuSnapshot, min_window_s: float = MIN_WINDOW_S) -> float | None:
    """Mean number of the run's cores that other processes kept busy between two snapshots
    (None for a window shorter than ``min_window_s``)."""
    dt = b.t - a.t
    if dt < min_window_s:
        return None
    own = sum(max(0.0, s - a.own_s.get(pid, 0.0)) for pid, s in b.own_s.items())
    return max(0.0, (b.busy_s - a.busy_s) - own) / dt


class BusyMachineGuard:
    """The guard hook; see the module documentation.

    ``cpus``: the cores this run may use, or ``None`` to leave the host checks to another
    worker of this node. ``run_roots``: the processes whose trees are this run. ``gpus``:
    NVML indices of this worker's GPUs. ``sampler``: the telemetry hook whose host samples
    say how fast the cores ran. The probes are parameters so tests can script them.
    """

    def __init__(self, *, cpus: Sequence[int] | None, run_roots: Sequence[int] = (), gpus: Sequence[int] = (),
                 sampler: TelemetrySampler | None = None, clock: Callable[[], float] = time.monotonic,
                 busy_seconds: Callable[[Sequence[int]], float] = host.busy_cpu_seconds,
                 own_seconds: Callable[[Sequence[int]], Mapping[int, float]] = host.tree_cpu_seconds,
                 governors: Callable[[Sequence[int]], Mapping[str, list[int]]] = host.governors,
                 frequency_range: Callable[[Sequence[int]], Mapping[str, float | None]] = host.frequency_range_mhz,
                 nvml: Callable[[], Nvml | None] = open_nvml,
                 min_window_s: float = MIN_WINDOW_S) -> None:
        self.cpus = list(cpus) if cpus is not None else None
        self.run_roots = list(run_roots) or [os.getpid()]
        self.gpus = list(gpus)
        self.sampler = sampler
        self.clock = clock
        self._busy_seconds = busy_seconds
        self._own_seconds = own_seconds
        self._governors = governors
        self._frequency_range = frequency_range
        self._open_nvml = nvml
        self.min_window_s = min_window_s
        self._snaps: dict[str, CpuSnapshot] = {}
        self._others: dict[int, dict[int, dict[str, Any]]] = {}
        self._gpu_ambiguous: dict[int, int] = {}
        self._governor_text: str | None = None
        self._since_us = 0
        self._started = self._stopped = False
        self._snapshot("created")

    # -- the hook --------------------------------------------------------------------
    def start(self) -> None:
        self._started = True
        self._snapshot("started")
        if self.cpus is not None:
            self._governor_text = self._check_governor()
        self._since_us = int(time.time() * 1e6)
        self._look_at_gpus(utilization=False)

    def stop(self) -> None:
        if self._stopped or not self._started:
            return
        self._stopped = True
        self._snapshot("stopped")
        self._look_at_gpus(utilization=True)

    def metrics(self) -> Mapping[str, Any]:
        warnings: list[str] = []
        during = before = None
        if self.cpus is not None and self._stopped:
            snaps = self._snaps
            if {"created", "started", "stopped"} <= set(snaps):
                before = other_cpu_cores(snaps["created"], snaps["started"], self.min_window_s)
                during = other_cpu_cores(snaps["started"], snaps["stopped"], self.min_window_s)
                text = self._busy_cpu_text(before, during)
                if text:
                    warnings.append(text)
            frequency = self._governor_text or self._frequency_text()
            if frequency:
                warnings.append(frequency)
        warnings += self._busy_gpu_texts()
        return {
            "other_processes_cpu_cores": _rounded(during),
            "other_processes_cpu_cores_before": _rounded(before),
            "warnings": warnings,
        }

    # -- CPU ---------------------------------------------------------------------------
    def _snapshot(self, name: str) -> None:
        if self.cpus is None:
            return
        try:
            snap = CpuSnapshot(self.clock(), self._busy_seconds(self.cpus), dict(self._own_seconds(self.run_roots)))
        except Exception as exc:  # a probe that fails costs the check, not the run
            log.debug("CPU snapshot failed: %s", exc)
            return
        self._snaps[name] = snap
        log.debug("guard %s: this run's processes %s", name, sorted(snap.own_s))

    def _busy_cpu_text(self, before: float | None, during: float | None) -> str | None:
        assert self.cpus is not None
        n = len(self.cpus)
        limit = BUSY_CPU_SHARE * n
        cores = plural(n, "core")
        load = self._load_text()
        if during is not None and during >= limit:
            also = f"; {before:.2f} before them" if before is not None and before >= limit else ""
            return (f"busy CPU: other processes used {during:.2f} of the {cores} this run may use during the "
                    f"timed steps{also}{load}")
        if during is None and before is not None and before >= limit:
            return f"busy CPU: other processes used {before:.2f} of the {cores} this run may use before the timed " \
                   f"steps{load}"
        if during is None and before is None:
            whole = other_cpu_cores(self._snaps["created"], self._snaps["stopped"], self.min_window_s)
            if whole is not None and whole >= limit:
                return f"busy CPU: other processes used {whole:.2f} of the {cores} this run may use during the " \
                       f"run{load}"
        return None

    def _load_text(self) -> str:
        load = None
        if self.sampler is not None and self.sampler.host_samples:
            values = [s.load_1m for s in self.sampler.host_samples if s.load_1m is not None]
            load = max(values) if values else None
        if load is None:
            now = host.load_average()
            load = now[0] if now else None
        return f" (load average {load:.1f})" if load is not None else ""

    def _check_governor(self) -> str | None:
        assert self.cpus is not None
        try:
            found = self._governors(self.cpus)
        except Exception as exc:
            log.debug("governors: %s", exc)
            return None
        slow = {name: cpus for name, cpus in found.items() if name != "performance"}
        if not slow:
            return None
        parts = []
        for name, cpus in sorted(slow.items()):
            where = "" if len(slow) == 1 and len(cpus) == len(self.cpus) else f" on cores {host.format_cpu_list(cpus)}"
            parts.append(f"{name}{where}")
        return f"CPU frequency: scaling governor {', '.join(parts)} (not performance); figures may vary with load"

    def _frequency_text(self) -> str | None:
        if self.sampler is None or self.cpus is None:
            return None
        freqs = [s.frequency_mhz for s in self.sampler.host_samples if s.frequency_mhz is not None]
        if not freqs:
            return None
        try:
            limits = self._frequency_range(self.cpus)
        except Exception:
            return None
        reference, word = limits.get("base"), "base"
        if not reference:
            reference, word = limits.get("max"), "maximum"
        if not reference:
            return None
        mean = sum(freqs) / len(freqs)
        if mean >= LOW_FREQUENCY_SHARE * reference:
            return None
        return (f"CPU frequency: cores ran at {mean / 1000:.2f} GHz on average during the timed steps, "
                f"{mean / reference:.0%} of their {reference / 1000:.2f} GHz {word} (power or thermal limits?)")

    # -- GPU ---------------------------------------------------------------------------
    def _look_at_gpus(self, *, utilization: bool) -> None:
        if not self.gpus:
            return
        nv = self._open_nvml()
        if nv is None:
            return
        with nv:
            ours = {p.pid for p in host.process_tree(self.run_roots)}
            for index in self.gpus:
                procs = nv.processes(index)
                if not procs:
                    continue
                util = nv.process_utilization(index, self._since_us) if utilization else None
                self._note_gpu_processes(index, procs, ours, util or {})

    def _note_gpu_processes(self, index: int, procs: Sequence[GpuProcess], ours: set[int],
                            util: Mapping[int, int]) -> None:
        others = [p for p in procs if p.pid not in ours]
        if len(others) == len(procs):
            # None of the listed processes is ours, though this run holds memory on the GPU:
            # NVML reports another PID namespace's numbers (a container); one of them is ours.
            if len(procs) > 1:
                self._gpu_ambiguous[index] = max(self._gpu_ambiguous.get(index, 0), len(procs))
            return
        found = self._others.setdefault(index, {})
        for p in others:
            entry = found.setdefault(p.pid, {"memory_bytes": p.memory_bytes, "sm_pct": None})
            if p.memory_bytes is not None:
                entry["memory_bytes"] = max(entry["memory_bytes"] or 0, p.memory_bytes)
            if p.pid in util:
                entry["sm_pct"] = max(entry["sm_pct"] or 0, util[p.pid])

    def _busy_gpu_texts(self) -> list[str]:
        texts = []
        for index, found in sorted(self._others.items()):
            if not found:
                continue
            parts = []
            for pid, entry in sorted(found.items()):
                details = [_process_name(pid)]
                if entry["memory_bytes"] is not None:
                    details.append(f"{entry['memory_bytes'] / 2**30:.1f} GiB")
                if entry["sm_pct"]:
                    details.append(f"up to {entry['sm_pct']}% SM")
                parts.append(f"pid {pid} ({', '.join(details)})")
            n = len(found)
            texts.append(f"busy GPU: GPU {index} is shared with {plural(n, 'other process', 'other processes')}: "
                         + "; ".join(parts))
        for index, n in sorted(self._gpu_ambiguous.items()):
            texts.append(f"busy GPU: {n} processes hold memory on GPU {index} (NVML lists them from another "
                         "PID namespace, so which is this run's is unknown)")
        return texts


def _process_name(pid: int) -> str:
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:
        return "?"


def _rounded(x: float | None) -> float | None:
    return round(x, 3) if x is not None else None
