"""Small, valid, learnable data sets for demos and tests (``cnnbench make-dataset``).

The images are generated, not photographs: each class is a shape (disc, square, triangle,
cross, ring, diamond, bar, star) in a colour of its own (hues spread by the golden ratio),
drawn at a random place and size over a random background gradient, with pixel noise on
top. A model can learn the classes (a tiny convnet does within a few epochs), which is what
training-to-accuracy tests need; the noise also gives JPEG files the detail (and the size)
of ordinary photographs.

Layouts written (the ones :mod:`cnnbench.data.layouts` reads):

* ``imagefolder``: ``DIR/train/<class>/<n>.jpg`` (or ``.png``) and ``DIR/val/<class>/...``;
* ``cifar10``: ``data_batch_1`` .. ``data_batch_5``, ``test_batch`` and ``batches.meta``,
  pickled as in the official archive (10 classes, 32 × 32);
* ``cifar100``: ``train``, ``test`` and ``meta`` (100 fine classes, 20 coarse ones, 32 × 32).

Deterministic: the same arguments write the same files. No torch here.

Arguments are checked before anything is written (:class:`GenerateOptions`: each number in
its declared range, the total within what one machine can hold), and the data set is
written into a hidden folder beside ``DIR`` that is renamed to ``DIR`` only when complete: a
failure (a full disk, Ctrl-C) leaves no partial data set behind. That folder (named at random,
``.DIR.partial-<pid>-<random>``) is made private (0700) until complete, and its folders and
files are made relative to a descriptor of it, never following a symlink
(:func:`cnnbench.results.files.open_in`): the folder beside ``DIR`` may be shared (a study's
``data/`` in a results store), and whatever someone else puts there is never written through.
"""

from __future__ import annotations

import colorsys
import contextlib
import errno
import math
import os
import pickle
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageDraw

from cnnbench.config.errors import ConfigError
from cnnbench.config.measurement_options import MAX_SEED
from cnnbench.config.options import option
from cnnbench.config.run_config import check_fields
from cnnbench.data.layouts import (
    CIFAR10_META,
    CIFAR10_TEST,
    CIFAR10_TRAIN,
    CIFAR100_META,
    CIFAR100_TEST,
    CIFAR100_TRAIN,
    TRAIN_SPLIT,
    VAL_SPLIT,
)
from cnnbench.data.layouts import GENERATED_FORMATS as FORMATS
from cnnbench.data.layouts import GENERATED_KINDS as KINDS
from cnnbench.results import files

SHAPES = ("disc", "square", "triangle", "cross", "ring", "diamond", "bar", "star")
CIFAR_CLASSES = {"cifar10": 10, "cifar100": 100}
CIFAR_SIZE = 32
NOISE = 18.0
"""Standard deviation of the pixel noise, in 0..255 levels."""


MIN_SIDE, MAX_SIDE = 8, 4096
"""Generated images' width and height, in pixels."""
MAX_CLASSES = 1000
MAX_PER_CLASS = 100_000
MAX_IMAGES = 2_000_000
"""Training and validation images together (ImageNet has 1.33 million)."""
MAX_CIFAR_IMAGES = 200_000
"""CIFAR batches are made in memory (3 KiB per image); the official sets hold 60,000."""
MAX_RAW_BYTES = 2**40
"""Uncompressed pixels over the whole data set (ImageNet at 500 x 375 is about 0.7 TiB)."""
BYTES_PER_PIXEL_BYTE = {"jpeg": 0.2, "png": 1.0}
"""What one uncompressed byte costs on disk, about (the noise keeps PNG near raw size)."""


class GenerateError(ValueError):
    """Arguments that cannot make a data set (one line)."""


