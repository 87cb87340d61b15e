"""Batch buffers in shared memory that each loader process reuses once the main process lets go.

A loader process hands its batches to the main process in shared memory, so that nothing is
copied. A new shared-memory tensor for every batch costs the kernel's zero-filling of every
page: for a float32 batch of 64 × 3 × 224 × 224, 0.48 ms per image against 0.03 ms into
memory already mapped (``benchmarks/README.md``). So each loader process keeps a few batch
buffers (at most :data:`BUFFER_SLOTS`) and writes into one again only after the main process
has handed it back:

* before the loader processes start, the main process makes a table of flags in shared
  memory (:class:`BufferReturns`: a row per loader process, a flag per slot);
* a loader process takes one of its slots whose flag is clear, sets the flag, writes the batch
  into it and sends it with a :class:`Lease` naming the slot;
* unpickled in the main process, the lease keeps a *weak* reference to the storage the batch's
  images arrived in (the very tensor: pickle's memo). At every arrival, the main process clears
  the flag of each earlier lease whose storage nothing there references any more: no tensor,
  no view of one, no array over one (a batch pinned for a GPU is a copy: its shared storage is
  let go as soon as it is copied);
* when every slot is still held, the loader process writes the batch into new shared memory as
  before (its lease names no slot: its arrival still hands back the slots let go since): reusing
  never waits and never overwrites a batch the main process still holds.

The slots grow one at a time, only while all are held, so they hold no more memory than the
batches that were alive at once. No GPU is needed; the same path serves uint8 and float batches.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from typing import Any

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.data import get_worker_info

BUFFER_SLOTS = 5
"""Buffers each loader process may keep: the batches it has ready (``prefetch_factor``: 2), the
one it is writing, and two the main process may still hold (the batch in use, and the one before
it, let go only after the next one arrived). 0: a new buffer for every batch (as before)."""

_RETURNS: weakref.WeakValueDictionary[int, BufferReturns] = weakref.WeakValueDictionary()
"""In the main process: the tables by token, for the leases that arrive."""
_TOKENS = itertools.count(1)


def shared_storage(nbytes: int) -> torch.UntypedStorage:
    """New shared memory of ``nbytes`` (torch's allocation, as ``default_collate``'s in a loader process)."""
    return torch.UntypedStorage._new_shared(nbytes)


def shaped(storage: torch.UntypedStorage, shape: tuple[int, ...], dtype: torch.dtype,
           memory_format: torch.memory_format) -> torch.Tensor:
    """A ``shape`` tensor of ``dtype`` over the start of ``storage``, in ``memory_format``."""
    numel = 1
    for n in shape:
        numel *= n
    flat = torch.empty(0, dtype=dtype).set_(storage, 0, (numel,), (1,))
    if memory_format == torch.channels_last:
        _, c, h, w = shape
        return flat.as_strided(shape, (h * w * c, 1, w * c, c))
    return flat.view(shape)


def nbytes_of(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    numel = 1
    for n in shape:
        numel *= n
    return numel * torch.empty(0, dtype=dtype).element_size()


class Lease:
    """A batch buffer a loader process lent the main process: which table, loader process and slot
    (-1: new shared memory, not a slot).

    Sent with the batch; unpickled in the main process it registers the batch's storage with
    its table (:func:`_arrived`) and keeps nothing alive itself."""

    __slots__ = ("token", "worker", "slot", "uses", "images")

    def __init__(self, token: int, worker: int, slot: int, uses: int, images: torch.Tensor | None) -> None:
        self.token = token
        self.worker = worker
        self.slot = slot
        self.uses = uses
        """How many batches this slot has carried, this one included (1: a new buffer)."""
        self.images = images
        """The batch's images (in the loader process only: the same object the batch sends)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_arrived, (self.token, self.worker, self.slot, self.uses, self.images))


def _arrived(token: int, worker: int, slot: int, uses: int, images: torch.Tensor | None) -> Lease:
    """Unpickling a lease in the main process: register the batch's storage, hand back the slots let go."""
    returns = _RETURNS.get(token)
    if returns is not None:
        returns.arrived(worker, slot, uses, images.untyped_storage() if images is not None and slot >= 0 else None)
    return Lease(token, worker, slot, uses, None)


