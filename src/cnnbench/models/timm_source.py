"""timm models as ``timm/<name>``, when timm is installed (``pip install 'cnnbench[timm]'``).

Specs are made on demand: timm knows more than a thousand architectures, and building
a spec reads only its pretrained config (input size), never weights.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING, Any

from cnnbench.config.errors import ConfigError
from cnnbench.models.registry import ModelSpec

if TYPE_CHECKING:
    from torch import nn

PREFIX = "timm/"


def available() -> bool:
    return importlib.util.find_spec("timm") is not None


@functools.lru_cache(maxsize=1)
def list_names() -> tuple[str, ...]:
    if not available():
        return ()
    import timm

    return tuple(PREFIX + n for n in timm.list_models())


@functools.cache
def spec_for(name: str) -> ModelSpec | None:
    if not available():
        raise ConfigError("model", f"{name!r} needs timm, which is not installed (pip install 'cnnbench[timm]')")
    import timm

    arch = name[len(PREFIX):]
    if not timm.is_model(arch):
        return None
    cfg: Any = timm.get_pretrained_cfg(arch)
    input_size = getattr(cfg, "input_size", None) or (3, 224, 224)
    fixed = bool(getattr(cfg, "fixed_input_size", False))

    def build(num_classes: int = 1000, image_size: int = input_size[-1]) -> nn.Module:
        kwargs: dict[str, Any] = {"pretrained": False, "num_classes": num_classes}
        if fixed:
            kwargs["img_size"] = image_size
        return timm.create_model(arch, **kwargs)

    return ModelSpec(
        name=name,
        source="timm",
        builder=build,
        default_image_size=int(input_size[-1]),
        default_batch_size=32,
    )