@dataclass(frozen=True)
class GenerateOptions:
    """What ``cnnbench make-dataset`` writes; checked when made (ranges declared with each field)."""

    kind: str = option("imagefolder", "Layout to write.", choices=KINDS)
    num_classes: int | None = option(None, "Classes (imagefolder).", minimum=1, maximum=MAX_CLASSES)
    images_per_class: int = option(20, "Training images per class.", minimum=1, maximum=MAX_PER_CLASS)
    val_images_per_class: int | None = option(None, "Validation images per class.", minimum=0,
                                              maximum=MAX_PER_CLASS)
    width: int | None = option(None, "Image width (imagefolder).", minimum=MIN_SIDE, maximum=MAX_SIDE)
    height: int | None = option(None, "Image height (imagefolder).", minimum=MIN_SIDE, maximum=MAX_SIDE)
    image_format: str = option("jpeg", "File format (imagefolder).", choices=FORMATS)
    quality: int = option(90, "JPEG quality.", minimum=1, maximum=100)
    seed: int = option(0, "Random seed.", minimum=0, maximum=MAX_SEED)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.kind == "imagefolder":
            return self._check_total(MAX_IMAGES)
        fixed = CIFAR_CLASSES[self.kind]
        if self.num_classes not in (None, fixed):
            raise ConfigError("num_classes", f"{self.kind} has {fixed} classes by definition (got {self.num_classes})")
        if (self.width, self.height) not in ((None, None), (CIFAR_SIZE, CIFAR_SIZE)):
            raise ConfigError("image_size", f"{self.kind} images are {CIFAR_SIZE} × {CIFAR_SIZE} by definition")
        if self.image_format != "jpeg":
            raise ConfigError("image_format", f"applies to imagefolder ({self.kind} stores raw pixels)")
        self._check_total(MAX_CIFAR_IMAGES)

    def _check_total(self, most: int) -> None:
        images = self.classes() * (self.images_per_class + self.val_per_class())
        if images > most:
            raise ConfigError("images_per_class", f"{self.classes():,} classes x ({self.images_per_class:,} + "
                                                  f"{self.val_per_class():,} validation) images per class is "
                                                  f"{images:,} images; {self.kind} makes at most {most:,}")
        if self.raw_bytes() > MAX_RAW_BYTES:
            raise ConfigError("image_size", f"{images:,} images of {self.size()[0]} x {self.size()[1]} px are "
                                            f"{self.raw_bytes() / 2**40:.1f} TiB of pixels; at most 1 TiB")

    def classes(self) -> int:
        return self.num_classes or (CIFAR_CLASSES.get(self.kind) or 10)

    def val_per_class(self) -> int:
        return max(1, self.images_per_class // 5) if self.val_images_per_class is None else self.val_images_per_class

    def size(self) -> tuple[int, int]:
        if self.kind != "imagefolder":
            return CIFAR_SIZE, CIFAR_SIZE
        return self.width or 64, self.height or self.width or 64

    def raw_bytes(self) -> int:
        width, height = self.size()
        return self.classes() * (self.images_per_class + self.val_per_class()) * width * height * 3

    def disk_bytes(self) -> int:
        """About what the files take on disk."""
        share = BYTES_PER_PIXEL_BYTE[self.image_format] if self.kind == "imagefolder" else 1.0
        return int(self.raw_bytes() * share)


@dataclass(frozen=True)
class Generated:
    """What :func:`make_data_set` wrote."""

    kind: str
    root: str
    num_classes: int
    train_images: int
    val_images: int
    bytes_written: int


def class_names(num_classes: int) -> list[str]:
    return [f"{c:03d}_{SHAPES[c % len(SHAPES)]}" for c in range(num_classes)]


def draw_image(label: int, width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """One ``height × width × 3`` uint8 image of class ``label``."""
    hue = (label * 0.6180339887) % 1.0
    shape = SHAPES[label % len(SHAPES)]
    # background: a gradient between two random muted colours
    c0, c1 = (np.array(colorsys.hsv_to_rgb(rng.random(), rng.uniform(0, 0.35), rng.uniform(0.2, 0.9))) * 255
              for _ in range(2))
    t = np.linspace(0.0, 1.0, width if rng.random() < 0.5 else height, dtype=np.float32)
    ramp = t[None, :, None] if t.shape[0] == width else t[:, None, None]
    background = (c0 * (1 - ramp) + c1 * ramp).astype(np.float32)
    image = Image.fromarray(np.broadcast_to(background, (height, width, 3)).astype(np.uint8))
    # the class: its shape in its colour, at a random place and size
    colour = tuple(int(v * 255) for v in colorsys.hsv_to_rgb((hue + rng.uniform(-0.02, 0.02)) % 1.0,
                                                             rng.uniform(0.75, 1.0), rng.uniform(0.75, 1.0)))
    side = min(width, height)
    radius = side * rng.uniform(0.2, 0.35)
    cx = rng.uniform(radius, width - radius)
    cy = rng.uniform(radius, height - radius)
    _draw_shape(ImageDraw.Draw(image), shape, cx, cy, radius, colour, rng.uniform(0, math.pi / 8))
    pixels = np.asarray(image, dtype=np.float32)
    pixels += rng.standard_normal(pixels.shape, dtype=np.float32) * NOISE
    return np.clip(pixels, 0, 255).astype(np.uint8)


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float,
                colour: tuple[int, ...], turn: float) -> None:
    def polygon(points: int, radius: float, start: float) -> list[tuple[float, float]]:
        return [(cx + radius * math.cos(start + turn + 2 * math.pi * k / points),
                 cy + radius * math.sin(start + turn + 2 * math.pi * k / points)) for k in range(points)]

    fill = tuple(colour)
    if shape == "disc":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif shape == "square":
        draw.polygon(polygon(4, r * 1.2, math.pi / 4), fill=fill)
    elif shape == "triangle":
        draw.polygon(polygon(3, r * 1.2, -math.pi / 2), fill=fill)
    elif shape == "cross":
        w = r * 0.35
        draw.rectangle([cx - r, cy - w, cx + r, cy + w], fill=fill)
        draw.rectangle([cx - w, cy - r, cx + w, cy + r], fill=fill)
    elif shape == "ring":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=fill, width=max(1, int(r * 0.35)))
    elif shape == "diamond":
        draw.polygon(polygon(4, r * 1.2, 0.0), fill=fill)
    elif shape == "bar":
        draw.rectangle([cx - r, cy - r * 0.3, cx + r, cy + r * 0.3], fill=fill)
    else:  # star
        points = []
        for k in range(10):
            radius = r * (1.2 if k % 2 == 0 else 0.5)
            angle = turn - math.pi / 2 + math.pi * k / 5
            points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
        draw.polygon(points, fill=fill)


