"""Where the input comes from: synthetic batches, or a real data set read from a folder.

Without ``--data-dir`` input is synthetic (``--synthetic-location``). With it, images are
read from the folder: ``imagefolder`` (``train/<class>/*.jpg`` and ``val/<class>/...``) or
the python pickle batches of CIFAR-10/100; the name is guessed from the folder's contents
when ``--data-name`` is not given (when the run is resolved, since that reads the folder).
How a data set's images become batches is its input pipeline (``--input-pipeline``,
:mod:`cnnbench.data.pipelines`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cnnbench.config.choices import (
    DATA_NAMES,
    DEFAULT_INPUT_PIPELINE,
    INPUT_PIPELINE_HELP,
    INPUT_PIPELINES,
    SYNTHETIC,
    DataName,
    InputPipeline,
)
from cnnbench.config.input_rules import DEFAULT_SYNTHETIC_LOCATION, check_input_source
from cnnbench.config.options import option

SYNTHETIC_LOCATIONS = ("device", "host", "loader")
RESIZE_METHODS = ("bilinear", "bicubic", "nearest")
DEFAULT_SYNTHETIC_WORKERS = 2
MAX_WORKERS = 256
DEFAULT_RESIZE_METHOD = "bilinear"
DEFAULT_DALI_HW_DECODER_LOAD = 0.65
"""The share of the images DALI hands its hardware JPEG decoder, on a GPU that has one (DALI's own default)."""
_PIPELINES_HELP = ", ".join(f"{name} ({INPUT_PIPELINE_HELP[name]})" for name in INPUT_PIPELINES)
"""Every input pipeline with its few words (:data:`~cnnbench.config.choices.INPUT_PIPELINE_HELP`), in order."""


@dataclass(frozen=True)
class InputOptions:
    """input"""

    data_dir: str | None = option(
        None,
        "Folder of a real data set: ImageNet layout (train/<class>/*.jpg|jpeg|png, val/<class>/...) or the "
        "python pickle batches of CIFAR-10 (data_batch_1..5, test_batch) or CIFAR-100 (train, test). "
        "Without it, input is synthetic.",
        metavar="DIR",
    )
    data_name: DataName | None = option(
        None,
        "Data set: synthetic, imagefolder, cifar10, cifar100 [default: synthetic without --data-dir, "
        "else guessed from the folder's contents].",
        choices=DATA_NAMES,
    )
    synthetic_location: str | None = option(
        None,
        "Where synthetic batches are made: device (one batch resident on the device, no copy per "
        "step), host (a new batch on the host each step, copied pinned and non-blocking), loader "
        f"(batches made in DataLoader worker processes with prefetch) [default there: {DEFAULT_SYNTHETIC_LOCATION}].",
        choices=SYNTHETIC_LOCATIONS, depends_on=("data_name",),
    )
    input_pipeline: InputPipeline | None = option(
        None,
        f"How the images of --data-dir become batches: {_PIPELINES_HELP} [default there: {DEFAULT_INPUT_PIPELINE}].",
        choices=INPUT_PIPELINES, unnamed=(DEFAULT_INPUT_PIPELINE,), depends_on=("data_name",),
    )
    dali_hw_decoder_load: float | None = option(
        None,
        "dali on a GPU with a hardware JPEG decoder (A100, H100, H200): the share of the images it "
        "decodes, 0 to 1; nvJPEG on the GPU's cores takes the rest "
        f"[default there: {DEFAULT_DALI_HW_DECODER_LOAD:g}].",
        unnamed=(DEFAULT_DALI_HW_DECODER_LOAD,), depends_on=("input_pipeline",), metavar="FRACTION",
        minimum=0, maximum=1,
    )
    num_workers: int | None = option(
        None,
        f"DataLoader worker processes per device: with --data-dir they decode and augment images "
        f"[default: from the cores this run may use]; with --synthetic-location loader "
        f"[default there: {DEFAULT_SYNTHETIC_WORKERS}].",
        # its default, the cores per device less one, follows the devices on a node: it never splits a scaling series
        depends_on=("synthetic_location", "data_name", "num_devices", "num_nodes"), metavar="N", minimum=0,
        maximum=MAX_WORKERS,
    )
    distortions: bool = option(
        False, "Training augmentation of real images: random resized crop, horizontal flip, colour jitter "
        "(without it: resize the shorter side and crop the centre)."
    )
    resize_method: str | None = option(
        None, f"How real images are resized: bilinear, bicubic, nearest [default there: {DEFAULT_RESIZE_METHOD}].",
        choices=RESIZE_METHODS, depends_on=("data_name",),
    )
    skip_bad_images: bool = option(
        False, "Skip images that cannot be decoded and count them (metrics.bad_images) instead of stopping "
        "the run at the first one.",
        identity=False,
    )

    def check_input_options(self) -> None:
        """The rules of the input source (:mod:`~cnnbench.config.input_rules`)."""
        check_input_source(self)

    def real_data(self) -> bool:
        """Does this run read a data set (rather than make synthetic batches)?"""
        return self.data_dir is not None

    def input_defaults(self) -> dict[str, Any]:
        """The values this input uses for options left unset (the data set's name and the loader's
        workers of a real data set are filled when the run is resolved: they need the folder and
        the machine)."""
        filled: dict[str, Any] = {}
        if self.real_data():
            if self.resize_method is None:
                filled["resize_method"] = DEFAULT_RESIZE_METHOD
            if self.input_pipeline is None:
                filled["input_pipeline"] = DEFAULT_INPUT_PIPELINE
            return filled
        if self.input_pipeline is not None:  # the default, accepted: synthetic input uses no pipeline
            filled["input_pipeline"] = None
        if self.data_name is None:
            filled["data_name"] = SYNTHETIC
        location = self.synthetic_location or DEFAULT_SYNTHETIC_LOCATION
        if self.synthetic_location is None:
            filled["synthetic_location"] = location
        if location == "loader" and self.num_workers is None:
            filled["num_workers"] = DEFAULT_SYNTHETIC_WORKERS
        return filled
