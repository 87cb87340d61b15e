"""The ``dali`` input pipeline (issue 47) on DALI's CPU back end: images per epoch, sharding,
labels, layout and dtype, the random factors against the ``cpu`` pipeline's, bad files, the
refusal without DALI, and a run end to end. Skipped, with the reason shown, without DALI."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import statistics
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.data import dali
from cnnbench.data.catalog import data_set_facts, open_data_set
from cnnbench.data.generate import make_data_set
from cnnbench.data.imagefolder import ImageFolderReader
from cnnbench.data.loader import BadImageError
from cnnbench.data.preprocess import CROP_RATIO, CROP_SCALE, JITTER, Preprocessing
from cnnbench.data.source import InputRequest

HAVE_DALI = importlib.util.find_spec("nvidia") is not None and dali.dali_installed()
needs_dali = pytest.mark.skipif(not HAVE_DALI, reason="NVIDIA DALI is not installed (pip install 'cnnbench[dali]')")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dali") / "folder"
    make_data_set("imagefolder", root, num_classes=3, images_per_class=3, val_images_per_class=1,
                  image_size=(40, 30))
    return root


def _source(folder: Path, *, rank: int = 0, world: int = 1, batch: int = 2, dtype=torch.float32,
            channels_last: bool = False, size: int = 16, **changes: Any) -> dali.DaliSource:
    cfg = RunConfig(**{"model": "trivial", "device": "cpu", "data_dir": str(folder), "data_name": "imagefolder",
                       "input_pipeline": "dali", "num_workers": 1, "batch_size": batch, **changes})
    request = InputRequest(cfg, batch, size, torch.device("cpu"), dtype, channels_last, 7, rank, world)
    return dali.DaliSource(request, open_data_set("imagefolder", str(folder)))


@needs_dali
@pytest.mark.parametrize("world", [1, 2])
def test_images_per_epoch_and_shards_are_the_cpu_pipelines(folder, world):
    """Each worker: N // W // batch full batches an epoch, as the cpu pipeline; the ranks' images
    of an epoch disjoint; with W = 1 an epoch reshuffles and covers its images."""
    sources = [_source(folder, rank=r, world=world, distortions=True) for r in range(world)]
    try:
        for epoch in range(2):
            per_rank = []
            for s in sources:
                assert s.steps_per_epoch == 9 // world // 2
                batches = list(s.epoch(epoch))
                assert len(batches) == s.steps_per_epoch and all(b[0].shape[0] == 2 for b in batches)
                per_rank.append([b[1] for b in batches])
            assert len(per_rank) == world
    finally:
        for s in sources:
            s.close()


@needs_dali
def test_sharding_two_ranks_is_disjoint_and_covering(folder):
    """Which files each rank reads: DALI's reader over the shared list, read as file indices."""
    reader = ImageFolderReader(str(folder))
    n = reader.size("train")
    for epoch_reads in _reads_by_rank(folder, n):
        first, second = epoch_reads
        assert not set(first) & set(second)
        assert sorted(first + second) == list(range(n))


def _reads_by_rank(folder: Path, n: int) -> list[list[list[int]]]:
    """Per epoch (two), per rank (two), the indices of the files read (labels replaced by indices)."""
    out: list[list[list[int]]] = [[], []]
    for rank in range(2):
        s = _source(folder, rank=rank, world=2, batch=1)
        s.close()
        index = {f: i for i, f in enumerate(sorted(s.train_files))}
        labels = [index[f] for f in s.train_files]
        s._train = s._passes(s.train_files, labels, training=True)
        s.num_classes = n
        for epoch in range(2):
            s._train.finish()
            real = dali.shard_size(n, rank, 2)
            read = []
            for _ in range(s._train.per_pass):
                _, label, *_ = s._train.next()
                read += label.as_array().reshape(-1).tolist()
            out[epoch].append(read[:real])
    return out


@needs_dali
def test_labels_are_the_sorted_class_folders(folder):
    """A class's index is its folder's place among train/'s sorted names, in every batch."""
    reader = ImageFolderReader(str(folder))
    s = _source(folder, batch=9)
    try:
        (images, labels), = list(s.epoch(0))
        assert sorted(labels.tolist()) == sorted(reader.splits["train"].labels.tolist())
        by_file = {reader.path("train", i): reader.label("train", i) for i in range(reader.size("train"))}
        assert all(by_file[f] == c for f, c in zip(s.train_files, s.train_labels, strict=True))
        assert reader.classes == sorted(reader.classes)
        assert [b[1].tolist() for b in s.eval_batches()] == [[0, 1, 2]]  # val: one image per class, in order
    finally:
        s.close()


