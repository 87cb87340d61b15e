"""Reading CIFAR-10 and CIFAR-100 from the python pickle batches of the official archives.

Each batch file is a pickled dict: ``data`` (N × 3072 uint8: the red, green and blue
32 × 32 planes of each image, row after row), ``labels`` (CIFAR-10) or ``fine_labels``
(CIFAR-100, whose 100 classes are the ones used), and ``batch_label``/``filenames``. The
class names come from ``batches.meta`` / ``meta`` when present. The whole set is held in
memory as one ``N × 3 × 32 × 32`` uint8 array per split (150 MB for CIFAR's 60,000 images);
DataLoader workers share it (forked processes). Unlike torchvision, the files are read with a
restricted unpickler (:mod:`cnnbench.data.safe_pickle`): a batch that names any global other
than numpy's array reconstructors is refused, naming the file, before anything in it runs.
No torch here.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cnnbench.data.layouts import (
    CIFAR10_META,
    CIFAR100_META,
    TRAIN_SPLIT,
    VAL_SPLIT,
    DataSetError,
    cifar_files,
    locate,
)
from cnnbench.data.safe_pickle import ForbiddenGlobal, safe_load

CIFAR_SIZE = 32
NUM_CLASSES = {"cifar10": 10, "cifar100": 100}


@dataclass(frozen=True)
class CifarSplit:
    images: np.ndarray
    """uint8, N × 3 × 32 × 32."""
    labels: np.ndarray
    """int64, N."""
    files: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.labels.shape[0])


class CifarReader:
    """Both splits of a CIFAR archive in memory; ``image(split, i)`` is a 3 × 32 × 32 uint8 array."""

    def __init__(self, data_name: str, data_dir: str) -> None:
        root = locate(data_name, data_dir)
        self.root = str(root)
        files = cifar_files(data_name)
        *train, test = (root / f for f in files)
        self.splits = {TRAIN_SPLIT: load_split(train, data_name), VAL_SPLIT: load_split([test], data_name)}
        self.classes = _class_names(root, data_name)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def size(self, split: str) -> int:
        return len(self.splits[split])

    def has(self, split: str) -> bool:
        return self.size(split) > 0

    def path(self, split: str, index: int) -> str:
        part = self.splits[split]
        return f"{self.root}/{','.join(part.files)}[{index}]"

    def label(self, split: str, index: int) -> int:
        return int(self.splits[split].labels[index])

    def image(self, split: str, index: int) -> np.ndarray:
        return self.splits[split].images[index]


def _whole_numbers(value: Any, path: Path, key: str, dtype: type[np.integer[Any]]) -> np.ndarray:
    """``value`` (a batch's ``key``) as an array of ``dtype``; a :class:`DataSetError` naming the
    file where it holds anything but whole numbers that ``dtype`` holds (text, nested lists of
    several lengths, objects, a number too big), never wrapped around nor a traceback."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise DataSetError(f"{path}: {key} is no array of whole numbers ({str(exc).splitlines()[0]})") from None
    if array.size == 0:
        return array.astype(dtype)
    if array.dtype.kind not in "iu":
        raise DataSetError(f"{path}: {key} is no array of whole numbers (it holds {array.dtype})")
    most = np.iinfo(dtype)
    if array.min() < most.min or array.max() > most.max:
        raise DataSetError(f"{path}: {key} holds values outside {most.min}..{most.max}")
    return array.astype(dtype, copy=False)


def load_split(paths: list[Path], data_name: str) -> CifarSplit:
    """The images and labels of the batch files ``paths``, in order."""
    images, labels = [], []
    for path in paths:
        batch = _unpickle(path)
        data = _field(batch, "data", path)
        key = "labels" if data_name == "cifar10" else "fine_labels"
        values = _whole_numbers(_field(batch, key, path), path, key, np.int64)
        array = _whole_numbers(data, path, "data", np.uint8)
        if array.ndim != 2 or array.shape[1] != 3 * CIFAR_SIZE * CIFAR_SIZE or array.shape[0] != values.shape[0]:
            raise DataSetError(f"{path}: expected {key} and data of N × 3072 bytes (32 × 32 RGB), "
                               f"got data {array.shape} and {values.shape[0]} labels")
        if values.size and (values.min() < 0 or values.max() >= NUM_CLASSES[data_name]):
            raise DataSetError(f"{path}: labels outside 0..{NUM_CLASSES[data_name] - 1}")
        images.append(array.reshape(-1, 3, CIFAR_SIZE, CIFAR_SIZE))
        labels.append(values)
    return CifarSplit(np.concatenate(images), np.concatenate(labels), tuple(p.name for p in paths))


def _unpickle(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = safe_load(f, encoding="bytes")  # the official files were written by Python 2
    except ForbiddenGlobal as exc:
        raise DataSetError(f"{path}: not a CIFAR python batch, and not loaded: {exc}") from None
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError, ImportError) as exc:
        raise DataSetError(f"{path}: not a CIFAR python batch ({type(exc).__name__}: {exc})") from None
    if not isinstance(raw, dict):
        raise DataSetError(f"{path}: not a CIFAR python batch (a {type(raw).__name__}, not a dict)")
    return {(k.decode("latin1") if isinstance(k, bytes) else str(k)): v for k, v in raw.items()}


def _field(batch: dict[str, Any], key: str, path: Path) -> Any:
    if key not in batch:
        raise DataSetError(f"{path}: no {key!r} in this batch (keys: {', '.join(sorted(batch))})")
    return batch[key]


def _class_names(root: Path, data_name: str) -> list[str]:
    count = NUM_CLASSES[data_name]
    meta, key = (root / CIFAR10_META, "label_names") if data_name == "cifar10" else (root / CIFAR100_META,
                                                                                      "fine_label_names")
    if meta.is_file():
        names = _unpickle(meta).get(key)
        if isinstance(names, list) and len(names) == count:
            return [n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n) for n in names]
    return [f"class_{i}" for i in range(count)]
