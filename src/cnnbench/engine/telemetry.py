"""Telemetry during the timed steps: a background sampler of the GPUs (NVML) and the host (psutil).

:class:`TelemetrySampler` is a measurement hook (:mod:`cnnbench.engine.hooks`). ``start()``
opens the NVML session, reads each GPU's energy counter there and then (synchronously, so
the energy window starts with the timed window, not with the thread's start-up), starts a
daemon thread and returns; the thread takes a sample right away, then every ``interval_s``
(default 0.5 s), and a last one when ``stop()`` asks it to end. ``stop()`` first reads the
energy counters again, then ends the thread. The timed loop does nothing for it, and every
other NVML or psutil call happens on the sampler's thread, so a slow reading never holds
the loop up; ``stop()`` waits at most :data:`STOP_TIMEOUT_S` for the thread (a sampler that
does not answer in time leaves a warning and its samples are marked incomplete).

Per GPU (this worker's own): power, SM and memory clocks, temperature, utilisation and the
clock event ("throttle") reasons; the record gets their mean and maximum, and the energy
over the timed window: NVML's total energy counter read at its start and end where the GPU
has one, else power integrated over the samples with the trapezoidal rule (the first and
last sample held out to the window's edges). Running at the software power cap is normal
under boost: it is reported apart (``power_capped``), not warned about. ``throttled`` (and a
warning) is for heat, a hardware slowdown or the power brake (``THROTTLE_MASK``), or an
SM clock well below its maximum (under ``LOW_CLOCK_SHARE`` of it, on average over the
samples where the GPU was not idle). On every machine, for the CPUs this run may use: CPU
utilisation, the 1-minute load average and the mean core frequency.

The figures made of the samples are :mod:`cnnbench.engine.telemetry_figures`'s. Several
workers: its ``merge_worker_telemetry`` sums energy over every worker's GPU, says throttled
(power capped) if any was, and keeps rank 0's host figures.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from cnnbench.engine.telemetry_figures import (
    GpuSample,
    HostSample,
    gpu_summary,
    gpu_totals,
    gpu_warnings,
    host_summary,
)
from cnnbench.machine import host
from cnnbench.machine.nvml import Nvml, open_nvml

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.5
STOP_TIMEOUT_S = 2.0
"""How long ``stop()`` waits for the sampler's last sample."""


@dataclass(frozen=True)
class EnergyMark:
    """When the timed window opened or closed, and each GPU's total energy counter then
    (millijoules since the driver loaded; None where the GPU has none)."""

    t: float
    energy_mj: list[int | None]


@dataclass
class _GpuTrack:
    index: int
    name: str | None
    sm_clock_limit_mhz: float | None = None
    samples: list[GpuSample] = field(default_factory=list)


