"""The names of the choices that implementations register against, written once (no torch).

``--data-name`` names an input source of :mod:`cnnbench.data` and ``--input-pipeline`` one of
its input pipelines; each implementation registers against its name (``@register_input``,
``@register_pipeline``, typed with these ``Literal`` types so that mypy checks the names), and
the options' choices (the CLI's, a suite file's) are these tuples; an input pipeline's few words
for ``--help`` are written beside its name (:data:`INPUT_PIPELINE_HELP`). What each choice takes
and refuses is declared with it, as :class:`Declared` (:mod:`~cnnbench.config.input_rules`). The
strategies of ``--variable-update`` (``@register_strategy``) have their names written with their
declarations, in one place: :mod:`~cnnbench.config.strategy_rules`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args

Synthetic = Literal["synthetic"]
RealDataName = Literal["imagefolder", "cifar10", "cifar100"]
DataName = Literal[Synthetic, RealDataName]
SYNTHETIC: Synthetic = "synthetic"
REAL_DATA_NAMES: tuple[RealDataName, ...] = get_args(RealDataName)
DATA_NAMES: tuple[DataName, ...] = (SYNTHETIC, *REAL_DATA_NAMES)
"""The input sources, in the order ``--help`` lists them."""

InputPipeline = Literal["cpu", "dali"]
INPUT_PIPELINES: tuple[InputPipeline, ...] = get_args(InputPipeline)
"""How a data set's images become batches (:mod:`cnnbench.data.pipelines`: the pipeline ``name`` is
registered by its module, ``cnnbench.data.<name>``), the default first."""
DEFAULT_INPUT_PIPELINE: InputPipeline = INPUT_PIPELINES[0]
INPUT_PIPELINE_HELP: dict[InputPipeline, str] = {
    "cpu": "decoded, cropped and resized on the host in --num-workers DataLoader processes, normalised on the device",
    "dali": "image folders decoded and augmented by NVIDIA DALI, on the GPU for a GPU run, in --num-workers threads; "
            "pip install 'cnnbench[dali]'",
}
"""Each pipeline in a few words, as the help of ``--input-pipeline`` lists them (every name of
:data:`INPUT_PIPELINES` has one)."""

NameT = TypeVar("NameT", bound=str)


def _nothing(config: Any) -> None:
    """No rule of its own."""


@dataclass(frozen=True)
class Declared(Generic[NameT]):
    """What one choice declares: the names it answers to, the options only it takes, and its
    own rules, ``validate(config)`` (raises :class:`~cnnbench.config.ConfigError`)."""

    names: tuple[NameT, ...]
    options: tuple[str, ...] = ()
    """Fields that apply to this choice alone (given with another choice, they are refused)."""
    validate: Callable[[Any], None] = _nothing
    training_only: tuple[str, ...] = ()
    """Of ``options``, those that apply to training alone (a run with --forward-only leaves them unset)."""

    @property
    def name(self) -> NameT:
        return self.names[0]


LrScaling = Literal["none", "linear"]
LR_SCALINGS: tuple[LrScaling, ...] = get_args(LrScaling)
"""How the learning rate follows the global batch (``--lr-scaling``): ``linear`` multiplies it by
the device count (Goyal et al., 2017), ``none`` keeps it."""
