"""Input pipelines: how a data set's images become batches, registered by name.

A data set (``imagefolder``, ``cifar10``, ``cifar100``: :mod:`~cnnbench.data.catalog`) says
where the images are; its input pipeline (``--input-pipeline``) says how they become the
model's batches: the decoder, the transforms, where they run, the loader processes. A
pipeline registers its name (one of :data:`~cnnbench.config.choices.INPUT_PIPELINES`, written
torch-free so that ``--help`` and suite files know the choices) with a factory that makes one
worker's input source from the run's request and the opened data set, and may add a ``check``
that refuses what it cannot do with a data set or a configuration, with a
:class:`~cnnbench.config.ConfigError`, when the run is resolved (before any work)::

    @register_pipeline("cpu")
    def cpu_pipeline(request: InputRequest, data_set: DataSetReader) -> InputSource: ...

The pipeline ``name`` is the module ``cnnbench.data.<name>``, which registers it: the registry
imports a pipeline's module when it is first asked for it (:func:`pipeline_of`; every one with
:func:`registered_pipelines`), so nothing of a pipeline is imported before a run uses it. A new
pipeline is its module, its name in ``InputPipeline`` with its few words for ``--help`` beside it
(:data:`~cnnbench.config.choices.INPUT_PIPELINE_HELP`), and its test. The first, the default, is
``cpu`` (:mod:`~cnnbench.data.cpu`); ``dali`` (:mod:`~cnnbench.data.dali`) is an optional extra.

Synthetic input is made, not decoded, so no pipeline applies to it: ``--input-pipeline``
with synthetic input accepts the default (a suite may set it for all its cases) and the
record holds ``null``, as records from before the option did; any other pipeline is refused
in one line before any work (:mod:`cnnbench.config.input_rules`).

This module also registers the input source of the real data sets: the data set in
``--data-dir``, opened once per process, through the run's pipeline.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from cnnbench.config.choices import DEFAULT_INPUT_PIPELINE, INPUT_PIPELINES, InputPipeline
from cnnbench.config.input_options import InputOptions
from cnnbench.config.input_rules import REAL_DATA_SET
from cnnbench.data.catalog import DataSetFacts, DataSetReader, open_data_set
from cnnbench.data.source import InputRequest, InputSource, register_input

PipelineFactory = Callable[[InputRequest, DataSetReader], InputSource]
PipelineCheck = Callable[[InputOptions, DataSetFacts], None]
"""``check(config, data_set)``: raises :class:`~cnnbench.config.ConfigError` for what the pipeline cannot do."""


def _no_check(config: InputOptions, data_set: DataSetFacts) -> None:
    """No rule of its own."""


@dataclass(frozen=True)
class RegisteredPipeline:
    """An input pipeline: its name, the factory of its sources, and its own refusals."""

    name: str
    factory: PipelineFactory
    check: PipelineCheck = _no_check


_PIPELINES: dict[str, RegisteredPipeline] = {}


def register_pipeline(name: InputPipeline,
                      check: PipelineCheck = _no_check) -> Callable[[PipelineFactory], PipelineFactory]:
    """Decorator: the factory makes the sources of ``--input-pipeline name``; ``check`` refuses
    (when the run is resolved) the data sets and configurations it cannot serve."""

    def wrap(factory: PipelineFactory) -> PipelineFactory:
        if name not in INPUT_PIPELINES:
            choices = ", ".join(INPUT_PIPELINES)
            raise ValueError(f"input pipeline {name!r} is not an --input-pipeline choice ({choices})")
        if name in _PIPELINES:
            raise ValueError(f"input pipeline {name!r} registered twice")
        _PIPELINES[name] = RegisteredPipeline(name, factory, check)
        return factory

    return wrap


def registered_pipelines() -> dict[str, RegisteredPipeline]:
    """Every input pipeline, by name (importing the modules that register them)."""
    _load_pipelines()
    return dict(_PIPELINES)


def pipeline_of(config: InputOptions) -> RegisteredPipeline:
    """The pipeline ``config.input_pipeline`` names (the default when unset; its module imported now)."""
    name = config.input_pipeline or DEFAULT_INPUT_PIPELINE
    if name not in INPUT_PIPELINES:
        raise ValueError(f"no input pipeline {name!r} (known: {', '.join(INPUT_PIPELINES)})")
    _load_pipelines(name)
    if name not in _PIPELINES:
        raise ValueError(f"input pipeline {name!r}: its module, cnnbench.data.{name}, "
                         "registers no pipeline of that name")
    return _PIPELINES[name]


def check_pipeline(config: InputOptions, data_set: DataSetFacts) -> None:
    """The refusals of the run's pipeline for ``data_set`` (raises :class:`~cnnbench.config.ConfigError`)."""
    pipeline_of(config).check(config, data_set)


def make_pipeline(request: InputRequest, data_set: DataSetReader) -> InputSource:
    """One worker's batches of ``data_set`` through the pipeline of ``request.config``."""
    return pipeline_of(request.config).factory(request, data_set)


@register_input(REAL_DATA_SET)
def data_set_input(request: InputRequest) -> InputSource:
    """Batches of the data set in ``--data-dir``: this worker's shard, through the run's input pipeline."""
    cfg = request.config
    if cfg.data_dir is None or cfg.data_name is None:
        raise ValueError("a data set input needs a resolved --data-dir and --data-name")
    return make_pipeline(request, open_data_set(cfg.data_name, cfg.data_dir))


def _load_pipelines(*names: str) -> None:
    """Import the modules (``cnnbench.data.<name>``) that register the pipelines ``names`` (every
    ``--input-pipeline`` choice when none is given; names that are no choice are left alone)."""
    for name in names or INPUT_PIPELINES:
        if name in INPUT_PIPELINES:
            importlib.import_module(f"cnnbench.data.{name}")
