"""The input-source protocol: where the engine's batches come from.

The engine asks :func:`make_input` for a source and then only calls ``next(source)``
inside the timed loop, so a new kind of input joins by registering a factory here, without
touching the loop (a new way of turning a data set's images into batches, a GPU decoder,
is an input pipeline instead: :mod:`cnnbench.data.pipelines`):

    @register_input(SYNTHETIC_SOURCE)
    def _synthetic(request: InputRequest) -> InputSource: ...

What it registers with is its declaration (:class:`~cnnbench.config.choices.Declared`,
torch-free in :mod:`cnnbench.config.input_rules`): the ``--data-name`` values it answers to
(among :data:`~cnnbench.config.choices.DATA_NAMES`), the options only it takes, and its
``validate(config)`` rules, which the configuration applies before anything runs.

A source yields ``(images, labels)`` already on the worker's device, in the dtype and
memory format the model wants (``torch.channels_last`` for NHWC), and says how many
classes its labels have (the model is built with that many outputs). ``close()`` stops
whatever it started (DataLoader workers); ``metrics()`` adds what the source counted to
the record (``bad_images``). Sources that also know epochs (real data sets,
for training to accuracy) implement :class:`EpochSource`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from cnnbench.config.choices import DATA_NAMES, DataName, Declared

if TYPE_CHECKING:
    from cnnbench.config.input_options import InputOptions

Batch = tuple[torch.Tensor, torch.Tensor]


@runtime_checkable
class InputSource(Protocol):
    """Endless batches for one worker, on its device."""

    description: str
    """How the run's header names the input: ``synthetic (device)``, ``imagefolder /data/x``."""
    num_classes: int

    def __next__(self) -> Batch: ...

    def close(self) -> None: ...

    def metrics(self) -> Mapping[str, Any]:
        """Fields the source adds to the record's ``metrics`` at the end (``bad_images``, ...)."""
        ...


@runtime_checkable
class EpochSource(InputSource, Protocol):
    """An input source that also walks its data set in epochs (train and validation splits)."""

    steps_per_epoch: int

    def epoch(self, index: int) -> Iterator[Batch]:
        """One pass over this worker's share of the training split (``index`` reshuffles)."""
        ...

    def eval_batches(self) -> Iterator[Batch]:
        """One pass over this worker's share of the validation split."""
        ...


@dataclass(frozen=True)
class InputRequest:
    """What the engine asks of an input source: every field concrete."""

    config: InputOptions
    """The resolved configuration (a run's, or ``cnnbench data``'s): its input options (data_name,
    data_dir, synthetic_location, num_workers, distortions, ...) all filled."""
    batch_size: int
    """Images per step for this worker."""
    image_size: int
    device: torch.device
    dtype: torch.dtype
    """The dtype the model's inputs must have (float32, or the weights' dtype for fp16/bf16)."""
    channels_last: bool
    seed: int
    rank: int = 0
    """This worker's index among ``world_size`` workers: sources give each worker its own data."""
    world_size: int = 1


InputFactory = Callable[[InputRequest], InputSource]


@dataclass(frozen=True)
class RegisteredInput:
    """An input source: what it declares, and the factory that makes it."""

    declared: Declared[DataName]
    factory: InputFactory


_SOURCES: dict[str, RegisteredInput] = {}


def register_input(declared: Declared[DataName]) -> Callable[[InputFactory], InputFactory]:
    """Decorator: the factory makes the sources for the ``--data-name`` values ``declared`` names."""

    def wrap(factory: InputFactory) -> InputFactory:
        for name in declared.names:
            if name not in DATA_NAMES:
                raise ValueError(f"input source {name!r} is not a --data-name choice ({', '.join(DATA_NAMES)})")
            if name in _SOURCES:
                raise ValueError(f"input source {name!r} registered twice")
            _SOURCES[name] = RegisteredInput(declared, factory)
        return factory

    return wrap


def registered_inputs() -> dict[str, RegisteredInput]:
    """Every input source, by ``--data-name`` (importing the modules that register them)."""
    _load_sources()
    return dict(_SOURCES)


def make_input(request: InputRequest) -> InputSource:
    """The input source for ``request.config.data_name`` (resolved: never ``None``)."""
    sources = registered_inputs()
    name = request.config.data_name
    if name is None:
        raise ValueError("make_input needs a resolved configuration (data_name is not set)")
    try:
        source = sources[name]
    except KeyError:
        raise ValueError(f"no input source for data name {name!r} (known: {', '.join(sorted(sources))})") from None
    return source.factory(request)


def _load_sources() -> None:
    from cnnbench.data import pipelines, synthetic  # noqa: F401  (they register on import)