def parse_size(text: str) -> tuple[int, int]:
    """``64`` -> (64, 64); ``500x375`` -> (500, 375) (width × height). The range is
    :class:`GenerateOptions`' to check."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise GenerateError(f"--image-size: expected PX or WIDTHxHEIGHT, got {text!r}") from None
    if len(values) == 1:
        values *= 2
    if len(values) != 2:
        raise GenerateError(f"--image-size: expected PX or WIDTHxHEIGHT, got {text!r}")
    return values[0], values[1]


def generate_options(kind: str, *, num_classes: int | None = None, images_per_class: int = 20,
                     val_images_per_class: int | None = None, image_size: tuple[int, int] | None = None,
                     image_format: str = "jpeg", quality: int = 90, seed: int = 0) -> GenerateOptions:
    """The arguments of :func:`make_data_set`, checked: :class:`GenerateError` (one line naming the
    flag) for arguments that cannot make a data set. A study checks its ``make_dataset`` so, when its
    file is read, before any folder is made."""
    width, height = image_size if image_size is not None else (None, None)
    try:
        return GenerateOptions(kind=kind, num_classes=num_classes, images_per_class=images_per_class,
                               val_images_per_class=val_images_per_class, width=width, height=height,
                               image_format=image_format, quality=quality, seed=seed)
    except ConfigError as exc:
        flag = _FLAGS.get(exc.field, exc.flag)
        reason = f"{exc.field} {exc.reason}" if exc.field in ("width", "height") else exc.reason
        raise GenerateError(f"{flag}: {reason}") from None


def make_data_set(kind: str, out_dir: str | os.PathLike[str], *, num_classes: int | None = None,
                  images_per_class: int = 20, val_images_per_class: int | None = None,
                  image_size: tuple[int, int] | None = None, image_format: str = "jpeg", quality: int = 90,
                  seed: int = 0, inside: str | os.PathLike[str] | None = None) -> Generated:
    """Write a data set of ``kind`` into ``out_dir`` (which must be empty or absent); raises
    :class:`GenerateError` before writing anything for arguments that cannot make one.
    ``inside``: a folder (a results store) of which ``out_dir`` and its folder are cnnbench's own
    folders: each must be a real folder there, never a symlink (:class:`~cnnbench.results.files.
    LinkedFolder`); default: ``out_dir``, as given, is the user's choice."""
    opts = generate_options(kind, num_classes=num_classes, images_per_class=images_per_class,
                            val_images_per_class=val_images_per_class, image_size=image_size,
                            image_format=image_format, quality=quality, seed=seed)
    root = Path(out_dir) if inside is not None else Path(out_dir).expanduser()  # a store's path is literal
    home, names = (root.parent, ()) if inside is None else (Path(inside), root.parent.relative_to(inside).parts)
    if inside is not None:
        files.check_folders(home, *names, root.name)
    _check_destination(root, opts)
    created = _first_missing(root.parent)
    parent = files.open_folder(home, *names, make=True)
    partial = None
    published = False
    try:
        partial, folder = _make_partial(parent, root)
        written = _write(opts, folder, root.parent / partial)
        _publish(parent, partial, folder, root)
        published = True  # from here on the folder is the data set's: never emptied on an error
        _check_published(parent, folder, root)
    except BaseException:
        if partial is not None and not published:
            _remove(parent, partial, folder)
        if created is not None:
            _remove_empty(root.parent, created)
        raise
    finally:
        os.close(parent)
        if partial is not None:
            os.close(folder)
    return Generated(kind, str(root.resolve()), opts.classes(), opts.classes() * images_per_class,
                     opts.classes() * opts.val_per_class(), written)


