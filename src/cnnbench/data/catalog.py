"""Opening the data set a configuration names: one reader per folder and process.

:func:`open_data_set` returns the reader of ``imagefolder``, ``cifar10`` or ``cifar100``
(listing the files, or loading the CIFAR batches, once per process: the checks made when a
run is resolved and the input source then share it). :func:`data_set_facts` is what the
checks before a run need: the name (guessed when not given), the split sizes and the
number of classes. Errors are :class:`~cnnbench.data.layouts.DataSetError`, one line each.
No torch here.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Protocol

from cnnbench.data.layouts import TRAIN_SPLIT, VAL_SPLIT, DataSetError, guess_data_name


class DataSetReader(Protocol):
    """What the input pipeline needs of a data set (:class:`ImageFolderReader`, :class:`CifarReader`)."""

    root: str
    classes: list[str]

    @property
    def num_classes(self) -> int: ...

    def size(self, split: str) -> int: ...

    def has(self, split: str) -> bool: ...

    def path(self, split: str, index: int) -> str:
        """Where image ``index`` of ``split`` comes from, for messages."""
        ...

    def label(self, split: str, index: int) -> int: ...


@dataclass(frozen=True)
class DataSetFacts:
    name: str
    root: str
    """The folder that holds the files (absolute)."""
    train_size: int
    val_size: int
    num_classes: int


def data_set_name(data_name: str | None, data_dir: str) -> str:
    """``data_name``, or the one guessed from the folder when it is ``None``."""
    return data_name if data_name is not None else guess_data_name(data_dir)


def open_data_set(data_name: str, data_dir: str) -> DataSetReader:
    """The reader of ``data_name`` in ``data_dir`` (the same object for the same folder in one process)."""
    return _open(data_name, os.path.abspath(os.path.expanduser(data_dir)))


@functools.lru_cache(maxsize=4)
def _open(data_name: str, data_dir: str) -> DataSetReader:
    if data_name == "imagefolder":
        from cnnbench.data.imagefolder import ImageFolderReader

        return ImageFolderReader(data_dir)
    if data_name in ("cifar10", "cifar100"):
        from cnnbench.data.cifar import CifarReader

        return CifarReader(data_name, data_dir)
    raise DataSetError(f"unknown data set {data_name!r} (known: imagefolder, cifar10, cifar100)")


def data_set_facts(data_name: str | None, data_dir: str) -> DataSetFacts:
    """Name, folder, split sizes and classes of the data set in ``data_dir`` (raises DataSetError)."""
    name = data_set_name(data_name, data_dir)
    reader = open_data_set(name, data_dir)
    if not reader.has(TRAIN_SPLIT):
        raise DataSetError(f"{reader.root}: the training split holds no image")
    return DataSetFacts(name, reader.root, reader.size(TRAIN_SPLIT), reader.size(VAL_SPLIT), reader.num_classes)
