"""The model registry: one name space for torchvision, tf_cnn_benchmarks aliases, timm and built-ins.

Sources register :class:`ModelSpec` entries; lookups load the sources lazily so that
``import cnnbench.models`` stays cheap. ``timm/<name>`` names are resolved on demand
when timm is installed. An unknown name raises :class:`UnknownModelError` naming the
three nearest known names.

    >>> from cnnbench.models import get_model_spec, list_models
    >>> get_model_spec("inception3").default_image_size
    299
    >>> list_models("resnet5*")
    ['resnet50', 'resnet50_v1.5']
"""

from __future__ import annotations

import difflib
import fnmatch
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cnnbench.config.errors import ConfigError
from cnnbench.words import natural_key

if TYPE_CHECKING:
    from torch import nn

log = logging.getLogger(__name__)

DEFAULT_NUM_CLASSES = 1000


@dataclass(frozen=True)
class ModelSpec:
    """What the tool knows about one model before building it."""

    name: str
    """Canonical registry name (``resnet50``, ``timm/inception_v4``, ``trivial``)."""
    source: str
    """Where the model comes from: ``torchvision``, ``timm`` or ``builtin``."""
    builder: Callable[..., nn.Module] = field(repr=False)
    """``builder(num_classes=..., image_size=...)`` returns a freshly initialised module."""
    default_image_size: int = 224
    default_batch_size: int = 32
    min_image_size: int = 16
    """Smallest input side the model accepts (from library metadata where it ships one)."""
    reference: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """Reference figures the library ships in its code (torchvision weight metadata):
    ``num_params``, ``ops`` (as published; see :mod:`cnnbench.models.cost`), ``acc1``, ``acc5``,
    ``weights`` (the weight-enum name they describe)."""

    def build(self, num_classes: int = DEFAULT_NUM_CLASSES, image_size: int | None = None) -> nn.Module:
        return self.builder(num_classes=num_classes, image_size=image_size or self.default_image_size)


class UnknownModelError(ConfigError):
    """A model name that no source knows."""

    def __init__(self, name: str, nearest: list[str]) -> None:
        hint = f"; nearest: {', '.join(nearest)}" if nearest else ""
        super().__init__("model", f"unknown model {name!r}{hint} (see `cnnbench models --list`)")
        self.name = name
        self.nearest = nearest


_SPECS: dict[str, ModelSpec] = {}
_ALIASES: dict[str, str] = {}
_LOADED = False
_LOADING = threading.RLock()


def register_spec(spec: ModelSpec) -> ModelSpec:
    if spec.name in _SPECS:
        raise ValueError(f"model {spec.name!r} registered twice")
    _SPECS[spec.name] = spec
    return spec


def register_alias(alias: str, target: str) -> None:
    """``alias`` resolves to ``target`` (which may itself be a ``timm/`` name)."""
    _ALIASES[alias] = target


def register_model(
    name: str, *, default_image_size: int = 224, default_batch_size: int = 32, min_image_size: int = 16
) -> Callable[[Callable[..., nn.Module]], Callable[..., nn.Module]]:
    """Decorator for built-in model functions ``fn(num_classes, image_size) -> nn.Module``."""

    def wrap(fn: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        register_spec(
            ModelSpec(
                name=name,
                source="builtin",
                builder=fn,
                default_image_size=default_image_size,
                default_batch_size=default_batch_size,
                min_image_size=min_image_size,
            )
        )
        return fn

    return wrap


def _load_sources() -> None:
    """Import the sources (they register on import), once. Under a lock, and marked loaded
    only once their imports are done: a second thread that looked meanwhile (``cnnbench.run``
    from two threads) waits for them, instead of finding the registry half filled; after an
    import that failed it is not marked loaded either. Re-entrant: a source may look up a name."""
    global _LOADED
    if _LOADED:
        return
    with _LOADING:
        if _LOADED:
            return
        from cnnbench.models import builtin, torchvision_source  # noqa: F401  (they register on import)

        _LOADED = True


def _timm_spec(name: str) -> ModelSpec | None:
    from cnnbench.models import timm_source

    return timm_source.spec_for(name)


def get_model_spec(name: str) -> ModelSpec:
    """The spec for a registry name or alias; raises :class:`UnknownModelError`."""
    _load_sources()
    target = _ALIASES.get(name, name)
    if target in _SPECS:
        return _SPECS[target]
    if target.startswith("timm/"):
        spec = _timm_spec(target)
        if spec is not None:
            return spec
    known = list(_SPECS) + list(_ALIASES)
    raise UnknownModelError(name, difflib.get_close_matches(name, known, n=3, cutoff=0.0))


def canonical_name(name: str) -> str:
    """Registry name behind an alias (``inception3`` -> ``inception_v3``)."""
    return get_model_spec(name).name


def list_models(pattern: str = "*", *, include_aliases: bool = True, include_timm: bool | None = None) -> list[str]:
    """Names matching a shell-style wildcard, in natural order (``resnet18`` before ``resnet101``).

    timm's thousand-odd names are listed only when the pattern asks for them
    (starts with ``timm/``) or ``include_timm`` is true, and timm is installed.
    """
    _load_sources()
    names = set(_SPECS)
    if include_aliases:
        names |= set(_ALIASES)
    if include_timm or (include_timm is None and pattern.startswith("timm/")):
        from cnnbench.models import timm_source

        names |= set(timm_source.list_names())
    return sorted((n for n in names if fnmatch.fnmatchcase(n, pattern)), key=natural_key)


def aliases_of(name: str) -> list[str]:
    _load_sources()
    return sorted((a for a, t in _ALIASES.items() if t == name), key=natural_key)


def create_model(name: str, *, num_classes: int = DEFAULT_NUM_CLASSES, image_size: int | None = None) -> nn.Module:
    """Build a freshly initialised model by registry name or alias."""
    return get_model_spec(name).build(num_classes=num_classes, image_size=image_size)
