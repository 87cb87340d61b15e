"""Under torchrun: rank 0 records a failed rank even while it cannot raise.

Under torchrun rank 0 writes the record. When another rank fails, rank 0 may be blocked in
a NCCL or CUDA call that does not return; torchrun's agent then sends it SIGTERM, and
SIGKILL after a grace period. A Python signal handler runs only in the main thread, between
bytecodes: it may never run. So the record is written from a thread, :class:`FailureWatch`:

* a rank that fails publishes its error in the c10d store first (:meth:`FailureWatch.publish`),
  in one key that only the first failure sets (``compare_set``: the first in time wins);
* every rank's watch thread beats in the store, and takes SIGTERM from a wakeup fd (written
  by Python's C-level handler in whichever thread the signal lands, whatever the main thread
  is doing); a rank other than 0 says in the store that it was stopped, and exits;
* rank 0's watch thread calls ``on_failure(rank, cause)`` once: as soon as another rank has
  published its failure, or, after SIGTERM, for a rank whose beat stopped without its being
  stopped (killed, crashed); then, after SIGTERM, it exits (143).

Rank 0 looks for a failure every :data:`BEAT_S` in a constant number of store round trips
(:data:`ROUND_TRIPS_PER_BEAT`), whatever the world size: the failure key is one key. It reads
the other ranks' beats only after SIGTERM, twice, :data:`SILENT_S` apart.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable

from torch.distributed import Store

from cnnbench.distributed.world import World

log = logging.getLogger(__name__)

BEAT_S = 0.5
"""How often every rank beats, and rank 0 looks for failures."""
SILENT_S = 5.0
"""A rank whose beat has not changed for this long (after SIGTERM) has died."""
STORE_TIMEOUT_S = 5.0
ROUND_TRIPS_PER_BEAT = 2
"""Store round trips each watch thread makes per beat while the run goes on: its beat, and on
rank 0 whether the failure key is there (then reading it, once)."""
FIRST_FAILURE = "first-failure"
"""The key (under ``cnnbench/watch/``) the first rank that fails sets to ``"<rank>\t<cause>"``."""
RECORD_TIMEOUT_S = 60.0
"""The longest the end of the run waits for the watch thread's record to be written."""

OnFailure = Callable[[int, str], None]


