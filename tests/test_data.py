"""Real data in one process: generated data sets, readers, name guessing, preprocessing, bad
files, `cnnbench data`, and training to an accuracy on a generated data set."""

from __future__ import annotations

import copy
import io
import json
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.data.catalog import open_data_set
from cnnbench.data.cifar import CifarReader
from cnnbench.data.decode import BadImage, Box, decode_for_crop
from cnnbench.data.generate import GenerateError, make_data_set
from cnnbench.data.imagefolder import ImageFolderReader
from cnnbench.data.layouts import DataSetError, guess_data_name
from cnnbench.data.loader import BatchLoader, DataSetSource, InputPipelineError
from cnnbench.data.normalize import IMAGENET_MEAN, IMAGENET_STD, Normalize
from cnnbench.data.preprocess import Preprocessing
from cnnbench.data.sharding import ShardPlan
from cnnbench.data.source import InputRequest, make_input
from cnnbench.engine import run_in_process
from cnnbench.engine.resolve import resolve
from cnnbench.report.build import build_report
from cnnbench.report.tables.pipeline import is_pipeline_record
from cnnbench.results.store import read_records
from tests.conftest import requires_cuda

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, Path]:
    """One small generated data set of each layout (written once for this module)."""
    root = tmp_path_factory.mktemp("data")
    make_data_set("imagefolder", root / "folder", num_classes=3, images_per_class=8, val_images_per_class=3,
                  image_size=(60, 45))
    make_data_set("cifar10", root / "c10", images_per_class=40, val_images_per_class=10)
    make_data_set("cifar100", root / "c100", images_per_class=1, val_images_per_class=1)
    return {"imagefolder": root / "folder", "cifar10": root / "c10", "cifar100": root / "c100"}


def _source(data_dir: Path, dtype: torch.dtype = torch.float32, channels_last: bool = False,
            **changes) -> DataSetSource:
    base = dict(model="trivial", device="cpu", data_dir=str(data_dir), batch_size=4, num_workers=0)
    base.update(changes)
    run = resolve(RunConfig(**base))
    source = make_input(InputRequest(config=run.config, batch_size=run.batch_size, image_size=run.image_size,
                                     device=CPU, dtype=dtype, channels_last=channels_last, seed=run.config.seed))
    assert isinstance(source, DataSetSource)
    return source


def _uint8(source: DataSetSource) -> BatchLoader:
    """The source's loader as it runs for a GPU: uint8 batches, normalised on the device later."""
    loader = copy.copy(source.batches)
    loader.normalize = None
    return loader


# --------------------------------------------------------------------------- writing and reading


def test_generated_image_folder_is_read_back(sets):
    reader = ImageFolderReader(str(sets["imagefolder"]))
    assert reader.classes == ["000_disc", "001_square", "002_triangle"]
    assert (reader.size("train"), reader.size("val")) == (24, 9)
    assert sorted(set(reader.splits["train"].labels.tolist())) == [0, 1, 2]
    with Image.open(io.BytesIO(reader.read("train", 0))) as image:
        assert (image.format, image.size) == ("JPEG", (60, 45))


