"""The CPU cores a run may use: reading them, and restricting a run to N of them.

``--host-cpus N`` (:func:`restrict_host_cpus`) pins every thread of this process to the
first N cores of its current CPU affinity; processes started afterwards (the workers of a
multi-device run, DataLoader workers) inherit it, and torch's intra-op threads are set to
N. Every process of a node picks the same N cores (the first of the same set), so a run
started by torchrun is restricted as a whole, too. Linux only (``os.sched_setaffinity``).
No torch here, except to set its thread count when torch is already imported.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from cnnbench.errors import ConfigError
from cnnbench.machine.host import usable_cpus

log = logging.getLogger(__name__)


def available_cpus() -> list[int]:
    """The CPU numbers this process may run on (all of them where affinity is unknown)."""
    return usable_cpus()


def cpu_count_available() -> int:
    return len(available_cpus())


def check_host_cpus(host_cpus: int | None) -> None:
    """Reject more cores than this process may use (before any work)."""
    if host_cpus is None:
        return
    have = available_cpus()
    if host_cpus > len(have):
        raise ConfigError("host_cpus", f"asks for {host_cpus} cores, but this process may use "
                                       f"{len(have)} ({_ranges(have)})")
    if not hasattr(os, "sched_setaffinity"):  # pragma: no cover - not Linux
        raise ConfigError("host_cpus", "needs CPU affinity (os.sched_setaffinity), which this platform lacks")


def restrict_host_cpus(host_cpus: int | None) -> list[int]:
    """Pin this process (every thread of it) to the first ``host_cpus`` cores it may use.

    Returns the cores the run now has; raises :class:`ConfigError` when it asks for more
    cores than there are. ``None`` changes nothing.
    """
    if host_cpus is None:
        return available_cpus()
    check_host_cpus(host_cpus)
    chosen = available_cpus()[:host_cpus]
    for thread in _threads():
        try:
            os.sched_setaffinity(thread, chosen)
        except OSError as exc:  # a thread that ended meanwhile
            log.debug("affinity of thread %s: %s", thread, exc)
    os.sched_setaffinity(0, chosen)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() > host_cpus:
        torch.set_num_threads(host_cpus)
    log.info("restricted to %d cores: %s", host_cpus, _ranges(chosen))
    return chosen


@contextlib.contextmanager
def host_cpus_pinned(host_cpus: int | None) -> Iterator[list[int]]:
    """:func:`restrict_host_cpus` for the length of a block, then this process's cores (every thread's)
    and torch's thread count as they were: a library caller (``cnnbench.run(host_cpus=1)``, a test)
    is not left pinned to the run's cores. ``None`` changes nothing."""
    if host_cpus is None:
        yield available_cpus()
        return
    before = available_cpus()
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    chosen = restrict_host_cpus(host_cpus)
    try:
        yield chosen
    finally:
        for thread in [0, *_threads()]:
            try:
                os.sched_setaffinity(thread, before)
            except OSError as exc:  # a thread that ended meanwhile
                log.debug("affinity of thread %s: %s", thread, exc)
        torch = sys.modules.get("torch")
        if torch is not None and threads is not None:
            torch.set_num_threads(threads)


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # pragma: no cover - no procfs
        return []


def _ranges(cpus: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    parts: list[str] = []
    start = prev = None
    for c in cpus:
        if start is None:
            start = prev = c
        elif prev is not None and c == prev + 1:
            prev = c
        else:
            parts.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = c
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ",".join(parts)
