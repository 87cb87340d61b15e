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
  training mode (auxiliary heads of GoogLeNet/Inception v3 included) + backward with
  input and weight gradients (no input gradient for the image itself). Measured at
  batch 2 (batch norm in training mode needs more than one value per channel) and
  halved; every counted operator is linear in the batch. About 3 x ``forward_flops``.
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
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count

from cnnbench.config.errors import ConfigError
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


def model_cost(name: str, image_size: int | None = None) -> ModelCost:
    """Cost of registry model ``name`` (aliases accepted) at ``image_size`` (default: the model's).

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
    return _cached_cost(spec.name, size)


@functools.cache
def _cached_cost(canonical: str, size: int) -> ModelCost:
    spec = get_model_spec(canonical)
    try:
        counts = _measure(spec, size, real=False)
    except Exception as meta_exc:
        log.info("%s at %d: meta trace failed (%s); trying a real CPU forward", canonical, size, _one_line(meta_exc))
        try:
            counts = _measure(spec, size, real=True)
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


def _measure(spec: ModelSpec, size: int, *, real: bool) -> tuple[int, int, int, int, str]:
    """(params, feature bytes, forward FLOPs at batch 1, train FLOPs per image, method)."""
    device = "cpu" if real else "meta"
    model = _build(spec, size, real=real)
    params = sum(p.numel() for p in model.parameters())

    model.eval()
    image = torch.zeros(1, 3, size, size, device=device)  # made outside: the input is not a feature
    with torch.no_grad(), _CostMode(count_memory=True) as forward:
        model(image)

    model.train()
    batch = torch.zeros(TRAIN_BATCH, 3, size, size, device=device)
    with _CostMode(count_memory=False) as train:
        out = model(batch)
        outputs = [t for t in _tensors(out) if t.is_floating_point()]
        torch.stack([t.sum() for t in outputs]).sum().backward()
    method = METHOD_REAL if real else METHOD_META
    return params, forward.feature_bytes, forward.flops, train.flops // TRAIN_BATCH, method


def _build(spec: ModelSpec, size: int, *, real: bool) -> nn.Module:
    if real:
        return spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=size)
    try:
        with torch.device("meta"), _FastMeta():
            return spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=size)
    except Exception as exc:
        log.debug("%s: cannot build under the meta device (%s); moving parameters as they register", spec.name, exc)
        with _parameters_on_meta(), _FastMeta():
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
    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed=transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


@functools.lru_cache(maxsize=1)
def _flop_formulas() -> dict[Any, Any]:
    """torch's FLOP formulas (op packet -> fn(*args, out_val=..., **kwargs)), our conv backward in."""
    mapping = {torch.ops.aten.convolution_backward: _conv_backward_flop}
    return dict(FlopCounterMode(display=False, custom_mapping=mapping).flop_registry)


# ---------------------------------------------------------------------------------------
# Tracing on meta. Many meta kernels are Python reference implementations (0.3-5 ms a
# call, most of the time of a zoo run); the helpers below avoid running them where the
# result is known: a call whose argument metadata was seen before replays the recorded
# output metadata, value-only in-place ops (weight init, relu_, out += x) return their
# target, and batch/layer norm outputs are made from shapes. Results are unchanged.
# ---------------------------------------------------------------------------------------

_Template = Any  # ("tensor", shape, stride, dtype) | ("none",) | ("tuple", (templates...))

# (op, argument signatures) -> (output template, FLOPs), shared by all models.
_REPLAY: dict[Any, tuple[_Template, int]] = {}

# In-place ops that change values only (never shape or strides): on meta, a no-op.
_VALUE_ONLY_INPLACE = frozenset([
    "normal_", "uniform_", "fill_", "zero_", "random_", "bernoulli_", "exponential_", "erfinv_", "clamp_",
    "clamp_min_", "clamp_max_", "add_", "sub_", "mul_", "div_", "copy_", "masked_fill_", "relu_", "silu_",
    "gelu_", "hardswish_", "hardsigmoid_", "hardtanh_", "sigmoid_", "tanh_", "leaky_relu_", "elu_",
    "threshold_",
])

_NORMS = (
    aten.native_batch_norm.default,
    aten.native_batch_norm_backward.default,
    aten.native_layer_norm.default,
    aten.native_layer_norm_backward.default,
)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _signature(value: Any) -> Any:
    """A hashable description of an op argument: meta tensors by metadata, containers by items."""
    kind = type(value)
    if kind is int or kind is float or kind is bool:
        return (kind, value)  # 2 and 2.0 promote differently
    if kind is list or kind is tuple:
        return tuple([_signature(v) for v in value])
    if isinstance(value, torch.Tensor):
        if value.device.type != "meta":
            raise TypeError("only meta tensors are replayed")
        return (value.shape, value.stride(), value.dtype, value.storage_offset())
    if kind is dict:
        return tuple([(k, _signature(v)) for k, v in sorted(value.items())])
    hash(value)  # None, str, dtype, device, memory format...; TypeError if unhashable
    return value


def _storage_id(t: torch.Tensor) -> int:
    return int(t.untyped_storage()._cdata)