_FLAGS = {"width": "--image-size", "height": "--image-size", "image_format": "--format"}
"""Fields of :class:`GenerateOptions` that ``cnnbench make-dataset`` spells otherwise."""


def _partial_name(root: Path) -> str:
    """A name for the folder the data set is written in, beside ``root``: hidden, and drawn at random."""
    return f".{root.name}.partial-{os.getpid()}-{secrets.token_hex(6)}"


def _make_partial(parent: int, root: Path) -> tuple[str, int]:
    """A new private (0700) folder beside ``root`` in the folder open as ``parent``, never one already
    there (nor a link): its name, and a descriptor of it (opened without following a link)."""
    for _ in range(100):
        name = _partial_name(root)
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            continue
        try:
            return name, _subfolder(parent, name, root.parent / name, make=False)
        except BaseException:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=parent)
            raise
    raise FileExistsError(errno.EEXIST, "no unused temporary name", os.fspath(root.parent))


def _remove(parent: int, name: str, folder: int) -> None:
    """Our folder, open as ``folder``, emptied through that descriptor (never following a link),
    and its name ``name`` in the folder open as ``parent`` removed only while it is still ours:
    the name itself is never opened (something put in its place, a FIFO, would block the open);
    errors ignored."""
    with contextlib.suppress(OSError):
        for _, dirs, names, fd in os.fwalk(".", topdown=False, dir_fd=folder):
            for entry in (*dirs, *names):
                with contextlib.suppress(OSError):
                    if stat.S_ISDIR(os.stat(entry, dir_fd=fd, follow_symlinks=False).st_mode):
                        os.rmdir(entry, dir_fd=fd)
                    else:
                        os.unlink(entry, dir_fd=fd)
        if _same(os.fstat(folder), os.stat(name, dir_fd=parent, follow_symlinks=False)):
            os.rmdir(name, dir_fd=parent)


