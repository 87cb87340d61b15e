"""Models: the registry (torchvision, tf_cnn_benchmarks aliases, timm, built-ins), model cost, layer kinds.
May import: ``config``, ``machine`` and the leaf modules (``cnnbench.errors``, ``cnnbench.words``)."""

from cnnbench.models.registry import (
    ModelSpec,
    UnknownModelError,
    aliases_of,
    canonical_name,
    create_model,
    get_model_spec,
    list_models,
    register_model,
)

__all__ = [
    "ModelSpec",
    "UnknownModelError",
    "aliases_of",
    "canonical_name",
    "create_model",
    "get_model_spec",
    "list_models",
    "register_model",
]
