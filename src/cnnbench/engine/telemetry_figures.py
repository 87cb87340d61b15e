"""The figures made of telemetry samples: per GPU, per host, and over a run's workers.

Pure functions of :class:`GpuSample` / :class:`HostSample` lists (the sampler that takes them
is :mod:`cnnbench.engine.telemetry`): means and maximums, the energy of the timed window
(the GPU's energy counter, else its power integrated with the trapezoidal rule), the clock
events (power cap, throttle reasons, a low busy SM clock) and their warnings. No torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.machine.nvml import GPU_IDLE, POWER_CAP, THROTTLE_MASK, reason_names

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
    memory_used_bytes: int | None = None
    """The device's memory in use, every process's (NVML): also what torch's allocator does not
    see, such as DALI's pool, which it keeps until the process ends."""


@dataclass
class HostSample:
    t: float
    cpu_percent: float | None = None
    load_1m: float | None = None
    frequency_mhz: float | None = None


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
    """Mean and maximum of each reading, the most device memory in use (NVML's, every process's),
    the energy over the timed ``window``, the power cap, the throttle reasons seen and how the
    busy SM clock compares with its maximum."""
    out: dict[str, Any] = {"index": index, "name": name, "samples": len(samples)}
    for reading, unit in (("power", "w"), ("sm_clock", "mhz"), ("memory_clock", "mhz"), ("temperature", "c"),
                          ("utilization", "pct")):
        xs = _values(samples, f"{reading}_{unit}")
        out[f"{reading}_mean_{unit}"] = _rounded(_mean(xs))
        out[f"{reading}_max_{unit}"] = _rounded(max(xs)) if xs else None
    used = [s.memory_used_bytes for s in samples if s.memory_used_bytes is not None]
    out["memory_used_max_bytes"] = max(used) if used else None
    energy, source = _window_energy(samples, complete, window)
    out["energy_j"] = _rounded(energy, 3)
    out["energy_source"] = source
    out.update(_clock_events(samples, sm_clock_limit_mhz))
    return out


def _window_energy(samples: Sequence[GpuSample], complete: bool,
                   window: Window | None) -> tuple[float | None, str | None]:
    """The energy of the timed window, in joules, and where it comes from: the GPU's energy
    counter, else its power samples (only when every sample has one and none is missing)."""
    (t0, e0), (t1, e1) = window if window is not None else ((None, None), (None, None))
    if e0 is not None and e1 is not None:
        return (e1 - e0) / 1000.0, "counter"
    if complete:
        power = [(s.t, s.power_w) for s in samples if s.power_w is not None]
        if len(power) == len(samples):
            energy = window_energy_j(power, t0, t1)
            return energy, ("power samples" if energy is not None else None)
    return None, None


def _clock_events(samples: Sequence[GpuSample], sm_clock_limit_mhz: float | None) -> dict[str, Any]:
    """Power cap, throttle reasons seen, the busy SM clock against its maximum, throttled."""
    known = [s.reasons for s in samples if s.reasons is not None]
    seen = 0
    for r in known:
        seen |= r
    busy = busy_sm_clock_mhz(samples)
    share = busy / sm_clock_limit_mhz if busy is not None and sm_clock_limit_mhz else None
    low = share is not None and share < LOW_CLOCK_SHARE
    return {
        "power_capped": bool(seen & POWER_CAP) if known else None,
        "throttle_reasons": reason_names(seen & THROTTLE_MASK),
        "sm_clock_busy_mean_mhz": _rounded(busy),
        "sm_clock_limit_mhz": sm_clock_limit_mhz,
        "sm_clock_share": _rounded(share, 3),
        "throttled": (bool(seen & THROTTLE_MASK) or low) if (known or share is not None) else None,
    }


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


def host_summary(samples: Sequence[HostSample], cpus: int | None = None) -> dict[str, Any]:
    """CPU utilisation (%, of the ``cpus`` CPUs the run may use), 1-minute load average and core
    frequency (MHz): mean and maximum (frequency: also the minimum); and the cores that use comes
    to (``cores_used_mean``: the mean utilisation times ``cpus``, over 100: 2 cores fully busy of 16
    read 12.5 % and 2.0 cores)."""
    cpu, load, freq = (_values(samples, n) for n in ("cpu_percent", "load_1m", "frequency_mhz"))
    mean = _mean(cpu)
    return {
        "samples": len(samples),
        "cpus": cpus,
        "cpu_percent_mean": _rounded(mean),
        "cores_used_mean": None if mean is None or not cpus else _rounded(mean * cpus / 100, 2),
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
