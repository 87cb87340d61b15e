"""Synthetic input at three locations, as an endless iterator of (images, labels).

- ``device``: one batch made once on the device and returned every step: no copy, no host work.
  The upper bound of what the model alone can do.
- ``host``: a new batch made on the host each step, in pinned memory when the device is CUDA
  (PyTorch's caching host allocator makes this cheap and tracks the asynchronous copy), and
  copied with ``non_blocking=True``.
- ``loader``: batches made in ``DataLoader`` worker processes, prefetched, pinned, then copied
  like ``host``: the shape of a real input pipeline without the decoding.

A host batch is "made" by copying one random batch drawn at start into new memory
(:func:`fresh_copy`): the step pays for writing and moving a batch, as a real pipeline's
does, not for drawing 38 million normal variates. Drawn each step, they held an H200 to a
quarter of its ``device`` rate (resnet50, batch 256: 1,194 against 4,737 img/s, torch 2.11),
a figure about the random generator, not about the copy.

Batches arrive in the dtype and memory format the model wants (``channels_last`` for NHWC).
:class:`SyntheticInput` is the first :class:`~cnnbench.data.source.InputSource`; each
worker of a multi-device run draws its own batches (the seed is offset by its rank).
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from cnnbench.config.input_rules import SYNTHETIC_SOURCE
from cnnbench.data.loader import loader_start_method
from cnnbench.data.source import Batch, InputRequest, InputSource, register_input
from cnnbench.lifetime import loader_worker_init

SYNTHETIC_NUM_CLASSES = 1000


@dataclass(frozen=True)
class BatchShape:
    batch_size: int
    image_size: int
    num_classes: int
    channels: int = 3

    @property
    def images(self) -> tuple[int, int, int, int]:
        return (self.batch_size, self.channels, self.image_size, self.image_size)


def _random_batch(shape: BatchShape, generator: torch.Generator, pin: bool, device: str = "cpu") -> Batch:
    images = torch.empty(shape.images, pin_memory=pin, device=device).normal_(generator=generator)
    labels = torch.randint(0, shape.num_classes, (shape.batch_size,), generator=generator, device=device)
    if pin:
        labels = labels.pin_memory()
    return images, labels


def fresh_copy(batch: Batch, shift: int, pin: bool = False) -> Batch:
    """A new batch (new memory, pinned when ``pin``) holding ``batch``'s samples rotated by
    ``shift`` along the batch, for the price of one copy (consecutive batches differ, but for a
    batch of one; they repeat every ``batch_size`` steps)."""
    out = []
    for t in batch:
        new = torch.empty(t.shape, dtype=t.dtype, pin_memory=pin)
        k = shift % t.shape[0]
        new[: t.shape[0] - k].copy_(t[k:])
        new[t.shape[0] - k:].copy_(t[:k])
        out.append(new)
    return out[0], out[1]


class _HostBatches(IterableDataset):
    """Endless batches, a new one each step (see :func:`fresh_copy`), one random batch per
    DataLoader worker."""

    def __init__(self, shape: BatchShape, seed: int) -> None:
        self.shape = shape
        self.seed = seed

    def __iter__(self) -> Iterator[Batch]:
        info = get_worker_info()
        g = torch.Generator().manual_seed(self.seed + (info.id + 1 if info else 0))
        template = _random_batch(self.shape, g, pin=False)
        for step in itertools.count():
            yield fresh_copy(template, step)


class SyntheticInput:
    """Endless synthetic batches for one device. Use as an iterator; ``close()`` stops workers."""

    num_classes: int
    description: str

    def __init__(
        self,
        location: str,
        shape: BatchShape,
        device: torch.device,
        *,
        dtype: torch.dtype = torch.float32,
        channels_last: bool = False,
        seed: int = 0,
        loader_workers: int = 2,
    ) -> None:
        self.location = location
        self.shape = shape
        self.num_classes = shape.num_classes
        self.description = f"synthetic ({location})"
        self.device = device
        self.dtype = dtype
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self._loader: DataLoader | None = None
        self._pin = device.type == "cuda"
        if location == "device":
            g = torch.Generator(device=device).manual_seed(seed)
            images, labels = _random_batch(shape, g, pin=False, device=str(device))
            self._iter: Iterator[Batch] = itertools.repeat(self._place(images, labels))
        elif location == "host":
            self._iter = self._host_batches(torch.Generator().manual_seed(seed))
        elif location == "loader":
            self._loader = DataLoader(
                _HostBatches(shape, seed),
                batch_size=None,
                num_workers=loader_workers,
                pin_memory=self._pin,
                prefetch_factor=2 if loader_workers > 0 else None,
                persistent_workers=False,
                multiprocessing_context=loader_start_method() if loader_workers > 0 else None,
                worker_init_fn=functools.partial(loader_worker_init, os.getpid()) if loader_workers > 0 else None,
            )
            self._iter = (self._place(x, y) for x, y in self._loader)
        else:
            raise ValueError(f"unknown synthetic location {location!r}")

    def _place(self, images: torch.Tensor, labels: torch.Tensor) -> Batch:
        images = images.to(self.device, dtype=self.dtype, non_blocking=True, memory_format=self.memory_format)
        return images, labels.to(self.device, non_blocking=True)

    def _host_batches(self, g: torch.Generator) -> Iterator[Batch]:
        template = _random_batch(self.shape, g, pin=False)
        for step in itertools.count():
            yield self._place(*fresh_copy(template, step, pin=self._pin))

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        return next(self._iter)

    def metrics(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """Stop DataLoader workers (the iterator is dropped; workers exit with it)."""
        self._iter = iter(())
        self._loader = None


@register_input(SYNTHETIC_SOURCE)
def synthetic_input(request: InputRequest) -> InputSource:
    """Synthetic batches at ``--synthetic-location``, a different draw on every worker."""
    cfg = request.config
    return SyntheticInput(
        cfg.synthetic_location or "device",
        BatchShape(request.batch_size, request.image_size, SYNTHETIC_NUM_CLASSES),
        request.device,
        dtype=request.dtype,
        channels_last=request.channels_last,
        seed=request.seed + request.rank,
        loader_workers=cfg.num_workers if cfg.num_workers is not None else 0,
    )
