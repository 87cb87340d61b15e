"""The configuration of ``cnnbench data``: the input pipeline of a data set, measured alone.

:class:`DataBenchConfig` takes the input options of ``cnnbench run`` (``--data-dir``,
``--data-name``, ``--distortions``, ``--resize-method``, ``--num-workers``,
``--skip-bad-images``), ``--host-cpus`` and the output options, plus what a pipeline
without a model needs: the image size, the batch size, the number of batches and the
device the batches go to. Its record's ``config`` says ``mode: data``. No torch here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from cnnbench.config.errors import ConfigError
from cnnbench.config.host_options import HostOptions
from cnnbench.config.input_options import InputOptions
from cnnbench.config.measurement_options import MAX_SEED, MAX_STEPS
from cnnbench.config.model_options import MAX_BATCH_SIZE, MAX_IMAGE_SIZE, MIN_IMAGE_SIZE
from cnnbench.config.options import option
from cnnbench.config.output_options import OutputOptions
from cnnbench.config.run_config import check_fields

DATA_MODE = "data"
DATA_DEVICES = ("auto", "cpu", "cuda")
DEFAULT_DATA_IMAGE_SIZE = 224
DEFAULT_DATA_BATCH_SIZE = 64


@dataclass(frozen=True)
class PipelineOptions:
    """data pipeline"""

    image_size: int | None = option(
        None, f"Height and width of the images the pipeline makes [default: {DEFAULT_DATA_IMAGE_SIZE}, "
        "32 for CIFAR].", metavar="PX", minimum=MIN_IMAGE_SIZE, maximum=MAX_IMAGE_SIZE,
    )
    batch_size: int = option(DEFAULT_DATA_BATCH_SIZE, "Images per batch.", metavar="N", minimum=1,
                             maximum=MAX_BATCH_SIZE)
    num_batches: int = option(100, "Timed batches.", identity=False, metavar="N", minimum=1, maximum=MAX_STEPS)
    num_warmup_batches: int = option(
        10, "Untimed batches first (the loader processes start and fill their prefetch queues).",
        identity=False, metavar="N", minimum=0, maximum=MAX_STEPS,
    )
    display_every: int = option(10, "Print a progress line every N timed batches.", identity=False, metavar="N",
                                minimum=1, maximum=MAX_STEPS)
    seed: int = option(1234, "Random seed of the shuffling and the augmentation.", identity=False, minimum=0,
                       maximum=MAX_SEED)
    device: str = option(
        "cpu", "Where the batches go: cpu (the host pipeline alone), cuda (also the pinned copy and the "
        "normalisation on the GPU), auto (cuda when present).", choices=DATA_DEVICES,
    )

    def check_pipeline_options(self) -> None:
        """Ranges are checked with the fields (:func:`~cnnbench.config.run_config.check_fields`)."""


DATA_SECTIONS: tuple[type, ...] = (PipelineOptions, InputOptions, HostOptions, OutputOptions)


@dataclass(frozen=True)
class DataBenchConfig(OutputOptions, HostOptions, InputOptions, PipelineOptions):
    """One ``cnnbench data`` run. Field names are the record's ``config`` keys (with ``mode``)."""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.data_dir is None:
            raise ConfigError("data_dir", "cnnbench data measures the input pipeline of a data set: give "
                                          "--data-dir DIR (cnnbench make-dataset writes one)")
        self.check_pipeline_options()
        self.check_input_options()
        self.check_host_options()
        self.check_output_options()

    def recorded(self) -> dict[str, Any]:
        """The record's ``config``: ``mode: data``, then every recorded field."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("recorded", True)}
        return {"mode": DATA_MODE, "num_devices": 1, **fields}

    def replace(self, **changes: Any) -> DataBenchConfig:
        return dataclasses.replace(self, **changes)
