"""Telemetry during the timed steps: a background sampler of the GPUs (NVML) and the host (psutil).

:class:`TelemetrySampler` is a measurement hook (:mod:`cnnbench.engine.hooks`). ``start()``
starts a daemon thread and returns at once; the thread takes a sample right away, then every
``interval_s`` (default 0.5 s), and a last one when ``stop()`` asks it to end. The timed loop
does nothing for it, and every NVML or psutil call happens on the sampler's thread, so a slow
driver never holds the loop up; ``stop()`` waits at most :data:`STOP_TIMEOUT_S` for the
thread (a sampler that does not answer in time leaves a warning and its figures are marked
incomplete).

Per GPU (this worker's own): power, SM and memory clocks, temperature, utilisation and the
clock event ("throttle") reasons; the record gets their mean and maximum, the energy over
the timed window (NVML's total energy counter where the GPU has one, else power integrated
over the samples with the trapezoidal rule), and ``throttled`` when a power or thermal
reason was active in any sample. On every machine, for the CPUs this run may use: CPU
utilisation, the 1-minute load average and the mean core frequency.

Several workers: :func:`merge_worker_telemetry` sums energy over every worker's GPU, says
throttled if any was, and keeps rank 0's host figures.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from cnnbench.machine import host
from cnnbench.machine.nvml import THROTTLE_MASK, Nvml, open_nvml, reason_names

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.5
STOP_TIMEOUT_S = 2.0
"""How long ``stop()`` waits for the sampler's last sample."""


@dataclass
class GpuSample:
    t: float
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    temperature_c: float | None = None
    utilization_pct: float | None = None
    memory_utilization_pct: float | None = None
    reasons: int | None = None
    energy_mj: int | None = None
    """NVML's total energy counter (millijoules since the driver loaded), where the GPU has one."""


@dataclass
class HostSample:
    t: float
    cpu_percent: float | None = None
    load_1m: float | None = None
    frequency_mhz: float | None = None


@dataclass
class _GpuTrack:
    index: int
    name: str | None
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
            energy_mj=self._get("nvmlDeviceGetTotalEnergyConsumption"),
        )


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

    # -- the hook --------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="cnnbench-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread = self._thread
        if thread is None or self._stop.is_set():
            return
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
    def _run(self) -> None:
        try:
            self._open()
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
                    self._gpus.append(_GpuTrack(i, name.decode() if isinstance(name, bytes) else name))
                    self._readers.append(GpuReader(self._nv, i))
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
        gpus = [gpu_summary(track.index, track.name, list(track.samples), complete=complete)
                for track in self._gpus]
        out: dict[str, Any] = {
            "telemetry_interval_s": self.interval_s,
            "gpu_telemetry": gpus,
            "host_telemetry": host_summary(list(self.host_samples)) if self.host_cpus is not None else None,
            **gpu_totals(gpus),
            "warnings": list(self._warnings),
        }
        for g in gpus:
            if g["throttled"]:
                out["warnings"].append(f"throttled: GPU {g['index']} ({', '.join(g['throttle_reasons'])}) "
                                       "during the timed steps")
        return out


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _values(samples: Sequence[Any], name: str) -> list[float]:
    return [float(v) for v in (getattr(s, name) for s in samples) if v is not None]


def _rounded(x: float | None, digits: int = 1) -> float | None:
    return round(x, digits) if x is not None else None


def integrate(points: Sequence[tuple[float, float]]) -> float | None:
    """The trapezoidal integral of ``(t, value)`` points (None with fewer than two)."""
    if len(points) < 2:
        return None
    return sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False))


def gpu_summary(index: int, name: str | None, samples: Sequence[GpuSample], *, complete: bool = True) -> dict[str, Any]:
    """Mean and maximum of each reading, the energy, and the throttle reasons seen."""
    out: dict[str, Any] = {"index": index, "name": name, "samples": len(samples)}
    for reading, unit in (("power", "w"), ("sm_clock", "mhz"), ("memory_clock", "mhz"), ("temperature", "c"),
                          ("utilization", "pct")):
        xs = _values(samples, f"{reading}_{unit}")
        out[f"{reading}_mean_{unit}"] = _rounded(_mean(xs))
        out[f"{reading}_max_{unit}"] = _rounded(max(xs)) if xs else None
    energy, source = None, None
    counters = [s.energy_mj for s in samples]
    if complete and len(samples) >= 2 and counters[0] is not None and counters[-1] is not None:
        energy, source = (counters[-1] - counters[0]) / 1000.0, "counter"
    elif complete:
        power = [(s.t, s.power_w) for s in samples if s.power_w is not None]
        if len(power) == len(samples):
            energy = integrate(power)
            source = "power samples" if energy is not None else None
    out["energy_j"] = _rounded(energy, 3)
    out["energy_source"] = source
    seen = 0
    for s in samples:
        if s.reasons is not None:
            seen |= s.reasons & THROTTLE_MASK
    known = any(s.reasons is not None for s in samples)
    out["throttle_reasons"] = reason_names(seen)
    out["throttled"] = bool(seen) if known else None
    return out


def host_summary(samples: Sequence[HostSample]) -> dict[str, Any]:
    """CPU utilisation (%, of the CPUs the run may use), 1-minute load average and core
    frequency (MHz): mean and maximum (frequency: also the minimum)."""
    cpu, load, freq = (_values(samples, n) for n in ("cpu_percent", "load_1m", "frequency_mhz"))
    return {
        "samples": len(samples),
        "cpu_percent_mean": _rounded(_mean(cpu)),
        "cpu_percent_max": _rounded(max(cpu)) if cpu else None,
        "load_average_1m_mean": _rounded(_mean(load), 2),
        "load_average_1m_max": _rounded(max(load), 2) if load else None,
        "cpu_frequency_mean_mhz": _rounded(_mean(freq)),
        "cpu_frequency_min_mhz": _rounded(min(freq)) if freq else None,
        "cpu_frequency_max_mhz": _rounded(max(freq)) if freq else None,
    }


def gpu_totals(gpus: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Energy summed over GPUs (null unless every GPU has one), throttled if any GPU was,
    and the union of the reasons."""
    if not gpus:
        return {"energy_j": None, "throttled": None, "throttle_reasons": []}
    energies = [float(g["energy_j"]) for g in gpus if g.get("energy_j") is not None]
    throttled = [g.get("throttled") for g in gpus]
    reasons = sorted({r for g in gpus for r in g.get("throttle_reasons") or []})
    return {
        "energy_j": round(sum(energies), 3) if len(energies) == len(gpus) else None,
        "throttled": True if any(throttled) else (None if all(t is None for t in throttled) else False),
        "throttle_reasons": reasons,
    }


def merge_worker_telemetry(per_worker: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's telemetry from every worker's hook metrics (rank 0's first): each worker's
    GPUs (tagged with the worker's rank), their totals, and rank 0's host figures."""
    gpus: list[dict[str, Any]] = []
    for rank, metrics in enumerate(per_worker):
        for g in metrics.get("gpu_telemetry") or []:
            gpus.append({"rank": rank, **g})
    if not any("gpu_telemetry" in m for m in per_worker):
        return {}
    return {"gpu_telemetry": gpus, **gpu_totals(gpus)}


def images_per_joule(images: int, energy_j: float | None) -> float | None:
    """Images over the GPU energy of the timed steps (None without an energy figure)."""
    if energy_j is None or energy_j <= 0:
        return None
    return images / energy_j