@needs_dali
@pytest.mark.parametrize(("dtype", "channels_last"), [(torch.float32, False), (torch.bfloat16, True),
                                                      (torch.float16, False)])
def test_layout_and_dtype_are_the_runs(folder, dtype, channels_last):
    s = _source(folder, dtype=dtype, channels_last=channels_last, size=24, distortions=True)
    try:
        images, labels = next(s)
        assert images.shape == (2, 3, 24, 24) and images.dtype == dtype and labels.dtype == torch.int64
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        assert images.is_contiguous(memory_format=fmt)
        assert images.float().abs().max() < 3  # normalised, not 0..255
    finally:
        s.close()


@needs_dali
def test_eval_batches_are_partial_then_empty_and_the_same_count_on_each_rank(folder):
    counts = []
    for rank in range(2):
        s = _source(folder, rank=rank, world=2, batch=1)
        try:
            sizes = [b[0].shape[0] for b in s.eval_batches()]
            assert sizes == [b[0].shape[0] for b in s.eval_batches()]  # a second pass: the same
            counts.append(sizes)
        finally:
            s.close()
    assert len(counts[0]) == len(counts[1]) == 2  # ceil(ceil(3 / 2) / 1)
    assert sum(map(sum, counts)) == 3


@needs_dali
def test_the_random_factors_match_the_cpu_pipelines_ranges_and_means(tmp_path):
    """DALI's crops, flips and jitter over many draws against preprocess.py's: the same ranges, close means."""
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import pipeline_def

    root = tmp_path / "one"
    make_data_set("imagefolder", root, num_classes=1, images_per_class=1, image_size=(400, 300))
    path = ImageFolderReader(str(root)).path("train", 0)
    n = 2048

    @pipeline_def(batch_size=256, num_threads=1, device_id=None, seed=3)
    def draws() -> Any:
        jpegs, _ = fn.readers.file(files=[path])
        crops = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                              random_area=list(CROP_SCALE), random_aspect_ratio=list(CROP_RATIO),
                                              num_attempts=10)
        return crops.shape(), fn.random.coin_flip(probability=0.5), fn.random.uniform(range=[1 - JITTER,
                                                                                              1 + JITTER], shape=[3])

    pipe = draws()
    pipe.build()
    areas, ratios, flips, jitter = [], [], [], []
    for _ in range(n // 256):
        shapes, coins, factors = pipe.run()
        for h, w, _c in shapes.as_array().tolist():
            areas.append(h * w / (400 * 300))
            ratios.append(w / h)
        flips += coins.as_array().reshape(-1).tolist()
        jitter += factors.as_array().reshape(-1).tolist()
    prep, rng = Preprocessing(16, True), random.Random(0)
    cpu = [prep.augmentation(400, 300, rng.randrange(2**62)) for _ in range(n)]
    cpu_areas = [a.box.w * a.box.h / (400 * 300) for a in cpu]
    cpu_ratios = [a.box.w / a.box.h for a in cpu]
    tol = 0.01
    assert CROP_SCALE[0] - tol <= min(areas) and max(areas) <= 1 + tol
    assert CROP_RATIO[0] - 0.05 <= min(ratios) and max(ratios) <= CROP_RATIO[1] + 0.05
    assert abs(statistics.fmean(areas) - statistics.fmean(cpu_areas)) < 0.03
    assert abs(statistics.fmean(ratios) - statistics.fmean(cpu_ratios)) < 0.03
    assert abs(statistics.fmean(flips) - 0.5) < 0.05 and set(flips) == {0, 1}
    cpu_jitter = [f for a in cpu for f in a.jitter]
    assert min(jitter) >= 1 - JITTER and max(jitter) <= 1 + JITTER
    assert abs(statistics.fmean(jitter) - statistics.fmean(cpu_jitter)) < 0.02
    assert abs(statistics.pstdev(jitter) - statistics.pstdev(cpu_jitter)) < 0.02


def _with_a_bad_file(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "bad"
    make_data_set("imagefolder", root, num_classes=2, images_per_class=4, image_size=(40, 30))
    bad = root / "train" / sorted(p.name for p in (root / "train").iterdir())[0] / "00001.jpg"
    bad.write_bytes(bad.read_bytes()[:150])  # truncated
    return root, bad


@needs_dali
def test_a_corrupt_jpeg_is_named(tmp_path):
    root, bad = _with_a_bad_file(tmp_path)
    s = _source(root, batch=7)
    try:
        with pytest.raises(BadImageError, match=f"bad image {bad}: truncated JPEG.*--skip-bad-images"):
            list(s.epoch(0))
    finally:
        s.close()


@needs_dali
def test_a_corrupt_jpeg_is_skipped_and_counted_once_over_the_ranks(tmp_path):
    root, _ = _with_a_bad_file(tmp_path)
    counted = 0
    for rank in range(2):
        s = _source(root, rank=rank, world=2, batch=1, skip_bad_images=True)
        try:
            assert len(s.train_files) == 7 and s.steps_per_epoch == 3
            assert len(list(s.epoch(0))) == 3
            counted += s.metrics()["bad_images"]
            assert s.metrics()["classes_all_bad"] == []
        finally:
            s.close()
    assert counted == 1


def test_bad_file_reads_the_ends_of_jpegs_and_pngs(tmp_path):
    make_data_set("imagefolder", tmp_path / "p", num_classes=1, images_per_class=1, image_size=(20, 20),
                  image_format="png")
    png = next((tmp_path / "p" / "train").rglob("*.png"))
    assert dali.bad_file(str(png)) is None
    png.write_bytes(png.read_bytes()[:-5])
    assert dali.bad_file(str(png)) == "truncated PNG (no IEND chunk)"
    (tmp_path / "e.jpg").write_bytes(b"")
    assert dali.bad_file(str(tmp_path / "e.jpg")) == "empty file"
    (tmp_path / "h.jpg").write_bytes(b"<html>not found</html>")
    assert dali.bad_file(str(tmp_path / "h.jpg")) == "neither a JPEG nor a PNG file"
    assert dali.bad_file(str(tmp_path / "missing.jpg")).startswith("unreadable")
    png_bomb = (b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (60_000).to_bytes(4, "big") * 2
                + bytes(9) + b"\x00\x00\x00\x00IEND\xaeB`\x82")  # a header alone, saying 60,000 x 60,000 pixels
    jpeg_bomb = (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(9) + b"\xff\xdb\x00\x04\x00\x00"
                 + b"\xff\xc2\x00\x0b\x08" + (60_000).to_bytes(2, "big") * 2 + b"\x01\x01\x11\x00\xff\xd9")
    for name, data in (("bomb.png", png_bomb), ("bomb.jpg", jpeg_bomb)):
        (tmp_path / name).write_bytes(data)
        assert dali.bad_file(str(tmp_path / name)) == ("an image of 60000 × 60000 pixels, more than the 178,956,970 "
                                                       "Pillow decodes (a decompression bomb?)")
        (tmp_path / name).write_bytes(data.replace((60_000).to_bytes(4 if name.endswith("png") else 2, "big"),
                                                   (9_500).to_bytes(4 if name.endswith("png") else 2, "big")))
        assert dali.bad_file(str(tmp_path / name)) is None  # a photo of 90 million pixels is an image
    os.mkfifo(tmp_path / "f.jpg")  # swapped in after the listing: named, never waited on
    said: list[str | None] = []
    looking = threading.Thread(target=lambda: said.append(dali.bad_file(str(tmp_path / "f.jpg"))), daemon=True)
    looking.start()
    looking.join(60)  # an open that waits on the FIFO fails here, not hangs
    assert said == ["unreadable (is a FIFO (named pipe), not a regular file)"]


@needs_dali
def test_an_entry_that_is_no_file_is_named_before_dali_opens_it(tmp_path):
    """DALI opens each file itself: a FIFO named as an image hung it for ever. Without
    --skip-bad-images it is named before the run; with it, skipped and counted."""
    import subprocess
    import sys

    make_data_set("imagefolder", tmp_path / "d", num_classes=2, images_per_class=4, image_size=(40, 30))
    fifo = tmp_path / "d" / "train" / "000_disc" / "zz.jpg"
    os.mkfifo(fifo)
    run = [sys.executable, "-m", "cnnbench", "data", "--data-dir", str(tmp_path / "d"), "--input-pipeline", "dali",
           "--batch-size", "4", "--num-batches", "2", "--num-warmup-batches", "0", "--image-size", "16"]
    done = subprocess.run([*run, "--results-dir", str(tmp_path / "r")], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 1 and f"bad image {fifo}: unreadable (is a FIFO" in done.stderr, done.stderr
    done = subprocess.run([*run, "--results-dir", str(tmp_path / "s"), "--skip-bad-images"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0 and f"skipped bad image {fifo}" in done.stderr, done.stderr


def test_a_jpeg_with_data_after_its_end_marker_is_whole_and_one_cut_short_is_not(tmp_path):
    make_data_set("imagefolder", tmp_path / "j", num_classes=1, images_per_class=1, image_size=(400, 300))
    jpeg = next((tmp_path / "j" / "train").rglob("*.jpg"))
    data = jpeg.read_bytes()
    assert len(data) > 2 * dali.TAIL_BYTES  # the cut below leaves no end marker in the window
    jpeg.write_bytes(data + b"MotionPhoto_Data" + bytes(200))  # what a phone appends
    assert dali.bad_file(str(jpeg)) is None
    jpeg.write_bytes(data[: len(data) // 2])
    assert dali.bad_file(str(jpeg)) == "truncated JPEG (no end marker)"


def test_without_dali_the_pipeline_is_refused_in_one_line_naming_the_extras(folder, monkeypatch):
    monkeypatch.setattr(dali.importlib.util, "find_spec", lambda name: None)
    cfg = RunConfig(model="trivial", device="cpu", data_dir=str(folder), input_pipeline="dali")
    with pytest.raises(ConfigError) as err:
        dali.check_dali(cfg, data_set_facts(None, str(folder)))
    message = str(err.value)
    assert "\n" not in message and "cnnbench[dali]" in message and "cnnbench[dali-cuda120]" in message


def test_without_dali_a_run_is_refused_before_any_work(folder, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(dali.importlib.util, "find_spec", lambda name: None)
    made = []
    monkeypatch.setattr(dali, "DaliSource", lambda *a: made.append(a))
    code = main(["run", "--model", "trivial", "--device", "cpu", "--data-dir", str(folder), "--input-pipeline",
                 "dali", "--batch-size", "2", "--num-batches", "1", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "cnnbench[dali]" in err and not made and not list(tmp_path.glob("*.jsonl"))


def test_cifar_is_refused(tmp_path):
    make_data_set("cifar10", tmp_path / "c", images_per_class=1, val_images_per_class=1)
    cfg = RunConfig(model="trivial", device="cpu", data_dir=str(tmp_path / "c"), input_pipeline="dali")
    if HAVE_DALI:
        with pytest.raises(ConfigError, match="cifar10 holds arrays"):
            dali.check_dali(cfg, data_set_facts(None, str(tmp_path / "c")))


@needs_dali
def test_a_run_end_to_end_on_the_cpu(folder, tmp_path):
    code = main(["run", "--model", "trivial", "--device", "cpu", "--data-dir", str(folder), "--input-pipeline",
                 "dali", "--distortions", "--batch-size", "2", "--num-batches", "3", "--num-warmup-batches", "1",
                 "--num-workers", "1", "--results-dir", str(tmp_path)])
    assert code == 0
    (line,) = next(tmp_path.glob("*.jsonl")).read_text().splitlines()
    record = json.loads(line)
    assert record["status"] == "ok" and record["config"]["input_pipeline"] == "dali"
    assert record["metrics"]["dali"]["decode_device"] == "cpu" and record["metrics"]["bad_images"] == 0


@pytest.mark.parametrize(("flags", "why"), [
    (["--input-pipeline", "cpu", "--dali-hw-decoder-load", "0.5"], "with --input-pipeline cpu"),
    (["--dali-hw-decoder-load", "0.5"], "with --input-pipeline cpu"),  # the default pipeline
    (["--input-pipeline", "dali", "--dali-hw-decoder-load", "1.5"], "1.5"),
    (["--input-pipeline", "dali", "--dali-hw-decoder-load", "-0.1"], "-0.1"),
])
def test_the_hardware_decoder_load_is_refused_where_it_cannot_apply(folder, tmp_path, capsys, flags, why):
    code = main(["run", "--model", "trivial", "--device", "cpu", "--data-dir", str(folder), *flags,
                 "--num-batches", "1", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "dali-hw-decoder-load" in err.replace("_", "-") and why in err
    assert len(err.strip().splitlines()) == 1 and not list(tmp_path.glob("*.jsonl"))


def test_the_hardware_decoder_load_is_refused_on_synthetic_input(tmp_path, capsys):
    code = main(["run", "--model", "trivial", "--device", "cpu", "--dali-hw-decoder-load", "0.5",
                 "--num-batches", "1", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "synthetic input" in err and not list(tmp_path.glob("*.jsonl"))


@needs_dali
def test_the_hardware_decoder_load_is_recorded_as_given_and_unused_off_a_gpu(folder, tmp_path):
    code = main(["run", "--model", "trivial", "--device", "cpu", "--data-dir", str(folder), "--input-pipeline",
                 "dali", "--dali-hw-decoder-load", "0.25", "--batch-size", "2", "--num-batches", "1",
                 "--num-warmup-batches", "0", "--num-workers", "1", "--results-dir", str(tmp_path)])
    assert code == 0
    record = json.loads(next(tmp_path.glob("*.jsonl")).read_text())
    assert record["config"]["dali_hw_decoder_load"] == 0.25
    assert record["metrics"]["dali"]["hw_decoder_load"] is None  # the CPU back end has no hardware decoder
