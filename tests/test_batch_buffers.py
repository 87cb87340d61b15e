"""Loader processes reuse their shared-memory batch buffers, never one the main process still holds:
held batches keep their pixels, the numbers equal a loader without reuse, and reuse does happen."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from cnnbench.config import RunConfig
from cnnbench.data import buffers
from cnnbench.data.catalog import open_data_set
from cnnbench.data.generate import make_data_set
from cnnbench.data.loader import BatchLoader, DataSetSource, loader_start_method
from cnnbench.data.preprocess import Preprocessing
from cnnbench.data.sharding import ShardPlan
from cnnbench.data.source import InputRequest, make_input
from cnnbench.engine.resolve import resolve
from tests.conftest import requires_cuda

CPU = torch.device("cpu")
STEPS = 24


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("buffers") / "set"
    make_data_set("imagefolder", root, num_classes=3, images_per_class=8, val_images_per_class=3,
                  image_size=(60, 45))
    return root


def _source(root: Path, workers: int, **changes) -> DataSetSource:
    base = dict(model="trivial", device="cpu", data_dir=str(root), batch_size=4, num_workers=workers,
                distortions=True, image_size=24)
    base.update(changes)
    run = resolve(RunConfig(**base))
    source = make_input(InputRequest(config=run.config, batch_size=run.batch_size, image_size=run.image_size,
                                     device=CPU, dtype=torch.float32, channels_last=False, seed=run.config.seed))
    assert isinstance(source, DataSetSource)
    return source


def _reference(root: Path, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The batches loaded in the main process: ordinary memory, nothing reused."""
    source = _source(root, 0)
    try:
        return [(x.clone(), y.clone()) for x, y in itertools.islice(source, steps)]
    finally:
        source.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_held_batches_keep_their_pixels_while_the_others_buffers_are_reused(folder, workers):
    """Every third batch held (one only through a view of it), the rest let go at once: the loader
    processes reuse the buffers let go, and every batch equals the one loaded without reuse."""
    expected = _reference(folder, STEPS)
    source = _source(folder, workers)
    returns = source.batches.returns
    assert returns is not None and returns.flags.shape == (workers, buffers.BUFFER_SLOTS)
    held: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    try:
        for step, (images, labels) in enumerate(itertools.islice(source, STEPS)):
            assert torch.equal(images, expected[step][0]) and torch.equal(labels, expected[step][1])
            if step % 3 == 0:
                held[step] = (images[1:] if step == 3 else images, labels)  # a view holds the buffer too
            del images, labels
        assert returns.reused > 0  # buffers were reused ...
        for step, (images, labels) in held.items():  # ... and none that was still held
            assert torch.equal(images, expected[step][0][1:] if step == 3 else expected[step][0]), step
            assert torch.equal(labels, expected[step][1])
    finally:
        source.close()


def test_holding_every_batch_makes_new_buffers_and_overwrites_none(folder):
    expected = _reference(folder, STEPS)
    source = _source(folder, 1)
    try:
        batches = list(itertools.islice(source, STEPS))
        assert source.batches.returns is not None and source.batches.returns.reused == 0
        assert len({images.data_ptr() for images, _ in batches}) == STEPS
        for (images, labels), (want_images, want_labels) in zip(batches, expected, strict=True):
            assert torch.equal(images, want_images) and torch.equal(labels, want_labels)
        del batches
        more = [x.clone() for x, _ in itertools.islice(source, STEPS)]  # let go: reused again, the same numbers
        assert source.batches.returns.reused > 0
        again = _reference(folder, 2 * STEPS)[STEPS:]
        assert all(torch.equal(a, b) for a, (b, _) in zip(more, again, strict=True))
    finally:
        source.close()


def test_uint8_batches_and_the_shorter_last_validation_batch_reuse_buffers_too(folder):
    """The loader as a GPU run uses it (uint8, jitter factors beside), read straight from a DataLoader:
    the hand-back needs nothing from the consumer; validation batches (9 images: 4, 4, 1) fit the slots."""
    reader = open_data_set("imagefolder", str(folder))
    loader = BatchLoader(reader, Preprocessing(24, True), Preprocessing(24, False), skip_bad_images=False,
                         jpeg_decoder="pillow")
    plan = ShardPlan(reader.size("train"), reader.size("val"), 4, seed=7)
    keys = [*itertools.chain.from_iterable(plan.train_batches(e) for e in range(3)), *plan.eval_batches(),
            *plan.train_batches(3)]
    expected = [loader[key] for key in keys]  # the main process: no reuse
    loader.share_buffers(1)
    data = DataLoader(loader, batch_size=None, sampler=keys, num_workers=1,  # type: ignore[arg-type]
                      prefetch_factor=2, multiprocessing_context=loader_start_method())
    held = []
    for i, batch in enumerate(data):
        want = expected[i]
        assert torch.equal(batch.images, want.images) and torch.equal(batch.jitter, want.jitter)
        assert torch.equal(batch.labels, want.labels)
        if i % 4 == 1:
            held.append((i, batch.images))
    assert loader.returns is not None and loader.returns.reused > 0
    assert [tuple(expected[i].images.shape) for i in range(len(keys)) if keys[i].split == "val"][-1][0] == 1
    for i, images in held:
        assert torch.equal(images, expected[i].images), i


def test_without_slots_every_batch_is_new_shared_memory(folder):
    source = _source(folder, 1)
    source.close()
    loader = source.batches
    loader.share_buffers(1, slots=0)
    assert loader.returns is None
    loader.share_buffers(0)
    assert loader.returns is None  # no loader process: the main process loads into ordinary memory


@requires_cuda
def test_pinned_batches_for_a_gpu_hand_their_buffers_back_and_equal_the_cpu_ones(folder):
    """On a GPU the pin-memory thread copies each batch out of its buffer: the buffer is handed back
    at once, reused, and the batches equal the CPU's, normalised on the device."""
    expected = _reference(folder, STEPS)
    run = resolve(RunConfig(model="trivial", device="cuda", data_dir=str(folder), batch_size=4, num_workers=1,
                            distortions=True, image_size=24))
    gpu = make_input(InputRequest(config=run.config, batch_size=4, image_size=24, device=torch.device("cuda"),
                                  dtype=torch.float32, channels_last=False, seed=run.config.seed))
    assert isinstance(gpu, DataSetSource) and gpu.batches.returns is not None
    try:
        held = [(x, y) for x, y in itertools.islice(gpu, STEPS)]
        assert gpu.batches.returns.reused > 0
        for (images, labels), (want_images, want_labels) in zip(held, expected, strict=True):
            assert torch.allclose(images.cpu(), want_images, atol=1e-5) and torch.equal(labels.cpu(), want_labels)
    finally:
        gpu.close()