def _template(out: Any, input_storages: set[int]) -> _Template | None:
    """How to remake ``out`` from metadata; None unless it is fresh meta tensors (or None) only."""
    if out is None:
        return ("none",)
    if isinstance(out, torch.Tensor):
        if out.device.type != "meta" or _storage_id(out) in input_storages:
            return None
        return ("tensor", tuple(out.shape), out.stride(), out.dtype)
    if isinstance(out, tuple) and out:
        parts = tuple(_template(o, input_storages) for o in out)
        return None if any(p is None for p in parts) else ("tuple", parts)
    return None


def _remake(template: _Template) -> Any:
    if template[0] == "none":
        return None
    if template[0] == "tuple":
        return tuple(_remake(t) for t in template[1])
    _, shape, stride, dtype = template
    return torch.empty_strided(shape, stride, dtype=dtype, device="meta")


def _inplace_target(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """The target of a value-only in-place op on meta whose operands broadcast to it, else None."""
    if func.__name__.split(".")[0] not in _VALUE_ONLY_INPLACE or not args:
        return None
    target = args[0]
    if not isinstance(target, torch.Tensor) or target.device.type != "meta":
        return None
    for t in _tensors((args[1:], kwargs)):
        if t.device.type != "meta":
            return None
        if t.shape != target.shape and torch.broadcast_shapes(t.shape, target.shape) != target.shape:
            return None  # let the kernel raise its own error
    return target


def _norm_outputs(func: Any, args: tuple[Any, ...]) -> Any:
    """Outputs of batch/layer norm and their backward on meta, from shapes (as the kernels make them)."""
    backward = func in (aten.native_batch_norm_backward.default, aten.native_layer_norm_backward.default)
    x = args[1] if backward else args[0]
    if x.device.type != "meta" or not x.is_contiguous():
        return None
    if func is aten.native_batch_norm.default or func is aten.native_batch_norm_backward.default:
        c = x.shape[1]
        return x.new_empty(x.shape), x.new_empty((c,)), x.new_empty((c,))
    if func is aten.native_layer_norm.default:
        stats = tuple(x.shape[: x.dim() - len(args[1])]) + (1,) * len(args[1])
        return x.new_empty(x.shape), x.new_empty(stats), x.new_empty(stats)
    mask, weight, bias = args[7], args[5], args[6]
    return (
        x.new_empty(x.shape) if mask[0] else None,
        x.new_empty(weight.shape) if mask[1] and weight is not None else None,
        x.new_empty(bias.shape) if mask[2] and bias is not None else None,
    )


class _FastMeta(TorchDispatchMode):
    """Runs ops as usual, taking the shortcuts above on meta; counts the FLOPs of each op."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out, flops = self._run(func, args, kwargs)
        self.flops += flops
        self.observe(func, args, kwargs, out)
        return out

    def observe(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        """Hook for subclasses: sees every op with its result."""

    def _run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, int]:
        kind = _op_kind(func)
        if kind == "mutable":
            target = _inplace_target(func, args, kwargs)
            if target is not None:
                return target, 0
            out = func(*args, **kwargs)
            return out, _count_flops(func, args, kwargs, out)
        key = None
        if kind == "functional":
            try:
                key = (func, _signature(args), _signature(kwargs))
            except TypeError:  # a real tensor or an unhashable argument: no replay
                key = None
        if key is not None:
            hit = _REPLAY.get(key)
            if hit is not None:
                return _remake(hit[0]), hit[1]
        out = _norm_outputs(func, args) if func in _NORMS and not kwargs else None
        if out is None:
            out = func(*args, **kwargs)
        flops = _count_flops(func, args, kwargs, out)
        if key is not None:
            template = _template(out, {_storage_id(t) for t in _tensors((args, kwargs))})
            if template is not None:
                _REPLAY[key] = (template, flops)
        return out, flops


@functools.cache
def _op_kind(func: Any) -> str:
    """``mutable`` (writes an argument), ``alias`` (returns a view) or ``functional``."""
    schema = func._schema
    if schema.is_mutable:
        return "mutable"
    return "functional" if all(r.alias_info is None for r in schema.returns) else "alias"


def _count_flops(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    formula = _flop_formulas().get(func._overloadpacket)
    return 0 if formula is None else int(formula(*args, **kwargs, out_val=out))


class _CostMode(_FastMeta):
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
        results = [t for t in _tensors(out) if t.is_floating_point()]
        if not results:
            return
        inputs = list(_tensors((args, kwargs)))
        alias = returns[0].alias_info
        if alias is not None and alias.is_write:
            # In place: an activation (relu_) adds nothing; combining the target with
            # another same-shaped tensor (out += identity) is a layer of its own.
            t = results[0]
            if func is not aten.copy_.default and any(a.shape == t.shape for a in inputs[1:]):
                self.feature_bytes += t.numel() * FP32_BYTES
            return
        input_storages = {_storage_id(a) for a in inputs}
        for t in results:
            sid = _storage_id(t)
            if sid in self._seen or sid in input_storages:
                continue  # a view of an input, or an alias of something already counted
            self._seen[sid] = t.untyped_storage()
            self.feature_bytes += t.numel() * FP32_BYTES
