"""Stopping a sweep: a flag that signal handlers set and that wakes a waiting parent.

SIGINT and SIGTERM set the flag while a sweep runs (:class:`SignalScope`); the parent,
waiting on a case (:mod:`cnnbench.sweep.waiting`), wakes through the flag's pipe and
stops the case at once.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any


class StopFlag:
    """Set by signal handlers; wakes a waiting parent through a pipe."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)

    @property
    def fd(self) -> int:
        return self._r

    def set(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
        try:
            os.write(self._w, b"x")
        except OSError:  # the pipe is full (already woken) or closed
            pass

    def __bool__(self) -> bool:
        return self.signum is not None

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


class SignalScope:
    """SIGINT and SIGTERM set the stop flag while a sweep runs (main thread only)."""

    def __init__(self, stop: StopFlag) -> None:
        self.stop = stop
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> SignalScope:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, lambda signum, frame: self.stop.set(signum))
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