@pytest.mark.parametrize(("name", "classes", "train", "test"), [("cifar10", 10, 400, 100), ("cifar100", 100, 100, 100)])
def test_generated_cifar_follows_the_official_pickles(sets, name, classes, train, test):
    reader = CifarReader(name, str(sets[name]))
    assert (reader.num_classes, reader.size("train"), reader.size("val")) == (classes, train, test)
    first = "data_batch_1" if name == "cifar10" else "train"
    with open(sets[name] / first, "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape[1] == 3072
    # the reader's 3 × 32 × 32 image is the file's row: red plane, green plane, blue plane
    assert np.array_equal(reader.image("train", 0).reshape(-1), batch[b"data"][0])


def test_generated_images_are_learnable_not_noise():
    """Two images of one class are closer in colour than images of different classes."""
    from cnnbench.data.generate import draw_image

    rng = np.random.default_rng(0)
    means = {c: [draw_image(c, 32, 32, rng).reshape(-1, 3).astype(float) for _ in range(8)] for c in (0, 1)}
    # the class colour: the most saturated pixels' mean hue differs between the classes
    def vivid(img):
        sat = img.max(1) - img.min(1)
        return img[sat >= np.quantile(sat, 0.8)].mean(0)
    a = np.array([vivid(x) for x in means[0]])
    b = np.array([vivid(x) for x in means[1]])
    within = np.linalg.norm(a - a.mean(0), axis=1).mean()
    between = np.linalg.norm(a.mean(0) - b.mean(0))
    assert between > 2 * within


def test_make_dataset_refuses_a_full_folder_and_bad_arguments(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    assert main(["make-dataset", "imagefolder", str(tmp_path / "x")]) == 2
    assert main(["make-dataset", "cifar10", str(tmp_path / "y"), "--num-classes", "5"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "not an empty folder" in err[0] and "10 classes by definition" in err[1]
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"
    with pytest.raises(GenerateError, match="--image-size"):
        make_data_set("cifar100", tmp_path / "z", image_size=(64, 64))


@pytest.mark.parametrize(("args", "words"), [
    (["--image-size", "100000"], "--image-size: width must be <= 4096"),
    (["--image-size", "64x5"], "--image-size: height must be >= 8"),
    (["--images-per-class", "10000000"], "--images-per-class: must be <= 100000"),
    (["--num-classes", "5000"], "--num-classes: must be <= 1000"),
    (["--num-classes", "1000", "--images-per-class", "5000"], "imagefolder makes at most 2,000,000"),
    (["--image-size", "4000", "--num-classes", "50", "--images-per-class", "20000"], "at most 1 TiB"),
    (["--val-images-per-class", "-1"], "--val-images-per-class: must be >= 0"),
    (["--quality", "101"], "--quality: must be <= 100"),
    (["--seed", "-1"], "--seed: must be >= 0"),
])
def test_make_dataset_bounds_are_one_line_before_anything_is_written(tmp_path, capsys, args, words):
    assert main(["make-dataset", "imagefolder", str(tmp_path / "new" / "x"), *args]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert words in line
    assert list(tmp_path.iterdir()) == []


def test_cifar_sets_are_bounded_by_what_memory_holds(tmp_path):
    with pytest.raises(GenerateError, match="cifar100 makes at most 200,000"):
        make_data_set("cifar100", tmp_path / "c", images_per_class=5000)


def test_a_failure_while_writing_leaves_no_partial_data_set(tmp_path, monkeypatch, capsys):
    from cnnbench.data import generate

    real, calls = generate.draw_image, []

    def fails_at_the_fifth(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(generate, "draw_image", fails_at_the_fifth)
    target = tmp_path / "parent" / "shapes"
    assert main(["make-dataset", "imagefolder", str(target), "--num-classes", "2", "--images-per-class", "4",
                 "--image-size", "16"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "No space left on device" in line
    assert list(tmp_path.iterdir()) == []  # neither the data set, nor its hidden partial copy, nor its parent
    empty = tmp_path / "empty"
    empty.mkdir()
    calls.clear()
    with pytest.raises(OSError):
        make_data_set("cifar10", empty, images_per_class=2)
    assert list(tmp_path.iterdir()) == [empty] and list(empty.iterdir()) == []  # the user's folder stays


def test_make_dataset_fills_an_empty_folder_at_once(tmp_path):
    target = tmp_path / "shapes"
    target.mkdir()
    made = make_data_set("imagefolder", target, num_classes=2, images_per_class=2, image_size=(16, 16))
    assert made.root == str(target.resolve()) and len(list(target.glob("train/*/*.jpg"))) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shapes"]


def test_make_dataset_command_writes_pngs(tmp_path, capsys):
    out = tmp_path / "pngs"
    assert main(["make-dataset", "imagefolder", str(out), "--num-classes", "2", "--images-per-class", "2",
                 "--format", "png", "--image-size", "24x16"]) == 0
    assert "generated images, not photographs" in capsys.readouterr().out
    files = sorted(out.glob("train/*/*.png"))
    assert len(files) == 4 and Image.open(files[0]).size == (24, 16)
    assert guess_data_name(out) == "imagefolder"


# --------------------------------------------------------------------------- names and layouts


def test_the_data_name_is_guessed_and_recorded(sets):
    for name, folder in sets.items():
        run = resolve(RunConfig(model="trivial", device="cpu", data_dir=str(folder), batch_size=4))
        assert run.config.data_name == name and run.config.data_dir == str(folder.resolve())
        assert run.config.synthetic_location is None and run.config.num_workers >= 1
    cifar = resolve(RunConfig(model="resnet18", device="cpu", data_dir=str(sets["cifar10"]), batch_size=4))
    assert cifar.image_size == 32  # CIFAR's own size unless --image-size says otherwise
    folder = resolve(RunConfig(model="resnet18", device="cpu", data_dir=str(sets["imagefolder"]), batch_size=4))
    assert folder.image_size == 224  # the model's


def test_the_archive_folder_of_cifar_is_found(sets, tmp_path):
    (tmp_path / "cifar-10-batches-py").symlink_to(sets["cifar10"], target_is_directory=True)
    assert guess_data_name(tmp_path) == "cifar10"
    assert open_data_set("cifar10", str(tmp_path)).size("train") == 400


@pytest.mark.parametrize(("make", "changes", "words"), [
    (lambda p: None, {}, "does not exist"),
    (lambda p: p.mkdir(), {}, "is empty: expected one of: train/<class>"),
    (lambda p: (p.mkdir(), (p / "notes.txt").write_text("x")), {}, "holds no data set I know"),
    (lambda p: (p / "train" / "cat").mkdir(parents=True), {}, "holds no data set"),
    (lambda p: p.mkdir(), {"data_name": "cifar10"}, "no data_batch_1 and"),
])
def test_a_wrong_folder_is_one_line_saying_what_was_expected(tmp_path, make, changes, words):
    folder = tmp_path / "data"
    make(folder)
    with pytest.raises(ConfigError, match=words) as info:
        resolve(RunConfig(model="trivial", device="cpu", data_dir=str(folder), **changes))
    assert str(info.value).startswith("--data-dir: ") and "\n" not in str(info.value)


def test_the_command_refuses_a_wrong_folder_before_any_work(tmp_path, capsys):
    assert main(["run", "--model", "trivial", "--device", "cpu", "--data-dir", str(tmp_path / "nope"),
                 "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("changes", "flag"), [
    ({"data_name": "cifar10"}, "--data-name"),
    ({"data_dir": "/x", "data_name": "synthetic"}, "--data-name"),
    ({"data_dir": "/x", "synthetic_location": "host"}, "--synthetic-location"),
    ({"resize_method": "bicubic"}, "--resize-method"),
    ({"skip_bad_images": True}, "--skip-bad-images"),
    ({"host_cpus": 0}, "--host-cpus"),
])
def test_data_options_that_contradict_are_rejected(changes, flag):
    with pytest.raises(ConfigError, match=flag):
        RunConfig(model="trivial", **changes)


def test_too_few_images_or_no_validation_split(sets, tmp_path):
    with pytest.raises(ConfigError, match="--batch-size: 32 per device on 1 device needs 32 training images"):
        resolve(RunConfig(model="trivial", device="cpu", data_dir=str(sets["imagefolder"]), batch_size=32))
    make_data_set("imagefolder", tmp_path / "noval", num_classes=2, images_per_class=4, val_images_per_class=0)
    with pytest.raises(ConfigError, match="--num-epochs: .* no validation images"):
        resolve(RunConfig(model="trivial", device="cpu", data_dir=str(tmp_path / "noval"), num_epochs=1,
                          batch_size=2))


# --------------------------------------------------------------------------- preprocessing


@pytest.mark.parametrize("distortions", [False, True])
def test_uint8_through_the_loader_for_a_gpu_and_normalised_floats_for_the_model(sets, distortions):
    source = _source(sets["imagefolder"], distortions=distortions, image_size=24)
    key = next(source.plan.train_batches(0))
    loaded = _uint8(source)[key]
    assert loaded.images.dtype == torch.uint8 and loaded.images.shape == (4, 3, 24, 24)
    assert loaded.jitter.shape == ((4, 3) if distortions else (0, 3))
    names = [source.reader.path("train", i).split("/")[-2] for i in key.indices]  # the class folder
    assert [source.reader.classes[y] for y in loaded.labels.tolist()] == names
    on_device, _ = source.normalize.batch(loaded.images, loaded.labels, loaded.jitter if distortions else None)
    images, labels = next(source)  # on the CPU: normalised in the loader, image by image
    assert images.dtype == torch.float32 and images.shape == (4, 3, 24, 24) and labels.dtype == torch.int64
    assert torch.allclose(images, on_device, atol=1e-5)  # the same input either way
    low = (0 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)
    high = (1 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)
    per_channel = images.transpose(0, 1).reshape(3, -1)
    assert (per_channel.min(1).values >= low - 1e-5).all() and (per_channel.max(1).values <= high + 1e-5).all()
    assert per_channel.std() > 0.2  # an image, not a constant
    source.close()


def test_the_model_dtype_and_layout_are_made_in_the_loader_on_cpu(sets):
    source = _source(sets["imagefolder"], torch.bfloat16, True, image_size=24)
    images, _ = next(source)
    assert images.dtype == torch.bfloat16 and images.is_contiguous(memory_format=torch.channels_last)
    source.close()


def test_evaluation_is_a_centre_crop_and_distortions_are_random_but_repeatable(sets):
    plain = _source(sets["imagefolder"], image_size=24)
    distorted = _source(sets["imagefolder"], image_size=24, distortions=True)
    key = next(plain.plan.train_batches(0))
    a, b = plain.batches[key].images, plain.batches[key].images
    assert torch.equal(a, b)  # a batch key always loads the same pixels
    eval_key = next(plain.plan.eval_batches())
    eval_images = plain.batches[eval_key].images
    assert torch.equal(eval_images, distorted.batches[eval_key].images)  # evaluation is never distorted
    c, d = distorted.batches[key].images, distorted.batches[key].images
    assert torch.equal(c, d) and not torch.equal(a, c)
    other_epoch = next(distorted.plan.train_batches(1))
    assert other_epoch.indices != key.indices
    plain.close()
    distorted.close()


def test_cifar_at_its_own_size_is_the_pixels_of_the_file_and_resizes_on_request(sets):
    source = _source(sets["cifar10"])
    key = next(source.plan.eval_batches())
    raw = source.reader.splits["val"].images[list(key.indices)]
    loaded = _uint8(source)[key]
    assert torch.equal(loaded.images, torch.from_numpy(raw))
    with open(sets["cifar10"] / "test_batch", "rb") as f:
        labels = pickle.load(f, encoding="bytes")[b"labels"]
    assert loaded.labels.tolist() == [labels[i] for i in key.indices]  # each image keeps its own label
    big = _source(sets["cifar10"], image_size=64, resize_method="nearest")
    up = _uint8(big)[key].images
    assert up.shape == (4, 3, 64, 64) and torch.equal(up[:, :, ::2, ::2], torch.from_numpy(raw))


def test_resize_methods_differ(sets):
    images = {m: _source(sets["imagefolder"], image_size=32, resize_method=m) for m in ("bilinear", "bicubic",
                                                                                         "nearest")}
    key = next(images["bilinear"].plan.eval_batches())
    got = {m: _uint8(s)[key].images for m, s in images.items()}
    assert not torch.equal(got["bilinear"], got["nearest"]) and not torch.equal(got["bilinear"], got["bicubic"])


def _jpeg(width: int, height: int) -> bytes:
    from cnnbench.data.generate import draw_image

    buf = io.BytesIO()
    Image.fromarray(draw_image(3, width, height, np.random.default_rng(1))).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def test_a_16_bit_grey_png_is_scaled_to_8_bits_and_pillows_advice_is_no_warning(recwarn):
    """Pillow's conversion clipped a 16-bit grey image at 255 (white almost everywhere); its advice on
    a palette with transparency was printed once per image read, file unnamed, even with --quiet."""
    grey = (np.arange(64 * 64, dtype=np.uint32).reshape(64, 64) * 16).astype(np.uint16)
    buf = io.BytesIO()
    Image.fromarray(grey).save(buf, "PNG")
    pixels, _ = decode_for_crop(buf.getvalue(), 64, lambda w, h: Box(0, 0, w, h), jpeg_decoder="pillow")
    assert pixels.dtype == np.uint8 and pixels.shape == (64, 64, 3)
    assert np.array_equal(pixels[:, :, 0], (grey >> 8).astype(np.uint8)) and np.array_equal(pixels[:, :, 2],
                                                                                            pixels[:, :, 0])
    palette = Image.new("P", (8, 8))
    palette.putpalette([0, 0, 0, 255, 0, 0] * 128)
    buf = io.BytesIO()
    palette.save(buf, "PNG", transparency=b"\x00\x80")  # a partial alpha: kept as bytes
    decode_for_crop(buf.getvalue(), 8, lambda w, h: Box(0, 0, w, h), jpeg_decoder="pillow")
    assert [str(w.message) for w in recwarn] == []


@pytest.mark.parametrize("decoder", ["simplejpeg", "pillow"])
def test_jpegs_are_decoded_at_reduced_size_when_the_crop_allows(decoder):
    data = _jpeg(480, 360)
    full = Box(0, 0, 480, 360)
    small, box = decode_for_crop(data, 40, lambda w, h: full, jpeg_decoder=decoder)
    assert small.shape == (45, 60, 3) and box == Box(0, 0, 60, 45)  # 1/8 of the size: 45 px still >= 40
    big, _ = decode_for_crop(data, 300, lambda w, h: full, jpeg_decoder=decoder)
    assert big.shape == (360, 480, 3)  # no power-of-two reduction keeps 300 px
    half, _ = decode_for_crop(data, 150, lambda w, h: full, jpeg_decoder=decoder)
    assert half.shape == (180, 240, 3)
    for size in (20, 50, 100, 200):  # the crop box always keeps at least `size` pixels both ways
        for crop in (full, Box(100, 50, 200, 150), Box(0, 0, 60, 60)):
            _, scaled = decode_for_crop(data, size, lambda w, h, c=crop: c, jpeg_decoder=decoder)
            assert min(scaled.w, scaled.h) >= min(size, crop.w, crop.h) - 1e-6
    prep = Preprocessing(40, distortions=False, crop_fraction=1.0)
    reduced = prep.resize(small, box).float()
    exact = prep.resize(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")), full).float()
    assert (reduced - exact).abs().mean() < 6  # the same picture, within JPEG's DCT-scaling error


def test_decoders_agree_and_fall_back_to_pillow():
    data = _jpeg(96, 64)
    a, _ = decode_for_crop(data, 64, lambda w, h: Box(0, 0, w, h), jpeg_decoder="simplejpeg")
    b, _ = decode_for_crop(data, 64, lambda w, h: Box(0, 0, w, h), jpeg_decoder="pillow")
    assert a.shape == b.shape and np.abs(a.astype(int) - b.astype(int)).mean() < 2
    cmyk = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("CMYK").save(cmyk, "JPEG")  # simplejpeg declines CMYK
    c, _ = decode_for_crop(cmyk.getvalue(), 64, lambda w, h: Box(0, 0, w, h), jpeg_decoder="simplejpeg")
    assert c.shape == (64, 96, 3)


def test_colour_jitter_is_brightness_contrast_saturation_on_the_device_and_in_the_loader():
    images = torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8)
    factors = torch.tensor([[1.0, 1.0, 1.0], [1.3, 0.7, 1.2], [0.6, 1.4, 0.6], [1.0, 1.0, 0.0]])
    norm = Normalize(CPU, torch.float32, channels_last=True)
    got, _ = norm.batch(images, torch.zeros(4, dtype=torch.long), factors)
    plain, _ = norm.batch(images, torch.zeros(4, dtype=torch.long))
    assert got.is_contiguous(memory_format=torch.channels_last)
    assert torch.allclose(got[0], plain[0], atol=1e-5)  # factors of 1 change nothing
    x = images.float() / 255
    gray_w = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)
    b, c, s = (factors[:, i].view(-1, 1, 1, 1) for i in range(3))
    x = x * b
    m = (x * gray_w).sum(1, keepdim=True).mean((2, 3), keepdim=True)
    x = (x - m) * c + m
    g = (x * gray_w).sum(1, keepdim=True)
    x = ((x - g) * s + g).clamp(0, 1)
    want = (x - torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)) / torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    assert torch.allclose(got, want, atol=1e-4)
    gray = got[3] * torch.tensor(IMAGENET_STD).view(3, 1, 1) + torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    assert torch.allclose(gray[0], gray[1], atol=1e-5)  # saturation 0: grey
    one_by_one = torch.empty((4, 3, 8, 8)).contiguous(memory_format=torch.channels_last)
    for i in range(4):
        norm.image_into(images[i], one_by_one[i], tuple(factors[i].tolist()))
    assert torch.allclose(one_by_one, want, atol=1e-4)


@pytest.mark.parametrize("jittered", [True, False])
def test_an_image_normalised_straight_into_its_batch_slot_has_the_values_of_one_copied_there(jittered):
    """A CPU run's float32 NCHW slot is written by the map itself, without a temporary; every
    value is that of the image mapped apart and copied in (a channels-last or bf16 slot)."""
    images = torch.randint(0, 256, (3, 3, 16, 12), dtype=torch.uint8)
    factors = [(1.3, 0.7, 1.2), (0.6, 1.4, 0.6), (1.0, 1.0, 0.0)]
    norm = Normalize(CPU, torch.float32, channels_last=False)
    straight = torch.full((3, 3, 16, 12), float("nan"))
    copied = torch.full((3, 3, 16, 12), float("nan")).contiguous(memory_format=torch.channels_last)
    halves = torch.zeros((3, 3, 16, 12), dtype=torch.bfloat16)
    for i in range(3):
        jitter = factors[i] if jittered else None
        norm.image_into(images[i], straight[i], jitter)
        norm.image_into(images[i], copied[i], jitter)
        norm.image_into(images[i], halves[i], jitter)
    assert torch.equal(straight, copied)
    assert torch.equal(halves, straight.to(torch.bfloat16))
    with pytest.raises(RuntimeError):  # a slot of another shape is refused, never half written
        norm.image_into(images[0], torch.empty((3, 32, 24)), factors[0] if jittered else None)


# --------------------------------------------------------------------------- sharding


def test_workers_share_out_each_epoch_and_the_validation_split_exactly_once():
    plans = [ShardPlan(train_size=50, val_size=9, batch_size=4, seed=7, rank=r, world_size=2) for r in (0, 1)]
    assert all(p.steps_per_epoch == 6 for p in plans)  # 25 each, full batches only
    for epoch in (0, 1):
        shards = [[i for k in p.train_batches(epoch) for i in k.indices] for p in plans]
        assert len(shards[0]) == len(shards[1]) == 24 and not set(shards[0]) & set(shards[1])
        keys = [list(p.train_batches(epoch)) for p in plans]
        assert keys == [list(p.train_batches(epoch)) for p in plans]  # deterministic
    assert [k.indices for k in plans[0].train_batches(0)] != [k.indices for k in plans[0].train_batches(1)]
    evals = [[k.indices for k in p.eval_batches()] for p in plans]
    assert [len(e) for e in evals] == [2, 2]  # the same number of evaluation steps on every worker
    assert evals[1][-1] == ()  # the worker with fewer images ends with an empty batch
    assert sorted(i for e in evals for k in e for i in k) == list(range(9))


# --------------------------------------------------------------------------- bad files


@pytest.fixture
def damaged(tmp_path) -> tuple[Path, list[Path]]:
    root = tmp_path / "damaged"
    make_data_set("imagefolder", root, num_classes=2, images_per_class=8, val_images_per_class=2, image_size=(40, 30))
    truncated = sorted(root.glob("train/000_disc/*.jpg"))[0]
    truncated.write_bytes(truncated.read_bytes()[:300])
    garbage = root / "train" / "001_square" / "zz.jpg"
    garbage.write_bytes(b"not an image at all")
    return root, [truncated, garbage]


@pytest.mark.parametrize("workers", [0, 1])
def test_a_bad_image_stops_the_run_naming_the_file(damaged, workers):
    root, bad = damaged
    record = run_in_process(RunConfig(model="trivial", device="cpu", data_dir=str(root), batch_size=4,
                                      num_batches=8, num_warmup_batches=0, num_workers=workers))
    assert record.status == "error" and "\n" not in record.error
    assert record.error.startswith("BadImageError: bad image ") and any(str(p) in record.error for p in bad)
    assert "--skip-bad-images" in record.error


@pytest.mark.parametrize("kind", ["unlistable", "name too long"])
def test_a_class_folder_that_cannot_be_listed_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, kind):
    """A class folder that cannot be listed (no permission; a path longer than a path may be): one line
    naming it, before any work (it was a traceback)."""
    import os

    root = tmp_path / "d"
    if kind == "name too long":  # a class folder whose path is longer than a path may be
        root = tmp_path.joinpath(*["p" * 200] * ((3900 - len(str(tmp_path))) // 201))
    make_data_set("imagefolder", root, num_classes=2, images_per_class=4, val_images_per_class=1, image_size=(40, 30))
    folder = root / "train" / "000_disc"
    if kind == "unlistable":  # chmod 0 (root would list it anyway)
        odd = folder
        real = os.scandir
        monkeypatch.setattr(os, "scandir", lambda path=".": real(path) if Path(path) != folder else (
            _ for _ in ()).throw(PermissionError(13, "Permission denied", str(path))))
    else:
        fd = os.open(root / "train", os.O_RDONLY)
        os.mkdir("c" * 250, dir_fd=fd)
        os.close(fd)
        odd = root / "train" / ("c" * 250)
    code = main(["data", "--data-dir", str(root), "--batch-size", "2", "--num-batches", "1",
                 "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert str(odd) in err
    assert not list(tmp_path.glob("r/*.jsonl"))


@pytest.mark.parametrize("command", ["data", "run"])
def test_a_class_folder_of_no_image_in_train_is_one_line_before_any_work(tmp_path, capsys, command):
    """A class folder of train/ that holds no image (empty, or a note and a .DS_Store only) was a
    class counted and never read, without a word: one line naming it, before any work, as
    torchvision's ImageFolder refuses it. A class val/ has no image of is fine."""
    root = tmp_path / "d"
    make_data_set("imagefolder", root, num_classes=2, images_per_class=4, val_images_per_class=1, image_size=(40, 30))
    (root / "val" / "002_gone").mkdir()
    (root / "train" / "002_gone").mkdir()
    one = root / "train" / "002_gone" / "a.jpg"
    one.write_bytes(next((root / "train" / "000_disc").iterdir()).read_bytes())
    assert ImageFolderReader(str(root)).num_classes == 3  # val/ may have no image of a class
    one.unlink()
    (root / "train" / "002_gone" / "README.txt").write_text("to do")
    (root / "train" / "002_gone" / ".DS_Store").write_bytes(b"\0")
    (root / "train" / "003_empty").mkdir()
    run = [command, "--data-dir", str(root), "--batch-size", "2", "--num-batches", "1", "--results-dir",
           str(tmp_path / "r")]
    code = main([*run, "--model", "trivial", "--device", "cpu"] if command == "run" else run)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{root / 'train' / '002_gone'}: class folder holds no image (and 1 more)" in err, err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("kind", ["fifo", "socket", "zero", "broken link"])
def test_an_entry_named_as_an_image_that_is_no_file_is_a_bad_image_named_never_waited_on(tmp_path, capsys, kind):
    """A FIFO, a socket, a device or a link to nothing named as an image was passed over in silence (the
    batch size then looked too big for the data set): it is a bad image, named, which --skip-bad-images
    skips and counts. A hidden one (an editor's lock link) is passed over."""
    import os
    import socket

    root = tmp_path / "d"
    make_data_set("imagefolder", root, num_classes=2, images_per_class=4, val_images_per_class=1, image_size=(40, 30))
    folder = root / "train" / "000_disc"
    odd = folder / "odd.jpg"
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(odd))
    elif kind == "zero":
        odd.symlink_to("/dev/zero")
    else:
        odd.symlink_to(tmp_path / "nothing.jpg")
    (folder / ".#lock.jpg").symlink_to("user@host.1234")  # what an editor leaves
    assert ImageFolderReader(str(root)).size("train") == 9
    run = ["data", "--data-dir", str(root), "--batch-size", "9", "--num-batches", "1", "--num-warmup-batches", "0",
           "--num-workers", "0", "--image-size", "16"]
    code = main([*run, "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 1 and f"bad image {odd}: unreadable" in err and "Traceback" not in err, err
    assert main([*run, "--results-dir", str(tmp_path / "skipped"), "--skip-bad-images"]) == 0
    err = capsys.readouterr().err
    (record,), _ = read_records(tmp_path / "skipped")
    assert record["metrics"]["bad_images"] == 1
    # the data command warns of it as a run does (its record did not say so)
    assert any(w.startswith("1 bad image skipped (--skip-bad-images)") for w in record["metrics"]["warnings"])
    assert "warning: 1 bad image skipped" in err, err


def test_a_data_folder_that_is_a_link_loop_or_a_link_to_nothing_says_so(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing")
    with pytest.raises(DataSetError, match="loop: cannot be read .Too many levels of symbolic links"):
        guess_data_name(tmp_path / "loop")  # it was said not to exist
    with pytest.raises(DataSetError, match="dangling is a link to nothing"):
        guess_data_name(tmp_path / "dangling")
    with pytest.raises(DataSetError, match="missing does not exist"):
        guess_data_name(tmp_path / "missing")


def test_an_image_swapped_for_a_fifo_or_too_big_is_a_bad_image_never_waited_on(tmp_path, monkeypatch):
    import os

    from cnnbench.data import imagefolder

    root = tmp_path / "d"
    make_data_set("imagefolder", root, num_classes=2, images_per_class=4, val_images_per_class=1, image_size=(40, 30))
    reader = ImageFolderReader(str(root))
    first = reader.path("train", 0)
    os.unlink(first)
    os.mkfifo(first)
    raised: list[BaseException] = []

    def read() -> None:
        try:
            reader.read("train", 0)
        except OSError as exc:
            raised.append(exc)

    reading = threading.Thread(target=read, daemon=True)  # a read that waits on the FIFO fails here, not hangs
    reading.start()
    reading.join(60)
    assert not reading.is_alive() and len(raised) == 1 and "is a FIFO" in str(raised[0])
    monkeypatch.setattr(imagefolder, "MAX_IMAGE_BYTES", 100)
    with pytest.raises(OSError, match="larger than"):
        reader.read("train", 1)


def test_skip_bad_images_counts_them(damaged):
    root, _ = damaged
    record = run_in_process(RunConfig(model="trivial", device="cpu", data_dir=str(root), batch_size=4,
                                      num_epochs=2, num_workers=1, skip_bad_images=True))
    assert record.status == "ok"
    assert record.metrics["bad_images"] == 4  # two bad files, read once per epoch
    assert [e["images_per_sec"] * e["time_s"] for e in record.metrics["epochs"]] == pytest.approx([14, 14])
    assert record.config["skip_bad_images"] is True


def test_skipped_images_are_named_each_once_and_five_at_most(tmp_path, caplog):
    """--skip-bad-images names the first five bad images in the log, each once: not an image bad
    in every epoch once per epoch, nor more than five when one batch holds several."""
    root = tmp_path / "many_bad"
    make_data_set("imagefolder", root, num_classes=2, images_per_class=8, val_images_per_class=1,
                  image_size=(40, 30))
    for f in sorted((root / "train" / "000_disc").iterdir())[:7]:
        f.write_bytes(b"corrupt")
    with caplog.at_level("WARNING", logger="cnnbench.data.loader"):
        record = run_in_process(RunConfig(model="trivial", device="cpu", data_dir=str(root), batch_size=8,
                                          num_epochs=3, num_workers=0, skip_bad_images=True))
    assert record.status == "ok", record.error
    assert record.metrics["bad_images"] == 21  # seven bad files, read once per epoch
    named = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped bad image ")]
    assert len(named) == 5 and len(set(named)) == 5, named


def test_skipped_images_and_a_class_with_no_good_image_are_warned(tmp_path):
    """--skip-bad-images: the record's warnings say how many were skipped, and name a class
    every read image of which was bad (the run trained without it, exit 0 otherwise)."""
    root = tmp_path / "one_class_gone"
    make_data_set("imagefolder", root, num_classes=3, images_per_class=6, val_images_per_class=1,
                  image_size=(40, 30))
    for f in (root / "train" / "001_square").iterdir():
        f.write_bytes(b"corrupt")
    record = run_in_process(RunConfig(model="trivial", device="cpu", data_dir=str(root), batch_size=4,
                                      num_epochs=1, num_workers=0, skip_bad_images=True))
    assert record.status == "ok", record.error
    warnings = record.metrics["warnings"]
    assert record.metrics["bad_images"] == 6
    assert any("6 bad images skipped (--skip-bad-images)" in w for w in warnings), warnings
    assert any("class 001_square was bad" in w for w in warnings), warnings
    assert record.metrics["classes_all_bad"] == ["001_square"]
    assert not any("000_disc" in w or "002_triangle" in w for w in warnings)


def test_a_failure_in_a_loader_process_is_one_line(sets, monkeypatch):
    def broken(self, split, index):
        raise ValueError(f"boom reading {index}")

    monkeypatch.setattr(ImageFolderReader, "read", broken)  # before the loader process forks
    record = run_in_process(RunConfig(model="trivial", device="cpu", data_dir=str(sets["imagefolder"]), batch_size=4,
                                      num_batches=3, num_warmup_batches=0, num_workers=1))
    assert record.status == "error" and "\n" not in record.error
    assert record.error.startswith("InputPipelineError: ValueError: boom reading") and "DataLoader worker" in \
        record.error
    with pytest.raises(InputPipelineError):
        raise InputPipelineError("x")


def test_an_unreadable_file_is_a_bad_image(tmp_path):
    root = tmp_path / "perm"
    make_data_set("imagefolder", root, num_classes=1, images_per_class=2, val_images_per_class=0)
    reader = ImageFolderReader(str(root))
    loader = BatchLoader(reader, Preprocessing(16, False), Preprocessing(16, False), skip_bad_images=True,
                         jpeg_decoder="pillow")
    Path(reader.path("train", 1)).unlink()  # listed, then gone
    from cnnbench.data.sharding import BatchKey

    loaded = loader[BatchKey("train", (0, 1))]
    assert loaded.bad == 1 and loaded.labels.shape == (1,) and "unreadable" in loaded.skipped[0]
    with pytest.raises(BadImage, match="empty file"):
        decode_for_crop(b"", 16, lambda w, h: Box(0, 0, w, h))


# --------------------------------------------------------------------------- cnnbench data


def test_the_data_command_measures_the_pipeline_and_records_it(sets, tmp_path, capsys):
    results = tmp_path / "results"
    code = main(["data", "--data-dir", str(sets["imagefolder"]), "--distortions", "--image-size", "32",
                 "--batch-size", "4", "--num-batches", "6", "--num-warmup-batches", "1", "--num-workers", "1",
                 "--results-dir", str(results), "--machine-label", "box"])
    out = capsys.readouterr().out
    assert code == 0 and "total images/sec: " in out and "per loading process: " in out
    assert "(1 loader process)" in out
    (record,) = [json.loads(line) for line in (results / "box.jsonl").read_text().splitlines()]
    cfg, m = record["config"], record["metrics"]
    assert cfg["mode"] == "data" and cfg["data_name"] == "imagefolder" and cfg["distortions"] is True
    assert cfg["data_dir"] == str(sets["imagefolder"].resolve()) and cfg["num_workers"] == 1
    assert m["images"] == 24 and len(m["step_times_s"]) == 6 and m["bad_images"] == 0
    assert m["images_per_sec_per_worker"] == pytest.approx(m["total_images_per_sec"])
    cores = record["environment"]["available_cpus"]
    assert m["images_per_sec_per_core"] == pytest.approx(m["total_images_per_sec"] / cores)
    assert is_pipeline_record(record)
    report = build_report([record])
    (total, per_core) = [t for t in report.tables if t.kind == "pipeline"]
    row = "imagefolder 32 px, distortions, bilinear, batch 4, 1 worker"
    assert total.cell(row, "box").value == pytest.approx(m["total_images_per_sec"], rel=1e-3)
    assert per_core.cell(row, "box").value == pytest.approx(m["images_per_sec_per_core"], rel=1e-3)
    assert not [t for t in report.tables if t.kind in ("configuration", "cost")]
    # the same pipeline alone through DALI: a row of its own, named by its pipeline
    dali = json.loads(json.dumps(record))
    dali["run_id"] += "-dali"
    dali["config"]["input_pipeline"] = "dali"
    dali["metrics"].update(total_images_per_sec=1000.0, images_per_sec_per_core=250.0)
    (total, per_core) = [t for t in build_report([record, dali]).tables if t.kind == "pipeline"]
    assert total.cell(row, "box").value == pytest.approx(m["total_images_per_sec"], rel=1e-3)
    through = "imagefolder through dali 32 px, distortions, bilinear, batch 4, 1 worker"
    assert total.cell(through, "box").value == 1000.0 and per_core.cell(through, "box").value == 250.0
    # another share for the hardware decoder is another configuration, not a repeat
    loaded = json.loads(json.dumps(dali))
    loaded["run_id"] += "-hw"
    loaded["config"]["dali_hw_decoder_load"] = 0.25
    loaded["metrics"]["total_images_per_sec"] = 3000.0
    (total, _) = [t for t in build_report([record, dali, loaded]).tables if t.kind == "pipeline"]
    assert total.cell(through, "box").value == 1000.0
    hw = "imagefolder through dali, hardware decoder 0.25, 32 px, distortions, bilinear, batch 4, 1 worker"
    assert total.cell(hw, "box").value == 3000.0
    default = json.loads(json.dumps(dali))  # the default share, given: the same row as left unset
    default["run_id"] += "-default"
    default["config"]["dali_hw_decoder_load"] = 0.65
    (total, _) = [t for t in build_report([dali, default]).tables if t.kind == "pipeline"]
    assert [row[0].text for row in total.rows] == [through]


def test_the_data_commands_lines_are_of_blocks_of_k_batches_never_of_one_made_ahead(sets, monkeypatch):
    """Two loader processes hand over the first batches timed made already, then batches in bursts
    of two: the first line read "1 images/sec: 198854.1" and the next ones a +/- of 35 to 100 times
    their figure. The clock here is the source's: each batch takes the time it is given."""
    from cnnbench.config.data_bench import DataBenchConfig
    from cnnbench.engine import input_bench

    clock = [0.0]
    takes = iter([0.01] + [1e-6] * 4 + [0.019, 0.001] * 18)  # the warm-up's, four made ahead (2 each), then bursts

    class Source:
        description = "fake"

        def __next__(self):
            clock[0] += next(takes)
            return torch.zeros(4, 3, 8, 8), torch.zeros(4, dtype=torch.long)

        def metrics(self):
            return {}

        def close(self):
            pass

    monkeypatch.setattr(input_bench, "make_input", lambda request: Source())
    monkeypatch.setattr(input_bench.time, "perf_counter", lambda: clock[0])
    lines: list[str] = []
    record = input_bench.run_data_benchmark(DataBenchConfig(
        data_dir=str(sets["imagefolder"]), image_size=32, batch_size=4, num_batches=40, num_warmup_batches=1,
        num_workers=2, display_every=10, device="cpu"), emit=lines.append)
    assert record.status == "ok", record.error
    steps = [line.split("\t")[0] for line in lines if "\timages/sec: " in line]
    assert steps == ["10", "20", "30", "40"], lines  # no line of step 1: its batch was made ahead
    for line in lines:
        if "\timages/sec: " in line:
            mean, rest = line.split("images/sec: ")[1].split(" +/- ")
            assert float(rest.split()[0]) < 0.2 * float(mean), line  # blocks of 2: 10 ms each, but the first
    assert record.metrics["images_per_sec_stderr"] < 0.2 * record.metrics["images_per_sec_mean"]
    assert not any("unstable" in w for w in record.metrics["warnings"]), record.metrics["warnings"]


def _data(sets, tmp_path, *extra: str) -> int:
    return main(["data", "--data-dir", str(sets["imagefolder"]), "--image-size", "32", "--batch-size", "4",
                 "--num-batches", "4", "--num-warmup-batches", "1", "--results-dir", str(tmp_path / "results"),
                 "--machine-label", "box", *extra])


def _data_record(tmp_path) -> dict:
    (record,) = [json.loads(line) for line in (tmp_path / "results" / "box.jsonl").read_text().splitlines()]
    return record


def test_data_records_carry_the_guards_warnings_and_host_telemetry_as_run_records_do(sets, tmp_path, capsys,
                                                                                        monkeypatch):
    from cnnbench.engine.guard import BusyMachineGuard

    real = BusyMachineGuard.metrics

    def busy(self):
        m = dict(real(self))
        return {**m, "warnings": [*m.get("warnings", []), "busy CPU: scripted"]}

    monkeypatch.setattr(BusyMachineGuard, "metrics", busy)
    assert _data(sets, tmp_path, "--num-workers", "0") == 0
    m = _data_record(tmp_path)["metrics"]
    assert "busy CPU: scripted" in m["warnings"]
    assert "other_processes_cpu_cores" in m  # the guard's own look at the host
    assert m["host_telemetry"]["samples"] >= 2 and m["gpu_telemetry"] == []
    assert m["peak_host_memory_bytes"] > 0
    assert "cnnbench data: warning: busy CPU: scripted" in capsys.readouterr().err


def test_data_batch_times_get_the_spread_check(sets, tmp_path, monkeypatch):
    from cnnbench.engine import input_bench

    monkeypatch.setattr(input_bench, "spread_warnings",
                        lambda times, block=1: [f"unstable: {len(times)} batches in blocks of {block}"])
    assert _data(sets, tmp_path, "--num-workers", "0") == 0
    assert "unstable: 4 batches in blocks of 1" in _data_record(tmp_path)["metrics"]["warnings"]
    assert _data(sets, tmp_path, "--num-workers", "2") == 0  # two loader processes: blocks of two batches
    lines = (tmp_path / "results" / "box.jsonl").read_text().splitlines()
    assert "unstable: 4 batches in blocks of 2" in json.loads(lines[-1])["metrics"]["warnings"]


def test_without_loader_processes_the_main_process_is_said_to_load(sets, tmp_path, capsys):
    assert _data(sets, tmp_path, "--num-workers", "0") == 0
    out = capsys.readouterr().out
    assert "Loading:     the main process: --num-workers 0" in out
    assert "per loading process: " in out and "(the main process: --num-workers 0)" in out
    assert "0 process" not in out
    m = _data_record(tmp_path)["metrics"]
    assert m["loader_workers"] == 0 and m["loading_processes"] == 1
    assert m["images_per_sec_per_worker"] == pytest.approx(m["total_images_per_sec"])


def test_the_data_commands_help_says_a_data_set_is_read(capsys):
    with pytest.raises(SystemExit):
        main(["data", "--help"])
    out = capsys.readouterr().out
    assert "synthetic" not in out.lower()
    assert "--data-name {imagefolder,cifar10,cifar100}" in out and "(required)" in out
    with pytest.raises(SystemExit) as info:
        main(["data", "--data-dir", "x", "--data-name", "synthetic"])
    assert info.value.code == 2


@pytest.mark.parametrize("part", ["train", "val", "train/000_disc"])
def test_a_split_or_class_folder_is_answered_with_the_folder_to_pass(sets, capsys, part):
    root = sets["imagefolder"]
    assert main(["data", "--data-dir", str(root / part)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"pass the data set's own folder, {root.resolve()}" in line
    with pytest.raises(ConfigError, match="pass the data set's own folder"):
        resolve(RunConfig(model="trivial", device="cpu", data_dir=str(root / part), data_name="imagefolder"))


def test_the_root_folder_is_refused_in_one_line(tmp_path, capsys):
    assert main(["data", "--data-dir", "/", "--results-dir", str(tmp_path)]) == 2  # no folder above it to look at
    (line,) = capsys.readouterr().err.splitlines()
    assert "--data-dir: / holds no data set" in line


def test_the_data_command_needs_a_data_set(tmp_path, capsys):
    assert main(["data", "--results-dir", str(tmp_path)]) == 2
    assert main(["data", "--data-dir", str(tmp_path / "none"), "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "--data-dir: cnnbench data measures" in err[0] and "does not exist" in err[1]


# --------------------------------------------------------------------------- training to accuracy


def _train(data_dir: Path, **changes):
    base = dict(model="trivial", device="cpu", data_dir=str(data_dir), num_epochs=4, batch_size=16,
                optimizer="momentum", learning_rate=0.1, num_workers=0, display_every=1000)
    base.update(changes)
    return run_in_process(RunConfig(**base))


def test_a_small_model_learns_the_generated_classes(sets):
    record = _train(sets["cifar10"])
    epochs = record.metrics["epochs"]
    assert record.status == "ok" and len(epochs) == 4
    assert epochs[-1]["test_accuracy"] > 0.5  # 10 classes: chance is 0.1
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    assert all(e["test_images"] == 100 for e in epochs)  # the whole validation split, every epoch
    assert record.metrics["final_test_accuracy"] == epochs[-1]["test_accuracy"]
    assert record.config["data_name"] == "cifar10" and record.config["num_epochs"] == 4


def test_the_same_seed_gives_the_same_loss_curve_whatever_the_loader_processes(sets):
    def curve(record):
        return [(e["train_loss"], e["train_accuracy"], e["test_accuracy"]) for e in record.metrics["epochs"]]

    a = _train(sets["imagefolder"], num_epochs=2, batch_size=4, distortions=True, num_workers=0)
    b = _train(sets["imagefolder"], num_epochs=2, batch_size=4, distortions=True, num_workers=2)
    c = _train(sets["imagefolder"], num_epochs=2, batch_size=4, distortions=True, num_workers=0, seed=99)
    assert curve(a) == curve(b)
    assert curve(a) != curve(c)


def test_the_report_fills_the_training_table_from_real_records(sets):
    records = [_train(sets["cifar10"], num_epochs=2).to_dict()]
    report = build_report(records)
    (table,) = [t for t in report.tables if t.kind == "training"]
    m = records[0]["metrics"]
    assert table.cell("Test accuracy", "CPU (1)").value == pytest.approx(m["final_test_accuracy"], abs=1e-3)
    assert table.cell("Training time (s)", "CPU (1)").value == pytest.approx(m["total_time_s"], abs=0.01)
    assert table.cell("Maximum host memory per worker, RSS (MiB)", "CPU (1)").value == pytest.approx(
        m["peak_host_memory_bytes"] / 2**20, abs=1)


def test_data_set_errors_name_the_folder(tmp_path):
    (tmp_path / "test_batch").write_bytes(b"x")
    for i in range(1, 6):
        (tmp_path / f"data_batch_{i}").write_bytes(b"not a pickle")
    with pytest.raises(DataSetError, match="data_batch_1: not a CIFAR python batch"):
        CifarReader("cifar10", str(tmp_path))


class _Payload:
    """Unpickling this runs ``os.system``: what a hostile "CIFAR" download would hold."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("where", ["data_batch_1", "batches.meta"])
def test_a_cifar_file_that_would_run_code_is_refused_and_runs_nothing(sets, tmp_path, where):
    root = tmp_path / "c10"
    root.mkdir()
    for f in sets["cifar10"].iterdir():
        (root / f.name).write_bytes(f.read_bytes())
    marker = tmp_path / "pwned"
    with open(root / where, "wb") as f:
        pickle.dump({b"data": _Payload(marker), b"label_names": _Payload(marker)}, f, protocol=2)
    with pytest.raises(DataSetError, match=rf"{where}: not a CIFAR python batch, and not loaded: refused to load "
                                           r"(posix|os)\.system"):
        CifarReader("cifar10", str(root))
    assert not marker.exists()
    code = main(["data", "--data-dir", str(root), "--batch-size", "4", "--num-batches", "1"])
    assert code != 0 and not marker.exists()


@pytest.mark.parametrize("batch, why", [
    ({b"data": "abc"}, "data is no array of whole numbers"),
    ({b"data": [[1000] * 3072]}, "data holds values outside 0..255"),
    ({b"data": [[1] * 3072, [2]]}, "data is no array of whole numbers"),
    ({b"data": {b"x": 1}}, "data is no array of whole numbers"),
    ({b"labels": ["x"]}, "labels is no array of whole numbers"),
    ({b"labels": [10**30]}, "labels is no array of whole numbers"),
])
def test_a_cifar_batch_of_values_no_image_holds_is_one_line_naming_it(sets, tmp_path, capsys, batch, why):
    root = tmp_path / "c10"
    root.mkdir()
    for f in sets["cifar10"].iterdir():
        (root / f.name).write_bytes(f.read_bytes())
    good = {b"data": np.zeros((1, 3072), dtype=np.uint8), b"labels": [1]}
    with open(root / "data_batch_3", "wb") as f:
        pickle.dump({**good, **batch}, f, protocol=2)
    with pytest.raises(DataSetError, match=f"data_batch_3: {why}"):
        CifarReader("cifar10", str(root))
    code = main(["data", "--data-dir", str(root), "--batch-size", "4", "--num-batches", "1",
                 "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_cifar_arrays_pickled_by_numpy_1_and_numpy_2_are_both_read(tmp_path):
    """numpy < 2 names its array reconstructor numpy.core.multiarray._reconstruct, numpy 2
    numpy._core.multiarray._reconstruct: the official archive was written with the first."""
    from cnnbench.data.safe_pickle import safe_load
    data = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    raw = pickle.dumps({b"data": data, b"labels": [1, 2]}, protocol=2)
    for module in (b"numpy._core.multiarray", b"numpy.core.multiarray"):
        other = b"numpy.core.multiarray" if module == b"numpy._core.multiarray" else b"numpy._core.multiarray"
        spelled = raw.replace(other, module)
        assert module in spelled
        out = safe_load(io.BytesIO(spelled))
        assert out[b"labels"] == [1, 2] and np.array_equal(out[b"data"], data) and out[b"data"].dtype == np.uint8


def test_loader_processes_are_forked_even_inside_a_spawned_worker(sets):
    """A worker of --num-devices is spawned, so its default would be to spawn loader processes too:
    a fresh interpreter importing torch, and the data set pickled to each."""
    source = _source(sets["cifar10"], num_workers=1)
    assert source._loader is not None and source._loader.multiprocessing_context.get_start_method() == "fork"
    source.close()


@requires_cuda
def test_real_data_on_a_gpu_is_normalised_there(sets, tmp_path):
    source = _source(sets["imagefolder"], image_size=24)
    key = next(source.plan.train_batches(0))
    on_cpu, _ = source.normalize.batch(*_uint8(source)[key][:2])
    gpu = make_input(InputRequest(config=resolve(RunConfig(model="trivial", device="cuda", data_dir=str(
        sets["imagefolder"]), batch_size=4, num_workers=1, image_size=24)).config, batch_size=4, image_size=24,
        device=torch.device("cuda"), dtype=torch.float32, channels_last=True, seed=source.plan.seed))
    assert isinstance(gpu, DataSetSource) and not gpu.on_host and gpu.batches.normalize is None
    images, labels = next(gpu)
    assert images.is_cuda and labels.is_cuda and images.is_contiguous(memory_format=torch.channels_last)
    assert torch.allclose(images.cpu(), on_cpu, atol=1e-5)
    gpu.close()
    source.close()
    record = _train(sets["cifar10"], device="cuda", num_epochs=2, num_workers=1)
    assert record.status == "ok" and record.metrics["epochs"][-1]["test_images"] == 100
    assert main(["data", "--data-dir", str(sets["imagefolder"]), "--device", "cuda", "--distortions",
                 "--image-size", "32", "--batch-size", "4", "--num-batches", "3", "--num-workers", "1",
                 "--results-dir", str(tmp_path)]) == 0
