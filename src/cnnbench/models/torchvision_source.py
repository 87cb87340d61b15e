"""Registers every torchvision classification model, plus tf_cnn_benchmarks' names as aliases.

Default input sizes come from the crop size of each model's first published weights
(224 for ResNets, 299 for Inception v3, 600 for EfficientNet-B7); transformers that take
their input size as a constructor argument (ViT, MaxViT) default to 224 and are built
for the size asked. Default batch sizes follow tf_cnn_benchmarks where it has the model
(alexnet 512, resnets and vggs 64, inception 32) and are 32 elsewhere.
Reference figures (parameter count, published operation count, top-1/top-5 accuracy)
are read from torchvision's weight metadata, shipped in its code: nothing is downloaded.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable
from typing import Any

import torchvision
from torch import nn
from torchvision import models as tvm

from cnnbench.models.registry import ModelSpec, register_alias, register_spec

log = logging.getLogger(__name__)

# tf_cnn_benchmarks model names whose torchvision (or timm) equivalent has another name.
TF_CNN_BENCHMARKS_ALIASES = {
    "inception3": "inception_v3",
    "inception4": "timm/inception_v4",
    "resnet50_v1.5": "resnet50",  # torchvision's ResNet-50 puts the stride on the 3x3 conv: v1.5
    "mobilenet": "mobilenet_v2",  # tf_cnn_benchmarks' "mobilenet" is MobileNet v2
}

# tf_cnn_benchmarks' default per-device batch sizes (model.CNNModel(name, size, batch, lr)).
TF_DEFAULT_BATCH = {"alexnet": 512, "resnet*": 64, "vgg*": 64, "wide_resnet*": 64, "inception_v3": 32, "googlenet": 32}

# Constructor keyword that sets the input size, for models built for one size only.
_SIZE_KWARG = {"vit_*": "image_size", "maxvit_*": "input_size"}

# Smallest input where library metadata does not say it (MaxViT's 7x7 partitions need 224).
_MIN_SIZE = {"maxvit_*": 224}

# Constructor keywords that silence initialisation warnings without changing the model.
_EXTRA_KWARGS: dict[str, dict[str, Any]] = {
    "googlenet": {"init_weights": True},
    "inception_v3": {"init_weights": True},
}


def _match(table: dict[str, Any], name: str) -> Any:
    for pattern, value in table.items():
        if fnmatch.fnmatchcase(name, pattern):
            return value
    return None


def _crop_size(weights: Any) -> int | None:
    transforms = getattr(weights, "transforms", None)
    keywords = getattr(transforms, "keywords", None) or {}
    crop = keywords.get("crop_size")
    if isinstance(crop, (list, tuple)):
        crop = crop[0]
    return int(crop) if crop else None


def _reference(weights: Any) -> dict[str, Any]:
    meta = weights.meta
    metrics = meta.get("_metrics", {}).get("ImageNet-1K", {})
    return {
        "weights": f"{type(weights).__name__}.{weights.name}",
        "num_params": meta.get("num_params"),
        "ops": meta.get("_ops"),
        "acc1": metrics.get("acc@1"),
        "acc5": metrics.get("acc@5"),
        "image_size": _crop_size(weights),
    }


def _make_builder(name: str, size_kwarg: str | None) -> Callable[..., nn.Module]:
    fn = tvm.get_model_builder(name)
    extra = _EXTRA_KWARGS.get(name, {})

    def build(num_classes: int = 1000, image_size: int = 224) -> nn.Module:
        kwargs: dict[str, Any] = dict(extra, weights=None, num_classes=num_classes)
        if size_kwarg == "image_size":
            kwargs["image_size"] = image_size
        elif size_kwarg == "input_size":
            kwargs["input_size"] = (image_size, image_size)
        return fn(**kwargs)

    build.__name__ = f"build_{name}"
    return build


def _register_all() -> None:
    for name in tvm.list_models(module=tvm):
        weights = list(tvm.get_model_weights(name))
        first = weights[0] if weights else None
        size_kwarg = _match(_SIZE_KWARG, name)
        crop = _crop_size(first) if first is not None else None
        default_size = 224 if size_kwarg or crop is None else crop
        min_size = _match(_MIN_SIZE, name) or 16
        if first is not None:
            ms = first.meta.get("min_size")
            if ms and not size_kwarg:
                min_size = max(min_size, int(ms[0]))
        register_spec(
            ModelSpec(
                name=name,
                source="torchvision",
                builder=_make_builder(name, size_kwarg),
                default_image_size=default_size,
                default_batch_size=_match(TF_DEFAULT_BATCH, name) or 32,
                min_image_size=min_size,
                reference=_reference(first) if first is not None else {},
            )
        )
    for alias, target in TF_CNN_BENCHMARKS_ALIASES.items():
        register_alias(alias, target)
    log.debug("registered torchvision %s classification models", torchvision.__version__)


_register_all()
