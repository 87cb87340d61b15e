"""The configuration of one benchmark run: every ``cnnbench run`` flag is a field here.

:class:`RunConfig` is one flat, frozen dataclass (its field names are the record's
``config`` keys and, spelled with dashes, the CLI flags), assembled from one section per
concern so that each lives in its own small module:

==========================  ============================================================
:class:`ModelOptions`       model, batch and image size, inference, layout, precision, compile
:class:`MeasurementOptions` timed and warm-up steps, progress lines, seed
:class:`ParallelOptions`    device kind, device count, how devices share variables
:class:`HostOptions`        the host CPU cores a run may use
:class:`TrainingOptions`    optimizer and its hyperparameters
:class:`InputOptions`       synthetic or real input (a data set folder) and how it is made
:class:`OutputOptions`      results folder and machine label (not recorded)
==========================  ============================================================

Field help texts are the CLI's help texts; ``__post_init__`` rejects bad values,
contradictory combinations and values that would have no effect, before any work starts.
Options left unset (``None``) are filled when the run is resolved: from other options
(:meth:`RunConfig.with_derived_defaults`: the optimizer's momentum, the loader's workers,
the communication back end of the device kind),
from the model (image and batch size) or from the machine (device); the record holds the
filled values, and ``null`` for what the run did not use. Checks that need the machine
(is CUDA there? can this device run bf16?) live in :mod:`cnnbench.engine.resolve`.

This module does not import torch, so suite files and reports can use it cheaply.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cnnbench.config.errors import ConfigError
from cnnbench.config.host_options import HostOptions
from cnnbench.config.input_options import InputOptions
from cnnbench.config.measurement_options import MeasurementOptions
from cnnbench.config.model_options import ModelOptions
from cnnbench.config.options import field_bounds, field_choices, field_types
from cnnbench.config.output_options import OutputOptions
from cnnbench.config.parallel_options import ParallelOptions
from cnnbench.config.training_options import TrainingOptions
from cnnbench.words import quoted

# The sections in the order --help shows them.
SECTIONS: tuple[type, ...] = (
    ModelOptions, MeasurementOptions, ParallelOptions, HostOptions, TrainingOptions, InputOptions, OutputOptions,
)


@dataclass(frozen=True)
class RunConfig(OutputOptions, InputOptions, TrainingOptions, HostOptions, ParallelOptions, MeasurementOptions,
                ModelOptions):
    """One benchmark run. Field names are the record's ``config`` keys."""

    def __post_init__(self) -> None:
        check_fields(self)
        self.check_model_options()
        self.check_measurement_options()
        self.check_parallel_options()
        self.check_training_options(self.forward_only, self.num_epochs)
        self.check_host_options()
        self.check_input_options()
        self.check_output_options()
        if (self.compile or self.compile_mode) and self.num_epochs is None and self.warmup_steps() < 1:
            raise ConfigError("num_warmup_batches", "must be >= 1 with --compile, so compilation is not timed")
        if self.num_epochs is not None:
            if self.forward_only:
                raise ConfigError("num_epochs", "trains to an accuracy; it has no meaning with --forward-only")
            if not self.real_data():
                raise ConfigError("num_epochs", "trains on a data set's training and validation splits: "
                                                "give --data-dir (synthetic input has no epochs)")

    # --- conversions -------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build from a plain mapping (suite files, records), naming any unknown field."""
        known = {f.name for f in dataclasses.fields(cls)}
        for key in values:
            if key not in known:
                raise ConfigError(str(key)[:40], f"unknown configuration field {quoted(key)}")
        return cls(**dict(values))

    def with_derived_defaults(self) -> RunConfig:
        """Options left unset, filled from the other options (no machine or model needed)."""
        filled = {
            **self.measurement_defaults(),
            **self.model_defaults(self.device),
            **self.parallel_defaults(self.device, self.forward_only),
            **self.training_defaults(self.forward_only),
            **self.input_defaults(),
        }
        return self.replace(**filled) if filled else self

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


def section_fields(section: type, config: type | None = None) -> tuple[dataclasses.Field, ...]:
    """The fields a section declares, in the order of ``config`` (default :class:`RunConfig`)."""
    own = {f.name for f in dataclasses.fields(section)}
    return tuple(f for f in dataclasses.fields(config or RunConfig) if f.name in own)


def identity_fields() -> frozenset[str]:
    """Recorded fields whose values change what is measured (not step counts or the seed)."""
    return frozenset(f.name for f in dataclasses.fields(RunConfig) if f.metadata.get("identity", True)
                     and f.metadata.get("recorded", True))


def dependent_fields(field: str) -> frozenset[str]:
    """Fields that apply only with some values of ``field`` (declared with ``depends_on``)."""
    return frozenset(f.name for f in dataclasses.fields(RunConfig) if field in f.metadata.get("depends_on", ()))


def unnamed_values() -> dict[str, tuple[Any, ...]]:
    """Per field, the values a configuration's name need not mention (see ``option(unnamed=...)``)."""
    return {f.name: f.metadata["unnamed"] for f in dataclasses.fields(RunConfig) if f.metadata.get("unnamed")}


_ACCEPTED: dict[type, tuple[type, ...]] = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}


def check_fields(cfg: Any) -> None:
    """:func:`check_field` for every field of an options dataclass (:class:`RunConfig`, or
    another command's configuration built from the same sections)."""
    for f in dataclasses.fields(cfg):
        check_field(f.name, getattr(cfg, f.name), config=type(cfg))


def check_field(name: str, value: Any, *, choices: bool = True, config: type | None = None) -> None:
    """One field's own rules, as declared with it: its type, its choices (unless
    ``choices=False``), its range, and, for a float, a finite value. ``None`` passes where
    the field may be unset. Raises :class:`ConfigError` naming the flag.

    ``config`` is the dataclass the field belongs to (default :class:`RunConfig`), which
    applies this to every field; whoever takes option values from elsewhere (an imported
    table) applies it too, so the rules are written once.
    """
    cls = config or RunConfig
    f = _FIELDS[name] if cls is RunConfig else _fields_of(cls)[name]
    base, optional = field_types(cls)[name]
    if value is None:
        if optional:
            return
        raise ConfigError(name, "a value is required")
    allowed = _ACCEPTED.get(base)
    if allowed is not None:
        if isinstance(value, bool) and base in (int, float):
            raise ConfigError(name, f"expected a number, got {quoted(value)}")
        if not isinstance(value, allowed):
            raise ConfigError(name, f"expected {base.__name__}, got {quoted(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number (got {value})")
    known = field_choices(f)
    if choices and known is not None and value not in known:
        raise ConfigError(name, f"invalid choice {quoted(value)} (choose from {', '.join(map(str, known))})")
    low, high = field_bounds(f)
    if low is not None and value < low:
        raise ConfigError(name, f"must be >= {low} (got {quoted(value)})")
    if high is not None and value > high:
        raise ConfigError(name, f"must be <= {high} (got {quoted(value)})")


def check_config_values(values: Mapping[str, Any], *, choices: bool = True) -> None:
    """:func:`check_field` for every ``cnnbench run`` option in ``values`` (others are ignored)."""
    for name, value in values.items():
        if name in _FIELDS:
            check_field(name, value, choices=choices)


def _fields_of(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


_FIELDS: dict[str, dataclasses.Field] = _fields_of(RunConfig)
