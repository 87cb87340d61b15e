"""Tracing a model on the ``meta`` device, fast, counting the FLOPs of every op.

Many meta kernels are Python reference implementations (0.3-5 ms a call, most of the time
of a zoo run); :class:`FastMeta` avoids running them where the result is known: a call whose
argument metadata was seen before replays the recorded output metadata, value-only in-place
ops (weight init, relu_, out += x) return their target, and batch/layer norm outputs are
made from shapes. Results are unchanged. FLOPs come from torch's formulas, with
:func:`conv_backward_flop` for convolution backward. See :mod:`cnnbench.models.cost`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count

aten = torch.ops.aten


def conv_backward_flop(
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
    mapping = {torch.ops.aten.convolution_backward: conv_backward_flop}
    return dict(FlopCounterMode(display=False, custom_mapping=mapping).flop_registry)


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


def tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors(v)


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


def storage_id(t: torch.Tensor) -> int:
    return int(t.untyped_storage()._cdata)


def _template(out: Any, input_storages: set[int]) -> _Template | None:
    """How to remake ``out`` from metadata; None unless it is fresh meta tensors (or None) only."""
    if out is None:
        return ("none",)
    if isinstance(out, torch.Tensor):
        if out.device.type != "meta" or storage_id(out) in input_storages:
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
    for t in tensors((args[1:], kwargs)):
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


class FastMeta(TorchDispatchMode):
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
            template = _template(out, {storage_id(t) for t in tensors((args, kwargs))})
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
