"""What each input source (``--data-name``) takes and refuses, checked before anything runs.

Each :class:`~cnnbench.config.choices.Declared` here is one source's (the three real data
sets share one): its names, the options that apply to it alone, and its own rules; the
source of :mod:`cnnbench.data` that implements the names declares it as its ``declared``.
Torch-free, so the configuration checks it cheaply.
:meth:`~cnnbench.config.input_options.InputOptions.check_input_options` applies them.
"""

from __future__ import annotations

from typing import Any

from cnnbench.config.checks import unused
from cnnbench.config.choices import DEFAULT_INPUT_PIPELINE, REAL_DATA_NAMES, SYNTHETIC, DataName, Declared
from cnnbench.config.errors import ConfigError

DEFAULT_SYNTHETIC_LOCATION = "device"


def _folder(config: Any) -> None:
    if not str(config.data_dir).strip():
        raise ConfigError("data_dir", "is empty (give the folder of a data set)")


def _synthetic(config: Any) -> None:
    if config.data_dir is not None:
        _folder(config)
        raise ConfigError("data_name", "synthetic input reads no folder: leave out --data-dir, or name the "
                                       f"data set ({', '.join(REAL_DATA_NAMES)})")
    location = config.synthetic_location or DEFAULT_SYNTHETIC_LOCATION
    if location != "loader":
        unused(config, "num_workers", f"with --synthetic-location {location} (no DataLoader workers there)")
    if config.distortions:
        raise ConfigError("distortions", "augments real images; synthetic input has none to distort "
                                         "(give --data-dir)")
    unused(config, "resize_method", "on synthetic input (nothing is resized; give --data-dir)")
    if config.skip_bad_images:
        raise ConfigError("skip_bad_images", "has no effect on synthetic input (give --data-dir)")
    if config.input_pipeline not in (None, DEFAULT_INPUT_PIPELINE):
        raise ConfigError("input_pipeline", f"{config.input_pipeline} makes batches of a data set's images; "
                                            "synthetic input has none to decode (give --data-dir)")
    unused(config, "dali_hw_decoder_load", "on synthetic input (nothing is decoded; give --data-dir and "
                                           "--input-pipeline dali)")


def _real(config: Any) -> None:
    if config.data_dir is None:
        raise ConfigError("data_name", f"{config.data_name} is read from a folder: give --data-dir DIR")
    _folder(config)
    unused(config, "synthetic_location", "with --data-dir (images are read, not made)")
    if config.input_pipeline != "dali":
        pipeline = config.input_pipeline or DEFAULT_INPUT_PIPELINE
        unused(config, "dali_hw_decoder_load", f"with --input-pipeline {pipeline} "
                                               "(it sets DALI's hardware JPEG decoder: --input-pipeline dali)")


SYNTHETIC_SOURCE: Declared[DataName] = Declared((SYNTHETIC,), ("synthetic_location",), _synthetic)
REAL_DATA_SET: Declared[DataName] = Declared(REAL_DATA_NAMES, ("resize_method", "distortions", "skip_bad_images"),
                                             _real)

INPUT_RULES: dict[DataName, Declared[DataName]] = {
    name: d for d in (SYNTHETIC_SOURCE, REAL_DATA_SET) for name in d.names
}


def check_input_source(config: Any) -> None:
    """The rules of the source the configuration names (a real data set when ``--data-dir`` is
    given without ``--data-name``, which is guessed later from the folder)."""
    name = config.data_name or (REAL_DATA_NAMES[0] if config.data_dir is not None else SYNTHETIC)
    INPUT_RULES[name].validate(config)
