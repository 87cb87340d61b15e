"""The few statistics the report and the sweep need: the median, and how much repeats differ.
No numpy, no torch.

How much the repeats of one configuration differ is stated one way everywhere: their
**relative stdev**, the sample standard deviation over the mean (``n - 1`` in the variance),
as pyperf states the spread of its values (``mean +- std dev``). The sweep's warning and its
``--noise``, the report's ``±x%`` in a cell, the ``<column> relative stdev`` column of the
tables' CSV/JSON and the ``†`` mark (on a run's step times) all call :func:`relative_stdev`.
The per-step ``jitter`` of a single run (a robust spread of its steps,
:mod:`cnnbench.engine.stats`) is a different figure, with its own name.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Iterable, Sequence

SPREAD_NAME = "relative stdev"
"""What the figure is called wherever it is shown: warnings, table notes, CSV/JSON columns."""

REPEAT_NOISE = 0.02
"""Repeats whose relative stdev exceeds this disagree (the sweep warns; the report shows ``±x%``).

It replaces the 3% that used to bound the range over the median, and warns on the same runs
within reason. For two repeats ``a < b`` the relation is exact: the stdev is ``(b - a) / √2``
and the mean is the median, so a range of ``r`` times the median is a relative stdev of
``r / √2``; 3% of range is 2.12%, and 2% warns from a range of 2.83% on. For three repeats
it depends on where the middle one lies: the stdev is between half the range (middle one
halfway) and the range over √3 (middle one at an end), so 3% of range is 1.5% to 1.73%
(about 1.57% for normal noise), and 2% warns from a range of 3.46% to 4% on. With more
repeats the range grows with their number while the stdev does not (for normal noise, the
expected range is 2.33 stdevs for 5 repeats, 3.08 for 10): the range rule grew stricter with
every repeat added, the stdev rule stays put. On simulated repeats (normal noise of 0.2% to
10%), 2% agrees with the old rule on 99% of configurations of two repeats and 94% of three,
the repeat counts of the suites here."""


def median(values: Iterable[float]) -> float | None:
    """The median, or ``None`` for no values."""
    xs = list(values)
    return statistics.median(xs) if xs else None


def relative_stdev(values: Sequence[float]) -> float | None:
    """The sample standard deviation over the mean (pyperf's ``stdev / mean``), or ``None``
    with fewer than two values or a mean that is not positive.

    Two passes over floats (the mean, then the squares of the deviations from it): as exact
    as ``statistics.stdev`` to about 1e-12 for such figures, and fast enough for the step
    times of every run of a large report."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    if not mean > 0:
        return None
    dev = [x - mean for x in values]
    return math.sqrt(sum(map(operator.mul, dev, dev)) / (n - 1)) / mean


def spread_percent(fraction: float) -> str:
    """A relative stdev as shown: one decimal, ``9.1%``."""
    return f"{fraction * 100:.1f}%"