class GpuReader:
    """Reads one GPU's live values through an NVML session; readings a GPU does not
    support are asked once and then left alone."""

    def __init__(self, nv: Nvml, index: int) -> None:
        self.nv = nv
        self.index = index
        self.handle = nv.handle(index)
        self._unsupported: set[str] = set()
        self._sm = getattr(nv.nv, "NVML_CLOCK_SM", 1)
        self._mem = getattr(nv.nv, "NVML_CLOCK_MEM", 2)
        self._temp = getattr(nv.nv, "NVML_TEMPERATURE_GPU", 0)

    def _get(self, name: str, *args: Any) -> Any:
        if name in self._unsupported or self.handle is None:
            return None
        value = self.nv.call(name, self.handle, *args)
        if value is None:
            self._unsupported.add(name)
        return value

    def sample(self, t: float) -> GpuSample:
        power = self._get("nvmlDeviceGetPowerUsage")
        util = self._get("nvmlDeviceGetUtilizationRates")
        memory = self._get("nvmlDeviceGetMemoryInfo")
        reasons = self._get("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self._get("nvmlDeviceGetCurrentClocksThrottleReasons")
        return GpuSample(
            t=t,
            power_w=power / 1000.0 if power is not None else None,
            sm_clock_mhz=self._get("nvmlDeviceGetClockInfo", self._sm),
            memory_clock_mhz=self._get("nvmlDeviceGetClockInfo", self._mem),
            temperature_c=self._get("nvmlDeviceGetTemperature", self._temp),
            utilization_pct=getattr(util, "gpu", None),
            memory_utilization_pct=getattr(util, "memory", None),
            reasons=int(reasons) if reasons is not None else None,
            memory_used_bytes=int(memory.used) if getattr(memory, "used", None) is not None else None,
        )

    def energy_mj(self) -> int | None:
        """NVML's total energy counter, where the GPU has one."""
        value = self._get("nvmlDeviceGetTotalEnergyConsumption")
        return int(value) if value is not None else None

    def sm_clock_limit_mhz(self) -> float | None:
        """The GPU's maximum SM clock (NVML's max clock info)."""
        value = self._get("nvmlDeviceGetMaxClockInfo", self._sm)
        return float(value) if value else None


class HostReader:
    """CPU utilisation, load average and mean core frequency of the CPUs a run may use."""

    def __init__(self, cpus: Sequence[int]) -> None:
        self.cpus = list(cpus)
        self._first = True

    def sample(self, t: float) -> HostSample:
        per_cpu = psutil.cpu_percent(percpu=True)  # since the previous sample
        mine = [per_cpu[c] for c in self.cpus if c < len(per_cpu)] if not self._first else []
        self._first = False  # the first call only sets the reference point
        load = host.load_average()
        freqs = host.core_frequencies_mhz(self.cpus)
        return HostSample(
            t=t,
            cpu_percent=sum(mine) / len(mine) if mine else None,
            load_1m=load[0] if load else None,
            frequency_mhz=sum(freqs) / len(freqs) if freqs else None,
        )


class TelemetrySampler:
    """The telemetry hook; see the module documentation.

    ``gpus``: NVML indices of this worker's GPUs (empty on CPU). ``host_cpus``: the CPUs
    whose utilisation and frequency to sample, or ``None`` to leave the host out (only one
    worker per node samples it).
    """

    def __init__(self, gpus: Sequence[int] = (), *, host_cpus: Sequence[int] | None = None,
                 interval_s: float = DEFAULT_INTERVAL_S, stop_timeout_s: float = STOP_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.gpu_indices = list(gpus)
        self.host_cpus = list(host_cpus) if host_cpus is not None else None
        self.interval_s = interval_s
        self.stop_timeout_s = stop_timeout_s
        self.clock = clock
        self._nv: Nvml | None = None
        self._gpus: list[_GpuTrack] = []
        self._readers: list[GpuReader] = []
        self._host: HostReader | None = None
        self.host_samples: list[HostSample] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_done = False
        self._errors = 0
        self._warnings: list[str] = []
        self._summary: dict[str, Any] | None = None
        self.window: tuple[EnergyMark, EnergyMark | None] | None = None
        """The energy marks at the start and end of the timed window."""

    # -- the hook --------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        try:
            self._open()
        except Exception as exc:  # never let telemetry take the run down
            self._errors += 1
            log.warning("telemetry: could not open the GPU readings: %s", exc)
        self.window = (self._mark(), None)
        self._thread = threading.Thread(target=self._run, name="cnnbench-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread = self._thread
        if thread is None or self._stop.is_set():
            return
        if self.window is not None:
            self.window = (self.window[0], self._mark())
        self._stop.set()
        thread.join(self.stop_timeout_s)
        if thread.is_alive():
            self._warnings.append(f"telemetry: the sampler did not answer within {self.stop_timeout_s:g} s; "
                                  "power and energy cover only part of the timed steps")
            log.warning("telemetry sampler still busy after %.1f s; left behind", self.stop_timeout_s)

    def metrics(self) -> Mapping[str, Any]:
        if self._summary is None:
            self._summary = self._summarise()
        return self._summary

    # -- the thread ------------------------------------------------------------------
    def _mark(self) -> EnergyMark:
        """The time and every GPU's energy counter, read now on the caller's thread."""
        t = self.clock()
        energies: list[int | None] = []
        for reader in self._readers:
            try:
                energies.append(reader.energy_mj())
            except Exception as exc:
                log.debug("GPU %d energy counter: %s", reader.index, exc)
                energies.append(None)
        return EnergyMark(t, energies)

    def _run(self) -> None:
        try:
            self.sample()
            while not self._stop.wait(self.interval_s):
                self.sample()
            self.sample()
            self._last_done = True
        except Exception as exc:  # never let the sampler take the run down
            self._errors += 1
            log.warning("telemetry sampler stopped: %s", exc)
        finally:
            if self._nv is not None:
                self._nv.close()

    def _open(self) -> None:
        if self.gpu_indices:
            self._nv = open_nvml()
            if self._nv is not None:
                for i in self.gpu_indices:
                    name = self._nv.call("nvmlDeviceGetName", self._nv.handle(i))
                    reader = GpuReader(self._nv, i)
                    self._gpus.append(_GpuTrack(i, name.decode() if isinstance(name, bytes) else name,
                                                reader.sm_clock_limit_mhz()))
                    self._readers.append(reader)
        if self.host_cpus is not None:
            self._host = HostReader(self.host_cpus)

    def sample(self) -> None:
        """Take one sample of every source now (the thread calls this; so may tests)."""
        t = self.clock()
        for track, reader in zip(self._gpus, self._readers, strict=True):
            try:
                track.samples.append(reader.sample(t))
            except Exception as exc:
                self._errors += 1
                log.debug("GPU %d sample failed: %s", track.index, exc)
        if self._host is not None:
            try:
                self.host_samples.append(self._host.sample(t))
            except Exception as exc:
                self._errors += 1
                log.debug("host sample failed: %s", exc)

    # -- the figures -----------------------------------------------------------------
    def _summarise(self) -> dict[str, Any]:
        complete = self._last_done
        start, end = self.window if self.window is not None else (None, None)
        gpus = []
        for k, track in enumerate(self._gpus):
            marks = None
            if start is not None and end is not None:
                marks = ((start.t, start.energy_mj[k]), (end.t, end.energy_mj[k]))
            gpus.append(gpu_summary(track.index, track.name, list(track.samples), complete=complete,
                                    window=marks, sm_clock_limit_mhz=track.sm_clock_limit_mhz))
        out: dict[str, Any] = {
            "telemetry_interval_s": self.interval_s,
            "gpu_telemetry": gpus,
            "host_telemetry": (host_summary(list(self.host_samples), len(self.host_cpus))
                               if self.host_cpus is not None else None),
            **gpu_totals(gpus),
            "warnings": list(self._warnings),
        }
        for g in gpus:
            out["warnings"] += gpu_warnings(g)
        return out
