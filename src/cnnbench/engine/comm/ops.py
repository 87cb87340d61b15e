"""The collectives as torch.distributed calls on buffers made once per size.

Each :func:`make_op` returns a function of no arguments that runs the collective once on
buffers allocated beforehand (nothing is allocated while it is timed). Where torch has the
single-tensor forms (``all_gather_single``, ``reduce_scatter_single``; older names
``all_gather_into_tensor``, ``reduce_scatter_tensor``), those are used, as NCCL's own calls
take one contiguous buffer. Roots are rank 0.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from cnnbench.engine.comm.spec import element_counts

Op = Callable[[], object]


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"this torch has no dtype {name}")
    return dtype


def _filled(count: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A buffer of zeros: every dtype holds them, and sums of them never overflow however many
    times an all-reduce adds the buffer to itself."""
    return torch.zeros(count, dtype=dtype, device=device)


def _single(*names: str) -> Callable[..., object]:
    for name in names:
        fn = getattr(dist, name, None)
        if fn is not None:
            return fn
    raise NotImplementedError(f"this torch has none of {', '.join(names)}")


def make_op(collective: str, size: int, n: int, dtype: torch.dtype, device: torch.device) -> tuple[Op, int, int]:
    """(the collective as a call, elements per rank's part, bytes of the whole buffer)."""
    item = torch.empty((), dtype=dtype).element_size()
    count, total = element_counts(collective, size, n, item)
    if collective == "all_reduce":
        x = _filled(count, dtype, device)
        return (lambda: dist.all_reduce(x)), count, total
    if collective == "reduce":
        x = _filled(count, dtype, device)
        return (lambda: dist.reduce(x, dst=0)), count, total
    if collective == "broadcast":
        x = _filled(count, dtype, device)
        return (lambda: dist.broadcast(x, src=0)), count, total
    part, whole = _filled(count, dtype, device), _filled(count * n, dtype, device)
    if collective == "all_gather":
        gather = _single("all_gather_single", "all_gather_into_tensor")
        return (lambda: gather(whole, part)), count, total
    if collective == "reduce_scatter":
        scatter = _single("reduce_scatter_single", "reduce_scatter_tensor")
        return (lambda: scatter(part, whole)), count, total
    if collective == "all_to_all":
        out = torch.empty_like(whole)
        return (lambda: dist.all_to_all_single(out, whole)), count, total
    raise ValueError(f"unknown collective {collective!r}")
