"""Time spent in collectives during the timed steps, where it can be measured honestly.

On CPU (Gloo) a collective's future completes when its data has been exchanged, so the
time from its launch to its completion is its duration; the durations of the timed steps
are summed. On GPUs a future completes before the device has done the work, so nothing is
claimed there (``None``).

:class:`CommunicationTimer` is a measurement hook of its own (``start``/``stop``/``metrics``,
see :mod:`cnnbench.engine.hooks`): a strategy adds to it while the timed steps run, and
lists it in its ``measurement_hooks()``; the record gets ``metrics.communication_time_s``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any


class CommunicationTimer:
    """The time spent in collectives between ``start`` and ``stop``; ``None`` where not
    ``measurable`` (GPUs, or a strategy whose collectives cannot be timed)."""

    def __init__(self, measurable: bool) -> None:
        self.measurable = measurable
        self._lock = threading.Lock()
        self._active = False
        self._total = 0.0
        self._count = 0

    def start(self) -> None:
        with self._lock:
            self._active, self._total, self._count = True, 0.0, 0

    def stop(self) -> None:
        with self._lock:
            self._active = False

    def add(self, seconds: float) -> None:
        with self._lock:
            if self._active:
                self._total += seconds
                self._count += 1

    @property
    def total_s(self) -> float | None:
        return self._total if self.measurable else None

    @property
    def count(self) -> int:
        return self._count

    def metrics(self) -> Mapping[str, Any]:
        return {"communication_time_s": self.total_s}


def now() -> float:
    return time.perf_counter()
