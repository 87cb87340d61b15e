"""The ``dali`` input pipeline: JPEGs read, decoded and augmented by NVIDIA DALI.

For ``imagefolder`` data sets (files: CIFAR's arrays need no decoder). Per worker of a run:

1. DALI's file reader lists the data set's own files and labels (:mod:`~cnnbench.data.imagefolder`:
   a class's index is its folder's place among train/'s sorted folder names, as the ``cpu``
   pipeline's), sharded by rank (``shard_id``, ``num_shards``). Training reshuffles the whole
   list every epoch (``shuffle_after_epoch``: the same permutation on every rank, after one
   drawn from ``--seed``), so each epoch the ranks read disjoint shards that cover it;
2. decoding where the batches go: ``device="mixed"`` on a GPU (nvJPEG, and the hardware JPEG
   decoder where the GPU has one, taking ``--dali-hw-decoder-load`` of the images),
   ``device="cpu"`` on a CPU run (``--num-workers`` DALI threads);
3. with ``--distortions``, the random resized crop fused into the decode
   (``decoders.image_random_crop``, the ``cpu`` pipeline's ranges, :mod:`~cnnbench.data.preprocess`),
   a flip with probability 1/2 and the colour jitter factors (each in 0.6–1.4); without it,
   the centre crop (``crop_fraction`` of the shorter side) decoded alone. Then the resize
   (``--resize-method``, antialiased but for nearest), as uint8 ``N × 3 × size × size``;
4. the jitter, the normalisation, the dtype and the layout of the run by the ``cpu`` pipeline's
   own :class:`~cnnbench.data.normalize.Normalize` on the device: the same colour map.

The same images per epoch as the ``cpu`` pipeline: each worker takes ``N // W // batch`` full
batches of its shard (the reader pads every shard to the same number of batches, so ranks stay
in step; the rest of a shard is read and left, as the ``cpu`` pipeline leaves its last partial
batch). Evaluation reads each worker's shard once in order, the last batches partial or empty,
every worker the same number of them.

DALI fails a whole batch on a bad image and does not say which file it was: a failure is
named by a check of the files' headers and ends (:func:`bad_file`); with ``--skip-bad-images``
every file is checked first and those that fail are left out and counted (``metrics.bad_images``).
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import logging
import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from cnnbench.config.errors import ConfigError
from cnnbench.config.input_options import DEFAULT_DALI_HW_DECODER_LOAD, InputOptions
from cnnbench.data.catalog import DataSetFacts, DataSetReader
from cnnbench.data.layouts import TRAIN_SPLIT, VAL_SPLIT
from cnnbench.data.loader import NAMED_BAD_IMAGES, BadImageError, InputPipelineError, classes_all_bad
from cnnbench.data.normalize import Normalize
from cnnbench.data.pipelines import register_pipeline
from cnnbench.data.preprocess import CROP_RATIO, CROP_SCALE, JITTER, PHOTO_CROP_FRACTION
from cnnbench.data.sharding import SEED_LIMIT
from cnnbench.data.source import Batch, InputRequest, InputSource
from cnnbench.results.files import open_regular

log = logging.getLogger(__name__)

EXTRAS = "pip install 'cnnbench[dali]' (NVIDIA driver 580 or later) or 'cnnbench[dali-cuda120]' (older drivers)"
_INTERP = {"bilinear": "INTERP_LINEAR", "bicubic": "INTERP_CUBIC", "nearest": "INTERP_NN"}


def dali_installed() -> bool:
    """Can ``nvidia.dali`` be imported (without importing it)?"""
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):
        return False


def check_dali(config: InputOptions, data_set: DataSetFacts) -> None:
    """The ``dali`` pipeline's refusals, before any work: DALI not installed, a data set of arrays."""
    if not dali_installed():
        raise ConfigError("input_pipeline", f"dali needs NVIDIA DALI, which is not installed: {EXTRAS}")
    if data_set.name != "imagefolder":
        raise ConfigError("input_pipeline", f"dali decodes image files; {data_set.name} holds arrays "
                                            "(use --input-pipeline cpu)")


TAIL_BYTES = 4096
"""How far from a file's end its end marker is looked for: writers append data after it (a phone's
motion photo, some EXIF tools), and such a file decodes whole."""


