"""The ``cpu`` input pipeline: a data set read, decoded and augmented in DataLoader workers.

:class:`DataSetSource` is the :class:`~cnnbench.data.source.EpochSource` that the ``cpu``
pipeline (:mod:`cnnbench.data.pipelines`) makes of ``imagefolder``, ``cifar10`` and
``cifar100``. Its path, for each worker of a run:

1. :class:`~cnnbench.data.sharding.ShardPlan` says which images make each batch of this
   worker (its shard of the epoch's permutation; the validation split shared out in order);
2. one ``torch.utils.data.DataLoader`` (``--num-workers`` processes, persistent across
   epochs, prefetching, pinned memory when the device is a GPU) loads whole batches:
   :class:`BatchLoader` decodes each image at reduced size (:mod:`~cnnbench.data.decode`),
   crops, resizes and flips it in uint8 (:mod:`~cnnbench.data.preprocess`) into a batch
   tensor in shared memory (nothing is copied to hand it over): one of a few buffers each
   loader process reuses once the main process has let go of it (:mod:`~cnnbench.data.buffers`);
3. :class:`~cnnbench.data.normalize.Normalize` makes the model's input: on a GPU, from the
   uint8 batch; on the CPU, in the loader processes, image by image (see that module).

Training batches and validation batches go through the same loader processes (the batch
keys say which split). A bad image (corrupt, truncated, unreadable) stops the run with a
:class:`BadImageError` naming the file, or, with ``--skip-bad-images``, is left out of its
batch and counted (``metrics.bad_images``); errors from the loader's processes arrive as
one line (:class:`InputPipelineError`), never as a remote traceback.
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import multiprocessing as mp
import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from cnnbench.data import buffers
from cnnbench.data.buffers import BufferReturns, Lease, shaped, shared_storage
from cnnbench.data.catalog import DataSetReader
from cnnbench.data.decode import BadImage, decode_for_crop
from cnnbench.data.layouts import TRAIN_SPLIT, VAL_SPLIT
from cnnbench.data.normalize import Normalize
from cnnbench.data.preprocess import PHOTO_CROP_FRACTION, Preprocessing
from cnnbench.data.sharding import BatchKey, ShardPlan
from cnnbench.data.source import Batch, InputRequest
from cnnbench.lifetime import loader_worker_init
from cnnbench.words import plural

log = logging.getLogger(__name__)

PREFETCH_BATCHES = 2
"""Batches each loader process keeps ready (DataLoader's ``prefetch_factor``)."""
NAMED_BAD_IMAGES = 5
"""Skipped images named in the log, each once (an image bad in every epoch too); the rest are only
counted."""


def default_num_workers(cores: int, *, model_on_cpu: bool) -> int:
    """Loader processes per worker when ``--num-workers`` is not given, from the ``cores`` it may use.

    A model on a GPU needs about one core to drive it: the rest decode. A model on the CPU
    computes on the same cores: half of them decode.
    """
    return max(1, cores // 2 if model_on_cpu else cores - 1)


def too_few_cores(num_workers: int, cores: int, *, model_on_cpu: bool) -> str | None:
    """A warning when ``num_workers`` loader processes leave the model no core of its own."""
    if num_workers >= cores and cores > 0:
        what = "the model's threads" if model_on_cpu else "the process that drives the device"
        return (f"{plural(num_workers, 'loader process', 'loader processes')} per worker on "
                f"{plural(cores, 'core')}: no core is left for {what}, so figures include that contention")
    return None


class BadImageError(RuntimeError):
    """An image that cannot be decoded, with --skip-bad-images off (one line naming the file)."""


class InputPipelineError(RuntimeError):
    """A failure inside the loader's processes, in one line."""


class LoadedBatch(NamedTuple):
    """What a loader process hands over for one batch."""

    images: torch.Tensor
    """``n × 3 × size × size``: uint8 for a GPU, the model's input (normalised) for the CPU."""
    labels: torch.Tensor
    jitter: torch.Tensor
    """float32 ``n × 3`` colour jitter factors still to apply on the GPU, or an empty tensor."""
    bad: int
    """Images of this batch that could not be decoded and were skipped."""
    skipped: tuple[str, ...]
    """The skipped files with their reasons (the first few)."""
    error: str
    """A bad image that stops the run (``path: reason``), or ``""``."""
    bad_labels: tuple[int, ...] = ()
    """The class of each skipped image."""
    lease: Lease | None = None
    """The reused buffer the images are in (handed back when the main process lets go of them), or ``None``."""


class BatchLoader(Dataset):
    """Loads whole batches: ``loader[BatchKey]`` -> :class:`LoadedBatch` (runs in loader processes)."""

    def __init__(self, reader: DataSetReader, train: Preprocessing, evaluation: Preprocessing, *,
                 skip_bad_images: bool, jpeg_decoder: str | None, normalize: Normalize | None = None) -> None:
        self.reader = reader
        self.train = train
        self.evaluation = evaluation
        self.skip_bad_images = skip_bad_images
        self.jpeg_decoder = jpeg_decoder
        self.normalize = normalize
        """Set when the model is on the CPU: batches leave here normalised."""
        self.in_memory = hasattr(reader, "image")  # CIFAR: arrays, not files
        self.returns: BufferReturns | None = None
        """Set by :meth:`share_buffers`: loader processes reuse their batch buffers."""

    def share_buffers(self, loader_processes: int, slots: int | None = None) -> None:
        """Before ``loader_processes`` processes start: let each reuse up to ``slots`` batch buffers
        (:data:`~cnnbench.data.buffers.BUFFER_SLOTS`; 0: a new one for every batch)."""
        slots = buffers.BUFFER_SLOTS if slots is None else slots
        self.returns = BufferReturns(loader_processes, slots) if loader_processes > 0 and slots > 0 else None

    def __getitem__(self, key: BatchKey) -> LoadedBatch:
        prep = self.train if key.seeds is not None else self.evaluation
        host = self.normalize
        shape = (len(key.indices), 3, prep.size, prep.size)
        dtype, layout = (host.dtype, host.memory_format) if host else (torch.uint8, torch.contiguous_format)
        if self.returns is None or get_worker_info() is None:  # in the main process: ordinary memory
            return self._fill(key, prep, batch_tensor(shape, dtype, layout), None)
        images, lease = self.returns.batch(shape, dtype, layout)
        try:
            return self._fill(key, prep, images, lease)
        except BaseException:
            self.returns.take_back(lease)
            raise

    def _fill(self, key: BatchKey, prep: Preprocessing, images: torch.Tensor, lease: Lease | None) -> LoadedBatch:
        """Load the images of ``key`` into ``images``, leaving out bad ones (or stopping at the first)."""
        n = len(key.indices)
        host = self.normalize
        pixels = torch.empty((3, prep.size, prep.size), dtype=torch.uint8) if host else None
        labels = torch.empty(n, dtype=torch.int64)
        jitter = torch.empty((n, 3) if key.seeds is not None and prep.distortions and not host else (0, 3))
        kept, bad = 0, 0
        skipped: list[str] = []
        bad_labels: list[int] = []
        for i, index in enumerate(key.indices):
            seed = key.seeds[i] if key.seeds is not None else None
            try:
                factors = self._load(key.split, index, seed, prep, images[kept] if pixels is None else pixels)
            except BadImage as exc:
                where = f"bad image {self.reader.path(key.split, index)}: {exc}"
                if not self.skip_bad_images:
                    none = images[:0]
                    return LoadedBatch(none, labels[:0], jitter[:0], 0, (), where, (), _leased(lease, none))
                bad += 1
                bad_labels.append(self.reader.label(key.split, index))
                if len(skipped) < NAMED_BAD_IMAGES:
                    skipped.append(where)
                continue
            labels[kept] = self.reader.label(key.split, index)
            if host is not None and pixels is not None:
                host.image_into(pixels, images[kept], factors)
            elif jitter.shape[0] and factors is not None:
                jitter[kept] = torch.tensor(factors)
            kept += 1
        kept_images = images[:kept]
        return LoadedBatch(kept_images, labels[:kept], jitter[:kept] if jitter.shape[0] else jitter, bad,
                           tuple(skipped), "", tuple(bad_labels), _leased(lease, kept_images))

    def _load(self, split: str, index: int, seed: int | None, prep: Preprocessing,
              out: torch.Tensor) -> tuple[float, float, float] | None:
        """Decode, crop, resize and flip one image into ``out``; returns its jitter factors."""
        chosen: dict[str, Any] = {}
        augmentation_wanted = seed is not None and prep.distortions

        def choose(width: int, height: int) -> Any:
            if seed is None or not augmentation_wanted:
                return prep.eval_box(width, height)
            augmentation = prep.augmentation(width, height, seed)
            chosen["augmentation"] = augmentation
            return augmentation.box

        if self.in_memory:
            pixels = self.reader.image(split, index)  # type: ignore[attr-defined]
            box = choose(pixels.shape[2], pixels.shape[1])
            channels_first = True
        else:
            try:
                data = self.reader.read(split, index)  # type: ignore[attr-defined]
            except OSError as exc:
                raise BadImage(f"unreadable ({exc.strerror or exc})") from None
            pixels, box = decode_for_crop(data, prep.size, choose, jpeg_decoder=self.jpeg_decoder or "pillow",
                                          fast_dct=augmentation_wanted)
            channels_first = False
        augmentation = chosen.get("augmentation")
        prep.resize(pixels, box, channels_first=channels_first, flip=bool(augmentation and augmentation.flip),
                    out=out)
        return augmentation.jitter if augmentation is not None else None


def _leased(lease: Lease | None, images: torch.Tensor) -> Lease | None:
    """The lease to send with ``images`` (the very tensor the batch sends: pickled once, it arrives
    as one object, whose storage the lease then watches in the main process)."""
    if lease is not None:
        lease.images = images
    return lease


def batch_tensor(shape: tuple[int, ...], dtype: torch.dtype, memory_format: torch.memory_format) -> torch.Tensor:
    """An empty batch; in a loader process, in new shared memory (as torch's ``default_collate``
    allocates its batches), so that handing it to the main process copies nothing."""
    if get_worker_info() is None:
        return torch.empty(shape, dtype=dtype).contiguous(memory_format=memory_format)
    numel = 1
    for n in shape:
        numel *= n
    return shaped(shared_storage(numel * torch.empty(0, dtype=dtype).element_size()), shape, dtype, memory_format)


class _BatchKeys:
    """The DataLoader's sampler: the batch keys of whatever the source reads next.

    The DataLoader asks for a new iterator at each ``iter(loader)`` (in this process, also
    with persistent workers), so setting :attr:`keys` before that picks the next pass. It
    may ask twice for one pass (torch's multi-process iterator does): both get the same keys.
    """

    def __init__(self) -> None:
        self.keys: Iterator[BatchKey] = iter(())

    def __iter__(self) -> Iterator[BatchKey]:
        return self.keys


class DataSetSource:
    """Batches of a real data set for one worker; see the module documentation."""

    def __init__(self, request: InputRequest, reader: DataSetReader, data_name: str, *,
                 jpeg_decoder: str | None) -> None:
        """``jpeg_decoder``: :mod:`~cnnbench.data.decode`'s back end for JPEG files (``None`` for
        arrays in memory, which are not decoded)."""
        cfg = request.config
        self.reader = reader
        self.num_classes = reader.num_classes
        self.description = f"{data_name} {reader.root}"
        self.plan = ShardPlan(reader.size(TRAIN_SPLIT), reader.size(VAL_SPLIT), request.batch_size,
                              request.seed, request.rank, request.world_size)
        if self.plan.steps_per_epoch < 1:
            raise ValueError(f"{reader.root}: {reader.size(TRAIN_SPLIT)} training images cannot fill a batch of "
                             f"{request.batch_size} on each of {request.world_size} workers")
        crop_fraction = 1.0 if data_name.startswith("cifar") else PHOTO_CROP_FRACTION
        resize = cfg.resize_method or "bilinear"
        self.jpeg_decoder = jpeg_decoder
        self.normalize = Normalize(request.device, request.dtype, request.channels_last)
        self.on_host = request.device.type == "cpu"
        self.batches = BatchLoader(
            reader,
            Preprocessing(request.image_size, cfg.distortions, resize, crop_fraction),
            Preprocessing(request.image_size, False, resize, crop_fraction),
            skip_bad_images=cfg.skip_bad_images, jpeg_decoder=self.jpeg_decoder,
            normalize=self.normalize if self.on_host else None,
        )
        self.bad_images = 0
        self._named: set[str] = set()
        """The bad images named in the log so far (each once, :data:`NAMED_BAD_IMAGES` at most)."""
        self.classes = list(reader.classes)
        self._read_per_class: collections.Counter[int] = collections.Counter()
        """With --skip-bad-images: images read per class, and those that were bad (below)."""
        self._bad_per_class: collections.Counter[int] = collections.Counter()
        self.num_workers = cfg.num_workers if cfg.num_workers is not None else 0
        self._keys = _BatchKeys()
        pin = request.device.type == "cuda"
        self.batches.share_buffers(self.num_workers)
        self._loader: DataLoader | None = DataLoader(
            self.batches, batch_size=None, sampler=self._keys, num_workers=self.num_workers, pin_memory=pin,
            persistent_workers=self.num_workers > 0,
            prefetch_factor=PREFETCH_BATCHES if self.num_workers > 0 else None,
            multiprocessing_context=loader_start_method() if self.num_workers > 0 else None,
            worker_init_fn=functools.partial(loader_worker_init, os.getpid()) if self.num_workers > 0 else None,
        )
        self._endless: Iterator[Batch] | None = None
        if self.num_workers > 0:  # start the loader processes now, not inside the first timed step
            iter(self._loader)

    @property
    def steps_per_epoch(self) -> int:
        return self.plan.steps_per_epoch

    # --- the EpochSource protocol -------------------------------------------------
    def epoch(self, index: int) -> Iterator[Batch]:
        return self._read(self.plan.train_batches(index), training=True)

    def eval_batches(self) -> Iterator[Batch]:
        return self._read(self.plan.eval_batches(), training=False)

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        """Training batches without end (epoch after epoch), for runs that count steps."""
        if self._endless is None:
            keys = itertools.chain.from_iterable(self.plan.train_batches(e) for e in itertools.count())
            self._endless = self._read(keys, training=True)
        return next(self._endless)

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bad_images": self.bad_images, "jpeg_decoder": self.jpeg_decoder}
        if self.batches.skip_bad_images:
            out["classes_all_bad"] = classes_all_bad(self._read_per_class, self._bad_per_class, self.classes)
        return out

    def close(self) -> None:
        """Stop the loader processes."""
        self._endless = None
        loader, self._loader = self._loader, None
        iterator = getattr(loader, "_iterator", None)  # persistent workers live in the loader's iterator
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()

    # --- reading ----------------------------------------------------------------------
    def _read(self, keys: Iterator[BatchKey], *, training: bool) -> Iterator[Batch]:
        if self._loader is None:
            raise RuntimeError("the input source is closed")
        self._keys.keys = keys
        loaded = iter(self._loader)
        while True:
            try:
                batch = next(loaded)
            except StopIteration:
                return
            except (BadImageError, InputPipelineError):
                raise
            except Exception as exc:
                raise InputPipelineError(_one_line(exc)) from None
            yield self._place(batch, training)

    def _place(self, batch: LoadedBatch, training: bool) -> Batch:
        if batch.error:
            raise BadImageError(f"{batch.error} (--skip-bad-images skips and counts such images)")
        if training and self.batches.skip_bad_images:  # only then can a class lose images without a word
            self._read_per_class.update(batch.labels.tolist())
            self._read_per_class.update(batch.bad_labels)
            self._bad_per_class.update(batch.bad_labels)
        if batch.bad:
            self._count_bad(batch)
            if training and batch.labels.shape[0] == 0:
                raise BadImageError(f"every image of a training batch was bad ({batch.skipped[0]}, ...)")
        if self.on_host:  # normalised in the loader already
            return batch.images, batch.labels
        jitter = batch.jitter if batch.jitter.shape[0] else None
        return self.normalize.batch(batch.images, batch.labels, jitter)

    def _count_bad(self, batch: LoadedBatch) -> None:
        for where in batch.skipped:  # an image bad in every epoch is named once
            if len(self._named) < NAMED_BAD_IMAGES and where not in self._named:
                self._named.add(where)
                log.warning("skipped %s", where)
        self.bad_images += batch.bad


def classes_all_bad(read: collections.Counter[int], bad: collections.Counter[int], names: list[str]) -> list[str]:
    """The classes every training image of which that the run read was bad: empty for its training."""
    return [names[c] if 0 <= c < len(names) else str(c) for c in sorted(bad) if bad[c] and bad[c] == read[c]]


def loader_start_method() -> str | None:
    """``fork`` where there is one: the loader processes share the data set's list (CIFAR's arrays)
    and start at once, even inside a worker that was itself spawned (whose default would be to
    spawn them: a fresh interpreter importing torch, and the data set pickled to each)."""
    return "fork" if "fork" in mp.get_all_start_methods() else None


def _one_line(exc: BaseException) -> str:
    """A loader failure in one line: the remote exception's last line, where it happened."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if lines[0].startswith("Caught ") and len(lines) > 1:  # torch's ExceptionWrapper: remote traceback
        where = lines[0][len("Caught "):].rstrip(".")
        return f"{lines[-1]} ({where.split(' in ', 1)[-1]})"
    return f"{type(exc).__name__}: {lines[0]}"
