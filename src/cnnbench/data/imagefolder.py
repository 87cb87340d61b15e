"""Reading an image folder in the ImageNet layout: the file list of each split, and the files.

Classes are the folder names of ``train/``, sorted; their index is the label (as
torchvision's ``ImageFolder`` numbers them). ``val/`` must use the same folder names (a
class missing from ``val/`` is fine; one unknown to ``train/`` is an error). Files are
listed with ``os.scandir`` once per process and split (cached), sorted by name, so every
worker of a run sees the same order. Reading returns the file's bytes; decoding is
:mod:`cnnbench.data.decode`'s work. No torch here.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cnnbench.data.layouts import (
    IMAGE_EXTENSIONS,
    TRAIN_SPLIT,
    VAL_SPLIT,
    DataSetError,
    class_folders,
    image_entries,
    locate,
)
from cnnbench.results.files import read_regular

MAX_IMAGE_BYTES = 256 << 20
"""The largest image file read: far above any photograph's JPEG, and a file of gigabytes named like
an image (a disk image, a truncated-to-size placeholder) is a bad image named as such, never read
into memory whole."""


@dataclass(frozen=True)
class ImageList:
    """The images of one split: paths (relative to the split's folder) and labels."""

    folder: str
    paths: list[str]
    labels: np.ndarray
    """int64, one per path."""
    special: tuple[int, ...] = ()
    """The indexes of the paths that were no regular file when listed (a FIFO, a link to nothing):
    bad images, which a pipeline that opens files itself (DALI) names before it opens any."""

    def __len__(self) -> int:
        return len(self.paths)


class ImageFolderReader:
    """The train and val splits of an image folder; ``read(split, i)`` gives (bytes, label, path)."""

    def __init__(self, data_dir: str) -> None:
        root = locate("imagefolder", data_dir)
        self.root = str(root)
        self.classes = class_folders(root / TRAIN_SPLIT)
        self.splits: dict[str, ImageList] = {TRAIN_SPLIT: list_split(self.root, TRAIN_SPLIT, tuple(self.classes))}
        _refuse_empty_classes(root / TRAIN_SPLIT, self.classes, self.splits[TRAIN_SPLIT].labels)
        if (root / VAL_SPLIT).is_dir():
            self.splits[VAL_SPLIT] = list_split(self.root, VAL_SPLIT, tuple(self.classes))

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def size(self, split: str) -> int:
        return len(self.splits[split]) if split in self.splits else 0

    def has(self, split: str) -> bool:
        return self.size(split) > 0

    def path(self, split: str, index: int) -> str:
        images = self.splits[split]
        return os.path.join(images.folder, images.paths[index])

    def special(self, split: str) -> tuple[int, ...]:
        """The indexes of the split's entries that were no regular file when listed (:class:`ImageList`)."""
        return self.splits[split].special if split in self.splits else ()

    def label(self, split: str, index: int) -> int:
        return int(self.splits[split].labels[index])

    def read(self, split: str, index: int) -> bytes:
        """The bytes of an image file: a regular file (a FIFO put in its place is named, never
        waited on) of at most :data:`MAX_IMAGE_BYTES`; an ``OSError`` saying why otherwise."""
        return read_regular(self.path(split, index), MAX_IMAGE_BYTES)


def _refuse_empty_classes(train: Path, classes: list[str], labels: np.ndarray) -> None:
    """:class:`DataSetError` naming a class folder of ``train/`` that holds no image: a class the run
    would count (its model's outputs) and never read, as torchvision's ``ImageFolder`` refuses it
    too. ``val/`` may lack a class's images."""
    empty = np.flatnonzero(np.bincount(labels, minlength=len(classes)) == 0)
    if len(empty):
        more = f" (and {len(empty) - 1} more)" if len(empty) > 1 else ""
        raise DataSetError(f"{train / classes[int(empty[0])]}: class folder holds no image{more}: every class of "
                           f"train/ needs images ({', '.join(IMAGE_EXTENSIONS)}); add them or remove the folder")


@functools.lru_cache(maxsize=8)
def list_split(root: str, split: str, classes: tuple[str, ...]) -> ImageList:
    """Every image of ``root/split/<class>/``, labelled by the class's index in ``classes``."""
    folder = Path(root) / split
    index = {name: i for i, name in enumerate(classes)}
    paths: list[str] = []
    labels: list[int] = []
    special: list[int] = []
    for name in class_folders(folder):
        if name not in index:
            raise DataSetError(f"{folder / name}: class {name!r} is not one of train/'s {len(classes)} classes")
        for f, regular in image_entries(folder / name):
            if not regular:
                special.append(len(paths))
            paths.append(f"{name}/{f}")
            labels.append(index[name])
    return ImageList(str(folder), paths, np.asarray(labels, dtype=np.int64), tuple(special))
