"""The data set layouts cnnbench reads, and guessing which one a folder holds.

* ``imagefolder`` (the ImageNet layout): ``DIR/train/<class>/*.jpg|jpeg|png`` and
  ``DIR/val/<class>/...`` (the validation images sorted into the same class folders).
* ``cifar10``: the python pickle batches of the official archive, ``data_batch_1`` ..
  ``data_batch_5`` and ``test_batch`` (with ``batches.meta``), in DIR or in
  ``DIR/cifar-10-batches-py`` (the archive extracted as it comes).
* ``cifar100``: ``train`` and ``test`` (with ``meta``), in DIR or ``DIR/cifar-100-python``.

:func:`locate` finds where the files of a named data set are, or says in one line
(:class:`DataSetError`) what it expected; :func:`guess_data_name` names the layout a folder
holds. Only names are listed here (no image is opened), and nothing imports torch.
"""

from __future__ import annotations

import os
from pathlib import Path

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
GENERATED_KINDS = ("imagefolder", "cifar10", "cifar100")
"""The layouts ``cnnbench make-dataset`` writes (:mod:`cnnbench.data.generate`)."""
GENERATED_FORMATS = ("jpeg", "png")
"""The image formats it writes for ``imagefolder``. Named here, where nothing imports numpy, so
that building the command line does not."""
TRAIN_SPLIT, VAL_SPLIT = "train", "val"
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = "test_batch"
CIFAR10_META = "batches.meta"
CIFAR100_TRAIN, CIFAR100_TEST, CIFAR100_META = "train", "test", "meta"
ARCHIVE_FOLDERS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}

EXPECTED = {
    "imagefolder": "train/<class>/*.jpg|jpeg|png (the ImageNet layout, with val/<class>/... beside it)",
    "cifar10": "CIFAR-10's python batches data_batch_1..5 and test_batch (or the folder cifar-10-batches-py)",
    "cifar100": "CIFAR-100's python files train and test (or the folder cifar-100-python)",
}


class DataSetError(ValueError):
    """A data folder that does not hold what was expected (one line, naming the folder)."""


