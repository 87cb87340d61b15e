"""The real-data input pipeline against the plain torchvision way, side by side in one run.

    .venv/bin/python benchmarks/input_pipeline.py [--images 1000] [--workers 1 2] [--rounds 3]
        [--libturbojpeg3 PATH]

1. Writes an image folder of generated JPEGs of ordinary photo size (500 × 375, quality 90;
   ``cnnbench make-dataset``'s images: shapes, gradients and pixel noise, ~90 KB each, like
   photographs of that size; nothing is downloaded).
2. Decoders, per image, one core (decoding alone, no resizing): the same files decoded whole
   by each decoder here (the fastest is the *floor*: what the input pipeline could reach if
   it did nothing but decode whole files), and the candidates that decode only the region of
   each image's random resized crop (the same boxes cnnbench draws), each where it is
   installed: nvImageCodec's CPU back end (``nvidia-nvimgcodec-cu12``, a region of a code
   stream), DALI's CPU ``decoders.image_slice`` (``nvidia-dali-cuda120``; batches of 64, one
   thread), PyTurboJPEG's lossless MCU-aligned crop (``tjTransform``) then a decode of the
   crop, pyvips (``crop`` of a sequential load), and libjpeg-turbo 3's
   ``tj3SetCroppingRegion`` through ctypes when ``--libturbojpeg3`` names a
   ``libturbojpeg.so`` of version 3. Each prints the largest pixel difference from decoding
   the whole file and cropping.
3. Per image, on one core, the whole path: decode, crop (random resized crop), resize to
   224, flip, colour jitter (brightness, contrast, saturation, each 0.6–1.4) and normalised
   floats: torchvision's way (Pillow decodes the whole file, ``transforms.v2``
   RandomResizedCrop, RandomHorizontalFlip, ColorJitter on the PIL image, to float,
   normalise; also without the jitter, the baseline before 2026-11-25), then cnnbench's
   path (crop chosen from the header, DCT-scaled decoding, torch's uint8 resize of the crop,
   colour jitter and normalisation in one colour map) with each decoder.
4. Whole pipelines with ``--workers`` DataLoader processes, alternating in every round:
   ``cnnbench data --distortions --image-size 224`` (random resized crop, flip and colour
   jitter; float batches normalised in the loader processes, as on a CPU device) against
   ``ImageFolder`` + the torchvision transform above + ``DataLoader`` with the same batch
   size, processes and prefetch; and cnnbench's loader as a GPU run uses it (uint8 batches;
   the float work then runs on the GPU). The float side twice: as shipped (each image's colour
   map writes straight into its float32 batch slot) and ``before`` (into a temporary image,
   then copied into the slot, as before 2026-11-26).
   Prints images/sec, per loader process and per core, the ratios to torchvision's, and the
   CPU time (user + system of the main process and its loader processes over the timed
   batches) per image.
5. What a batch in fresh shared memory costs (every loader process allocates one per batch,
   on both sides): writing a float32 and a uint8 batch of 64 × 3 × 224 × 224 into a new
   shared-memory tensor against into one reused.

Every figure is the median over ``--rounds`` rounds; the ways alternate in every round (the
order reversed every other round). CPU time is the figure to compare on a shared machine:
wall time also counts the waits for other processes' use of the cores.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import math
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import simplejpeg
import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.transforms import v2

from cnnbench.config.data_bench import DataBenchConfig
from cnnbench.data.catalog import open_data_set
from cnnbench.data.decode import Box, decode_for_crop, default_jpeg_decoder
from cnnbench.data.generate import make_data_set, parse_size
from cnnbench.data.loader import BatchLoader, loader_start_method
from cnnbench.data.normalize import IMAGENET_MEAN, IMAGENET_STD, Normalize
from cnnbench.data.preprocess import JITTER, Preprocessing
from cnnbench.data.sharding import ShardPlan
from cnnbench.engine.input_bench import run_data_benchmark
from cnnbench.machine.affinity import cpu_count_available

SIZE = 224
BASELINE = "torchvision + colour jitter (the baseline)"


def torchvision_transform(jitter: bool = True) -> v2.Compose:
    """The usual training transform of torchvision's classification reference, with the colour
    jitter cnnbench's ``--distortions`` does (brightness, contrast, saturation in 0.6–1.4), on
    the PIL image, where the usual ImageNet recipes place it."""
    return v2.Compose([
        v2.RandomResizedCrop(SIZE, antialias=True), v2.RandomHorizontalFlip(),
        *([v2.ColorJitter(brightness=JITTER, contrast=JITTER, saturation=JITTER)] if jitter else []),
        v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: user + system, all threads) of ``fn()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def alternate(ways: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Each way once per round, the order reversed every other round."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for r in range(rounds):
        for name in (list(ways) if r % 2 == 0 else list(reversed(ways))):
            times[name].append(timed(ways[name]))
    return times


def medians(ts: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)


# --------------------------------------------------------------------------- decoders


def crop_boxes(blobs: list[bytes]) -> list[tuple[int, int, int, int]]:
    """The random resized crop of each image, as cnnbench draws it: (x0, y0, x1, y1) in pixels."""
    prep = Preprocessing(SIZE, distortions=True)
    boxes = []
    for i, data in enumerate(blobs):
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        boxes.append(prep.augmentation(width, height, i).box.pixels(width, height))
    return boxes


Decode = Callable[[bytes, tuple[int, int, int, int]], tuple[np.ndarray, int, int]]
"""``decode(data, box) -> (pixels, left, top)``: H × W × 3 uint8, the whole image or (about) the box's
region, and where those pixels start in the image (regions may start on the MCU grid, left of or above the box)."""


def whole_decoders() -> dict[str, Decode]:
    return {
        "simplejpeg, whole file, fast DCT (shipped)": lambda d, b: (
            simplejpeg.decode_jpeg(d, fastdct=True, fastupsample=True), 0, 0),
        "simplejpeg, whole file, exact DCT": lambda d, b: (simplejpeg.decode_jpeg(d), 0, 0),
        "Pillow, whole file": lambda d, b: (np.asarray(Image.open(io.BytesIO(d)).convert("RGB")), 0, 0),
        "simplejpeg at 1/8 scale (~ entropy decoding alone)": lambda d, b: (simplejpeg.decode_jpeg(
            d, fastdct=True, fastupsample=True, min_width=1, min_height=1), 0, 0),
    }


def region_decoders(libturbojpeg3: str | None, quiet: bool = False) -> dict[str, Decode]:
    """The candidates that decode (about) only the crop's region; those that are not installed are left out."""
    found: dict[str, Decode] = {}
    try:
        from nvidia import nvimgcodec as nv  # CPU back end; says on stderr that it found no nvJPEG

        decoder = nv.Decoder(device_id=nv.NVIMGCODEC_DEVICE_CPU_ONLY, max_num_cpu_threads=1,
                             backends=[nv.Backend(nv.CPU_ONLY)])
        params = nv.DecodeParams(apply_exif_orientation=False)

        def nvimgcodec_region(data: bytes, box: tuple[int, int, int, int]) -> tuple[np.ndarray, int, int]:
            x0, y0, x1, y1 = box
            stream = nv.CodeStream(data).get_sub_code_stream(region=nv.Region(y0, x0, y1, x1))
            return np.asarray(decoder.decode(stream, params=params).cpu()), x0, y0

        found["nvImageCodec CPU, region"] = nvimgcodec_region
    except Exception as exc:
        quiet or print(f"(nvImageCodec left out: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
    try:
        from turbojpeg import TJFLAG_FASTDCT, TJFLAG_FASTUPSAMPLE, TJPF_RGB, TurboJPEG

        turbo = TurboJPEG()

        def lossless_crop_then_decode(data: bytes, box: tuple[int, int, int, int]) -> tuple[np.ndarray, int, int]:
            x0, y0, x1, y1 = box
            ax, ay = x0 // 16 * 16, y0 // 16 * 16  # the crop's origin on the iMCU grid (16 for 4:2:0)
            cropped = turbo.crop(data, ax, ay, x1 - ax, y1 - ay)
            flags = TJFLAG_FASTDCT | TJFLAG_FASTUPSAMPLE
            return turbo.decode(cropped, pixel_format=TJPF_RGB, flags=flags), ax, ay

        found["PyTurboJPEG lossless crop, then decode"] = lossless_crop_then_decode
    except Exception as exc:
        quiet or print(f"(PyTurboJPEG left out: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
    try:
        import pyvips

        pyvips.cache_set_max(0)

        def vips_crop(data: bytes, box: tuple[int, int, int, int]) -> tuple[np.ndarray, int, int]:
            x0, y0, x1, y1 = box
            image = pyvips.Image.new_from_buffer(data, "", access="sequential")
            return image.crop(x0, y0, x1 - x0, y1 - y0).numpy(), x0, y0

        found["pyvips, crop of a sequential load"] = vips_crop
    except Exception as exc:
        quiet or print(f"(pyvips left out: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
    if libturbojpeg3:
        found["libjpeg-turbo 3 tj3SetCroppingRegion (ctypes)"] = tj3_region_decoder(libturbojpeg3)
    return found


class _Region(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int), ("w", ctypes.c_int), ("h", ctypes.c_int)]


def tj3_region_decoder(path: str, fast: bool = True) -> Decode:
    """TurboJPEG 3's cropped decompression (``jpeg_crop_scanline`` and ``jpeg_skip_scanlines`` inside):
    the region starts at the iMCU column at or left of the box."""
    lib = ctypes.CDLL(path)
    lib.tj3Init.restype = ctypes.c_void_p
    lib.tj3Init.argtypes = [ctypes.c_int]
    lib.tj3Set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.tj3DecompressHeader.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.tj3SetCroppingRegion.argtypes = [ctypes.c_void_p, _Region]
    lib.tj3Decompress8.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
                                   ctypes.c_int, ctypes.c_int]
    lib.tj3GetErrorStr.restype = ctypes.c_char_p
    lib.tj3GetErrorStr.argtypes = [ctypes.c_void_p]
    handle = lib.tj3Init(1)  # TJINIT_DECOMPRESS
    lib.tj3Set(handle, 9, int(fast))  # TJPARAM_FASTUPSAMPLE
    lib.tj3Set(handle, 10, int(fast))  # TJPARAM_FASTDCT

    def decode(data: bytes, box: tuple[int, int, int, int]) -> tuple[np.ndarray, int, int]:
        x0, y0, x1, y1 = box
        if lib.tj3DecompressHeader(handle, data, len(data)):
            raise ValueError(lib.tj3GetErrorStr(handle).decode())
        ax = x0 // 16 * 16
        lib.tj3SetCroppingRegion(handle, _Region(ax, y0, x1 - ax, y1 - y0))
        out = np.empty((y1 - y0, x1 - ax, 3), np.uint8)
        if lib.tj3Decompress8(handle, data, len(data), out.ctypes.data, 0, 0):  # TJPF_RGB
            raise ValueError(lib.tj3GetErrorStr(handle).decode())
        return out, ax, y0

    return decode


def dali_region_batches(blobs: list[bytes], boxes: list[tuple[int, int, int, int]]) -> Callable[[], object] | None:
    """DALI's CPU ``decoders.image_slice`` over every file, in batches of 64 on one thread."""
    try:
        from nvidia.dali import fn, pipeline_def, types
    except Exception as exc:
        print(f"(DALI left out: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        return None
    batch = 64
    n = len(blobs) // batch * batch
    encoded = [np.frombuffer(d, np.uint8) for d in blobs[:n]]
    anchors = [np.array([x0, y0], np.float32) for x0, y0, _, _ in boxes[:n]]
    shapes = [np.array([x1 - x0, y1 - y0], np.float32) for x0, y0, x1, y1 in boxes[:n]]
    position = [0]

    def source() -> tuple[list, list, list]:
        i = position[0]
        position[0] = (i + batch) % n
        return encoded[i:i + batch], anchors[i:i + batch], shapes[i:i + batch]

    @pipeline_def(batch_size=batch, num_threads=1, device_id=None, exec_async=False, exec_pipelined=False,
                  prefetch_queue_depth=1)
    def pipe():
        jpegs, anchor, shape = fn.external_source(source=source, num_outputs=3, batch=True)
        return fn.decoders.image_slice(jpegs, anchor, shape, axis_names="WH", normalized_anchor=False,
                                       normalized_shape=False, device="cpu", output_type=types.RGB)

    try:
        p = pipe()
        p.build()
        p.run()
    except Exception as exc:
        print(f"(DALI left out: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        return None

    def run() -> None:
        for _ in range(n // batch):
            p.run()
    return run


def bench_decoders(files: list[Path], rounds: int, libturbojpeg3: str | None) -> float:
    """Decoding alone, per image, one core; returns the floor (images/sec of the fastest whole decode)."""
    torch.set_num_threads(1)
    blobs = [f.read_bytes() for f in files]
    boxes = crop_boxes(blobs)
    whole = whole_decoders()
    regions = region_decoders(libturbojpeg3)
    exact = [simplejpeg.decode_jpeg(d) for d in blobs[:20]]
    fast = [simplejpeg.decode_jpeg(d, fastdct=True, fastupsample=True) for d in blobs[:20]]
    for name, decode in regions.items():  # pixels: the region against the whole image decoded, then cropped
        worst = {"exact": 0, "fast": 0}
        for data, box, full_exact, full_fast in zip(blobs, boxes, exact, fast, strict=False):
            got, left, top = decode(data, box)
            for kind, full in (("exact", full_exact), ("fast", full_fast)):
                expected = full[top:top + got.shape[0], left:left + got.shape[1]]
                worst[kind] = max(worst[kind], int(np.abs(got.astype(np.int16) - expected).max()))
        print(f"  {name}: largest pixel difference from the whole file decoded and cropped: {worst['exact']} "
              f"(exact DCT and upsampling), {worst['fast']} (fast DCT and upsampling)")

    def each(decode: Decode) -> Callable[[], object]:
        return lambda: [decode(d, b) for d, b in zip(blobs, boxes, strict=True)]

    ways = {name: each(decode) for name, decode in {**whole, **regions}.items()}
    dali = dali_region_batches(blobs, boxes)
    counts = dict.fromkeys(ways, len(blobs))
    if dali is not None:
        ways["DALI CPU decoders.image_slice (batches of 64)"] = dali
        counts["DALI CPU decoders.image_slice (batches of 64)"] = len(blobs) // 64 * 64
    times = alternate(ways, rounds)
    area = statistics.mean((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in boxes) / (500 * 375)
    print(f"\nDecoding alone, per image, one core ({len(blobs)} JPEGs, median of {rounds} rounds; "
          f"crops cover {area:.0%} of a 500 × 375 image on average):")
    width = max(map(len, times))
    print(f"{'decoder':<{width}} {'wall ms':>8} {'CPU ms':>8} {'images/s (CPU)':>15}")
    floor = 0.0
    for name, ts in times.items():
        wall, cpu = medians(ts)
        wall, cpu = wall / counts[name], cpu / counts[name]
        if name in whole and "1/8" not in name:
            floor = max(floor, 1 / cpu)
        print(f"{name:<{width}} {wall * 1e3:>8.3f} {cpu * 1e3:>8.3f} {1 / cpu:>15.0f}")
    print(f"floor: the same files decoded whole by the fastest decoder here: {floor:.0f} images/sec per core "
          "(CPU time)")
    return floor


# --------------------------------------------------------------------------- per image


def per_image_ways(libturbojpeg3: str | None) -> dict[str, Callable[[bytes, int], object]]:
    """Each way: decode, random resized crop, flip, colour jitter (but the first), to normalised float."""
    prep = Preprocessing(SIZE, distortions=True)
    tv, tv_jitter = torchvision_transform(jitter=False), torchvision_transform()
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
        "torchvision, no colour jitter (the old baseline)": lambda d, s: tv(Image.open(io.BytesIO(d)).convert("RGB")),
        BASELINE: lambda d, s: tv_jitter(Image.open(io.BytesIO(d)).convert("RGB")),
        "cnnbench, Pillow draft": ours("pillow"),
        "cnnbench, simplejpeg (shipped)": ours("simplejpeg"),
    }
    def ours_region(region: Decode) -> Callable[[bytes, int], object]:  # what decoding only the region would give
        def run(data: bytes, seed: int) -> object:
            height, width, _, _ = simplejpeg.decode_jpeg_header(data)
            a = prep.augmentation(width, height, seed)
            pixels, left, top = region(data, a.box.pixels(width, height))
            box = Box(a.box.x - left, a.box.y - top, a.box.w, a.box.h)
            prep.resize(pixels, box, flip=a.flip, out=pixels_u8)
            normalize.image_into(pixels_u8, out, a.jitter)
            return out
        return run

    for name, region in region_decoders(libturbojpeg3, quiet=True).items():
        if "lossless" not in name and "pyvips" not in name:  # both slower than decoding the whole file
            ways[f"cnnbench path, region decode: {name} (not shipped)"] = ours_region(region)
    return ways


def bench_per_image(files: list[Path], rounds: int, libturbojpeg3: str | None) -> None:
    torch.set_num_threads(1)  # as in a DataLoader process
    blobs = [f.read_bytes() for f in files]
    per_image = per_image_ways(libturbojpeg3)
    ways = {name: (lambda way=way: [way(d, i) for i, d in enumerate(blobs)]) for name, way in per_image.items()}
    times = alternate(ways, rounds)
    base_wall, base_cpu = medians(times[BASELINE])
    print(f"\nPer image, one core, the whole path ({len(blobs)} JPEGs, median of {rounds} rounds):")
    width = max(map(len, times))
    print(f"{'way':<{width}} {'wall ms':>8} {'CPU ms':>8} {'vs baseline (wall)':>19} {'(CPU)':>7}")
    for name, ts in times.items():
        wall, cpu = medians(ts)
        print(f"{name:<{width}} {wall / len(blobs) * 1e3:>8.2f} {cpu / len(blobs) * 1e3:>8.2f} "
              f"{base_wall / wall:>18.2f}x {base_cpu / cpu:>6.2f}x")


# --------------------------------------------------------------------------- pipelines


class CpuWindow:
    """CPU time (user + system) of this process and its children (the loader processes) between
    :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self.processes: list[psutil.Process] = []
        self.begin = 0.0
        self.seconds = 0.0

    def _total(self) -> float:
        total = 0.0
        for p in self.processes:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total

    def start(self) -> None:
        me = psutil.Process()
        self.processes = [me, *me.children(recursive=True)]
        self.begin = self._total()

    def stop(self) -> None:
        self.seconds = self._total() - self.begin


Pipeline = Callable[[Path, int, int, int, int], tuple[float, float]]
"""``(root, workers, batch, batches, warmup) -> (images/sec, CPU seconds per image)``."""


def copied_normalise(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` with each image normalised into a temporary float image and then copied into
    its batch slot (cnnbench before 2026-11-26, later; now the map writes into a float32 NCHW
    slot itself). cnnbench forks its loader processes wherever there is fork
    (:func:`~cnnbench.data.loader.loader_start_method`), so they inherit the setting."""
    def run(root: Path, workers: int, batch: int, batches: int, warmup: int) -> tuple[float, float]:
        if workers and loader_start_method() != "fork":
            raise RuntimeError("the 'before' side needs forked loader processes (they inherit its setting)")
        previous, Normalize.straight_into_slots = Normalize.straight_into_slots, False
        try:
            return pipeline(root, workers, batch, batches, warmup)
        finally:
            Normalize.straight_into_slots = previous
    return run


def ours(root: Path, workers: int, batch: int, batches: int, warmup: int) -> tuple[float, float]:
    window = CpuWindow()

    def emit(line: str) -> None:  # the CPU window: from the end of the warm-up to the last timed batch
        if line == "Done warm up":
            window.start()
        elif line.startswith(f"{batches}\t"):
            window.stop()

    record = run_data_benchmark(DataBenchConfig(
        data_dir=str(root), distortions=True, image_size=SIZE, batch_size=batch, num_workers=workers,
        num_batches=batches, num_warmup_batches=warmup, display_every=batches, results_dir=tempfile.gettempdir()),
        emit=emit)
    if record.status != "ok":
        raise RuntimeError(record.error)
    return float(record.metrics["total_images_per_sec"]), window.seconds / int(record.metrics["images"])


def ours_uint8(root: Path, workers: int, batch: int, batches: int, warmup: int) -> tuple[float, float]:
    """cnnbench's loader as a GPU run uses it: uint8 batches (normalised later, on the GPU, which
    this machine may not have): the same source with a CUDA request, minus the copy."""
    from itertools import chain, count

    reader = open_data_set("imagefolder", str(root))
    loader = BatchLoader(reader, Preprocessing(SIZE, True), Preprocessing(SIZE, False), skip_bad_images=False,
                         jpeg_decoder=default_jpeg_decoder(), normalize=None)
    loader.share_buffers(workers)  # as DataSetSource does (no reuse where BUFFER_SLOTS is 0)
    plan = ShardPlan(reader.size("train"), 0, batch, seed=1234)
    keys = chain.from_iterable(plan.train_batches(e) for e in count())
    data = DataLoader(loader, batch_size=None, sampler=keys, num_workers=workers,  # type: ignore[arg-type]
                      persistent_workers=workers > 0, prefetch_factor=2 if workers > 0 else None)
    return _drain(iter(data), lambda b: int(b.labels.shape[0]), batches, warmup)


def plain_torchvision(root: Path, workers: int, batch: int, batches: int, warmup: int) -> tuple[float, float]:
    loader = DataLoader(datasets.ImageFolder(str(root / "train"), transform=torchvision_transform()),
                        batch_size=batch, shuffle=True, drop_last=True, num_workers=workers,
                        persistent_workers=workers > 0, prefetch_factor=2 if workers > 0 else None)
    return _drain(iter(_forever(loader)), lambda b: int(b[1].shape[0]), batches, warmup)


def _drain(it: Iterator[Any], count: Callable[[Any], int], batches: int, warmup: int) -> tuple[float, float]:
    for _ in range(warmup):
        next(it)
    window = CpuWindow()
    window.start()
    start = time.perf_counter()
    images = sum(count(next(it)) for _ in range(batches))
    wall = time.perf_counter() - start
    window.stop()
    shutdown = getattr(it, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    return images / wall, window.seconds / images


def _forever(loader: DataLoader):
    while True:
        yield from loader


SIDES: list[tuple[str, Pipeline]] = [
    ("cnnbench", ours), ("cnnbench before", copied_normalise(ours)), ("torchvision", plain_torchvision),
    ("uint8 out", ours_uint8),
]


def bench_pipelines(root: Path, workers: list[int], rounds: int, batch: int, batches: int, warmup: int) -> None:
    cores = cpu_count_available()
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for r in range(rounds):
        for w in workers:
            for name, fn in (SIDES if r % 2 == 0 else SIDES[::-1]):
                ips, cpu = fn(root, w, batch, batches, warmup)
                results.setdefault((name, w), []).append((ips, cpu))
                print(f"  round {r + 1}, {w} worker(s), {name}: {ips:.1f} images/sec, "
                      f"{cpu * 1e3:.2f} ms CPU per image", flush=True)
    print(f"\nPipelines ({batch} images per batch, {batches} timed batches after {warmup}; median of {rounds} "
          f"rounds; {cores} cores available):")
    print(f"{'workers':>7} {'side':<12} {'images/sec':>11} {'per worker':>11} {'per core':>9} {'ratio':>7} "
          f"{'CPU ms/image':>13} {'CPU ratio':>10}")
    for w in workers:
        for name, _ in SIDES:
            runs = results[(name, w)]
            ips = statistics.median(x[0] for x in runs)
            cpu = statistics.median(x[1] for x in runs)
            base = results[("torchvision", w)]
            ratio = statistics.median(a[0] / b[0] for a, b in zip(runs, base, strict=True))
            cpu_ratio = statistics.median(b[1] / a[1] for a, b in zip(runs, base, strict=True))
            shown = (f"{ratio:.2f}x", f"{cpu_ratio:.2f}x") if name != "torchvision" else ("", "")
            print(f"{w:>7} {name:<12} {ips:>11.1f} {ips / w:>11.1f} {ips / cores:>9.1f} {shown[0]:>7} "
                  f"{cpu * 1e3:>13.2f} {shown[1]:>10}")
    print("cnnbench = `cnnbench data --distortions` on the CPU (float batches, normalised and jittered in the "
          "loader processes); uint8 out = its loader as a GPU run uses it (the float work then runs on the GPU); "
          "'cnnbench before': each image normalised into a temporary, then copied into its slot (before 2026-11-26); "
          "torchvision = ImageFolder + v2 with the same colour jitter. Ratio: per round, over torchvision's of "
          "that round (CPU ratio: torchvision's CPU time per image over this side's).")


def bench_shared_memory(rounds: int, batch: int = 64) -> None:
    """Writing one batch into fresh shared memory (as each loader process does per batch) or into reused memory."""
    torch.set_num_threads(1)
    ways: dict[str, Callable[[], object]] = {}
    for dtype in (torch.float32, torch.uint8):
        numel = batch * 3 * SIZE * SIZE
        size = torch.empty(0, dtype=dtype).element_size()

        def fresh(dtype: torch.dtype = dtype, numel: int = numel, size: int = size) -> None:
            for _ in range(5):
                storage = torch.UntypedStorage._new_shared(numel * size)
                torch.empty(0, dtype=dtype).set_(storage, 0, (numel,), (1,)).fill_(1)

        reused = torch.empty(numel, dtype=dtype)
        ways[f"{str(dtype)[6:]} batch, fresh shared memory"] = fresh
        ways[f"{str(dtype)[6:]} batch, reused memory"] = lambda t=reused: [t.fill_(1) for _ in range(5)]
    times = alternate(ways, rounds)
    print(f"\nOne batch of {batch} × 3 × {SIZE} × {SIZE} written once (median of {rounds} rounds), per image:")
    for name, ts in times.items():
        wall, cpu = medians(ts)
        print(f"{name:<36} wall {wall / 5 / batch * 1e3:.3f} ms, CPU {cpu / 5 / batch * 1e3:.3f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=1000, help="JPEGs to write (10 classes).")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="DataLoader processes to compare at.")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--batches", type=int, default=15, help="Timed batches per pipeline measurement.")
    ap.add_argument("--warmup", type=int, default=8, help="Untimed batches first, every side alike: enough for "
                    "each of 2 loader processes to make its reused batch buffers (steady state) [default: 8].")
    ap.add_argument("--per-image", type=int, default=200, help="Files for the per-image comparisons (0: skip).")
    ap.add_argument("--data", help="Use (or write) the image folder here instead of a temporary one.")
    ap.add_argument("--photo-size", default="500x375", help="Size of the JPEGs written, WIDTHxHEIGHT.")
    ap.add_argument("--no-pipelines", action="store_true", help="Only the per-image comparisons.")
    ap.add_argument("--libturbojpeg3", help="A libturbojpeg.so of libjpeg-turbo 3, for the tj3SetCroppingRegion "
                                            "candidate (none is installed by cnnbench).")
    args = ap.parse_args()

    print(f"torch {torch.__version__}, simplejpeg {simplejpeg.__version__}, Pillow {Image.__version__}, "
          f"{cpu_count_available()} cores available, load average before: "
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
            bench_decoders(files[: args.per_image], args.rounds, args.libturbojpeg3)
            bench_per_image(files[: args.per_image], args.rounds, args.libturbojpeg3)
        if not args.no_pipelines:
            bench_pipelines(root, args.workers, args.rounds, args.batch_size, args.batches, args.warmup)
            bench_shared_memory(args.rounds)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
