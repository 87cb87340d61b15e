"""Is a series of step times stable enough to trust its mean? pyperf's checks, on step times.

pyperf (``pyperf._cli.format_checks``) calls a result unstable when

1. the standard deviation is 10% of the mean or more (the coefficient of variation is
   at least 10%), or
2. the minimum or the maximum is 50% or more away from the mean (an outlier).

:func:`spread_warnings` applies both to the timed steps (sample standard deviation, as
pyperf's ``statistics.stdev``; at least two steps) and returns short texts for
``metrics.warnings``; :func:`coefficient_of_variation` gives the figure itself. Pure Python.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

MAX_CV = 0.10
"""Standard deviation at or above this share of the mean: unstable."""
MAX_OUTLIER = 0.50
"""A step this far from the mean (as a share of it), or farther: an outlier."""


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean (None with fewer than two values)."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def spread_warnings(step_times_s: Sequence[float]) -> list[str]:
    """pyperf's two instability checks on step times, as ``unstable: ...`` texts."""
    cv = coefficient_of_variation(step_times_s)
    if cv is None:
        return []
    out: list[str] = []
    mean = statistics.fmean(step_times_s)
    if cv >= MAX_CV:
        out.append(f"unstable: step times vary by {cv:.0%} of their mean (standard deviation "
                   f"{_ms(cv * mean)}, mean {_ms(mean)}, {len(step_times_s)} steps)")
    slowest, fastest = max(step_times_s), min(step_times_s)
    if (slowest - mean) / mean >= MAX_OUTLIER:
        out.append(f"unstable: the slowest step ({_ms(slowest)}) is {(slowest - mean) / mean:.0%} above the "
                   f"mean ({_ms(mean)})")
    if (mean - fastest) / mean >= MAX_OUTLIER:
        out.append(f"unstable: the fastest step ({_ms(fastest)}) is {(mean - fastest) / mean:.0%} below the "
                   f"mean ({_ms(mean)})")
    return out