def _same(mine: os.stat_result, there: os.stat_result) -> bool:
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _remove_empty(folder: Path, created: Path) -> None:
    """The folders this call made, ``folder`` up to ``created``, removed while empty (another
    process may be making a data set in them too); errors ignored."""
    for path in (folder, *folder.parents):
        try:
            path.rmdir()
        except OSError:
            return
        if path == created:
            return


def _subfolder(dir_fd: int, name: str, path: Path, *, make: bool = True) -> int:
    """A descriptor of folder ``name`` in the folder open as ``dir_fd`` (made with ``make``),
    opened without following a symlink (:class:`~cnnbench.results.files.LinkedFolder`)."""
    if make:
        os.mkdir(name, 0o777, dir_fd=dir_fd)
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        raise files.LinkedFolder(path, os.path.realpath(path), path.parent) from None


def _publish(parent: int, partial: str, folder: int, root: Path) -> None:
    """The finished folder ``partial`` (open as ``folder``) renamed to ``root`` in the folder open as
    ``parent`` (the whole data set appears at once, over an empty folder too), readable as a folder
    made by ``mkdir`` is; refused if something else has taken ``partial``'s name meanwhile."""
    mine, there = os.fstat(folder), os.stat(partial, dir_fd=parent, follow_symlinks=False)
    if not _same(mine, there) or not stat.S_ISDIR(there.st_mode):
        raise files.FileProblem(errno.EEXIST, root.parent / partial, "was replaced while the data set was written "
                                "there (someone else's? nothing was published)")
    mask = os.umask(0o022)
    os.umask(mask)
    os.fchmod(folder, (mine.st_mode & 0o7000) | (0o777 & ~mask))  # a set-group-ID bit mkdir gave stays
    os.replace(partial, root.name, src_dir_fd=parent, dst_dir_fd=parent)


def _check_published(parent: int, folder: int, root: Path) -> None:
    """``root`` (in the folder open as ``parent``) is the folder just published (open as ``folder``)."""
    if not _same(os.fstat(folder), os.stat(root.name, dir_fd=parent, follow_symlinks=False)):
        raise files.FileProblem(errno.EEXIST, root, "was replaced as soon as the data set was published there "
                                "(someone else's? check what it holds)")


def _write(opts: GenerateOptions, folder: int, root: Path) -> int:
    """Write the data set into the folder open as ``folder`` (``root``: its path, for messages)."""
    rng = np.random.default_rng(opts.seed)
    if opts.kind == "imagefolder":
        width, height = opts.size()
        return _write_image_folder(folder, root, opts.classes(), opts.images_per_class, opts.val_per_class(),
                                   width, height, opts.image_format, opts.quality, rng)
    return _write_cifar(opts.kind, folder, root, opts.images_per_class, opts.val_per_class(), rng)


def _new_file(dir_fd: int, name: str, path: Path) -> BinaryIO:
    """A new file ``name`` in the folder open as ``dir_fd``, open for writing (``O_EXCL``, never
    through a link: :func:`cnnbench.results.files.open_in`)."""
    return os.fdopen(files.open_in(dir_fd, name, os.O_WRONLY, path, fresh=True), "wb")