def bad_file(path: str) -> str | None:
    """Why ``path`` is not a whole JPEG or PNG file DALI may decode, or ``None``: its first bytes, its
    end marker in its last :data:`TAIL_BYTES`, and the width and height its header says (more pixels
    than Pillow decodes: a small file that declares 60,000 × 60,000 pixels ended DALI's run in
    ``std::bad_alloc``, naming no file). Only the ends and the header are read: a file damaged in the
    middle passes (DALI decodes it as it can), where the cpu pipeline's decoder may refuse it."""
    try:
        with open_regular(path) as f:  # a FIFO swapped in after the listing is named, never waited on
            head = f.read(8)
            f.seek(max(0, os.fstat(f.fileno()).st_size - TAIL_BYTES))
            tail = f.read()
            if not head:
                return "empty file"
            if head.startswith(b"\xff\xd8\xff"):
                if b"\xff\xd9" not in tail:
                    return "truncated JPEG (no end marker)"
                size = _jpeg_size(f)
            elif head == b"\x89PNG\r\n\x1a\n":
                if b"IEND\xaeB`\x82" not in tail:
                    return "truncated PNG (no IEND chunk)"
                f.seek(16)
                ihdr = f.read(8)
                size = (int.from_bytes(ihdr[:4], "big"), int.from_bytes(ihdr[4:], "big")) if len(ihdr) == 8 else None
            else:
                return "neither a JPEG nor a PNG file"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if size is not None and size[0] * size[1] > _most_pixels():
        return (f"an image of {size[0]} × {size[1]} pixels, more than the {_most_pixels():,} Pillow decodes "
                "(a decompression bomb?)")
    return None


def _most_pixels() -> int:
    """The most pixels an image may have: those Pillow decodes at all (twice its warning's limit:
    178,956,970 by default). A photo of 100 million pixels passes; a header of 60,000 × 60,000 does not."""
    from PIL import Image

    return 2 * int(Image.MAX_IMAGE_PIXELS or 0) or 1 << 62


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""The JPEG markers that start a frame (its height and width follow), of every coding."""


def _jpeg_size(f: Any) -> tuple[int, int] | None:
    """The width and height a JPEG's frame header says, found by walking its markers from the start
    (in one read of its first :data:`HEADER_BYTES`; past them, four bytes of each marker, never their
    contents); None where no frame header is found."""
    f.seek(0)
    block = f.read(HEADER_BYTES)
    at = 2
    for _ in range(4096):
        head = block[at:at + 9] if at + 9 <= len(block) else _bytes_at(f, at, 9)
        if len(head) < 4 or head[0] != 0xFF:
            return None
        if head[1] == 0xFF:  # a fill byte
            at += 1
            continue
        if head[1] in _SOF:
            return (int.from_bytes(head[7:9], "big"), int.from_bytes(head[5:7], "big")) if len(head) == 9 else None
        at += 2 + int.from_bytes(head[2:4], "big")
    return None


def _bytes_at(f: Any, at: int, size: int) -> bytes:
    f.seek(at)
    return bytes(f.read(size))


HEADER_BYTES = 2048
"""How much of a JPEG is read at once to find its frame header (most lie in the first few KiB, after
the quantization tables; one after a big EXIF block is found four bytes a marker further on)."""


def scan(paths: Sequence[str], threads: int) -> dict[int, str]:
    """The indices of ``paths`` that :func:`bad_file` refuses, with the reason."""
    with ThreadPoolExecutor(max(1, threads)) as pool:
        reasons = list(pool.map(bad_file, paths, chunksize=256))
    return {i: why for i, why in enumerate(reasons) if why is not None}


def shard_size(total: int, shard: int, shards: int) -> int:
    """Files in DALI's shard ``shard`` of ``shards`` (its shards are contiguous ranges)."""
    return (total * (shard + 1)) // shards - (total * shard) // shards


class _Passes:
    """One DALI pipeline read pass after pass: ``per_pass`` batches each (the reader's epoch, padded)."""

    def __init__(self, pipe: Any, per_pass: int) -> None:
        self.pipe = pipe
        self.per_pass = per_pass
        self.read = 0
        """Batches read of the current pass."""

    def next(self) -> tuple[Any, ...]:
        outputs = self.pipe.run()
        self.read = (self.read + 1) % self.per_pass
        return tuple(outputs)

    def finish(self) -> None:
        """Read and leave the rest of a pass begun, so that the next batch starts a pass."""
        while self.read:
            self.next()


