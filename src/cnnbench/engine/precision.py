"""Precision modes: what dtype weights and inputs have, what autocast does, whether to scale.

| mode     | weights, inputs | autocast | grad scaler | TF32 matmul/conv |
|----------|-----------------|----------|-------------|------------------|
| fp32     | float32         | -        | -           | off              |
| tf32     | float32         | -        | -           | on (CUDA)        |
| amp_fp16 | float32         | float16  | yes (CUDA)  | off              |
| amp_bf16 | float32         | bfloat16 | -           | off              |
| fp16     | float16         | -        | -           | off              |
| bf16     | bfloat16        | -        | -           | off              |
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from cnnbench.engine.backend import BackendFlags, apply_backend_flags, backend_flags, bf16_capable


@dataclass(frozen=True)
class PrecisionPolicy:
    name: str
    param_dtype: torch.dtype
    autocast_dtype: torch.dtype | None
    grad_scaler: bool
    tf32: bool

    def apply_backend_flags(self, device: torch.device | None = None,
                            cudnn_benchmark: bool | None = True) -> BackendFlags:
        """Set TF32 explicitly (so fp32 means fp32 whatever this torch build defaults to) and,
        on CUDA, cuDNN autotuning (:func:`cnnbench.engine.backend.backend_flags`)."""
        flags = backend_flags(self.tf32, device or torch.device("cpu"), cudnn_benchmark)
        apply_backend_flags(flags)
        return flags

    def autocast(self, device_type: str) -> AbstractContextManager[object]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device_type, dtype=self.autocast_dtype)

    def scaler_used(self, device_type: str, forward_only: bool) -> bool:
        """Whether training steps go through a gradient scaler (amp_fp16 on CUDA)."""
        return self.grad_scaler and not forward_only and device_type == "cuda"

    def scaler(self, device_type: str, forward_only: bool) -> torch.amp.GradScaler | None:
        if not self.scaler_used(device_type, forward_only):
            return None
        return torch.amp.GradScaler(device_type)


POLICIES = {
    "fp32": PrecisionPolicy("fp32", torch.float32, None, False, False),
    "tf32": PrecisionPolicy("tf32", torch.float32, None, False, True),
    "amp_fp16": PrecisionPolicy("amp_fp16", torch.float32, torch.float16, True, False),
    "amp_bf16": PrecisionPolicy("amp_bf16", torch.float32, torch.bfloat16, False, False),
    "fp16": PrecisionPolicy("fp16", torch.float16, None, False, False),
    "bf16": PrecisionPolicy("bf16", torch.bfloat16, None, False, False),
}


def precision_policy(name: str) -> PrecisionPolicy:
    return POLICIES[name]


def unsupported_reason(name: str, device: torch.device) -> str | None:
    """Why ``device`` cannot run precision ``name``, or None when it can."""
    if device.type == "cpu":
        if name == "tf32":
            return "TF32 is a mode of NVIDIA Ampere-or-newer GPUs; on CPU use fp32, bf16 or amp_bf16"
        if name in ("fp16", "amp_fp16"):
            return f"{name} needs a CUDA device; on CPU use bf16 or amp_bf16"
        return None
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if name == "tf32" and major < 8:
            return f"TF32 needs compute capability 8.0 or newer ({torch.cuda.get_device_name(device)} has {major}.x)"
        if name in ("bf16", "amp_bf16") and not bf16_capable((major, minor)):
            return (f"bfloat16 needs compute capability 8.0 or newer ({torch.cuda.get_device_name(device)} has "
                    f"{major}.x); use fp16 or amp_fp16")
    return None
