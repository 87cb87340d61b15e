"""From a validated :class:`RunConfig` to a runnable one, checked against this machine.

Fills defaults that depend on other options (:meth:`RunConfig.with_derived_defaults`),
on the model (image size, batch size) or on the machine (device), and rejects what this
machine cannot do (CUDA absent, a precision the device lacks, an image too small for the
model) with a :class:`ConfigError` before any work starts.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import torch

from cnnbench.config import ConfigError, RunConfig
from cnnbench.distributed.world import World
from cnnbench.engine.precision import unsupported_reason
from cnnbench.machine.devices import cuda_available, resolve_device_kind
from cnnbench.models import ModelSpec, get_model_spec


@dataclass(frozen=True)
class ResolvedRun:
    """A run with every choice made: what the engine's phases work from."""

    config: RunConfig
    """The configuration as recorded: every default filled, ``None`` only for unused options."""
    spec: ModelSpec
    device: torch.device
    """This worker's device (``cuda:<local rank>`` or ``cpu``)."""
    batch_size: int
    """Images per step on this worker."""
    image_size: int
    world: World

    @property
    def images_per_step(self) -> int:
        """Images per step over all workers."""
        return self.batch_size * self.world.world_size


def resolve(config: RunConfig, world: World | None = None) -> ResolvedRun:
    """The runnable form of ``config`` for this worker; raises :class:`ConfigError`."""
    world = world or World.single()
    spec = get_model_spec(config.model)
    device_kind = resolve_device_kind(config.device)
    if device_kind == "cuda" and not cuda_available():
        raise ConfigError("device", "cuda requested but no CUDA device is available here (use --device cpu)")
    device = torch.device("cuda", world.local_rank) if device_kind == "cuda" else torch.device("cpu")

    reason = unsupported_reason(config.precision, device)
    if reason:
        raise ConfigError("precision", f"{config.precision} on {device_kind}: {reason}")
    has_compiler = any(shutil.which(cc) for cc in ("g++", "c++", "clang++"))
    if config.compile and device_kind == "cpu" and not has_compiler:
        raise ConfigError("compile", "torch.compile on CPU needs a C++ compiler (g++ or clang++) on PATH")

    image_size = config.image_size or spec.default_image_size
    if config.image_size is not None:
        _check_image_size(spec, image_size)
    batch_size = config.batch_size or spec.default_batch_size
    resolved = config.with_derived_defaults().replace(device=device_kind, batch_size=batch_size,
                                                      image_size=image_size)
    return ResolvedRun(config=resolved, spec=spec, device=device, batch_size=batch_size,
                       image_size=image_size, world=world)


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
