"""The real-data input pipeline against the plain torchvision way, side by side in one run.

    .venv/bin/python benchmarks/input_pipeline.py [--images 1000] [--workers 1 2] [--rounds 3]

1. Writes an image folder of generated JPEGs of ordinary photo size (500 × 375, quality 90;
   ``cnnbench make-dataset``'s images: shapes, gradients and pixel noise, ~100 KB each, like
   photographs of that size; nothing is downloaded).
2. Per image, on one core: the decoders ``cnnbench`` can use, each decoding, cropping
   (random resized crop), resizing to 224, flipping and making normalised floats: torchvision's
   way (Pillow decodes the whole file, ``transforms.v2`` crop, resize, flip, to float,
   normalise), then cnnbench's path (crop chosen from the header, DCT-scaled decoding, torch's
   uint8 resize of the crop, colour jitter and normalisation in one colour map) with each
   decoder: Pillow with ``draft``, simplejpeg (libjpeg-turbo), and PyTurboJPEG when it is
   installed (it needs the system's libturbojpeg).
3. Whole pipelines with ``--workers`` DataLoader processes, alternating in every round:
   ``cnnbench data --distortions --image-size 224`` (random resized crop, flip and colour
   jitter; normalised in the main process, as the device would) against ``ImageFolder`` +
   ``transforms.v2`` (RandomResizedCrop, RandomHorizontalFlip, to float, Normalize) +
   ``DataLoader`` with the same batch size, processes and prefetch; and cnnbench's loader as a
   GPU run uses it (uint8 batches; the float work then runs on the GPU). Prints images/sec,
   per loader process and per core, and the ratios to torchvision's.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.transforms import v2

from cnnbench.config.data_bench import DataBenchConfig
from cnnbench.data.catalog import open_data_set
from cnnbench.data.decode import Box, decode_for_crop, default_jpeg_decoder
from cnnbench.data.generate import make_data_set, parse_size
from cnnbench.data.loader import BatchLoader
from cnnbench.data.normalize import IMAGENET_MEAN, IMAGENET_STD, Normalize
from cnnbench.data.preprocess import Preprocessing
from cnnbench.data.sharding import ShardPlan
from cnnbench.engine.input_bench import run_data_benchmark
from cnnbench.machine.affinity import cpu_count_available

SIZE = 224


def torchvision_transform() -> v2.Compose:
    """The usual training transform of torchvision's classification reference."""
    return v2.Compose([
        v2.RandomResizedCrop(SIZE, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor(),
        v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])


# --------------------------------------------------------------------------- per image


def per_image_ways() -> dict[str, Callable[[bytes, int], object]]:
    """Each way: decode, random resized crop, flip, to normalised float (ours also: colour jitter)."""
    prep = Preprocessing(SIZE, distortions=True)
    tv = torchvision_transform()
    normalize = Normalize(torch.device("cpu"), torch.float32, channels_last=False)
    pixels_u8 = torch.empty((3, SIZE, SIZE), dtype=torch.uint8)
    out = torch.empty((3, SIZE, SIZE))

    def ours(decoder: str) -> Callable[[bytes, int], object]:
        def run(data: bytes, seed: int) -> object:
            chosen = {}

            def choose(w: int, h: int) -> Box:
                chosen["a"] = prep.augmentation(w, h, seed)
                return chosen["a"].box

            pixels, box = decode_for_crop(data, SIZE, choose, jpeg_decoder=decoder, fast_dct=True)
            prep.resize(pixels, box, flip=chosen["a"].flip, out=pixels_u8)
            normalize.image_into(pixels_u8, out, chosen["a"].jitter)
            return out
        return run

    ways: dict[str, Callable[[bytes, int], object]] = {
        "torchvision (Pillow full decode + v2)": lambda data, seed: tv(Image.open(io.BytesIO(data)).convert("RGB")),
        "Pillow draft + torch uint8 resize": ours("pillow"),
        "simplejpeg + torch uint8 resize": ours("simplejpeg"),
    }
    try:
        from turbojpeg import TJFLAG_FASTDCT, TJPF_RGB, TurboJPEG

        turbo = TurboJPEG()

        def pyturbojpeg(data: bytes, seed: int) -> object:
            width, height, _, _ = turbo.decode_header(data)
            a = prep.augmentation(width, height, seed)
            need = max(SIZE / a.box.w, SIZE / a.box.h)  # 1/8, 1/4, 1/2 or 1, as cnnbench decodes
            factors = sorted((f for f in turbo.scaling_factors if f[0] / f[1] >= need and f[0] == 1),
                             key=lambda f: f[0] / f[1])
            pixels = turbo.decode(data, pixel_format=TJPF_RGB, scaling_factor=factors[0] if factors else (1, 1),
                                  flags=TJFLAG_FASTDCT)
            box = a.box.scaled(pixels.shape[1] / width, pixels.shape[0] / height)
            prep.resize(pixels, box, flip=a.flip, out=pixels_u8)
            normalize.image_into(pixels_u8, out, a.jitter)
            return out

        ways["PyTurboJPEG + torch uint8 resize"] = pyturbojpeg
    except Exception as exc:  # not installed, or no libturbojpeg on this machine
        print(f"(PyTurboJPEG left out: {type(exc).__name__}: {str(exc).splitlines()[0]})")
    return ways


def bench_per_image(files: list[Path], rounds: int) -> None:
    torch.set_num_threads(1)  # as in a DataLoader process
    blobs = [f.read_bytes() for f in files]
    ways = per_image_ways()
    times: dict[str, list[float]] = {name: [] for name in ways}
    for r in range(rounds):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for name in order:
            start = time.perf_counter()
            for i, data in enumerate(blobs):
                ways[name](data, i + 1000 * r)
            times[name].append((time.perf_counter() - start) / len(blobs))
    base = statistics.median(times[next(iter(ways))])
    print(f"\nPer image, one core ({len(blobs)} JPEGs, median of {rounds} rounds):")
    print(f"{'way':<42} {'ms/image':>9} {'images/sec':>11} {'vs torchvision':>15}")
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"{name:<42} {t * 1e3:>9.2f} {1 / t:>11.1f} {base / t:>14.2f}x")


