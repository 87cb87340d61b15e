"""The tests behind :func:`cnnbench.analysis.significance.compare_runs`: Student's t distribution
(from :mod:`scipy.special`), Welch's test with Fieller's interval for the ratio of two means
(block means of step times, with their autocorrelation), Student's pooled test on logarithms
(repeats), and the run-to-run spread pooled per machine. No torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cnnbench.analysis.samples import RunSample

ALPHA = 0.05
"""Two-sided level of the test."""


# --- the Student t distribution ---------------------------------------------------------

def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (``df`` need not be whole)."""
    from scipy.special import stdtr  # imported on the first p-value: 0.12-0.2 s (benchmarks/README.md)

    if math.isnan(t):
        return 1.0
    return min(1.0, 2.0 * float(stdtr(df, -abs(t))))


def t_two_sided_ps(ts: Sequence[float], dfs: Sequence[float]) -> list[float]:
    """:func:`t_two_sided_p` of many statistics at once (one call over arrays; the same numbers)."""
    if not ts:
        return []
    import numpy as np
    from scipy.special import stdtr

    t = np.asarray(ts, dtype=np.float64)
    p = 2.0 * stdtr(np.asarray(dfs, dtype=np.float64), -np.abs(t))
    return [1.0 if math.isnan(x) else min(1.0, float(q)) for x, q in zip(ts, p.tolist(), strict=True)]


