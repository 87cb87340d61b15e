"""Small validators shared by the configuration sections; each raises :class:`ConfigError`."""

from __future__ import annotations

import math
from typing import Any

from cnnbench.config.errors import ConfigError


def at_least(cfg: Any, name: str, minimum: int | float, *, allow_none: bool = False) -> None:
    """``getattr(cfg, name) >= minimum`` (``None`` passes when ``allow_none``)."""
    value = getattr(cfg, name)
    if value is None and allow_none:
        return
    if value < minimum:
        raise ConfigError(name, f"must be >= {minimum} (got {value})")


def finite(cfg: Any, name: str) -> None:
    """A float field that is not NaN or infinite (``None`` passes)."""
    value = getattr(cfg, name)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number (got {value})")


def unused(cfg: Any, name: str, why: str) -> None:
    """Reject a value given for an option that this configuration would not use."""
    if getattr(cfg, name) is not None:
        raise ConfigError(name, f"has no effect {why}")
