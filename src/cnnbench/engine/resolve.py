"""From a validated :class:`RunConfig` to a runnable one, checked against this machine.

Fills defaults that depend on the model (image size, batch size) or the machine (device),
and rejects what this machine cannot do (CUDA absent, a precision the device lacks, an
image too small for the model) with a :class:`ConfigError` before any work starts.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import torch

from cnnbench.config import ConfigError, RunConfig
from cnnbench.engine.precision import unsupported_reason
from cnnbench.models import ModelSpec, get_model_spec


@dataclass(frozen=True)
class ResolvedRun:
    config: RunConfig
    """Every field concrete (no ``None`` for device, batch or image size)."""
    spec: ModelSpec
    device: torch.device


def resolve(config: RunConfig) -> ResolvedRun:
    spec = get_model_spec(config.model)
    device_kind = config.device
    if device_kind == "auto":
        device_kind = "cuda" if torch.cuda.is_available() else "cpu"
    if device_kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "cuda requested but no CUDA device is available here (use --device cpu)")
    device = torch.device(device_kind, 0) if device_kind == "cuda" else torch.device("cpu")

    reason = unsupported_reason(config.precision, device)
    if reason:
        raise ConfigError("precision", f"{config.precision} on {device_kind}: {reason}")
    has_compiler = any(shutil.which(cc) for cc in ("g++", "c++", "clang++"))
    if config.compile and device_kind == "cpu" and not has_compiler:
        raise ConfigError("compile", "torch.compile on CPU needs a C++ compiler (g++ or clang++) on PATH")

    image_size = config.image_size or spec.default_image_size
    if config.image_size is not None:
        _check_image_size(spec, image_size)
    resolved = config.replace(
        device=device_kind,
        batch_size=config.batch_size or spec.default_batch_size,
        image_size=image_size,
    )
    return ResolvedRun(config=resolved, spec=spec, device=device)


def _check_image_size(spec: ModelSpec, size: int) -> None:
    """Reject sizes the model cannot take: a shape-only forward on the meta device, no compute."""
    if size < spec.min_image_size:
        raise ConfigError("image_size", f"{size} is too small for {spec.name} (minimum {spec.min_image_size})")
    try:
        with torch.device("meta"):
            model = spec.build(image_size=size).eval()
            with torch.no_grad():
                model(torch.empty(1, 3, size, size))
    except (RuntimeError, ValueError, AssertionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError("image_size", f"{size} does not fit {spec.name}: {first}") from None
