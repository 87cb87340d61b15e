"""Model cost: parameters, feature memory and FLOPs of one model at one input size (SPEC C8).

Everything is counted at the operator level (ATen ops seen by a ``TorchDispatchMode``),
on the ``meta`` device: shapes propagate, nothing is allocated or computed, so the whole
torchvision zoo takes seconds. A model that cannot run on ``meta`` falls back to a real
CPU forward at batch 1 (``ModelCost.method`` says so).

Definitions (also in ``cnnbench models --help`` and the README):

* ``params``: number of parameter elements (buffers such as batch-norm running
  statistics are not parameters); ``param_memory_mib`` = params x 4 bytes / 2**20.
* ``feature_memory_mib``: convnet-burden's definition, used in seed 000. The total size,
  at fp32, of every intermediate tensor produced by one forward pass of one image in
  evaluation mode, with no memory reuse: each op's floating-point output counts once.
  Views (``view``, ``transpose``, ``flatten``...) and in-place activations (``relu_``,
  ``silu_``...) add nothing. Functional layers count like any layer: concatenations,
  and residual additions even when the model writes them in place (``out += identity``
  is an ``add_`` of two same-shaped tensors: a layer with its own output in a
  no-reuse account). The input image is not counted; integer bookkeeping tensors
  (max-pool indices) are not features and are not counted.
* ``forward_macs``: multiply-accumulates of convolutions (grouped and transposed
  included), matrix products (``mm``/``addmm``/``bmm``/``baddbmm``) and attention
  (``scaled_dot_product_attention``), at batch 1 in evaluation mode.
  ``forward_flops`` = 2 x ``forward_macs``. Not counted: bias additions, batch norm,
  activations, pooling, softmax, residual additions and other elementwise work (a few
  percent of a convnet's total). This is how torchvision's published ``_ops`` figures
  (GMACs, despite the "GFLOPS" column title) were counted.
* ``train_flops``: the same operators over one training step per image: forward in
  training mode (auxiliary heads of GoogLeNet/Inception v3 included) + backward with
  input and weight gradients (no input gradient for the image itself). Measured at
  batch 2 (batch norm in training mode needs more than one value per channel) and
  halved; every counted operator is linear in the batch. About 3 x ``forward_flops``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Iterator

from cnnbench.config.errors import ConfigError
from cnnbench.models.registry import DEFAULT_NUM_CLASSES, ModelSpec, get_model_spec

if TYPE_CHECKING:
    import torch
    from torch import nn

log = logging.getLogger(__name__)

MIB = 2**20
FP32_BYTES = 4
TRAIN_BATCH = 2
METHOD_META = "meta"
METHOD_REAL = "real-forward fallback"


@dataclass(frozen=True)
class ModelCost:
    """The cost of one model at one input size. Integers are exact; MiB are 2**20 bytes."""

    name: str
    input_size: str
    """``"224x224"`` (height x width of the image)."""
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
        """A JSON-safe row (str, int, float or None values only)."""
        return asdict(self)


def model_cost(name: str, image_size: int | None = None) -> ModelCost:
    """Cost of registry model ``name`` (aliases accepted) at ``image_size`` (default: the model's).

    Raises :class:`~cnnbench.models.UnknownModelError` for an unknown name and
    :class:`ConfigError` (field ``image_size``) when the size is too small for the model.
    Results are cached by (canonical name, size).
    """
    spec = get_model_spec(name)
    size = int(image_size) if image_size is not None else spec.default_image_size
    if size < spec.min_image_size:
        raise ConfigError(
            "image_size", f"{size}x{size} is too small for {spec.name} (smallest: {spec.min_image_size})"
        )
    return _cached_cost(spec.name, size)


@functools.lru_cache(maxsize=None)
def _cached_cost(canonical: str, size: int) -> ModelCost:
    spec = get_model_spec(canonical)
    try:
        counts = _measure(spec, size, real=False)
    except Exception as meta_exc:  # noqa: BLE001 - any failure on meta means: try for real
        log.warning("%s at %d: meta trace failed (%s); using a real CPU forward", canonical, size, _one_line(meta_exc))
        try:
            counts = _measure(spec, size, real=True)
        except Exception as exc:  # noqa: BLE001 - a model that cannot run at this size
            raise ConfigError(
                "image_size", f"{size}x{size} is too small for {canonical} ({_one_line(exc)})"
            ) from exc
    params, feature_bytes, fwd_flops, train_flops, method = counts
    ref = spec.reference
    use_ref = bool(ref) and ref.get("image_size") in (None, size)
    return ModelCost(
        name=canonical,
        input_size=f"{size}x{size}",
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


def _measure(spec: ModelSpec, size: int, *, real: bool) -> tuple[int, int, int, int, str]:
    """(params, feature bytes, forward FLOPs at batch 1, train FLOPs per image, method)."""
    import torch
    from torch.utils._pytree import tree_flatten

    device = "cpu" if real else "meta"
    model = _build(spec, size, real=real)
    params = sum(p.numel() for p in model.parameters())

    model.eval()
    with torch.no_grad(), _CostMode(count_memory=True) as forward:
        model(torch.zeros(1, 3, size, size, device=device))

    model.train()
    with _CostMode(count_memory=False) as train:
        out = model(torch.zeros(TRAIN_BATCH, 3, size, size, device=device))
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]
        torch.stack([t.sum() for t in outputs]).sum().backward()
    method = METHOD_REAL if real else METHOD_META
    return params, forward.feature_bytes, forward.flops, train.flops // TRAIN_BATCH, method


def _build(spec: ModelSpec, size: int, *, real: bool) -> "nn.Module":
    import torch

    if real:
        return spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=size)
    try:
        with torch.device("meta"):
            return spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=size)
    except Exception as exc:  # noqa: BLE001 - e.g. RegNet computes widths with tensors in __init__
        log.debug("%s: cannot build under the meta device (%s); moving parameters as they register", spec.name, exc)
        with _parameters_on_meta():
            return spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=size)


@contextlib.contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Build on CPU, but move each parameter and buffer to ``meta`` as it registers.

    Factory calls inside ``__init__`` stay real (so code that computes layer widths with
    tensors works); weights are only ``torch.empty`` (untouched pages) until they move,
    and their initialisation then runs on meta, for free.
    """
    from torch import nn

    register_parameter = nn.Module.register_parameter
    register_buffer = nn.Module.register_buffer

    def param(self: nn.Module, name: str, p: Any) -> None:
        if p is not None:
            p = nn.Parameter(p.to("meta"), requires_grad=p.requires_grad)
        register_parameter(self, name, p)

    def buffer(self: nn.Module, name: str, b: Any, persistent: bool = True) -> None:
        register_buffer(self, name, None if b is None else b.to("meta"), persistent)

    nn.Module.register_parameter = param  # type: ignore[method-assign]
    nn.Module.register_buffer = buffer  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.register_parameter = register_parameter  # type: ignore[method-assign]
        nn.Module.register_buffer = register_buffer  # type: ignore[method-assign]


def _conv_backward_flop(
    grad_out_shape: list[int],
    x_shape: list[int],
    w_shape: list[int],
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    _groups: Any,
    output_mask: list[bool],
    out_shape: Any = None,
    **kwargs: Any,
) -> int:
    """Convolution backward: the input gradient and the weight gradient each cost one forward.

    torch's own formula multiplies the weight gradient by the full input channel count,
    which overcounts grouped and depthwise convolutions by the number of groups.
    """
    from torch.utils.flop_counter import conv_flop_count

    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed=transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


@functools.lru_cache(maxsize=1)
def _flop_formulas() -> dict[Any, Any]:
    """torch's FLOP formulas (op packet -> fn(*args, out_val=..., **kwargs)), our conv backward in."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    mapping = {torch.ops.aten.convolution_backward: _conv_backward_flop}
    return dict(FlopCounterMode(display=False, custom_mapping=mapping).flop_registry)


def _cost_mode_class() -> type:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    formulas = _flop_formulas()

    def storage_id(t: torch.Tensor) -> int:
        return int(t.untyped_storage()._cdata)

    class CostMode(TorchDispatchMode):
        """Counts FLOPs of every op with a formula and, optionally, feature memory (see module doc).

        Unlike ``FlopCounterMode`` it does not decompose ops that have no formula (batch
        norm, elementwise): they cost no FLOPs by definition, and decomposing them in
        Python is what makes ``FlopCounterMode`` slow. Totals are the same.
        """

        def __init__(self, count_memory: bool) -> None:
            super().__init__()
            self.count_memory = count_memory
            self.flops = 0
            self.feature_bytes = 0
            self._seen: dict[int, Any] = {}  # storage id -> storage, kept alive so no id is reused

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = formulas.get(func._overloadpacket)
            if formula is not None:
                self.flops += int(formula(*args, **kwargs, out_val=out))
            if self.count_memory:
                self._count_memory(func, args, kwargs, out)
            return out

        def _count_memory(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
            inputs = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
            results = out if isinstance(out, (tuple, list)) else (out,)
            for ret, t in zip(func._schema.returns, results):
                if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                    continue  # max-pool indices and other integer bookkeeping are not features
                if ret.alias_info is not None and ret.alias_info.is_write:
                    # In place: an activation (relu_) adds nothing; combining the target with
                    # another same-shaped tensor (out += identity) is a layer of its own.
                    if func.name() != "aten::copy_" and any(a.shape == t.shape for a in inputs[1:]):
                        self.feature_bytes += t.numel() * FP32_BYTES
                    continue
                sid = storage_id(t)
                if sid in self._seen or any(storage_id(a) == sid for a in inputs):
                    continue  # a view of an input, or an alias of something already counted
                self._seen[sid] = t.untyped_storage()
                self.feature_bytes += t.numel() * FP32_BYTES

    return CostMode


def _CostMode(count_memory: bool) -> Any:  # noqa: N802 - reads like the class it makes
    return _cost_mode_class_cached()(count_memory)


@functools.lru_cache(maxsize=1)
def _cost_mode_class_cached() -> type:
    return _cost_mode_class()