class BufferReturns:
    """The table of slots lent to the main process, shared by the main process and its loader processes."""

    def __init__(self, loader_processes: int, slots: int = BUFFER_SLOTS) -> None:
        self.token = (os.getpid() << 24) + next(_TOKENS)
        self.flags = torch.zeros((loader_processes, slots), dtype=torch.uint8).share_memory_()
        """1: the slot's buffer is with the main process (set by the loader process, cleared by the main one)."""
        self._init_local()
        _RETURNS[self.token] = self

    def _init_local(self) -> None:
        self._view: np.ndarray | None = None
        self._held: list[tuple[StorageWeakRef, int, int]] = []
        """In the main process: the storages lent, weakly, with their loader process and slot."""
        self._lock = threading.Lock()  # leases arrive in the pin-memory thread when there is one
        self._ring: dict[int, torch.UntypedStorage] = {}
        """In a loader process: its buffers by slot."""
        self._uses: dict[int, int] = {}
        self.reused = 0
        """In the main process: batches that arrived in a buffer used before."""
        self.arrivals = 0

    def __getstate__(self) -> dict[str, Any]:  # to a spawned loader process: the table, nothing local
        return {"token": self.token, "flags": self.flags}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.token = state["token"]
        self.flags = state["flags"]
        self._init_local()

    @property
    def slots(self) -> int:
        return int(self.flags.shape[1])

    def _table(self) -> np.ndarray:
        if self._view is None:
            self._view = self.flags.numpy()
        return self._view

    # --- in a loader process ------------------------------------------------------------
    def batch(self, shape: tuple[int, ...], dtype: torch.dtype,
              memory_format: torch.memory_format) -> tuple[torch.Tensor, Lease | None]:
        """An empty batch in shared memory and its lease: in a free slot of this loader process or, with
        every slot held by the main process, in new shared memory (a lease of no slot)."""
        nbytes = nbytes_of(shape, dtype)
        info = get_worker_info()
        worker = info.id if info is not None else -1
        if not 0 <= worker < self.flags.shape[0]:
            return shaped(shared_storage(nbytes), shape, dtype, memory_format), None
        row = self._table()[worker]
        slot = next((k for k, s in self._ring.items() if not row[k] and s.nbytes() >= nbytes), None)
        if slot is None:  # a slot not lent: new, or too small for this batch
            slot = next((k for k in range(self.slots) if not row[k]), None)
            if slot is None:
                fresh = shaped(shared_storage(nbytes), shape, dtype, memory_format)
                return fresh, Lease(self.token, worker, -1, 1, None)
            self._ring[slot] = shared_storage(nbytes)
            self._uses[slot] = 0
        row[slot] = 1
        self._uses[slot] += 1
        images = shaped(self._ring[slot], shape, dtype, memory_format)
        return images, Lease(self.token, worker, slot, self._uses[slot], images)

    def take_back(self, lease: Lease | None) -> None:
        """The batch of ``lease`` was never sent (its loader process failed): the slot is free again."""
        if lease is not None and lease.slot >= 0:
            self._table()[lease.worker][lease.slot] = 0

    # --- in the main process --------------------------------------------------------------
    def arrived(self, worker: int, slot: int, uses: int, storage: torch.UntypedStorage | None) -> None:
        """A batch arrived (in ``slot``'s buffer, whose ``storage`` is given, or in new memory): hand back
        the slots let go since the last one."""
        with self._lock:
            self.arrivals += 1
            self.reused += uses > 1
            if storage is not None:
                self._held.append((StorageWeakRef(storage), worker, slot))
            self._collect()

    def collect(self) -> None:
        """Hand back every slot whose storage nothing in this process references any more."""
        with self._lock:
            self._collect()

    def _collect(self) -> None:
        table = self._table()
        still: list[tuple[StorageWeakRef, int, int]] = []
        for held in self._held:
            ref, worker, slot = held
            if ref.expired():
                table[worker][slot] = 0
            else:
                still.append(held)
        self._held = still
