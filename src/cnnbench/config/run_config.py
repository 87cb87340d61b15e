"""The configuration of one benchmark run: every ``cnnbench run`` flag is a field here.

Field help texts are the CLI's help texts; ``__post_init__`` rejects bad values and
contradictory combinations before any work starts. Checks that need the machine
(is CUDA there? can this device run bf16?) live in :mod:`cnnbench.engine.resolve`.
Defaults left as ``None`` are resolved from the model (image size, batch size) or the
machine (device) when the run starts; the record holds the resolved values.

This module does not import torch, so suite files and reports can use it cheaply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cnnbench.config.errors import ConfigError
from cnnbench.config.options import field_choices, field_types, option

DEVICES = ("auto", "cpu", "cuda")
DATA_FORMATS = ("NCHW", "NHWC")
PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16")
OPTIMIZERS = ("sgd", "momentum", "rmsprop", "adam")
VARIABLE_UPDATES = ("replicated", "parameter_server", "independent", "fsdp")
ALL_REDUCES = ("nccl", "gloo")
SYNTHETIC_LOCATIONS = ("device", "host", "loader")
DATA_NAMES = ("synthetic",)


@dataclass(frozen=True)
class RunConfig:
    """One benchmark run. Field names are the record's ``config`` keys."""

    # --- what to run -------------------------------------------------------
    model: str = option(
        "resnet18",
        "Model name: any torchvision classification model, a tf_cnn_benchmarks alias "
        "(inception3, resnet50_v1.5, vgg16, ...), timm/<name> when timm is installed, "
        "or 'trivial'. See `cnnbench models --list`.",
    )
    batch_size: int | None = option(
        None, "Images per device per step (default: the model's default batch size).", metavar="N"
    )
    image_size: int | None = option(
        None, "Input height and width in pixels (default: the model's own, e.g. 224, 299).", metavar="PX"
    )
    forward_only: bool = option(False, "Benchmark inference (no backward pass, no optimizer step).")
    num_batches: int = option(100, "Timed steps.", metavar="N")
    num_warmup_batches: int = option(
        10, "Untimed steps before the timed ones; excluded from every figure.", metavar="N"
    )
    display_every: int = option(10, "Print a progress line every N timed steps.", metavar="N")
    seed: int = option(1234, "Random seed for weights and synthetic data.")

    # --- where and how -----------------------------------------------------
    device: str = option("auto", "Device kind; 'auto' takes cuda when present, else cpu.", choices=DEVICES)
    num_devices: int = option(
        1, "Devices that train together (data parallel). Only 1 is supported in this version.", metavar="N"
    )
    variable_update: str = option(
        "replicated",
        "How devices share variables: replicated (all-reduce, DDP), parameter_server, "
        "independent, fsdp. With one device they are the same computation.",
        choices=VARIABLE_UPDATES,
    )
    all_reduce: str | None = option(
        None, "All-reduce back end for --variable-update replicated.", choices=ALL_REDUCES
    )
    data_format: str = option(
        "NCHW", "Tensor layout: NCHW (contiguous) or NHWC (torch.channels_last).", choices=DATA_FORMATS
    )
    precision: str = option(
        "fp32",
        "Numeric precision: fp32 (TF32 off), tf32 (TF32 matmul/conv on CUDA), amp_fp16 / amp_bf16 "
        "(autocast; amp_fp16 with a gradient scaler), fp16 / bf16 (weights and inputs cast).",
        choices=PRECISIONS,
    )
    compile: bool = option(
        False, "Run the model through torch.compile; compilation time is reported apart from throughput."
    )

    # --- training ----------------------------------------------------------
    optimizer: str = option("sgd", "Optimizer (momentum = SGD with --momentum).", choices=OPTIMIZERS)
    learning_rate: float = option(0.005, "Learning rate.", metavar="LR")
    momentum: float = option(0.9, "Momentum for --optimizer momentum and rmsprop.")
    weight_decay: float = option(4e-5, "L2 weight decay.")

    # --- input -------------------------------------------------------------
    data_name: str = option(
        "synthetic", "Data set; only synthetic input in this version.", choices=DATA_NAMES
    )
    synthetic_location: str = option(
        "device",
        "Where synthetic batches are made: device (one batch resident on the device, no copy per "
        "step), host (a new batch on the host each step, copied pinned and non-blocking), loader "
        "(batches made in DataLoader worker processes with prefetch).",
        choices=SYNTHETIC_LOCATIONS,
    )
    loader_workers: int = option(2, "DataLoader worker processes for --synthetic-location loader.", metavar="N")
    distortions: bool = option(False, "Training augmentation of real images (needs real data).")

    # --- output (not part of what is measured) -----------------------------
    results_dir: str = option("results", "Folder of the results store.", recorded=False, metavar="DIR")
    machine_label: str | None = option(
        None,
        "Name of this machine in the results (default: derived from CPU and GPU names).",
        recorded=False,
        metavar="LABEL",
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            choices = field_choices(f)
            value = getattr(self, f.name)
            if choices is not None and value is not None and value not in choices:
                raise ConfigError(f.name, f"invalid choice {value!r} (choose from {', '.join(map(str, choices))})")
        _check_type(self)
        _positive(self, "batch_size", allow_none=True)
        _positive(self, "image_size", allow_none=True)
        _positive(self, "num_batches")
        _positive(self, "display_every")
        _positive(self, "num_devices")
        _at_least_zero(self, "num_warmup_batches")
        _at_least_zero(self, "loader_workers")
        if self.learning_rate <= 0:
            raise ConfigError("learning_rate", f"must be > 0 (got {self.learning_rate})")
        if not 0 <= self.momentum < 1:
            raise ConfigError("momentum", f"must be in [0, 1) (got {self.momentum})")
        if self.weight_decay < 0:
            raise ConfigError("weight_decay", f"must be >= 0 (got {self.weight_decay})")
        if self.image_size is not None and self.image_size < 16:
            raise ConfigError("image_size", f"must be at least 16 pixels (got {self.image_size})")
        if self.num_devices > 1:
            raise ConfigError(
                "num_devices", f"only 1 device per run is supported in this version (got {self.num_devices})"
            )
        if self.all_reduce is not None and self.variable_update != "replicated":
            raise ConfigError(
                "all_reduce", f"only applies to --variable-update replicated (got {self.variable_update})"
            )
        if self.distortions and self.data_name == "synthetic":
            raise ConfigError("distortions", "augments real images; synthetic input has none to distort")
        if self.compile and self.num_warmup_batches < 1:
            raise ConfigError(
                "num_warmup_batches", "must be >= 1 with --compile, so compilation is not timed"
            )

    # --- conversions -------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build from a plain mapping (suite files, records), naming any unknown field."""
        known = {f.name for f in dataclasses.fields(cls)}
        for key in values:
            if key not in known:
                raise ConfigError(key, f"unknown configuration field {key!r}")
        return cls(**dict(values))

    def recorded(self) -> dict[str, Any]:
        """The fields a record keeps under ``config`` (everything but output options)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.metadata.get("recorded", True)
        }

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)


def config_fields() -> tuple[dataclasses.Field, ...]:
    return dataclasses.fields(RunConfig)


_ACCEPTED: dict[type, tuple[type, ...]] = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}


def _check_type(cfg: RunConfig) -> None:
    for name, (base, optional) in field_types(type(cfg)).items():
        value = getattr(cfg, name)
        if value is None:
            if optional:
                continue
            raise ConfigError(name, "a value is required")
        allowed = _ACCEPTED.get(base)
        if allowed is None:
            continue
        if isinstance(value, bool) and base in (int, float):
            raise ConfigError(name, f"expected a number, got {value!r}")
        if not isinstance(value, allowed):
            raise ConfigError(name, f"expected {base.__name__}, got {value!r}")


def _positive(cfg: RunConfig, name: str, allow_none: bool = False) -> None:
    value = getattr(cfg, name)
    if value is None and allow_none:
        return
    if value < 1:
        raise ConfigError(name, f"must be >= 1 (got {value})")


def _at_least_zero(cfg: RunConfig, name: str) -> None:
    value = getattr(cfg, name)
    if value < 0:
        raise ConfigError(name, f"must be >= 0 (got {value})")
