"""The few statistics the report needs: median and relative spread. No numpy, no torch."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def median(values: Iterable[float]) -> float | None:
    """The median, or ``None`` for no values."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2


def relative_spread(values: Sequence[float]) -> float | None:
    """``(max - min) / median`` of repeats, or ``None`` with fewer than two values."""
    if len(values) < 2:
        return None
    m = median(values)
    if not m:
        return None
    return (max(values) - min(values)) / m
