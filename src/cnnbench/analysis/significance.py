"""Is B faster than A? The significance test shared by ``cnnbench compare`` and the report.

One function, :func:`compare_runs`, decides for two sets of runs (the repeats of one
configuration on each side) whether the candidate's images/sec differ from the baseline's:

- **Repeats** (both sides have two or more runs): Student's t-test on the logarithms of the
  runs' images/sec (``metrics.total_images_per_sec``), with the two sides' variances pooled,
  as pyperf's ``compare_to`` tests per-run values. The spread between runs holds everything
  that changes from one run to the next (machine state, clocks, memory placement) as well as
  the noise within runs. Logarithms, because run-to-run noise is relative (a run 5% off is 5%
  off at 100 or at 1,000 images/sec), so both sides of one harness on one machine share one
  relative spread, and pooling it keeps ``n_a + n_b - 2`` degrees of freedom: with two repeats
  per side Welch's unequal-variance test is left with about one, and calls not even a clean
  2× difference significant. Where many configurations are compared at once (an effect
  table, ``cnnbench compare``), the run-to-run spread is pooled, per machine, over all their
  groups of repeats on that machine (:class:`MachineSpreads`): ten configurations with two
  repeats a side give the test 20 degrees of freedom instead of 2. A pair whose own spread
  is larger keeps it; a pair across machines is tested on its own repeats alone.
- **Steps** (a side with a single run): Welch's t-test on *block means* of the per-step times
  (``metrics.step_times_s`` divided by the images per step, ``batch_size × num_devices``):
  consecutive steps are averaged in blocks of about ∛n steps (at least 10 blocks) and the
  blocks are the samples (the batch-means method of simulation output analysis). Step times
  within a run are autocorrelated (a slow phase lasts several steps), so a test that trusted
  every step as an independent sample would call tiny differences significant; what
  correlation is left between blocks shrinks each side's sample size to the AR(1) effective
  size ``n (1 - r) / (1 + r)`` (``r``: the blocks' lag-1 autocorrelation, bias-corrected).
  Imported tf_cnn_benchmarks logs have no step times, but their progress lines (cumulative
  images/sec every N steps) give the mean time of each block of N steps exactly, so they are
  tested the same way. One run per side says nothing about what changes between runs: only
  repeats do.
- Neither (no repeats and no step samples): **no samples**, never significant.

A difference is *significant* when the test's two-sided p-value is below ``alpha`` (0.05)
**and** the ratio differs from 1 by at least ``noise`` (the minimum effect, 3% by default),
in the direction the test found. The ratio shown is that of the medians of the runs'
images/sec (as every report cell is); the 95% interval is the one consistent with the test,
which excludes 1 exactly when the test rejects: for repeats, that of the ratio of geometric
means; for steps, Fieller's interval for the ratio of the two means.

Also here: the Student t distribution (through the regularised incomplete beta function;
no scipy) and each run's coefficient of variation of step times, which reports mark when
it is over 10%. No torch, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cnnbench.analysis.repeat_stats import relative_stdev

ALPHA = 0.05
"""Two-sided level of the test."""
DEFAULT_NOISE = 0.03
"""The smallest relative difference ever called significant."""
WIDE_CV = 0.10
"""A run whose step times vary more than this (std / mean) is marked as noisy (the threshold of
the run's own ``unstable`` warning, :data:`cnnbench.engine.stability.MAX_CV`)."""
MIN_BLOCKS = 10


# --- the Student t distribution ---------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny, eps = 1e-300, 1e-14
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 5000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (``df`` need not be whole)."""
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0
    if df > 1e5:  # the normal limit (the continued fraction converges slowly there)
        return math.erfc(abs(t) / math.sqrt(2.0))
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))


def _t_density(t: float, df: float) -> float:
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df))


@lru_cache(maxsize=4096)
def t_critical(df: float, alpha: float = ALPHA) -> float:
    """The t with ``P(|T| >= t) = alpha`` (e.g. 2.228 for 10 degrees of freedom at 0.05).

    Newton's method from the normal quantile: the tail probability is convex and falling
    in t, and the t quantile lies above the normal one, so the steps climb to it from below.
    """
    lo, hi = 0.0, 10.0
    for _ in range(60):  # the normal quantile, by bisection on erfc
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.erfc(mid / math.sqrt(2.0)) > alpha else (lo, mid)
    t = lo
    if df > 1e5:
        return t
    for _ in range(100):
        step = (t_two_sided_p(t, df) - alpha) / (2.0 * _t_density(t, df))
        t += step
        if step < 1e-12 * t:
            break
    return t


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
    n = len(xs)
    if n < 5:
        return 0.0
    mean = sum(xs) / n
    dev = [x - mean for x in xs]
    den = sum(d * d for d in dev)
    if den <= 0.0:
        return 0.0
    r = sum(a * b for a, b in zip(dev, dev[1:], strict=False)) / den
    r = (n * r + 1.0) / (n - 3.0)
    return max(0.0, min(r, MAX_AUTOCORRELATION))


def _side(xs: Sequence[float], autocorrelated: bool) -> tuple[float, float, float]:
    """Mean, variance of the mean and effective sample size of one side."""
    mean, var = _mean_var(xs)
    n_eff = float(len(xs))
    if autocorrelated:
        r = lag1_autocorrelation(xs)
        n_eff = max(2.0, n_eff * (1.0 - r) / (1.0 + r))
    return mean, var / n_eff, n_eff


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
    if len(num) < 2 or len(den) < 2:
        raise ValueError("the test needs two or more values on each side")
    m1, v1, n1 = _side(num, autocorrelated)
    m2, v2, n2 = _side(den, autocorrelated)
    ratio = m1 / m2
    se2 = v1 + v2
    if se2 <= 1e-24 * (m1 * m1 + m2 * m2):  # no spread at all: the means are the answer
        return RatioTest(ratio, 0.0 if m1 != m2 else 1.0, math.inf, ratio, ratio)
    df = se2 * se2 / (v1 * v1 / (n1 - 1.0) + v2 * v2 / (n2 - 1.0))
    t = (m1 - m2) / math.sqrt(se2)
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
    ss, df = 0.0, 0
    for group in groups:
        if len(group) < 2:
            continue
        logs = [math.log(r.rate) for r in group]
        mean = sum(logs) / len(logs)
        ss += sum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
    return RepeatSpread(ss / df, df) if df else None


class MachineSpreads:
    """The run-to-run spread pooled per machine: each machine's groups of repeats together
    (a group whose runs come from several machines joins none). :meth:`for_pair` gives the
    spread for a pair whose runs all come from one machine, ``None`` for a pair across
    machines (whose test then rests on its own repeats)."""

    def __init__(self, groups: Iterable[tuple[Sequence[RunSample], Sequence[Any]]]) -> None:
        """``groups``: each group's samples and the machine of each of its runs."""
        by_machine: dict[Any, list[Sequence[RunSample]]] = {}
        for samples, machines in groups:
            where = set(machines)
            if len(where) == 1:
                by_machine.setdefault(where.pop(), []).append(samples)
        self._spreads = {m: repeat_spread(g) for m, g in by_machine.items()}

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
    p = t_two_sided_p(diff / se, df)
    if not interval:
        return RatioTest(ratio, p, df, None, None)
    half = t_critical(df, alpha) * se
    return RatioTest(ratio, p, df, math.exp(diff - half), math.exp(diff + half))


# --- the runs of one side ----------------------------------------------------------------

def blocks_from_step_times(step_times: Sequence[float], images_per_step: float) -> tuple[float, ...]:
    """Seconds per image, averaged over blocks of consecutive steps.

    ``n`` steps make blocks of about ∛n steps, keeping at least 10 blocks (10 steps: blocks
    of 1; 100 steps: 20 blocks of 5; 10,000 steps: 454 blocks of 22). Leading steps that do
    not fill a block are left out (they are the ones nearest to the warm-up).
    """
    n = len(step_times)
    if n == 0 or images_per_step <= 0:
        return ()
    size = max(1, min(round(n ** (1.0 / 3.0)), n // MIN_BLOCKS))
    count = n // size
    start = n - count * size
    scale = 1.0 / (size * images_per_step)
    return tuple(sum(step_times[start + i * size: start + (i + 1) * size]) * scale for i in range(count))


def blocks_from_series(steps: Sequence[Any], rates: Sequence[Any]) -> tuple[float, ...]:
    """Seconds per image of each block between progress lines, from tf_cnn_benchmarks'
    cumulative images/sec (``images / mean step time`` of the steps so far) at those steps.

    The time of the first ``k`` steps per image is ``k / rate_k``; a block's is the
    difference of two such sums over its steps. Only the lines at multiples of the most
    common spacing are used (tf prints step 1, then 10, 20, ...); ``()`` when the lines do not
    allow it (too few, unordered, or a block that rounding makes non-positive).
    """
    pairs = [(int(s), float(r)) for s, r in zip(steps, rates, strict=False)
             if isinstance(s, (int, float)) and isinstance(r, (int, float)) and r > 0]
    if len(pairs) < 3:
        return ()
    gaps = [b[0] - a[0] for a, b in zip(pairs, pairs[1:], strict=False)]
    spacing = max(set(gaps), key=gaps.count)
    if spacing <= 0:
        return ()
    chosen = [(s, r) for s, r in pairs if s % spacing == 0]
    blocks = []
    prev_steps, prev_time = 0, 0.0
    for s, r in chosen:
        if s <= prev_steps:
            return ()
        total = s / r
        block = (total - prev_time) / (s - prev_steps)
        if block <= 0:
            return ()
        blocks.append(block)
        prev_steps, prev_time = s, total
    return tuple(blocks) if len(blocks) >= 2 else ()


def _cv(xs: Sequence[float]) -> float | None:
    """The relative stdev of the step times (:func:`cnnbench.analysis.repeat_stats.relative_stdev`, the one
    definition of spread in the report and the sweep), as the run's own ``unstable`` check
    computes it (:func:`cnnbench.engine.stability.coefficient_of_variation`, pyperf's), so that
    the ``†`` mark and that warning agree."""
    return relative_stdev(xs)


def _number(value: Any) -> float | None:
    return float(value) if value.__class__ in (int, float) else None


class RunSample:
    """What the test needs from one ``ok`` run: its images/sec, the coefficient of variation
    of its step times, and (computed when first asked for) its block means."""

    __slots__ = ("rate", "cv", "_blocks", "_times", "_images")

    def __init__(self, rate: float, blocks: Sequence[float] = (), cv: float | None = None, *,
                 step_times: Sequence[float] | None = None, images_per_step: float = 0.0) -> None:
        self.rate = rate
        """images/sec (``metrics.total_images_per_sec``)."""
        self.cv = cv
        """Coefficient of variation of the step times (std / mean), ``None`` when unknown."""
        self._blocks: tuple[float, ...] | None = None if step_times is not None else tuple(blocks)
        self._times = step_times
        self._images = images_per_step

    @property
    def blocks(self) -> tuple[float, ...]:
        """Seconds per image of each block of consecutive steps (empty: no step samples)."""
        if self._blocks is None:
            self._blocks = blocks_from_step_times(self._times or (), self._images)
            self._times = None
        return self._blocks

    @property
    def has_blocks(self) -> bool:
        """Are there two or more blocks (without computing them)?"""
        if self._blocks is None and self._times is not None:
            return len(self._times) >= 2 and self._images > 0  # no batch size: no blocks (see blocks_from_step_times)
        return len(self.blocks) >= 2

    @property
    def wide(self) -> bool:
        """Do its step times vary by more than :data:`WIDE_CV`?"""
        return self.cv is not None and self.cv > WIDE_CV

    def __repr__(self) -> str:
        return f"RunSample(rate={self.rate!r}, cv={self.cv!r}, blocks={len(self.blocks)})"


def _step_times(value: Any) -> list[float] | None:
    """``metrics.step_times_s`` when it is a non-empty list of positive numbers."""
    if not isinstance(value, list) or not value:
        return None
    try:
        if min(value) <= 0:  # null, text or a list among the numbers: TypeError
            return None
    except TypeError:
        return None
    return value


def run_sample(record: Mapping[str, Any]) -> RunSample | None:
    """The sample of an ``ok`` record with a throughput (``None`` for others)."""
    if str(record.get("status") or "ok") != "ok":
        return None
    metrics = record.get("metrics")
    if not isinstance(metrics, Mapping):
        return None
    rate = _number(metrics.get("total_images_per_sec"))
    if rate is None or rate <= 0:
        return None
    times = _step_times(metrics.get("step_times_s"))
    if times is not None:
        config = record.get("config") or {}
        batch = _number(config.get("batch_size")) if isinstance(config, Mapping) else None
        devices = _number(config.get("num_devices")) if isinstance(config, Mapping) else None
        images = batch * (devices or 1) if batch else 0.0
        return RunSample(rate, cv=_cv(times), step_times=times, images_per_step=images)
    series = metrics.get("step_series")
    blocks: tuple[float, ...] = ()
    if isinstance(series, Mapping):
        blocks = blocks_from_series(series.get("step") or [], series.get("images_per_sec") or [])
    return RunSample(rate, blocks, _cv_from_stderr(metrics, record.get("config")))


def _cv_from_stderr(metrics: Mapping[str, Any], config: Any) -> float | None:
    """For a log without step times: tf_cnn_benchmarks' ``+/-`` (std of per-step images/sec
    over √steps) times √steps, over the mean."""
    stderr = _number(metrics.get("images_per_sec_stderr"))
    mean = _number(metrics.get("images_per_sec_mean"))
    steps = _number(config.get("num_batches")) if isinstance(config, Mapping) else None
    if stderr is None or not mean or not steps:
        return None
    return stderr * math.sqrt(steps) / mean


# --- the decision ----------------------------------------------------------------------

REPEATS, STEPS, NONE = "repeats", "steps", "none"


@dataclass(frozen=True)
class Comparison:
    """The candidate against the baseline for one pair of configurations."""

    ratio: float | None
    """Candidate images/sec over baseline images/sec (medians of runs); > 1: candidate faster."""
    significant: bool
    basis: str
    """What the test used: ``repeats``, ``steps`` or ``none`` (nothing to test with)."""
    p: float | None = None
    low: float | None = None
    high: float | None = None
    n_base: int = 0
    n_cand: int = 0

    @property
    def verdict(self) -> str:
        """``faster``, ``slower``, ``not significant``, ``no samples`` (or ``—``: no ratio)."""
        if self.ratio is None:
            return "—"
        if self.basis == NONE:
            return "no samples"
        if not self.significant:
            return "not significant"
        return "faster" if self.ratio > 1 else "slower"


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def compare_runs(base: Sequence[RunSample], cand: Sequence[RunSample], noise: float = DEFAULT_NOISE,
                 alpha: float = ALPHA, interval: bool = True, spread: RepeatSpread | None = None) -> Comparison:
    """Is the candidate's images/sec different from the baseline's? (see the module docstring;
    ``interval=False``: no interval of the ratio, for callers that only need the verdict;
    ``spread``: the run-to-run spread pooled over the pairs being compared on the same machine, see
    :func:`log_ratio_test`)."""
    nb, nc = len(base), len(cand)
    if not nb or not nc:
        return Comparison(None, False, NONE, n_base=nb, n_cand=nc)
    ratio = _median([r.rate for r in cand]) / _median([r.rate for r in base])
    if nb >= 2 and nc >= 2:
        basis = REPEATS
    elif all(r.has_blocks for r in base) and all(r.has_blocks for r in cand):
        basis = STEPS
    else:
        return Comparison(ratio, False, NONE, n_base=nb, n_cand=nc)
    if not interval and abs(ratio - 1.0) < noise:  # never significant: spare the test
        return Comparison(ratio, False, basis, n_base=nb, n_cand=nc)
    if basis == REPEATS:
        test = log_ratio_test([r.rate for r in cand], [r.rate for r in base], alpha, interval, spread)
    else:
        # seconds per image, baseline over candidate: the ratio of rates
        test = ratio_test([x for r in base for x in r.blocks], [x for r in cand for x in r.blocks], alpha,
                          autocorrelated=True, interval=interval)
    same_direction = (test.ratio - 1.0) * (ratio - 1.0) > 0
    significant = test.p < alpha and abs(ratio - 1.0) >= noise and same_direction
    return Comparison(ratio, significant, basis, test.p, test.low, test.high, nb, nc)