# --------------------------------------------------------------------------- pipelines


def ours(root: Path, workers: int, batch: int, batches: int, warmup: int) -> float:
    record = run_data_benchmark(DataBenchConfig(
        data_dir=str(root), distortions=True, image_size=SIZE, batch_size=batch, num_workers=workers,
        num_batches=batches, num_warmup_batches=warmup, results_dir=tempfile.gettempdir()))
    if record.status != "ok":
        raise RuntimeError(record.error)
    return float(record.metrics["total_images_per_sec"])


def ours_uint8(root: Path, workers: int, batch: int, batches: int, warmup: int) -> float:
    """cnnbench's loader as a GPU run uses it: uint8 batches (normalised later, on the GPU, which
    this machine may not have): the same source with a CUDA request, minus the copy."""
    from itertools import chain, count

    reader = open_data_set("imagefolder", str(root))
    loader = BatchLoader(reader, Preprocessing(SIZE, True), Preprocessing(SIZE, False), skip_bad_images=False,
                         jpeg_decoder=default_jpeg_decoder(), normalize=None)
    plan = ShardPlan(reader.size("train"), 0, batch, seed=1234)
    keys = chain.from_iterable(plan.train_batches(e) for e in count())
    it = iter(DataLoader(loader, batch_size=None, sampler=keys, num_workers=workers,  # type: ignore[arg-type]
                         persistent_workers=workers > 0, prefetch_factor=2 if workers > 0 else None))
    for _ in range(warmup):
        next(it)
    start = time.perf_counter()
    images = sum(int(next(it).labels.shape[0]) for _ in range(batches))
    return images / (time.perf_counter() - start)