def is_image_file(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def entry_is(entry: os.DirEntry[str], kind: str) -> bool:
    """Whether a listed entry is a ``"file"`` or a ``"dir"`` (following symlinks); one that
    cannot be looked at (a symlink loop) is a :class:`DataSetError` naming it."""
    try:
        return entry.is_file() if kind == "file" else entry.is_dir()
    except OSError as exc:
        raise DataSetError(f"{entry.path}: cannot be read ({exc.strerror or exc}); remove it or fix the link") \
            from None


def scan(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of ``folder``; one it cannot list (no permission, a path too long) is a
    :class:`DataSetError` naming it."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError as exc:
        raise DataSetError(f"{folder}: cannot be read ({exc.strerror or exc})") from None


def image_files(folder: Path) -> list[str]:
    """The names of the image files of a class folder, sorted (see :func:`image_entries`)."""
    return [name for name, _ in image_entries(folder)]


def image_entries(folder: Path) -> list[tuple[str, bool]]:
    """Each entry of a class folder named as an image that is not a folder, sorted by name, and whether
    it is a regular file. One that is not (a FIFO, a socket, a device, a link to one or to nothing)
    is listed, never passed over in silence: reading it names it as a bad image, never waiting on it,
    and ``--skip-bad-images`` skips and counts it as any image that cannot be decoded. A hidden one
    that is no regular file (an editor's lock link, ``.#1.jpg``) is passed over; a symlink loop that
    is not hidden is a :class:`DataSetError` naming it."""
    entries = []
    for e in scan(folder):
        if not is_image_file(e.name):
            continue
        if e.name.startswith("."):
            try:
                if e.is_file():
                    entries.append((e.name, True))
            except OSError:
                pass
        elif entry_is(e, "file"):
            entries.append((e.name, True))
        elif not entry_is(e, "dir"):
            entries.append((e.name, False))
    return sorted(entries)


def guess_data_name(data_dir: str | os.PathLike[str]) -> str:
    """``imagefolder``, ``cifar10`` or ``cifar100``, from the folder's contents."""
    root = _existing_folder(data_dir)
    for name in ("cifar10", "cifar100"):
        if _cifar_root(name, root) is not None:
            return name
    if _class_folders(root / TRAIN_SPLIT):
        return "imagefolder"
    _refuse_a_part(root)
    what = "is empty" if not any(root.iterdir()) else "holds no data set I know"
    raise DataSetError(f"{root} {what}: expected one of: " + "; ".join(EXPECTED.values()))


def locate(data_name: str, data_dir: str | os.PathLike[str]) -> Path:
    """The folder that holds the files of ``data_name`` under ``data_dir`` (checked by name only)."""
    root = _existing_folder(data_dir)
    if data_name == "imagefolder":
        train = root / TRAIN_SPLIT
        if not train.is_dir():
            _refuse_a_part(root)
            raise DataSetError(f"{root} has no train/ folder: expected {EXPECTED['imagefolder']}")
        if not _class_folders(train):
            raise DataSetError(f"{train} has no class folder holding images: expected {EXPECTED['imagefolder']}")
        return root
    if data_name in ARCHIVE_FOLDERS:
        found = _cifar_root(data_name, root)
        if found is None:
            raise DataSetError(f"{root} has no {' and '.join(cifar_files(data_name))}: expected "
                               f"{EXPECTED[data_name]}")
        return found
    raise DataSetError(f"unknown data set {data_name!r} (known: {', '.join(EXPECTED)})")


def cifar_files(data_name: str) -> tuple[str, ...]:
    """The batch files of a CIFAR archive: training ones, then the test one."""
    return (*CIFAR10_TRAIN, CIFAR10_TEST) if data_name == "cifar10" else (CIFAR100_TRAIN, CIFAR100_TEST)


def class_folders(split: Path) -> list[str]:
    """The class folder names of one split, sorted (as torchvision's ImageFolder sorts them)."""
    return sorted(e.name for e in scan(split) if not e.name.startswith(".") and entry_is(e, "dir"))


def _existing_folder(data_dir: str | os.PathLike[str]) -> Path:
    from cnnbench.results.files import path_too_long, shown

    why = path_too_long(data_dir)
    if why is not None:
        raise DataSetError(f"{shown(data_dir)}: {why}")
    root = Path(data_dir).expanduser()
    try:
        os.stat(root)
    except FileNotFoundError:
        is_link = os.path.islink(root)
        raise DataSetError(f"{root} is a link to nothing" if is_link else f"{root} does not exist") from None
    except OSError as exc:  # a symlink loop, a folder above it that cannot be looked into
        raise DataSetError(f"{root}: cannot be read ({exc.strerror or exc})") from None
    if not root.is_dir():
        raise DataSetError(f"{root} is not a folder")
    return root.resolve()


def _refuse_a_part(folder: Path) -> None:
    """When ``folder`` is a split (``train/``, ``val/``) or a class folder of an image-folder data
    set, say which folder to pass instead (users often point at the split they mean)."""
    for root, depth in ((folder.parent, 1), (folder.parent.parent, 2)):
        if depth >= len(folder.parts):  # only the root (`/`) is above: no data set holds this folder
            return
        split = folder.parts[-depth]
        if split in (TRAIN_SPLIT, VAL_SPLIT) and _class_folders(root / TRAIN_SPLIT):
            part = f"the {split}/ split" if depth == 1 else f"a class folder of the {split}/ split"
            raise DataSetError(f"{folder} is {part} of the data set in {root}: pass the data set's own "
                               f"folder, {root} (cnnbench reads train/ and val/ below it)")


def _cifar_root(data_name: str, root: Path) -> Path | None:
    for folder in (root, root / ARCHIVE_FOLDERS[data_name]):
        if all(_is_file(folder / f) for f in cifar_files(data_name)):
            return folder
    return None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError as exc:  # a folder that cannot be looked into
        raise DataSetError(f"{path.parent}: cannot be read ({exc.strerror or exc})") from None


def _class_folders(split: Path) -> bool:
    """Does ``split`` hold at least one class folder with an image in it?"""
    if not split.is_dir():
        return False
    return any(image_files(split / name) for name in class_folders(split))
