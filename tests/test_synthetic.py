"""The three synthetic input locations."""

from __future__ import annotations

import pytest
import torch

from cnnbench.data.synthetic import BatchShape, SyntheticInput

SHAPE = BatchShape(batch_size=4, image_size=16, num_classes=10)


def _take(src, n):
    try:
        return [next(src) for _ in range(n)]
    finally:
        src.close()


@pytest.mark.parametrize("location", ["device", "host", "loader"])
def test_shapes_and_types(location):
    src = SyntheticInput(location, SHAPE, torch.device("cpu"), dtype=torch.bfloat16, channels_last=True,
                         seed=1, loader_workers=1)
    (images, labels), = _take(src, 1)
    assert images.shape == (4, 3, 16, 16) and images.dtype == torch.bfloat16
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert labels.shape == (4,) and labels.dtype == torch.int64
    assert int(labels.min()) >= 0 and int(labels.max()) < 10


def test_device_location_reuses_one_resident_batch():
    a, b = _take(SyntheticInput("device", SHAPE, torch.device("cpu")), 2)
    assert a[0].data_ptr() == b[0].data_ptr()


@pytest.mark.parametrize("location", ["host", "loader"])
def test_host_and_loader_make_a_new_batch_each_step(location):
    a, b = _take(SyntheticInput(location, SHAPE, torch.device("cpu"), loader_workers=2), 2)
    assert a[0].data_ptr() != b[0].data_ptr()
    assert not torch.equal(a[0], b[0])


def test_seed_makes_batches_repeatable():
    a = _take(SyntheticInput("host", SHAPE, torch.device("cpu"), seed=7), 1)[0][0]
    b = _take(SyntheticInput("host", SHAPE, torch.device("cpu"), seed=7), 1)[0][0]
    assert torch.equal(a, b)


def test_loader_without_workers_runs_in_process():
    (images, _), = _take(SyntheticInput("loader", SHAPE, torch.device("cpu"), loader_workers=0), 1)
    assert images.shape == (4, 3, 16, 16)