def plain_torchvision(root: Path, workers: int, batch: int, batches: int, warmup: int) -> float:
    loader = DataLoader(datasets.ImageFolder(str(root / "train"), transform=torchvision_transform()),
                        batch_size=batch, shuffle=True, drop_last=True, num_workers=workers,
                        persistent_workers=workers > 0, prefetch_factor=2 if workers > 0 else None)
    it = iter(_forever(loader))
    for _ in range(warmup):
        next(it)
    start = time.perf_counter()
    images = sum(int(next(it)[1].shape[0]) for _ in range(batches))
    return images / (time.perf_counter() - start)


def _forever(loader: DataLoader):
    while True:
        yield from loader


def bench_pipelines(root: Path, workers: list[int], rounds: int, batch: int, batches: int, warmup: int) -> None:
    cores = cpu_count_available()
    results: dict[tuple[str, int], list[float]] = {}
    for r in range(rounds):
        for w in workers:
            sides = [("cnnbench", ours), ("torchvision", plain_torchvision), ("uint8 out", ours_uint8)]
            for name, fn in (sides if r % 2 == 0 else sides[::-1]):
                ips = fn(root, w, batch, batches, warmup)
                results.setdefault((name, w), []).append(ips)
                print(f"  round {r + 1}, {w} worker(s), {name}: {ips:.1f} images/sec", flush=True)
    print(f"\nPipelines ({batch} images per batch, {batches} timed batches after {warmup}; median of {rounds} "
          f"rounds; {cores} cores available):")
    print(f"{'workers':>7} {'side':<12} {'images/sec':>11} {'per worker':>11} {'per core':>9} {'ratio':>7}")
    for w in workers:
        for name in ("cnnbench", "torchvision", "uint8 out"):
            ips = statistics.median(results[(name, w)])
            ratios = [a / b for a, b in zip(results[(name, w)], results[("torchvision", w)], strict=True)]
            ratio = f"{statistics.median(ratios):.2f}x" if name != "torchvision" else ""
            print(f"{w:>7} {name:<12} {ips:>11.1f} {ips / w:>11.1f} {ips / cores:>9.1f} {ratio:>7}")
    print("cnnbench = `cnnbench data --distortions` on the CPU (float batches, normalised and jittered in the "
          "loader processes); uint8 out = its loader as a GPU run uses it (the float work then runs on the GPU).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=1000, help="JPEGs to write (10 classes).")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="DataLoader processes to compare at.")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--batches", type=int, default=15, help="Timed batches per pipeline measurement.")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--per-image", type=int, default=200, help="Files for the per-image comparison (0: skip).")
    ap.add_argument("--data", help="Use (or write) the image folder here instead of a temporary one.")
    ap.add_argument("--photo-size", default="500x375", help="Size of the JPEGs written, WIDTHxHEIGHT.")
    ap.add_argument("--no-pipelines", action="store_true", help="Only the per-image comparison.")
    args = ap.parse_args()

    print(f"torch {torch.__version__}, {cpu_count_available()} cores available, load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="cnnbench-pipeline-") as tmp:
        root = Path(args.data) if args.data else Path(tmp) / "photos"
        if not (root / "train").is_dir():
            start = time.perf_counter()
            per_class = math.ceil(args.images / 10)
            made = make_data_set("imagefolder", root, num_classes=10, images_per_class=per_class,
                                 val_images_per_class=1, image_size=parse_size(args.photo_size), quality=90, seed=0)
            print(f"wrote {made.train_images} JPEGs of {args.photo_size} (quality 90), mean "
                  f"{made.bytes_written / (made.train_images + made.val_images) / 1024:.0f} KiB, "
                  f"in {time.perf_counter() - start:.1f} s")
        files = sorted(root.glob("train/*/*.jpg"))
        random.Random(0).shuffle(files)
        for f in files:  # into the page cache: the comparison is of decoding, not of the disk
            f.read_bytes()
        if args.per_image:
            bench_per_image(files[: args.per_image], args.rounds)
        if not args.no_pipelines:
            bench_pipelines(root, args.workers, args.rounds, args.batch_size, args.batches, args.warmup)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