def t_critical(df: float, alpha: float = ALPHA) -> float:
    """The t with ``P(|T| >= t) = alpha`` (e.g. 2.228 for 10 degrees of freedom at 0.05)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, 1.0 - alpha / 2.0))


# --- a test for the ratio of two means ---------------------------------------------------

def _mean_var(xs: Sequence[float]) -> tuple[float, float]:
    n = len(xs)
    mean = sum(xs) / n
    return mean, sum((x - mean) ** 2 for x in xs) / (n - 1)


MAX_AUTOCORRELATION = 0.9


def lag1_autocorrelation(xs: Sequence[float]) -> float:
    """The lag-1 autocorrelation of a series, corrected for its small-sample bias
    (Kendall's ``(n r + 1) / (n - 3)``, as the plain estimate is biased towards -1/n) and
    kept in ``[0, 0.9]``; 0 for fewer than 5 values."""
    if len(xs) < 5:
        return 0.0
    if len(xs) <= PLAIN_VALUES:
        return _plain_moments(xs, autocorrelated=True)[3]
    ((_, (_, _, _, r)),) = _moments([xs], autocorrelated=True)
    return float(r[0])


Side = tuple[float, float, float]
"""One side of Welch's test: its mean, the variance of that mean and its effective sample size."""


PLAIN_VALUES = 4096
"""Up to this many values in all, :func:`sides` adds them in plain Python, the same to the bit:
quicker than setting up arrays for a pair of runs, and a small report then imports numpy only
if a p-value must be computed (0.1 s of a 0.3 s report of a few hundred records)."""


def sides(samples: Sequence[Sequence[float]], autocorrelated: bool) -> list[Side]:
    """The :data:`Side` of each sample (two or more values each), over arrays: the samples of
    one length as the rows of one array (in plain Python up to :data:`PLAIN_VALUES` values). Every
    sum adds its own sample's values one after the other, as Python's ``sum`` did before 3.12, so
    a side is the same to the bit alone, among many, or computed value by value.
    ``autocorrelated``: the effective sample size is ``n (1 - r) / (1 + r)``, at least 2, with
    ``r`` of :func:`lag1_autocorrelation`."""
    if any(len(x) < 2 for x in samples):
        raise ValueError("a side needs two or more values")
    if sum(map(len, samples)) <= PLAIN_VALUES:
        return [_plain_side(x, autocorrelated) for x in samples]
    out: list[Side] = [(0.0, 0.0, 0.0)] * len(samples)
    for at, (mean, ss, n, r) in _moments(samples, autocorrelated):
        n_eff = (n * (1.0 - r) / (1.0 + r)).clip(min=2.0) if autocorrelated else n
        for i, side in zip(at, zip(mean.tolist(), (ss / (n - 1.0) / n_eff).tolist(), n_eff.tolist(),
                                   strict=True), strict=True):
            out[i] = side
    return out


def _plain_side(xs: Sequence[float], autocorrelated: bool) -> Side:
    """:func:`sides` of one sample, value by value in the order :func:`_moments` adds them."""
    mean, ss, n, r = _plain_moments(xs, autocorrelated)
    n_eff = max(n * (1.0 - r) / (1.0 + r), 2.0) if autocorrelated else n
    return mean, ss / (n - 1.0) / n_eff, n_eff


def _plain_moments(xs: Sequence[float], autocorrelated: bool) -> tuple[float, float, float, float]:
    """:func:`_moments` of one sample (two or more values) in plain Python, the same to the bit:
    the values as float64 first; each sum from the first value on, left to right; the squares of
    ``ss`` by C's ``pow`` (infinite past the largest float, where Python's ``**`` raises)."""
    xs = [float(x) for x in xs]
    n = float(len(xs))
    total = xs[0]
    for x in xs[1:]:
        total += x
    mean = total / n
    dev = [x - mean for x in xs]
    try:
        squares = [d**2.0 for d in dev]
    except OverflowError:  # a deviation beyond 1.3e154: its square one by one
        squares = [_square(d) for d in dev]
    ss = squares[0]
    for sq in squares[1:]:
        ss += sq
    if not autocorrelated or len(xs) < 5:
        return mean, ss, n, 0.0
    den, lag = dev[0] * dev[0], dev[0] * dev[1]
    for i in range(1, len(dev)):
        den += dev[i] * dev[i]
        if i + 1 < len(dev):
            lag += dev[i] * dev[i + 1]
    if not den > 0.0:
        return mean, ss, n, 0.0
    r = min(max((n * (lag / den) + 1.0) / (n - 3.0), 0.0), MAX_AUTOCORRELATION)
    return mean, ss, n, 0.0 if math.isnan(r) else r


def _square(d: float) -> float:
    """``d ** 2.0``, infinite where it overflows (as C's ``pow``)."""
    try:
        return d**2.0
    except OverflowError:
        return math.inf


def _moments(samples: Sequence[Sequence[float]], autocorrelated: bool) -> Iterator[tuple[list[int], Any]]:
    """For each length of sample: where its samples are, and their means, sums of squared
    deviations, sizes and (``autocorrelated``, else 0) bias-corrected lag-1 autocorrelations of
    :func:`lag1_autocorrelation`, as numpy arrays. Sums run along each row in order (``cumsum``)."""
    import numpy as np

    by_size: dict[int, list[int]] = {}
    for i, sample in enumerate(samples):
        by_size.setdefault(len(sample), []).append(i)
    for size, at in by_size.items():
        values = np.array([samples[i] for i in at], dtype=np.float64).reshape(len(at), size)
        n = np.full(len(at), float(size))
        mean = values.cumsum(axis=1)[:, -1] / n
        dev = values - mean[:, None]
        ss = np.float_power(dev, 2.0).cumsum(axis=1)[:, -1]  # C's pow, as Python's ** (not dev * dev)
        r = np.zeros_like(n)
        if autocorrelated and size >= 5:
            den = (dev * dev).cumsum(axis=1)[:, -1]
            with np.errstate(divide="ignore", invalid="ignore"):
                lag = (dev[:, :-1] * dev[:, 1:]).cumsum(axis=1)[:, -1] / den
                r = np.clip((n * lag + 1.0) / (n - 3.0), 0.0, MAX_AUTOCORRELATION)
            r[~(den > 0.0) | np.isnan(r)] = 0.0
        yield at, (mean, ss, n, r)


@dataclass(frozen=True)
class RatioTest:
    """Welch's t-test of ``mean(num) = mean(den)`` and Fieller's interval for their ratio."""

    ratio: float
    """``mean(num) / mean(den)``."""
    p: float
    df: float
    low: float | None
    """Bounds of the ``1 - alpha`` interval of the ratio (``None``: unbounded)."""
    high: float | None


def ratio_test(num: Sequence[float], den: Sequence[float], alpha: float = ALPHA,
               autocorrelated: bool = False, interval: bool = True) -> RatioTest:
    """Welch's unequal-variance t-test on two independent samples (two or more values each),
    and the interval of the ratio of their means that is consistent with it (Fieller's: it
    leaves out 1 exactly when the test rejects at ``alpha``).

    ``autocorrelated``: the values are consecutive block means of one series, whose residual
    correlation shrinks the information they carry; each side's sample size is then taken as
    ``n (1 - r) / (1 + r)`` with ``r`` its lag-1 autocorrelation (the AR(1) effective size).
    ``interval=False`` skips the interval (its bounds are then ``None``).
    """
    stats = ratio_statistic(num, den, autocorrelated)
    if isinstance(stats, RatioTest):
        return stats
    ratio, t, df, (m1, v1, m2, v2) = stats
    p = t_two_sided_p(t, df)
    if not interval:
        return RatioTest(ratio, p, df, None, None)
    q2 = t_critical(round(df, 3), alpha) ** 2
    # Fieller: the ratios r with (m1 - r m2)^2 <= q^2 (v1 + r^2 v2)
    a = m2 * m2 - q2 * v2
    b = m1 * m2
    c = m1 * m1 - q2 * v1
    disc = b * b - a * c
    if a <= 0.0 or disc < 0.0:
        return RatioTest(ratio, p, df, None, None)
    root = math.sqrt(disc)
    return RatioTest(ratio, p, df, (b - root) / a, (b + root) / a)


def ratio_statistic(num: Sequence[float], den: Sequence[float], autocorrelated: bool = False
                    ) -> RatioTest | tuple[float, float, float, tuple[float, float, float, float]]:
    """Welch's statistic of :func:`ratio_test`: the ratio of the means, ``t``, the degrees of
    freedom and each side's mean and variance of the mean; or the whole test when there is no
    spread at all (the means are the answer)."""
    if len(num) < 2 or len(den) < 2:
        raise ValueError("the test needs two or more values on each side")
    return welch_statistic(*sides([num, den], autocorrelated))


def welch_statistic(num: Side, den: Side) -> RatioTest | tuple[float, float, float, tuple[float, float, float, float]]:
    """:func:`ratio_statistic` from the two :data:`Side` s."""
    (m1, v1, n1), (m2, v2, n2) = num, den
    ratio = m1 / m2
    se2 = v1 + v2
    if se2 <= 1e-24 * (m1 * m1 + m2 * m2):  # no spread at all: the means are the answer
        return RatioTest(ratio, 0.0 if m1 != m2 else 1.0, math.inf, ratio, ratio)
    df = se2 * se2 / (v1 * v1 / (n1 - 1.0) + v2 * v2 / (n2 - 1.0))
    return ratio, (m1 - m2) / math.sqrt(se2), df, (m1, v1, m2, v2)


@dataclass(frozen=True)
class RepeatSpread:
    """The run-to-run spread of one harness on one machine, pooled over many configurations:
    the variance of ``ln(images/sec)`` between repeats of one configuration, and its degrees
    of freedom (the number of repeats less the number of configurations)."""

    var: float
    df: int


def repeat_spread(groups: Iterable[Sequence[RunSample]]) -> RepeatSpread | None:
    """The pooled spread of the groups of repeats (one group: the runs of one configuration)
    that have two or more runs; ``None`` when none has."""
    return pooled_spread(group_spread(g) for g in groups)


GroupSpread = tuple[float, int]
"""One group's share of a pooled spread: the sum of squared deviations of its runs'
``ln(images/sec)`` from their mean, and its degrees of freedom (runs less one)."""


def group_spread(group: Sequence[RunSample]) -> GroupSpread | None:
    """The :data:`GroupSpread` of one group of repeats (``None`` with fewer than two runs)."""
    if len(group) < 2:
        return None
    logs = [math.log(r.rate) for r in group]
    mean = sum(logs) / len(logs)
    return sum((x - mean) ** 2 for x in logs), len(logs) - 1


def pooled_spread(parts: Iterable[GroupSpread | None]) -> RepeatSpread | None:
    """The spread pooled over the groups' shares, in their order (``None``: no group had one)."""
    ss, df = 0.0, 0
    for part in parts:
        if part is not None:
            ss += part[0]
            df += part[1]
    return RepeatSpread(ss / df, df) if df else None


class MachineSpreads:
    """The run-to-run spread pooled per machine: each machine's groups of repeats together
    (a group whose runs come from several machines joins none). :meth:`for_pair` gives the
    spread for a pair whose runs all come from one machine, ``None`` for a pair across
    machines (whose test then rests on its own repeats)."""

    def __init__(self, groups: Iterable[tuple[Sequence[RunSample], Sequence[Any]]] = (), *,
                 parts: Iterable[tuple[set[Any], GroupSpread | None]] = ()) -> None:
        """``groups``: each group's samples and the machine of each of its runs; or ``parts``:
        each group's machines and :data:`GroupSpread`, computed once (the same spreads)."""
        by_machine: dict[Any, list[GroupSpread | None]] = {}
        for where, part in chain(((set(machines), group_spread(samples)) for samples, machines in groups), parts):
            if len(where) == 1:
                by_machine.setdefault(next(iter(where)), []).append(part)
        self._spreads = {m: pooled_spread(g) for m, g in by_machine.items()}

    def for_pair(self, machines: Iterable[Any]) -> RepeatSpread | None:
        where = set(machines)
        return self._spreads.get(where.pop()) if len(where) == 1 else None


def log_ratio_test(num: Sequence[float], den: Sequence[float], alpha: float = ALPHA,
                   interval: bool = True, spread: RepeatSpread | None = None) -> RatioTest:
    """Student's t-test (pooled variance) on the logarithms of two samples of positive values
    (two or more each), and the interval of the ratio of their geometric means consistent
    with it. ``ratio`` is that ratio of geometric means.

    ``spread``: the run-to-run spread pooled over more configurations than these two (of the
    same machine). When it has more degrees of freedom than the pair's own ``n_a + n_b - 2``,
    the test takes its degrees of freedom and the larger of the two variances: where every
    configuration shares the machine's spread, the pooled variance alone would make the test
    exact, and the larger one only makes it more cautious; a pair whose own repeats disagree
    more than the rest keeps its own, larger spread."""
    stats = log_ratio_statistic(num, den, spread)
    if isinstance(stats, RatioTest):
        return stats
    ratio, t, df, (diff, se) = stats
    p = t_two_sided_p(t, df)
    if not interval:
        return RatioTest(ratio, p, df, None, None)
    half = t_critical(df, alpha) * se
    return RatioTest(ratio, p, df, math.exp(diff - half), math.exp(diff + half))


def log_ratio_statistic(num: Sequence[float], den: Sequence[float], spread: RepeatSpread | None = None
                        ) -> RatioTest | tuple[float, float, float, tuple[float, float]]:
    """Student's statistic of :func:`log_ratio_test`: the ratio of the geometric means, ``t``,
    the degrees of freedom, the difference of the mean logarithms and its standard error; or
    the whole test when there is no spread at all (the means are the answer)."""
    if len(num) < 2 or len(den) < 2:
        raise ValueError("the test needs two or more values on each side")
    ln, ld = [math.log(x) for x in num], [math.log(x) for x in den]
    (m1, v1), (m2, v2) = _mean_var(ln), _mean_var(ld)
    n1, n2 = len(ln), len(ld)
    df = float(n1 + n2 - 2)
    var = ((n1 - 1) * v1 + (n2 - 1) * v2) / df
    if spread is not None and spread.df > df:
        var, df = max(var, spread.var), float(spread.df)
    diff = m1 - m2
    se = math.sqrt(var * (1.0 / n1 + 1.0 / n2))
    ratio = math.exp(diff)
    if se <= 1e-12 * max(1.0, abs(diff)):  # no spread at all: the means are the answer
        return RatioTest(ratio, 0.0 if diff else 1.0, df, ratio, ratio)
    return ratio, diff / se, df, (diff, se)