def group_store() -> Store | None:
    """The default process group's store, once the group is started."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.distributed_c10d._get_default_store()



class FailureWatch:
    """This rank's watch thread (see the module); a context manager around the run."""

    def __init__(self, world: World, on_failure: OnFailure | None = None, *,
                 store: Callable[[], Store | None] = group_store, exit_on_sigterm: bool = True) -> None:
        self.world = world
        self._store_source = store
        self._store: Store | None = None
        self._on_failure = on_failure
        self._exit_on_sigterm = exit_on_sigterm
        self._stop = threading.Event()
        self._once = threading.Lock()
        self._writing = threading.Lock()  # held while on_failure writes the record
        self._recorded = False
        self._thread = threading.Thread(target=self._watch, name="cnnbench-failure-watch", daemon=True)
        self._read_fd, self._write_fd = os.pipe()
        self._saved: tuple[object, int] | None = None

    # ------------------------------------------------------------------ main thread

    def __enter__(self) -> FailureWatch:
        os.set_blocking(self._write_fd, False)
        if threading.current_thread() is threading.main_thread():
            handler = signal.signal(signal.SIGTERM, _ignore)  # the watch thread acts on it
            self._saved = (handler, signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * BEAT_S + STORE_TIMEOUT_S)
        if self._writing.acquire(timeout=RECORD_TIMEOUT_S):  # a record being written is finished first
            self._writing.release()
        if self._saved is not None:
            handler, fd = self._saved
            signal.set_wakeup_fd(fd)
            signal.signal(signal.SIGTERM, handler)  # type: ignore[arg-type]
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def publish(self, cause: str) -> None:
        """Say in the store that this rank failed, with ``cause`` (before it tears anything down),
        unless another rank said so first."""
        store = self._connected()
        if store is None:
            return
        try:
            store.compare_set(f"cnnbench/watch/{FIRST_FAILURE}", "", f"{self.world.rank}\t{cause}")
        except Exception as exc:  # the store's host is gone: the run is ending anyway
            log.debug("failure watch: cannot publish: %s", exc)

    def claim(self) -> bool:
        """Whether the run's failure is this caller's to record (nobody has recorded it yet)."""
        with self._once:
            if self._recorded:
                return False
            self._recorded = True
            return True

    def record_once(self, rank: int, cause: str) -> bool:
        """Call ``on_failure`` unless the failure was recorded already; whether it was called now."""
        if self._on_failure is None or not self.claim():
            return False
        with self._writing:
            self._on_failure(rank, cause)
        return True

    @property
    def recorded(self) -> bool:
        return self._recorded

    def failed_peer(self) -> tuple[int, str] | None:
        """The first other rank that published its failure, with its cause (one key, whatever
        the world size)."""
        value = self._get(FIRST_FAILURE)
        if value is None:
            return None
        rank, _, cause = value.partition("\t")
        if not rank.isdigit() or int(rank) == self.world.rank:
            return None
        return int(rank), cause

    # ------------------------------------------------------------------ watch thread

    def _watch(self) -> None:
        beat = 0
        while not self._stop.is_set():
            beat += 1
            self._beat(beat)
            ready, _, _ = select.select([self._read_fd], [], [], BEAT_S)
            if ready and signal.SIGTERM in _signals(self._read_fd):
                self._terminated()
                return

    def _beat(self, beat: int) -> None:
        """One beat's work: say this rank is alive; on rank 0, record a published failure
        (:data:`ROUND_TRIPS_PER_BEAT` store round trips, whatever the world size)."""
        if self._connected() is not None:
            self._set(f"beat/{self.world.rank}", str(beat))
        if self.world.is_main and self._store is not None:
            peer = self.failed_peer()
            if peer is not None:
                self.record_once(*peer)

    def _terminated(self) -> None:
        if not self.world.is_main:
            self._set(f"stopped/{self.world.rank}", "SIGTERM")
        else:
            self._find_the_failed_rank()
        if self._exit_on_sigterm:
            logging.shutdown()
            os._exit(128 + signal.SIGTERM)

    def _find_the_failed_rank(self) -> None:
        """After SIGTERM, on rank 0: record the rank that published its failure, or else one
        whose beat has not changed for :data:`SILENT_S` although nobody stopped it."""
        before = self._beats()  # every other rank's beat, once
        start = time.monotonic()  # after reading them: each stood still SILENT_S at least
        silent_checked = False
        while not self._recorded and time.monotonic() < start + SILENT_S + 2 * BEAT_S:
            verdict = self.failed_peer()
            if verdict is None and not silent_checked and time.monotonic() >= start + SILENT_S:
                verdict, silent_checked = self._silent_peer(before), True
            if verdict is not None:
                self.record_once(*verdict)
                return
            time.sleep(BEAT_S)

    def _beats(self) -> dict[int, str]:
        """Each other rank's last beat (ranks that never beat are left out)."""
        beats = {}
        for rank in range(1, self.world.world_size):
            value = self._get(f"beat/{rank}")
            if value is not None:
                beats[rank] = value
        return beats

    def _silent_peer(self, before: dict[int, str]) -> tuple[int, str] | None:
        """A rank whose beat is still the one in ``before`` (read :data:`SILENT_S` ago), although
        nobody stopped it."""
        now = self._beats()
        for rank in sorted(before):
            if now.get(rank) == before[rank] and self._get(f"stopped/{rank}") is None:
                return rank, f"died without a word (no beat for {SILENT_S:g} s; killed, or crashed)"
        return None

    # ------------------------------------------------------------------ store

    def _connected(self) -> Store | None:
        """The store, once it is there (the run starts the process group)."""
        if self._store is None:
            store = self._store_source()
            if store is not None:
                store = store.clone()  # a connection of its own: the main thread may be blocked on the other
                store.set_timeout(datetime.timedelta(seconds=STORE_TIMEOUT_S))
                self._store = store
        return self._store

    def _set(self, key: str, value: str) -> None:
        store = self._connected()
        if store is None:
            return
        try:
            store.set(f"cnnbench/watch/{key}", value)
        except Exception as exc:  # the store's host is gone: the run is ending anyway
            log.debug("failure watch: cannot set %s: %s", key, exc)

    def _get(self, key: str) -> str | None:
        full = f"cnnbench/watch/{key}"
        store = self._connected()
        if store is None:
            return None
        try:
            return store.get(full).decode() if store.check([full]) else None
        except Exception as exc:
            log.debug("failure watch: cannot read %s: %s", key, exc)
            return None


def _ignore(signum: int, frame: object) -> None:
    """The main thread's part of SIGTERM: none (the watch thread's wakeup fd got it)."""


def _signals(fd: int) -> set[int]:
    try:
        return set(os.read(fd, 64))
    except OSError:
        return set()
