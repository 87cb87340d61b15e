"""The host's CPUs as the operating system reports them: cores, sockets, NUMA nodes,
frequency scaling, and who is using the CPU time.

Linux first (``/sys/devices/system``), psutil for the rest; every reading that a machine
cannot give is ``None``, never an error. No torch here.

- static: :func:`usable_cpus`, :func:`cpu_sockets`, :func:`numa_nodes`, :func:`governors`,
  :func:`frequency_range_mhz`;
- live: :func:`core_frequencies_mhz`, :func:`busy_cpu_seconds` (CPU time spent on given
  cores by anyone), :func:`tree_cpu_seconds` (CPU time of a set of process trees), which
  together tell how much CPU time *other* processes took on the cores a run may use.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psutil

log = logging.getLogger(__name__)

SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")


def _read(path: Path | str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity), in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def parse_cpu_list(text: str) -> list[int]:
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]`` (the kernel's cpulist format)."""
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def format_cpu_list(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def cpu_sockets() -> int | None:
    """Physical packages (sockets) with at least one online CPU."""
    ids = {_read(p) for p in glob.glob(str(SYS_CPU / "cpu[0-9]*/topology/physical_package_id"))}
    ids.discard(None)
    if ids:
        return len(ids)
    text = _read("/proc/cpuinfo")
    if text:
        found = set(re.findall(r"^physical id\s*:\s*(\d+)", text, flags=re.M))
        if found:
            return len(found)
    return None


def numa_nodes() -> list[dict[str, Any]]:
    """One entry per NUMA node: ``{"node": 0, "cpus": "0-15", "memory_bytes": ...}``
    (``memory_bytes``: the node's total memory, ``MemTotal`` of its ``meminfo``)."""
    nodes = []
    for path in sorted(SYS_NODE.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        meminfo = _read(path / "meminfo") or ""
        match = re.search(r"MemTotal:\s*(\d+)\s*kB", meminfo)
        nodes.append({
            "node": int(path.name[4:]),
            "cpus": _read(path / "cpulist"),
            "memory_bytes": int(match.group(1)) * 1024 if match else None,
        })
    return nodes


def governors(cpus: Sequence[int]) -> dict[str, list[int]]:
    """The cpufreq scaling governor of each CPU, grouped: ``{"powersave": [0, 1]}``.

    Empty when the kernel exposes no cpufreq (many virtual machines)."""
    out: dict[str, list[int]] = {}
    for cpu in cpus:
        name = _read(SYS_CPU / f"cpu{cpu}" / "cpufreq" / "scaling_governor")
        if name:
            out.setdefault(name, []).append(cpu)
    return out


def frequency_range_mhz(cpus: Sequence[int] | None = None) -> dict[str, float | None]:
    """Hardware minimum, base (where the driver reports it) and maximum frequency, in MHz."""
    cpu = (list(cpus) or [0])[0] if cpus is not None else 0
    base = SYS_CPU / f"cpu{cpu}" / "cpufreq"

    def khz(name: str) -> float | None:
        text = _read(base / name)
        try:
            return int(text) / 1000.0 if text else None
        except ValueError:
            return None

    lo, hi = khz("cpuinfo_min_freq"), khz("cpuinfo_max_freq")
    if hi is None:
        try:
            freq = psutil.cpu_freq()
        except Exception:  # psutil raises on some exotic platforms
            freq = None
        if freq is not None and freq.max:
            lo, hi = (freq.min or None), freq.max
    return {"min": lo, "base": khz("base_frequency"), "max": hi}


def core_frequencies_mhz(cpus: Sequence[int]) -> list[float]:
    """The current frequency of each of ``cpus`` (cpufreq), or what psutil reports."""
    out: list[float] = []
    for cpu in cpus:
        text = _read(SYS_CPU / f"cpu{cpu}" / "cpufreq" / "scaling_cur_freq")
        if text and text.isdigit():
            out.append(int(text) / 1000.0)
    if out:
        return out
    try:
        per_cpu = psutil.cpu_freq(percpu=True) or []
    except Exception:
        return []
    return [per_cpu[c].current for c in cpus if c < len(per_cpu) and per_cpu[c].current]


def busy_cpu_seconds(cpus: Sequence[int]) -> float:
    """CPU time spent on ``cpus`` by anyone since boot: user, nice, system, interrupts, and
    time a hypervisor gave to another machine (steal: a noisy neighbour too)."""
    per_cpu = psutil.cpu_times(percpu=True)
    total = 0.0
    for cpu in cpus:
        if cpu < len(per_cpu):
            t = per_cpu[cpu]
            total += t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) \
                + getattr(t, "steal", 0.0)
    return total


def process_tree(roots: Iterable[int]) -> list[psutil.Process]:
    """The processes of the trees under ``roots`` (roots included), those still alive."""
    seen: dict[int, psutil.Process] = {}
    for pid in roots:
        try:
            root = psutil.Process(pid)
            seen.setdefault(root.pid, root)
            for child in root.children(recursive=True):
                seen.setdefault(child.pid, child)
        except psutil.Error:
            continue
    return list(seen.values())


def tree_cpu_seconds(roots: Iterable[int]) -> dict[int, float]:
    """CPU time (user + system) of every live process under ``roots``, by pid, each with the
    time of the children it has already waited for (a loader worker that ended)."""
    out: dict[int, float] = {}
    for proc in process_tree(roots):
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        out[proc.pid] = t.user + t.system + t.children_user + t.children_system
    return out


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages."""
    try:
        return [round(x, 2) for x in psutil.getloadavg()]
    except (AttributeError, OSError):  # pragma: no cover - platforms without one
        return None


def running_now(readings: int = 1, interval_s: float = 0.002) -> int | None:
    """How many threads of the machine are running or ready to run, the caller's included: the
    most of ``readings`` readings ``interval_s`` apart (of the fourth field of Linux's
    ``/proc/loadavg``, ``running/all``), as a process that works in bursts may be waiting at
    one instant; None elsewhere, or where it counts none (gVisor: not even the caller's own)."""
    most = None
    for reading in range(readings):
        if reading:
            time.sleep(interval_s)
        try:
            with open("/proc/loadavg", "rb") as f:
                now = int(f.read().split()[3].split(b"/")[0])
        except (OSError, ValueError, IndexError):
            return None
        if now < 1:
            return None
        most = now if most is None else max(most, now)
    return most