def _check_destination(root: Path, opts: GenerateOptions) -> None:
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise GenerateError(f"{root} exists and is not an empty folder (nothing was written)")
    existing = next((p for p in [root, *root.parents] if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise GenerateError(f"{existing} is a file, not a folder (nothing was written)")
    if existing is not None:
        free = shutil.disk_usage(existing).free
        if opts.disk_bytes() > free:
            from cnnbench.words import sizes

            needed, available = sizes(opts.disk_bytes(), free)
            raise GenerateError(f"{root}: the data set needs about {needed}, and only {available} are free there "
                                "(nothing was written)")


def _first_missing(folder: Path) -> Path | None:
    """The outermost folder of ``folder``'s path that does not exist yet (None if all do)."""
    missing = None
    for p in [folder, *folder.parents]:
        if p.exists():
            break
        missing = p
    return missing


def _write_image_folder(dir_fd: int, root: Path, num_classes: int, per_class: int, val_per_class: int, width: int,
                        height: int, image_format: str, quality: int, rng: np.random.Generator) -> int:
    names = class_names(num_classes)
    suffix = ".jpg" if image_format == "jpeg" else ".png"
    options = {"quality": quality} if image_format == "jpeg" else {"compress_level": 1}
    written = 0
    for split, count in ((TRAIN_SPLIT, per_class), (VAL_SPLIT, val_per_class)):
        if count == 0:
            continue
        split_fd = _subfolder(dir_fd, split, root / split)
        try:
            for label, name in enumerate(names):
                class_fd = _subfolder(split_fd, name, root / split / name)
                try:
                    for n in range(count):
                        file = f"{n:05d}{suffix}"
                        with _new_file(class_fd, file, root / split / name / file) as f:
                            Image.fromarray(draw_image(label, width, height, rng)).save(
                                f, format=image_format.upper(), **options)
                            written += f.tell()
                finally:
                    os.close(class_fd)
        finally:
            os.close(split_fd)
    return written


def _write_cifar(kind: str, dir_fd: int, root: Path, per_class: int, val_per_class: int,
                 rng: np.random.Generator) -> int:
    classes = CIFAR_CLASSES[kind]
    names = class_names(classes)

    def split(count: int, title: str) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
        labels = rng.permutation(np.repeat(np.arange(classes), count))
        images = np.stack([draw_image(int(c), CIFAR_SIZE, CIFAR_SIZE, rng) for c in labels]) if labels.size else \
            np.zeros((0, CIFAR_SIZE, CIFAR_SIZE, 3), np.uint8)
        rows = images.transpose(0, 3, 1, 2).reshape(len(labels), -1)  # R, G, B planes, row after row
        files = [f"{title}_{i:05d}.png".encode() for i in range(len(labels))]
        return rows, labels, files

    def batch(title: str, rows: np.ndarray, labels: np.ndarray, files: list[bytes]) -> dict[bytes, object]:
        out: dict[bytes, object] = {b"batch_label": title.encode(), b"data": rows, b"filenames": files}
        if kind == "cifar10":
            out[b"labels"] = labels.tolist()
        else:
            out[b"fine_labels"] = labels.tolist()
            out[b"coarse_labels"] = (labels // 5).tolist()
        return out

    written = 0

    def dump(name: str, value: object) -> None:
        nonlocal written
        with _new_file(dir_fd, name, root / name) as f:
            pickle.dump(value, f, protocol=2)
            written += f.tell()

    train_rows, train_labels, train_files = split(per_class, "train")
    test_rows, test_labels, test_files = split(val_per_class, "test")
    if kind == "cifar10":
        parts = np.array_split(np.arange(len(train_labels)), len(CIFAR10_TRAIN))
        for i, (name, part) in enumerate(zip(CIFAR10_TRAIN, parts, strict=True)):
            dump(name, batch(f"training batch {i + 1} of 5", train_rows[part], train_labels[part],
                             [train_files[j] for j in part]))
        dump(CIFAR10_TEST, batch("testing batch 1 of 1", test_rows, test_labels, test_files))
        dump(CIFAR10_META, {b"label_names": [n.encode() for n in names], b"num_vis": 3072,
                            b"num_cases_per_batch": len(parts[0])})
    else:
        dump(CIFAR100_TRAIN, batch("training batch 1 of 1", train_rows, train_labels, train_files))
        dump(CIFAR100_TEST, batch("testing batch 1 of 1", test_rows, test_labels, test_files))
        dump(CIFAR100_META, {b"fine_label_names": [n.encode() for n in names],
                             b"coarse_label_names": [f"group_{i:02d}".encode() for i in range(20)]})
    return written