class DaliSource:
    """Batches of an image folder through DALI, for one worker; see the module documentation."""

    def __init__(self, request: InputRequest, reader: DataSetReader) -> None:
        import nvidia.dali as dali

        cfg = request.config
        self.request = request
        self.reader = reader
        self.num_classes = reader.num_classes
        self.classes = list(reader.classes)
        self.description = f"imagefolder {reader.root} (dali)"
        self.on_gpu = request.device.type == "cuda"
        self.decode_device = "mixed" if self.on_gpu else "cpu"
        given = cfg.dali_hw_decoder_load
        self.hw_decoder_load = (DEFAULT_DALI_HW_DECODER_LOAD if given is None else given) if self.on_gpu else None
        """The share DALI hands its hardware JPEG decoder (None off a GPU: nothing decodes there)."""
        self.threads = max(1, cfg.num_workers or 0)
        self.version = dali.__version__
        self.normalize = Normalize(request.device, request.dtype, request.channels_last)
        self.distortions = cfg.distortions
        self.bad_images = 0
        self.all_bad: list[str] = []
        rank, world = request.rank, request.world_size
        self.train_files, self.train_labels = self._files(TRAIN_SPLIT, cfg.skip_bad_images)
        self.val_files, self.val_labels = self._files(VAL_SPLIT, cfg.skip_bad_images)
        n = len(self.train_files)
        self.steps_per_epoch = n // world // request.batch_size
        if self.steps_per_epoch < 1:
            raise ValueError(f"{reader.root}: {n} training images cannot fill a batch of "
                             f"{request.batch_size} on each of {world} workers")
        order = np.random.default_rng([request.seed & SEED_LIMIT, 0]).permutation(n)  # the seed's order
        self.train_files = [self.train_files[i] for i in order]
        self.train_labels = [self.train_labels[i] for i in order]
        self._train = self._passes(self.train_files, self.train_labels, training=True)
        self._val: _Passes | None = None
        self._endless: Iterator[Batch] | None = None
        self._shard = (rank, world)

    # --- building ---------------------------------------------------------------------
    def _files(self, split: str, skip_bad: bool) -> tuple[list[str], list[int]]:
        """The split's files and labels (with --skip-bad-images: those that pass :func:`bad_file`)."""
        size = self.reader.size(split)
        files = [self.reader.path(split, i) for i in range(size)]
        labels = [self.reader.label(split, i) for i in range(size)]
        if not skip_bad:
            special = self.reader.special(split) if hasattr(self.reader, "special") else ()
            if special:  # DALI opens each file itself, and would wait on a FIFO for ever
                first = files[special[0]]
                raise BadImageError(f"bad image {first}: {bad_file(first)} (--skip-bad-images skips and counts "
                                    "such images)")
            return files, labels
        if not files:
            return files, labels
        bad = scan(files, self.threads)
        rank, world = self.request.rank, self.request.world_size
        mine = [i for i in bad if i % world == rank]  # each worker counts its share: the run's sum is the total
        for i in mine[:NAMED_BAD_IMAGES]:
            log.warning("skipped bad image %s: %s", files[i], bad[i])
        self.bad_images += len(mine)
        if split == TRAIN_SPLIT and bad:
            read = np.bincount(labels, minlength=len(self.classes))
            lost = np.bincount([labels[i] for i in bad], minlength=len(self.classes))
            self.all_bad = classes_all_bad(collections.Counter(dict(enumerate(read.tolist()))),
                                           collections.Counter(dict(enumerate(lost.tolist()))), self.classes)
        return [f for i, f in enumerate(files) if i not in bad], [c for i, c in enumerate(labels) if i not in bad]

    def _passes(self, files: list[str], labels: list[int], *, training: bool) -> _Passes:
        pipe = self._pipeline(files, labels, training=training)
        meta = pipe.reader_meta("reader")
        per_shard = math.ceil(meta["epoch_size_padded"] / meta["number_of_shards"])
        return _Passes(pipe, math.ceil(per_shard / self.request.batch_size))

    def _pipeline(self, files: list[str], labels: list[int], *, training: bool) -> Any:
        fn: Any = importlib.import_module("nvidia.dali.fn")  # Any: DALI's own stubs miss most of it
        dmath: Any = importlib.import_module("nvidia.dali.math")
        types: Any = importlib.import_module("nvidia.dali.types")
        pipeline_def: Any = importlib.import_module("nvidia.dali").pipeline_def

        req = self.request
        augment = training and self.distortions
        size = req.image_size
        resize = req.config.resize_method or "bilinear"
        device_id = (req.device.index if req.device.index is not None else torch.cuda.current_device()) \
            if self.on_gpu else None
        decoder: dict[str, Any] = {"device": self.decode_device, "output_type": types.RGB}
        if self.on_gpu:
            decoder["hw_decoder_load"] = self.hw_decoder_load

        @pipeline_def(batch_size=req.batch_size, num_threads=self.threads, device_id=device_id,
                      seed=(req.seed + 7919 * req.rank) % 2**31, prefetch_queue_depth=2)
        def graph() -> Any:
            jpegs, label = fn.readers.file(
                files=files, labels=labels, shard_id=req.rank, num_shards=req.world_size, pad_last_batch=True,
                shuffle_after_epoch=training, stick_to_shard=not training, name="reader")
            if augment:
                images = fn.decoders.image_random_crop(jpegs, random_area=list(CROP_SCALE),
                                                       random_aspect_ratio=list(CROP_RATIO), num_attempts=10,
                                                       **decoder)
                mirror = fn.random.coin_flip(probability=0.5)
                jitter = fn.random.uniform(range=[1 - JITTER, 1 + JITTER], shape=[3])
            else:
                shape = fn.peek_image_shape(jpegs, dtype=types.FLOAT)
                side = dmath.min(shape[0], shape[1]) * PHOTO_CROP_FRACTION
                images = fn.decoders.image_crop(jpegs, crop_w=side, crop_h=side, **decoder)
                mirror, jitter = 0, None
            images = fn.resize(images, resize_x=size, resize_y=size, interp_type=getattr(types, _INTERP[resize]),
                               antialias=resize != "nearest")
            images = fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW", mirror=mirror)
            return (images, label) if jitter is None else (images, label, jitter)

        pipe = graph()
        pipe.build()
        return pipe

    # --- the EpochSource protocol -------------------------------------------------
    def epoch(self, index: int) -> Iterator[Batch]:
        """The next training pass (DALI's reader reshuffles at every pass: ``index`` only counts)."""
        self._train.finish()
        for _ in range(self.steps_per_epoch):
            yield self._batch(self._train, self.request.batch_size, training=True)
        self._train.finish()

    def eval_batches(self) -> Iterator[Batch]:
        if self._val is None:
            if not self.val_files:
                return
            self._val = self._passes(self.val_files, self.val_labels, training=False)
        self._val.finish()
        rank, world = self._shard
        real = shard_size(len(self.val_files), rank, world)
        b = self.request.batch_size
        for step in range(self._val.per_pass):
            yield self._batch(self._val, max(0, min(b, real - step * b)), training=False)

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        """Training batches without end (epoch after epoch), for runs that count steps."""
        if self._endless is None:
            self._endless = self._forever()
        return next(self._endless)

    def _forever(self) -> Iterator[Batch]:
        index = 0
        while True:
            yield from self.epoch(index)
            index += 1

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bad_images": self.bad_images,
            "dali": {"version": self.version, "decode_device": self.decode_device, "threads": self.threads,
                     "hw_decoder_load": self.hw_decoder_load},
        }
        if self.request.config.skip_bad_images:
            out["classes_all_bad"] = self.all_bad
        return out

    def close(self) -> None:
        self._endless = None
        self._train.pipe = None
        if self._val is not None:
            self._val.pipe = None

    # --- reading ----------------------------------------------------------------------
    def _batch(self, passes: _Passes, real: int, *, training: bool) -> Batch:
        if passes.pipe is None:
            raise RuntimeError("the input source is closed")
        try:
            images, labels, *jitter = passes.next()
        except RuntimeError as exc:
            raise self._failure(exc, training) from None
        from nvidia.dali.plugin.pytorch import feed_ndarray

        dense = images.as_tensor()
        u8 = torch.empty(dense.shape(), dtype=torch.uint8, device=self.request.device)
        stream = torch.cuda.current_stream(self.request.device) if self.on_gpu else None
        feed_ndarray(dense, u8, cuda_stream=stream)
        label = torch.from_numpy(labels.as_array().reshape(-1).astype(np.int64))
        factors = torch.from_numpy(np.array(jitter[0].as_array(), dtype=np.float32))[:real] if jitter else None
        return self.normalize.batch(u8[:real], label[:real], factors)

    def _failure(self, exc: RuntimeError, training: bool) -> Exception:
        """DALI's failure in one line: the bad file named when a header check finds it."""
        files = self.train_files if training else self.val_files
        bad = scan(files, self.threads)
        if bad:
            i = min(bad)
            return BadImageError(f"bad image {files[i]}: {bad[i]} (--skip-bad-images skips and counts such images)")
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = next((lines[i + 1] for i, line in enumerate(lines[:-1]) if line == "encountered:"),
                      lines[0] if lines else type(exc).__name__)
        return InputPipelineError(f"DALI: {reason} (an image of {self.reader.root} that passes a header check)")


@register_pipeline("dali", check=check_dali)
def dali_pipeline(request: InputRequest, data_set: DataSetReader) -> InputSource:
    """Read, decoded and augmented by DALI (:class:`DaliSource`): on the GPU for a GPU run."""
    return DaliSource(request, data_set)
