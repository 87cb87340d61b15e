"""Model cost: parameters, feature memory and FLOPs of one model at one input size.

Everything is counted at the operator level (ATen ops seen by a ``TorchDispatchMode``),
on the ``meta`` device: shapes propagate, nothing is allocated or computed, so the whole
torchvision zoo takes seconds. A model that cannot run on ``meta`` falls back to a real
CPU forward at batch 1 (``ModelCost.method`` says so).

Definitions (also in ``cnnbench models --help`` and the README):

* ``params``: number of parameter elements (buffers such as batch-norm running
  statistics are not parameters); ``param_memory_mib`` = params x 4 bytes / 2**20.
* ``feature_memory_mib``: convnet-burden's definition, as vendor reports use it. The total size,
  at fp32, of every intermediate tensor produced by one forward pass of one image in
  evaluation mode, with no memory reuse: each op's output counts once. Views (``view``,
  ``transpose``, ``flatten``...) and in-place activations (``relu_``, ``silu_``...) add
  nothing. Functional layers count like any layer: concatenations, and residual
  additions even when the model writes them in place (``out += identity`` is an ``add_``
  of two same-shaped tensors: a layer with its own output in a no-reuse account). Not
  counted: the input image, and an op's auxiliary outputs (batch-norm statistics saved
  for backward, max-pool indices), which are bookkeeping rather than features.
* ``forward_macs``: multiply-accumulates of convolutions (grouped and transposed
  included), matrix products (``mm``/``addmm``/``bmm``/``baddbmm``) and attention
  (``scaled_dot_product_attention``), at batch 1 in evaluation mode.
  ``forward_flops`` = 2 x ``forward_macs``. Not counted: bias additions, batch norm,
  activations, pooling, softmax, residual additions and other elementwise work (a few
  percent of a convnet's total). This is how torchvision's published ``_ops`` figures
  (GMACs, despite the "GFLOPS" column title) were counted.
* ``train_flops``: the same operators over one training step per image: forward in
  training mode (auxiliary heads of GoogLeNet/Inception v3 included, unless ``aux=False``,
  which leaves them out of every figure, parameters too) + backward with
  input and weight gradients (no input gradient for the image itself). Measured at
  batch 2 (batch norm in training mode needs more than one value per channel) and
  halved; every counted operator is linear in the batch. About 3 x ``forward_flops``.

The fast trace on ``meta`` that counts the FLOPs is :mod:`cnnbench.models.meta_trace`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from cnnbench.config.errors import ConfigError
from cnnbench.models.meta_trace import FastMeta, storage_id, tensors
from cnnbench.models.registry import DEFAULT_NUM_CLASSES, ModelSpec, get_model_spec

log = logging.getLogger(__name__)
aten = torch.ops.aten

MIB = 2**20
FP32_BYTES = 4
TRAIN_BATCH = 2
METHOD_META = "meta"
METHOD_REAL = "real-forward fallback"


@dataclass(frozen=True)
class ModelCost:
    """The cost of one model at one input size. Integers are exact; MiB are 2**20 bytes."""

    name: str
    input_size: tuple[int, int, int]
    """(channels, height, width) of one input image."""
    params: int
    param_memory_mib: float
    feature_memory_mib: float
    forward_macs: int
    forward_flops: int
    train_flops: int
    top1_error: float | None
    top5_error: float | None
    image_size: int
    param_memory_bytes: int
    feature_memory_bytes: int
    method: str
    """``"meta"`` (shapes only) or ``"real-forward fallback"``."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe row: str, int, float or None values, ``input_size`` as a list."""
        row = asdict(self)
        row["input_size"] = list(self.input_size)
        return row


AUX_HEADS = ("AuxLogits", "aux1", "aux2")
"""Auxiliary classifier heads (Inception v3's, GoogLeNet's two), which train but do not infer."""


def has_aux_heads(name: str) -> bool:
    """Does registry model ``name`` carry auxiliary heads that ``aux=False`` leaves out?"""
    return get_model_spec(name).name in ("inception_v3", "googlenet")


def without_aux_heads(model: nn.Module) -> nn.Module:
    """``model`` without its auxiliary heads (torchvision's Inception v3 and GoogLeNet skip
    a head that is ``None``), as published cost tables count these models."""
    for name in AUX_HEADS:
        if getattr(model, name, None) is not None:
            setattr(model, name, None)
    if hasattr(model, "aux_logits"):
        setattr(model, "aux_logits", False)  # noqa: B010 (a plain attribute, which nn.Module's typing hides)
    return model


def model_cost(name: str, image_size: int | None = None, *, aux: bool = True) -> ModelCost:
    """Cost of registry model ``name`` (aliases accepted) at ``image_size`` (default: the model's);
    ``aux=False``: without auxiliary heads (:func:`without_aux_heads`).

    Raises :class:`~cnnbench.models.UnknownModelError` for an unknown name and
    :class:`ConfigError` (field ``image_size``, one line naming size and model) when the
    model cannot take that size. Cached by (canonical name, size); a first call costs
    0.05-1.5 s on the meta device (a real-forward fallback, logged as a warning, more).
    """
    spec = get_model_spec(name)
    size = int(image_size) if image_size is not None else spec.default_image_size
    if size < spec.min_image_size:
        raise ConfigError(
            "image_size", f"{size}x{size} is too small for {spec.name} (smallest: {spec.min_image_size})"
        )
    return _cached_cost(spec.name, size, aux)


