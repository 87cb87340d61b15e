"""Is a series of step times stable enough to trust its mean? pyperf's check, on step times.

pyperf (``pyperf._cli.format_checks``) calls a result unstable when its standard deviation
is 10% of the mean or more: the coefficient of variation (sample standard deviation over
the mean, as pyperf's ``statistics.stdev``) is at least 10%. :func:`spread_warnings` applies
it to the timed steps (at least two) and returns a short text for ``metrics.warnings``.

pyperf's other check, a minimum or maximum 50% or more away from the mean, is left out on
purpose: pyperf applies it to values that are each the mean of many loops, while a step time
is one loop, where a single hiccup would trip it without moving the mean (one step 1.5x
slower among 100 moves the mean by 0.5%); a hiccup large enough to matter raises the
coefficient of variation instead (one step 2x slower among 50 moves the mean by 2%: 14%).
Pure Python.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from cnnbench.words import duration

MAX_CV = 0.10
"""Standard deviation at or above this share of the mean: unstable."""


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean (None with fewer than two values)."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


def block_means(values: Sequence[float], block: int) -> list[float]:
    """Means of consecutive blocks of ``block`` values (the leading values that do not fill a
    block are left out)."""
    if block <= 1:
        return list(values)
    start = len(values) % block
    return [statistics.fmean(values[i:i + block]) for i in range(start, len(values), block)]


def spread_warnings(step_times_s: Sequence[float], block: int = 1) -> list[str]:
    """pyperf's instability check on step times, as an ``unstable: ...`` text (or none).

    ``block``: check the means of blocks of this many consecutive steps instead: batches
    that ``k`` loader processes make side by side arrive in bursts of ``k`` (a long wait,
    then ``k - 1`` batches at once), a pattern of the pipeline, not noise."""
    times = block_means(step_times_s, block)
    cv = coefficient_of_variation(times)
    if cv is None or cv < MAX_CV:
        return []
    mean = statistics.fmean(times)
    what = "step times" if block <= 1 else f"times of blocks of {block} batches"
    return [f"unstable: {what} vary by {cv:.0%} of their mean (standard deviation {duration(cv * mean)}, "
            f"mean {duration(mean)}, slowest {duration(max(times))}, {len(step_times_s)} steps)"]
