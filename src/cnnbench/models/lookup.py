"""The models a pattern names and what they cost, as ``cnnbench models`` shows them.

:func:`matching_models` finds the registry names (aliases included) that match shell-style
wildcards or plain names, in the order given; :func:`model_costs` traces the models behind them, once each
(:func:`cnnbench.models.cost.model_cost`, which imports torch when called), keeping the
error of a model that cannot be traced beside the costs of the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cnnbench.config.errors import ConfigError
from cnnbench.models.registry import canonical_name, get_model_spec, list_models
from cnnbench.words import natural_key

if TYPE_CHECKING:
    from cnnbench.models.cost import ModelCost


class NoModelMatches(ValueError):
    """A wildcard that matches no registry name."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        super().__init__(f"no model matches {pattern!r}")


def matching_models(patterns: str | Sequence[str]) -> list[str]:
    """Registry names (aliases included) matching any of ``patterns``: each pattern's in natural
    order of the models they name, the patterns in the order given, each name once. A plain name
    that is none raises the registry's :class:`ConfigError` naming the nearest ones; a wildcard
    that matches nothing, :class:`NoModelMatches`."""
    names: list[str] = []
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        found = list_models(pattern)
        if not found and not any(c in pattern for c in "*?["):
            get_model_spec(pattern)  # raises with the nearest names
        if not found:
            raise NoModelMatches(pattern)
        names += [n for n in sorted(found, key=lambda n: (natural_key(_canonical_or_self(n)), natural_key(n)))
                  if n not in names]
    return names


def _canonical_or_self(name: str) -> str:
    try:
        return canonical_name(name)
    except ConfigError:
        return name


@dataclass
class ModelCosts:
    """The models traced, the cost of each that could be, and one line for each that could not."""

    models: list[str]
    costs: list[ModelCost] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def canonical_models(names: Sequence[str]) -> list[str]:
    """Registry names behind ``names``, once each, in the order of ``names`` (as
    :func:`matching_models` gives them). With several names, an alias whose target cannot be
    built here (``inception4`` without timm) is left out; alone, it raises its :class:`ConfigError`."""
    found: list[str] = []
    for name in names:
        try:
            canonical = canonical_name(name)
        except ConfigError:
            if len(names) == 1:
                raise
            continue
        if canonical not in found:
            found.append(canonical)
    return found


def model_costs(names: Sequence[str], image_size: int | None = None,
                progress: Callable[[Sequence[str]], Iterable[str]] = lambda models: models, *,
                aux: bool = True) -> ModelCosts:
    """The cost of the models behind ``names`` (:func:`canonical_models`) at ``image_size``
    (``None``: each model's own; ``aux=False``: without auxiliary heads); ``progress`` wraps
    the iteration over the models."""
    from cnnbench.models.cost import model_cost

    result = ModelCosts(canonical_models(names))
    for name in progress(result.models):
        try:
            result.costs.append(model_cost(name, image_size, aux=aux))
        except ConfigError as exc:
            result.errors.append(str(exc))
    return result
