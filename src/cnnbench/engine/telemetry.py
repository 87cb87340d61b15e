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
warning) is for heat, a hardware slowdown or the power brake (:data:`THROTTLE_MASK`), or an
SM clock well below its maximum (under :data:`LOW_CLOCK_SHARE` of it, on average over the
samples where the GPU was not idle). On every machine, for the CPUs this run may use: CPU
utilisation, the 1-minute load average and the mean core frequency.

Several workers: :func:`merge_worker_telemetry` sums energy over every worker's GPU, says
throttled (power capped) if any was, and keeps rank 0's host figures.
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
from cnnbench.machine.nvml import GPU_IDLE, POWER_CAP, THROTTLE_MASK, Nvml, open_nvml, reason_names

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.5
STOP_TIMEOUT_S = 2.0
"""How long ``stop()`` waits for the sampler's last sample."""
LOW_CLOCK_SHARE = 0.70
"""Warn when a GPU's mean SM clock (busy samples) was below this share of its maximum."""


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


@dataclass(frozen=True)
class EnergyMark:
    """When the timed window opened or closed, and each GPU's total energy counter then
    (millijoules since the driver loaded; None where the GPU has none)."""

    t: float
    energy_mj: list[int | None]


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
            "host_telemetry": host_summary(list(self.host_samples)) if self.host_cpus is not None else None,
            **gpu_totals(gpus),
            "warnings": list(self._warnings),
        }
        for g in gpus:
            out["warnings"] += gpu_warnings(g)
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


def window_energy_j(power: Sequence[tuple[float, float]], t0: float | None, t1: float | None) -> float | None:
    """Energy (J) from ``(t, watts)`` samples over the window ``[t0, t1]``: the trapezoidal
    integral with the first and last sample held out to the window's edges (samples outside
    the window are moved onto its edge). Without a window: over the samples alone."""
    if not power:
        return None
    if t0 is None or t1 is None or t1 <= t0:
        return integrate(power)
    inside = [(min(max(t, t0), t1), w) for t, w in sorted(power)]
    return integrate([(t0, inside[0][1]), *inside, (t1, inside[-1][1])])


Window = tuple[tuple[float, int | None], tuple[float, int | None]]
"""``((t_start, energy_mj_start), (t_end, energy_mj_end))`` of the timed window."""


def gpu_summary(index: int, name: str | None, samples: Sequence[GpuSample], *, complete: bool = True,
                window: Window | None = None, sm_clock_limit_mhz: float | None = None) -> dict[str, Any]:
    """Mean and maximum of each reading, the energy over the timed ``window``, the power
    cap, the throttle reasons seen and how the busy SM clock compares with its maximum."""
    out: dict[str, Any] = {"index": index, "name": name, "samples": len(samples)}
    for reading, unit in (("power", "w"), ("sm_clock", "mhz"), ("memory_clock", "mhz"), ("temperature", "c"),
                          ("utilization", "pct")):
        xs = _values(samples, f"{reading}_{unit}")
        out[f"{reading}_mean_{unit}"] = _rounded(_mean(xs))
        out[f"{reading}_max_{unit}"] = _rounded(max(xs)) if xs else None
    (t0, e0), (t1, e1) = window if window is not None else ((None, None), (None, None))
    energy, source = None, None
    if e0 is not None and e1 is not None:
        energy, source = (e1 - e0) / 1000.0, "counter"
    elif complete:
        power = [(s.t, s.power_w) for s in samples if s.power_w is not None]
        if len(power) == len(samples):
            energy = window_energy_j(power, t0, t1)
            source = "power samples" if energy is not None else None
    out["energy_j"] = _rounded(energy, 3)
    out["energy_source"] = source
    known = [s.reasons for s in samples if s.reasons is not None]
    seen = 0
    for r in known:
        seen |= r
    out["power_capped"] = bool(seen & POWER_CAP) if known else None
    out["throttle_reasons"] = reason_names(seen & THROTTLE_MASK)
    busy = busy_sm_clock_mhz(samples)
    share = busy / sm_clock_limit_mhz if busy is not None and sm_clock_limit_mhz else None
    out["sm_clock_busy_mean_mhz"] = _rounded(busy)
    out["sm_clock_limit_mhz"] = sm_clock_limit_mhz
    out["sm_clock_share"] = _rounded(share, 3)
    low = share is not None and share < LOW_CLOCK_SHARE
    out["throttled"] = (bool(seen & THROTTLE_MASK) or low) if (known or share is not None) else None
    return out


def busy_sm_clock_mhz(samples: Sequence[GpuSample]) -> float | None:
    """Mean SM clock over the samples where the GPU was not idle."""
    busy = [float(s.sm_clock_mhz) for s in samples
            if s.sm_clock_mhz is not None and not (s.reasons is not None and s.reasons & GPU_IDLE)]
    return _mean(busy)


def gpu_warnings(g: Mapping[str, Any]) -> list[str]:
    """A GPU summary's warnings: throttle reasons, and an SM clock well below its maximum."""
    out = []
    if g.get("throttle_reasons"):
        out.append(f"throttled: GPU {g['index']} ({', '.join(g['throttle_reasons'])}) during the timed steps")
    busy, limit = g.get("sm_clock_busy_mean_mhz"), g.get("sm_clock_limit_mhz")
    if busy is not None and limit and busy / limit < LOW_CLOCK_SHARE:
        cap = " (at its software power cap)" if g.get("power_capped") else ""
        out.append(f"low GPU clock: GPU {g['index']} ran its SMs at {busy:.0f} MHz on average during "
                   f"the timed steps, {busy / limit:.0%} of its {limit:.0f} MHz maximum{cap}")
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


def _any(flags: Sequence[Any]) -> bool | None:
    """True if any flag is, None if none is known, else False."""
    return True if any(flags) else (None if all(f is None for f in flags) else False)


def gpu_totals(gpus: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Energy summed over GPUs (null unless every GPU has one), throttled (power capped) if
    any GPU was, and the union of the reasons."""
    if not gpus:
        return {"energy_j": None, "throttled": None, "throttle_reasons": [], "power_capped": None}
    energies = [float(g["energy_j"]) for g in gpus if g.get("energy_j") is not None]
    reasons = sorted({r for g in gpus for r in g.get("throttle_reasons") or []})
    return {
        "energy_j": round(sum(energies), 3) if len(energies) == len(gpus) else None,
        "throttled": _any([g.get("throttled") for g in gpus]),
        "throttle_reasons": reasons,
        "power_capped": _any([g.get("power_capped") for g in gpus]),
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
