"""How many torch threads a CPU worker runs: the one rule, and setting it.

By default the cores this process may use (its affinity, ``--host-cpus``) are divided among
the workers of the node, so N workers never oversubscribe the cores: a one-device run has
all of them, and each worker of an N-device run 1/N. A CPU scaling series then compares the
same cores split more ways. ``--threads-per-worker T`` holds every worker of every device
count at T threads instead, so that a series compares N workers x the same threads
(:func:`cnnbench.config.parallel_options.thread_rule` says which rule a run used, in words).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def worker_threads(fixed: int | None, workers_here: int) -> int:
    """The threads of one worker: ``fixed`` when given, else its share of the usable cores."""
    if fixed:
        return fixed
    return max(1, usable_cores() // max(1, workers_here))


def set_worker_threads(fixed: int | None, workers_here: int) -> int:
    """Set this worker process's torch threads (:func:`worker_threads`); returns the count."""
    threads = worker_threads(fixed, workers_here)
    torch.set_num_threads(threads)
    return threads


@contextmanager
def run_threads(fixed: int | None) -> Iterator[None]:
    """A run in this process (one device): ``fixed`` threads while it runs, this process's own
    count again afterwards; ``None`` leaves the count as it is (all the usable cores)."""
    if not fixed:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(fixed)
    try:
        yield
    finally:
        torch.set_num_threads(before)
