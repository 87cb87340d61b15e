"""The GPU decisions a run makes before its first step, each a small function a CPU test checks.

No GPU has run this code's tests; GPU correctness comes by construction: every choice that
decides how fast or how right a CUDA run is lives here as a function of plain inputs, and
only the final call into CUDA is left untested.

* :func:`make_current`: the run's device is made current before anything touches CUDA, so
  a run on ``--gpu-indices k`` never creates a context on GPU 0;
* :func:`backend_flags` / :func:`apply_backend_flags`: cuDNN autotuning on for CUDA runs
  (warm-up absorbs the tuning; ``--no-cudnn-benchmark`` turns it off), TF32 only for tf32;
* :func:`optimizer_implementation`: the fused CUDA optimizer where torch has one, since only
  those unscale amp_fp16's gradients on the device (``_step_supports_amp_scaling``); any
  other makes ``GradScaler.step`` wait for the device every step (:func:`syncs_every_step`);
* :func:`bf16_capable`: bfloat16 from the run's device's compute capability (8.0 or newer),
  not ``torch.cuda.is_bf16_supported()``, which counts emulation and allocates on the
  current device;
* :func:`keeps_normalization_fp32` / :func:`normalization_to_fp32`: under pure fp16/bf16,
  normalisation layers keep fp32 weights (cuDNN's batch norm takes fp16 input only with fp32
  weights, and never bf16 input);
* :func:`phase_timing_syncs`: the forward/backward split waits for the device at each phase
  boundary on CUDA (nothing to wait for on a CPU);
* :func:`inference_context`: ``torch.no_grad`` for FSDP (its first forward under
  ``inference_mode`` breaks its parameters), ``torch.inference_mode`` otherwise.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from cnnbench.models.layers import NORMALIZATION

OptimizerImplementation = Literal["fused", "foreach", "default"]

FUSED_CUDA = frozenset({"sgd", "momentum", "adam"})
"""``--optimizer`` values whose torch optimizer has a fused CUDA implementation (SGD, Adam)."""
FUSED_CPU = frozenset({"sgd", "momentum", "adam"})
"""``--optimizer`` values whose torch optimizer has a fused CPU implementation (SGD, Adam)."""
FUSED_ON_DTENSOR = frozenset({"adam"})
"""Fused implementations that take FSDP2's sharded (DTensor) parameters: torch registers
``_fused_adam_`` for DTensor but not ``_fused_sgd_``."""
C_COMPILERS = ("gcc", "clang", "cc")


def make_current(device: torch.device) -> None:
    """Make ``device`` the current CUDA device (nothing for a CPU run).

    Called before anything else touches CUDA in a run: whatever then uses "the current
    device" (a stream, an allocation without a device, a library handle) lands on the run's
    GPU, not on GPU 0."""
    if device.type == "cuda":
        torch.cuda.set_device(device)


@dataclass(frozen=True)
class BackendFlags:
    """What a run sets in ``torch.backends`` (recorded, and printed in the header)."""

    cudnn_benchmark: bool
    allow_tf32: bool


def backend_flags(tf32: bool, device: torch.device, cudnn_benchmark: bool | None) -> BackendFlags:
    """The flags for a run on ``device``: autotuning on CUDA unless turned off; TF32 when asked."""
    return BackendFlags(cudnn_benchmark=device.type == "cuda" and cudnn_benchmark is not False, allow_tf32=tf32)


def apply_backend_flags(flags: BackendFlags) -> None:
    """Set every flag explicitly, so that fp32 means fp32 whatever this torch build defaults to."""
    torch.backends.cudnn.benchmark = flags.cudnn_benchmark
    torch.backends.cuda.matmul.allow_tf32 = flags.allow_tf32
    torch.backends.cudnn.allow_tf32 = flags.allow_tf32


def optimizer_implementation(optimizer: str, device_type: str, sharded: bool = False, *,
                             host_update: bool = False) -> OptimizerImplementation:
    """Which implementation of ``--optimizer`` to build for parameters on ``device_type``.

    CUDA: the fused one where torch has it (``sharded``: FSDP2's DTensor parameters, for which
    only fused Adam exists), else ``foreach`` (one kernel per group of tensors). ``host_update``
    (host weights updated for a GPU run: a parameter server on ``--local-parameter-device
    cpu``): torch's fused CPU kernel where it has one, else ``foreach``. Elsewhere, torch's own
    default, as before.
    """
    if host_update:
        return "fused" if optimizer in FUSED_CPU else "foreach"
    if device_type != "cuda":
        return "default"
    fused = FUSED_ON_DTENSOR if sharded else FUSED_CUDA
    return "fused" if optimizer in fused else "foreach"


def optimizer_kwargs(implementation: OptimizerImplementation) -> dict[str, bool]:
    """The keyword that builds ``implementation`` (none for torch's default)."""
    if implementation == "fused":
        return {"fused": True}
    if implementation == "foreach":
        return {"foreach": True}
    return {}


def implementation_of(optimizer: torch.optim.Optimizer | None) -> OptimizerImplementation | None:
    """The implementation an optimizer was built with (torch keeps it in ``defaults``);
    None without an optimizer (inference, a worker that updates no weight)."""
    if optimizer is None:
        return None
    if optimizer.defaults.get("fused"):
        return "fused"
    if optimizer.defaults.get("foreach"):
        return "foreach"
    return "default"


def syncs_every_step(grad_scaler: bool, implementation: OptimizerImplementation | None) -> bool:
    """Whether each training step waits for the device: ``GradScaler.step`` reads found-inf
    with ``.item()`` unless the optimizer unscales on the device, which only fused ones do."""
    return grad_scaler and implementation is not None and implementation != "fused"


def bf16_capable(capability: tuple[int, int]) -> bool:
    """bfloat16 runs natively from compute capability 8.0 (Ampere) on."""
    return capability[0] >= 8


def keeps_normalization_fp32(param_dtype: torch.dtype) -> bool:
    """Pure fp16/bf16 runs keep normalisation layers' weights in fp32."""
    return param_dtype in (torch.float16, torch.bfloat16)


def normalization_to_fp32(model: nn.Module) -> int:
    """Put every normalisation layer's weights and buffers back to float32; returns how many
    layers. (Their inputs stay half: batch norm takes half input with fp32 weights.)"""
    layers = [m for m in model.modules() if isinstance(m, NORMALIZATION)]
    for layer in layers:
        layer.float()
    return len(layers)


def inference_context(strategy: str) -> Callable[[], AbstractContextManager[Any]]:
    """The grad-free context of a forward-only step: FSDP2's first forward under
    ``torch.inference_mode`` raises ("Inference tensors do not track version counter") and
    leaves its parameters unusable, so FSDP gets ``torch.no_grad``."""
    return torch.no_grad if strategy == "fsdp" else torch.inference_mode


def cuda_compiler_missing() -> str | None:
    """Why ``torch.compile`` on CUDA cannot build its kernels here, or None: Triton compiles
    a launcher with ``$CC``, gcc or clang."""
    cc = os.environ.get("CC")
    if cc and shutil.which(cc):
        return None
    if any(shutil.which(name) for name in C_COMPILERS):
        return None
    return "torch.compile on CUDA needs a C compiler (Triton builds with $CC, gcc or clang); none is on PATH"


def first_device_type(params: Iterable[nn.Parameter]) -> tuple[str, bool, list[nn.Parameter]]:
    """The device type of the first parameter, whether parameters are DTensors (FSDP2), and
    the parameters as a list (the iterable may be a generator)."""
    listed = list(params)
    if not listed:
        return "cpu", False, listed
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - a torch without distributed
        return listed[0].device.type, False, listed
    return listed[0].device.type, isinstance(listed[0], DTensor), listed


def phase_timing_syncs(device_type: str) -> bool:
    """Whether timing a step's phases apart (:mod:`cnnbench.engine.phase_split`) must wait for
    the device at each boundary: on CUDA kernels run after the call returns; on a CPU the
    call returns when its work is done."""
    return device_type == "cuda"