@functools.cache
def _cached_cost(canonical: str, size: int, aux: bool = True) -> ModelCost:
    spec = get_model_spec(canonical)
    try:
        counts = _measure(spec, size, real=False, aux=aux)
    except Exception as meta_exc:
        log.info("%s at %d: meta trace failed (%s); trying a real CPU forward", canonical, size, _one_line(meta_exc))
        try:
            counts = _measure(spec, size, real=True, aux=aux)
        except Exception as exc:
            raise ConfigError(
                "image_size", f"{canonical} cannot take {size}x{size} images: {_one_line(exc)}"
            ) from exc
        log.warning(
            "%s at %d: counted with a real CPU forward at batch 1 (the meta trace failed: %s)",
            canonical, size, _one_line(meta_exc),
        )
    params, feature_bytes, fwd_flops, train_flops, method = counts
    ref = spec.reference
    use_ref = bool(ref) and ref.get("image_size") in (None, size)
    return ModelCost(
        name=canonical,
        input_size=(3, size, size),
        params=params,
        param_memory_mib=params * FP32_BYTES / MIB,
        feature_memory_mib=feature_bytes / MIB,
        forward_macs=fwd_flops // 2,
        forward_flops=fwd_flops,
        train_flops=train_flops,
        top1_error=_error(ref.get("acc1")) if use_ref else None,
        top5_error=_error(ref.get("acc5")) if use_ref else None,
        image_size=size,
        param_memory_bytes=params * FP32_BYTES,
        feature_memory_bytes=feature_bytes,
        method=method,
    )


def _error(acc: Any) -> float | None:
    return None if acc is None else round(100.0 - float(acc), 3)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def _measure(spec: ModelSpec, size: int, *, real: bool, aux: bool = True) -> tuple[int, int, int, int, str]:
    """(params, feature bytes, forward FLOPs at batch 1, train FLOPs per image, method)."""
    device = "cpu" if real else "meta"
    model = _build(spec, size, real=real)
    if not aux:
        model = without_aux_heads(model)
    params = sum(p.numel() for p in model.parameters())

    model.eval()
    image = torch.zeros(1, 3, size, size, device=device)  # made outside: the input is not a feature
    with torch.no_grad(), _CostMode(count_memory=True) as forward:
        model(image)

    model.train()
    batch = torch.zeros(TRAIN_BATCH, 3, size, size, device=device)
    with _CostMode(count_memory=False) as train:
        out = model(batch)
        outputs = [t for t in tensors(out) if t.is_floating_point()]
        torch.stack([t.sum() for t in outputs]).sum().backward()
    method = METHOD_REAL if real else METHOD_META
    return params, forward.feature_bytes, forward.flops, train.flops // TRAIN_BATCH, method


def _build(spec: ModelSpec, size: int, *, real: bool) -> nn.Module:
    if real:
        return spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=size)
    try:
        with torch.device("meta"), FastMeta():
            return spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=size)
    except Exception as exc:
        log.debug("%s: cannot build under the meta device (%s); moving parameters as they register", spec.name, exc)
        with _parameters_on_meta(), FastMeta():
            return spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=size)


@contextlib.contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Build on CPU, but move each parameter and buffer to ``meta`` as it registers.

    Factory calls inside ``__init__`` stay real (so code that computes layer widths with
    tensors works); weights are only ``torch.empty`` (untouched pages) until they move,
    and their initialisation then runs on meta, for free.
    """
    register_parameter = nn.Module.register_parameter
    register_buffer = nn.Module.register_buffer

    def param(self: nn.Module, name: str, p: Any) -> None:
        if p is not None:
            p = nn.Parameter(p.to("meta"), requires_grad=p.requires_grad)
        register_parameter(self, name, p)

    def buffer(self: nn.Module, name: str, b: Any, persistent: bool = True) -> None:
        register_buffer(self, name, None if b is None else b.to("meta"), persistent)

    nn.Module.register_parameter = param  # type: ignore[method-assign,assignment]
    nn.Module.register_buffer = buffer  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        nn.Module.register_parameter = register_parameter  # type: ignore[method-assign]
        nn.Module.register_buffer = register_buffer  # type: ignore[method-assign]


class _CostMode(FastMeta):
    """FLOPs of every op with a formula and, with ``count_memory``, feature memory (module doc).

    Unlike ``FlopCounterMode`` it does not decompose ops that have no formula (batch norm,
    elementwise): they cost no FLOPs by definition, and decomposing them in Python is
    what makes ``FlopCounterMode`` slow. The totals are the same.
    """

    def __init__(self, count_memory: bool) -> None:
        super().__init__()
        self.count_memory = count_memory
        self.feature_bytes = 0
        self._seen: dict[int, Any] = {}  # storage id -> storage, kept alive so no id is reused

    def observe(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        if not self.count_memory:
            return
        returns = func._schema.returns
        if len(returns) > 1:
            out = out[0]  # the feature; the rest is bookkeeping (saved statistics, indices)
        results = [t for t in tensors(out) if t.is_floating_point()]
        if not results:
            return
        inputs = list(tensors((args, kwargs)))
        alias = returns[0].alias_info
        if alias is not None and alias.is_write:
            # In place: an activation (relu_) adds nothing; combining the target with
            # another same-shaped tensor (out += identity) is a layer of its own.
            t = results[0]
            if func is not aten.copy_.default and any(a.shape == t.shape for a in inputs[1:]):
                self.feature_bytes += t.numel() * FP32_BYTES
            return
        input_storages = {storage_id(a) for a in inputs}
        for t in results:
            sid = storage_id(t)
            if sid in self._seen or sid in input_storages:
                continue  # a view of an input, or an alias of something already counted
            self._seen[sid] = t.untyped_storage()
            self.feature_bytes += t.numel() * FP32_BYTES
