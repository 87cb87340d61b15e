"""History: each machine's and configuration's runs over time, their levels, change points and outliers.

A *series* is every ``ok`` run of one identity (the configuration and the machine, as
:func:`cnnbench.analysis.points.build_points` groups repeats), ordered by ``started_at``, or by
a field (a version) and then time. Runs with the same ``session_id`` next to each other form a
*job* (a record without one is a job of its own). The noise model holds two spreads, both
estimated from the series itself (on the log of images/sec): within a job (the pooled spread of
runs around their job's mean) and between jobs (from the differences of successive job means,
trimmed of the few large ones that are changes, less the within part). A job's mean is then
weighted by ``1 / (between^2 + within^2 / runs)``; the tests take the scale of those variances
from the residuals of the job means around the levels fitted (with the split tested), so that a
step is no part of the noise it is judged against.

:func:`fit_levels` finds the levels: a run, or a burst of two, far from both the runs before
and the runs after it (more than :data:`OUTLIER_SIGMAS` robust spreads from the median of
each side, the same way) is an outlier, left out of the fit and reported apart (the newest run
too, unless the run before it is as far the same way: two runs make a level); then
binary segmentation on the job means splits the level where the weighted two-sample t of the two
sides is most significant, when the chance that a split at any of the places it could have been
reaches that t (:func:`_adjusted`; Bonferroni's places times one p overstates it where
neighbouring places' ts nearly agree) is under :data:`ALPHA`, with at least two runs on each side
and a change of at least :data:`MIN_CHANGE`, and again until no split is; then, where the exact
best partition with more levels fits far beyond chance (a level that returns, slow fast slow fast,
which no one split explains: :func:`_more_levels`), that partition, each of its levels more than
a step of the throughputs' writing from the next; then each change is tested again between its two
neighbouring levels and the weakest dropped until every one holds. No test takes a scale below
what writing the throughputs to a step adds (:func:`_rounding`: whole numbers that tie show the
two spreads no noise).
``benchmarks/history_methods.py`` measured this against asv's step detection, Apache Otava's
E-Divisive, a Conbench-style lookback z-score and ruptures' PELT (``benchmarks/README.md``).

:func:`build_history` does this for every series of a set of records and names, for each change,
the last run before and the first after, its size with a 95% interval, its p-value, and the
suspects: environment fields (torch, CUDA, cuDNN, the driver, a GPU's clocks and power limit,
...) and kinds of warnings (busy CPU, ...) that differ between the two sides. Imported records
whose start time an import filled in (``started_at_source``: a file's modification time) are left
out and counted.
No torch here.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import re
import sys
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.points import PointSet, build_points
from cnnbench.results import fields as R
from cnnbench.results.query import get_value
from cnnbench.results.record import STARTED_AT_FILLED_IN
from cnnbench.words import digits_key

if TYPE_CHECKING:
    import numpy as np

ALPHA = 0.005
"""A split is kept when its p-value, adjusted for the places it could have been, is under this."""
MIN_CHANGE = 0.01
"""Changes smaller than this (1%) are never reported."""
MIN_POINTS = 8
"""A series with fewer ``ok`` runs is listed as too short."""
MIN_RUNS = 2
"""Runs (outliers left out) each side of a change must have."""
OUTLIER_SIGMAS = 5.0
"""How many robust spreads from the median of the runs each side make a run an outlier."""
_WINDOW = 4
"""Neighbours each side an outlier is judged against."""
_FLOOR = 1e-4
"""The smallest spread (relative) the noise model uses: a constant series is not infinitely sure."""
_NODES = 48
"""Points of the quadrature in :func:`_adjusted`."""

SUSPECT_FIELDS = (
    R.TORCH_VERSION, R.TORCHVISION_VERSION, R.CUDA_VERSION, R.CUDNN_VERSION, R.NCCL_VERSION, R.GPU_DRIVER,
    R.CUDA_DRIVER_VERSION, R.PYTHON_VERSION, R.PLATFORM, R.TORCH_NUM_THREADS, R.AVAILABLE_CPUS, R.CPU_THREADS,
    R.MEMORY_BYTES, R.HOSTNAME, R.GPU_MIG_PROFILE, R.GPU_POWER_LIMIT, R.GPU_SM_CLOCK, R.GPU_MEMORY_CLOCK,
    R.GPU_PCIE_GENERATION, R.GPU_PCIE_WIDTH, "tool_version",
)
"""Fields compared between the two sides of a change (``environment.gpus.X``: each GPU's ``X``)."""

__all__ = [
    "ALPHA", "MIN_CHANGE", "MIN_POINTS", "History", "Change", "Level", "LevelFit", "Noise", "Outlier", "Run",
    "Series", "Shift", "Suspect", "TooShort", "build_history", "fit_levels",
]


# --- the fit on numbers ----------------------------------------------------------------------

@dataclass(frozen=True)
class Noise:
    """The spreads of a series (standard deviations of the log, about relative): ``within`` a job
    and ``between`` jobs; ``df``: the degrees of freedom its tests use (the jobs less the levels)."""

    within: float
    between: float
    df: int


@dataclass(frozen=True)
class Level:
    """Runs ``start`` to ``stop - 1`` share this level (images/sec, a weighted geometric mean)."""

    start: int
    stop: int
    value: float


@dataclass(frozen=True)
class Shift:
    """A change between two levels: ``index`` is the first run after it; ``ratio`` after / before,
    ``low``-``high`` its 95% interval; ``p`` the two-sided p-value, adjusted for the places it
    could have split."""

    index: int
    ratio: float
    low: float
    high: float
    p: float


@dataclass(frozen=True)
class LevelFit:
    """What :func:`fit_levels` found: levels in order, the shifts between them, outlier runs."""

    levels: tuple[Level, ...]
    shifts: tuple[Shift, ...]
    outliers: tuple[int, ...]
    noise: Noise


def _job_index(jobs: Sequence[Hashable | None] | None, n: int) -> np.ndarray:
    """Each run's job number: a new job where the id changes or is missing."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    if jobs is None:
        return np.arange(n)
    out = np.empty(n, dtype=np.int64)
    j = -1
    prev: Any = None
    for i, job in enumerate(jobs):
        if job is None or i == 0 or job != prev:
            j += 1
        out[i] = j
        prev = job
    return out


def _median_of_sorted(rows: np.ndarray) -> np.ndarray:
    """Each row's median, its numbers sorted first and gaps (nan) after them; nan for a row of gaps
    (as ``np.nanmedian``, whose masked arrays took most of a fit's time)."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    k = (~np.isnan(rows)).sum(axis=1)
    at = np.arange(len(rows))
    lo = rows[at, np.maximum(k - 1, 0) // 2]
    hi = rows[at, k // 2 - (k == 0)]
    return np.where(k > 0, (lo + hi) / 2.0, np.nan)


def _outliers(y: np.ndarray, step: float = 0.0) -> np.ndarray:
    """Runs, alone or two together, far from the median of the runs before them and from that of
    the runs after them, on the same side of both (a boolean mask; a run at a step is near one of
    the two); the newest run alone unless the run before it is as far the same way. ``step``: the
    step the throughputs are written to (:func:`_step`); a run is never farther than one and a half
    of it from its neighbours' median only by the writing (a run and a median each half a step off
    at most), judged at the level of each run: 49 beside a row of whole 50s is no outlier, after a
    level of 100s too, and 4 beside 2s is."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    n = len(y)
    if n < 5:
        return np.zeros(n, dtype=bool)
    pad = np.full(n + 2 * _WINDOW, np.nan)
    pad[_WINDOW:_WINDOW + n] = y
    win = np.sort(np.lib.stride_tricks.sliding_window_view(pad, _WINDOW), axis=1)  # the gaps (nan) last
    before = _median_of_sorted(win[:n])
    after = _median_of_sorted(win[_WINDOW + 1:_WINDOW + 1 + n])
    r_before, r_after = y - before, y - after
    r_before = np.where(np.isnan(r_before), r_after, r_before)
    r_after = np.where(np.isnan(r_after), r_before, r_after)
    resid = np.where(np.abs(r_before) <= np.abs(r_after), r_before, r_after)
    resid = np.where(np.sign(r_before) == np.sign(r_after), resid, 0.0)
    scale = max(1.4826 * float(np.nanmedian(np.abs(r_before))), _FLOOR)
    far = np.abs(resid) > max(OUTLIER_SIGMAS * scale, MIN_CHANGE)
    if step:  # the writing's reach, relative to the level each run is judged against
        far &= np.abs(resid) > np.log1p(1.5 * step / np.exp(y - resid))
    out = np.zeros(n, dtype=bool)
    i = 0
    while i < n:
        if not far[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and far[j + 1] and resid[j + 1] * resid[i] > 0:
            j += 1
        if j < n - 1:  # a burst of one or two runs that the series comes back from
            out[i:j + 1] = j - i < MIN_RUNS
        elif i == j:  # the newest run alone: an outlier unless the run before it is as far the same way
            near = i > 0 and (y[i - 1] - (y[i] - resid[i])) * resid[i] >= 0.5 * resid[i] ** 2
            out[i] = not near
        i = j + 1
    return out


def _noise(y: np.ndarray, job: np.ndarray, m: np.ndarray, cnt: np.ndarray) -> Noise:
    """Within- and between-job spreads of a series (see the module's documentation)."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    dev = y - m[job]
    df_w = int((cnt - 1).sum())
    var_w = float((dev ** 2).sum()) / df_w if df_w > 0 else 0.0
    d = np.diff(m)
    df_b = 0
    var_b = 0.0
    if len(d):
        scale = 1.4826 * float(np.median(np.abs(d)))
        keep = np.abs(d) <= 4.0 * scale  # the few large differences are changes (or the only ones not 0)
        part = var_w * (1.0 / cnt[:-1] + 1.0 / cnt[1:])
        df_b = int(keep.sum())
        if df_b:
            var_b = max(0.0, float((d[keep] ** 2 - part[keep]).mean()) / 2.0)
    df = df_b if var_b > 0 or df_w == 0 else df_w
    return Noise(within=math.sqrt(var_w), between=math.sqrt(var_b), df=max(df, 1))


def _p_values(z: np.ndarray, df: int) -> np.ndarray:
    import numpy as np  # here, not at the top: a report without history loads no numpy
    from scipy.special import stdtr

    return 2.0 * stdtr(df, -np.abs(z))


@functools.lru_cache(maxsize=1)
def _nodes() -> tuple[np.ndarray, np.ndarray]:
    import numpy as np  # here, not at the top: a report without history loads no numpy

    return np.polynomial.legendre.leggauss(_NODES)


def _adjusted(t: float, w: np.ndarray, cnt: np.ndarray, df: int) -> float:
    """The p-value of the largest of the split ts of jobs with weights ``w`` and runs ``cnt``
    reaching ``|t|``: each split's t (its scale from the residuals of the fit with that split,
    ``df`` degrees of freedom) over the places with :data:`MIN_RUNS` runs each side. The chance
    that one of them does is at most that of the first plus, for each next place, that of
    reaching it where the place before did not (exact for two places: the residuals' direction
    is uniform on a sphere, and two splits' ts are two directions in it); neighbouring places'
    ts nearly agree, so this is near the truth where Bonferroni (the places times one p) is not."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    c = np.cumsum(cnt)
    valid = (c[:-1] >= MIN_RUNS) & (c[-1] - c[:-1] >= MIN_RUNS)
    one = float(_p_values(np.array([t]), df)[0])
    if valid.sum() < 2:
        return one
    if df < 2:  # the sum below vanishes at 1 degree of freedom (its terms are powers of 0): Bonferroni
        return min(1.0, one * int(valid.sum()))
    frac = (np.cumsum(w)[:-1] / w.sum())[valid]
    rho = np.sqrt(frac[:-1] * (1.0 - frac[1:]) / (frac[1:] * (1.0 - frac[:-1])))
    r2 = t * t / (df + t * t)
    half = math.acos(math.sqrt(r2))
    x, wx = _nodes()
    th = x * half  # the angles, from a split's direction, where its t is beyond |t|
    a1 = r2 / (np.cos(th) ** 2 - r2)
    c0 = np.cos(th[None, :] + np.arccos(np.minimum(rho, 1.0))[:, None]) ** 2 - r2
    a0 = np.where(c0 > 0, r2 / np.where(c0 > 0, c0, 1.0), np.inf)
    h = (df - 1) / 2.0
    new = (1.0 + a1) ** -h - (1.0 + np.maximum(a0, a1)) ** -h  # beyond at this place, not at the one before
    return min(1.0, one + float((new @ wx).sum()) * half / math.pi)


def _rss(m: np.ndarray, w: np.ndarray, bounds: Sequence[int]) -> float:
    """The weighted sum of squares of job means ``m`` around their level's weighted mean."""
    total = 0.0
    for a, b in zip(bounds, bounds[1:], strict=False):
        if b > a:
            mu = float((w[a:b] * m[a:b]).sum() / w[a:b].sum())
            total += float((w[a:b] * (m[a:b] - mu) ** 2).sum())
    return total


def _split(m: np.ndarray, w: np.ndarray, cnt: np.ndarray, rest: float, df: int, min_log: float,
           alpha: float, floor: float) -> tuple[int, float] | None:
    """The best place to split job means ``m`` (index of the first job after) and its adjusted p,
    or None when no split is significant: the weighted t of the two sides, scaled by the residuals
    of the fit with this split (``rest``: the sum of squares of the other levels; ``df``: the
    degrees of freedom of the fit with this split)."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    cw = np.cumsum(w)
    cs = np.cumsum(w * m)
    cc = np.cumsum(cnt)
    wl, sl, nl = cw[:-1], cs[:-1], cc[:-1]
    wr, sr = cw[-1] - wl, cs[-1] - sl
    diff = sr / wr - sl / wl
    gain = diff ** 2 / (1.0 / wl + 1.0 / wr)  # what the split takes off the sum of squares
    valid = (nl >= MIN_RUNS) & (cc[-1] - nl >= MIN_RUNS)
    tries = int(valid.sum())
    if not tries or df < 1:
        return None
    k = int(np.argmax(np.where(valid, gain, -1.0)))
    if abs(diff[k]) < min_log:
        return None
    whole = float((w * (m - cs[-1] / cw[-1]) ** 2).sum())
    scale = max((rest + whole - float(gain[k])) / df, floor)
    t = math.sqrt(float(gain[k]) / scale)
    # the adjusted p is no smaller than the t's, nor that than the normal's (Student's tails are
    # heavier at every df): most splits are told apart by the normal's alone, without scipy (0.13 s)
    if math.erfc(t / math.sqrt(2.0)) >= alpha or float(_p_values(np.array([t]), df)[0]) >= alpha:
        return None
    p = _adjusted(t, w, cnt, df)
    return (k + 1, p) if p < alpha else None


def _compare(m: np.ndarray, w: np.ndarray, cnt: np.ndarray, a: int, k: int, b: int,
             scale: float, df: int) -> tuple[float, float, float]:
    """Jobs ``a..k-1`` against ``k..b-1``: the log ratio, its standard error and the adjusted p."""
    wl, wr = w[a:k].sum(), w[k:b].sum()
    diff = float((w[k:b] * m[k:b]).sum() / wr - (w[a:k] * m[a:k]).sum() / wl)
    se = math.sqrt(scale * (1.0 / wl + 1.0 / wr))
    return diff, se, _adjusted(abs(diff) / se, w[a:b], cnt[a:b], df)


def _partitions(m: np.ndarray, w: np.ndarray, cnt: np.ndarray, most: int) -> list[tuple[float, list[int]]]:
    """For each count of changes 0..``most``, the partition of job means ``m`` into that many more
    levels, each of :data:`MIN_RUNS` runs or more, with the least weighted sum of squares around
    the levels' means: ``(sum of squares, changes)`` (``inf`` and no changes where none fits).
    Dynamic programming over the places, exact (binary segmentation is greedy: a level that
    returns, slow fast slow fast, has no one split worth its place)."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    n = len(m)
    cw, cs, cq, cc = (np.concatenate([[0.0], np.cumsum(v)]) for v in (w, w * m, w * m * m, cnt))
    a, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")  # a level of jobs a..b-1
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = (cq[b] - cq[a]) - (cs[b] - cs[a]) ** 2 / (cw[b] - cw[a])
    cost = np.where((b > a) & (cc[b] - cc[a] >= MIN_RUNS), np.maximum(cost, 0.0), np.inf)
    best = cost[0].copy()  # the least sum of squares of jobs 0..b-1 in k + 1 levels
    back: list[np.ndarray] = []
    out: list[tuple[float, list[int]]] = [(float(best[n]), [])]
    for _ in range(most):
        total = best[:, None] + cost  # the last level a..b-1 after the best of 0..a-1
        back.append(np.argmin(total, axis=0))
        best = total[back[-1], np.arange(n + 1)]
        cuts, end = [], n
        for step in reversed(back):
            end = int(step[end])
            cuts.append(end)
        out.append((float(best[n]), sorted(cuts)) if math.isfinite(best[n]) else (math.inf, []))
    return out


_MORE_LEVELS = 4
"""How many more changes than binary segmentation found :func:`_more_levels` looks for."""
_UNEXPLAINED = 25.0
"""How many times the variance of a job's mean (from the two spreads) the job means must vary
around binary segmentation's levels before :func:`_more_levels` looks for more (a level that
returns leaves all of its step there)."""
_EXACT_JOBS = 600
"""The most jobs whose exact partitions :func:`_more_levels` looks for (its tables are the jobs
squared: 2.9 MB each at this size); a longer series keeps binary segmentation's changes."""


def _more_levels(m: np.ndarray, w: np.ndarray, cnt: np.ndarray, cuts: list[int], alpha: float,
                 floor: float, step: float = 0.0) -> list[int]:
    """``cuts``, or the best partition with more changes where its fit is better beyond chance: the
    F test of the sum of squares it takes off (over the changes it adds) against what is left, its
    p (:func:`_f_tail`) times the number of partitions with that many changes and of the counts
    tried (Bonferroni: only a pattern far beyond the noise passes). Binary segmentation misses a
    level that returns (slow, fast, slow, fast); the exact partition does not."""
    n = len(m)
    have = len(cuts)
    most = min(have + _MORE_LEVELS, int(cnt.sum()) // MIN_RUNS - 1, n - 1)
    if most <= have or n > _EXACT_JOBS:
        return cuts
    bounds = [0, *cuts, n]
    # the levels leave the noise the weights expect (a job mean's variance, 1 / w: about 1 in the
    # scale; more where the throughputs are written to a step): nothing to find
    if _rss(m, w, bounds) / max(n - len(bounds) + 1, 1) < max(_UNEXPLAINED, floor):
        return cuts
    fits = _partitions(m, w, cnt, most)
    base = fits[have][0]
    for k in range(have + 1, most + 1):
        rss, found = fits[k]
        df = n - k - 1
        if df < 1 or not math.isfinite(rss) or rss >= base:
            continue
        f = (base - rss) / (k - have) / max(rss / df, floor)
        beyond = _f_tail(k - have, df, f) * math.comb(n - 1, k) * (most - have) < alpha
        if beyond and _apart(m, w, found, math.log1p(1.5 * step)):
            return found
    return cuts


def _apart(m: np.ndarray, w: np.ndarray, cuts: Sequence[int], least: float) -> bool:
    """Whether each level of job means ``m`` split at ``cuts`` is at least ``least`` (log) from the
    next: a level one step of the throughputs' writing away (99 among 100s) is the rounding's; two
    steps (10 then 12) are more than ``log1p(1.5 step)``."""
    bounds = [0, *cuts, len(m)]
    means = [float((w[a:b] * m[a:b]).sum() / w[a:b].sum()) for a, b in zip(bounds, bounds[1:], strict=False)]
    return all(abs(y - x) >= least for x, y in zip(means, means[1:], strict=False))


def _f_tail(d1: int, d2: int, f: float) -> float:
    """The chance that Snedecor's F with ``d1`` and ``d2`` degrees of freedom exceeds ``f``: exact
    for an even ``d1`` (a finite sum), and for an odd one the chance for ``d1 + 1`` at ``f d1 /
    (d1 + 1)``, which is never less (a chi-square of one more degree of freedom is stochastically
    larger): a bound that only makes the test stricter, without scipy."""
    if d1 % 2:
        return _f_tail(d1 + 1, d2, f * d1 / (d1 + 1))
    x = d2 / (d2 + d1 * f)
    term = total = 1.0
    for i in range(1, d1 // 2):
        term *= (d2 / 2 + i - 1) / i * (1.0 - x)
        total += term
    return min(1.0, x ** (d2 / 2) * total)


def _step(y: np.ndarray) -> float:
    """The step the throughputs ``exp(y)`` are written to: the largest power of ten every value is a
    multiple of, from 1 down to 0.000001 (1 for whole numbers, 0.01 for two decimals); 0 for none."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    values = np.exp(y)
    for digits in range(7):
        scaled = values * 10.0 ** digits
        # written to steps of q, a positive value is q or more (below, 1e-17 images/sec looked whole)
        if np.all(scaled >= 0.5) and np.all(np.abs(scaled - np.round(scaled)) <= 1e-6 * np.maximum(scaled, 1.0)):
            return 10.0 ** -digits
    return 0.0


def _rounding(q: float, y: np.ndarray) -> float:
    """The variance (of the log) that writing the throughputs ``exp(y)`` to a step ``q`` adds
    (:func:`_step`: 1 for whole numbers, 0.01 for two decimals): ``q**2 / 12`` around a value,
    ``(q / v)**2 / 12`` to its log, at their median; 0 for throughputs written in full. Where runs
    tie, the two spreads may see no noise at all, and a level of equal runs would fit exactly; no
    test takes a scale below this."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    return q * q / 12.0 / float(np.median(np.exp(y))) ** 2 if q else 0.0


def _segment(m: np.ndarray, w: np.ndarray, cnt: np.ndarray, min_log: float,
             alpha: float, floor: float, step: float = 0.0) -> tuple[list[int], float, int]:
    """Where job means ``m`` change (the first job after each), the scale of the weights' variances
    and its degrees of freedom: the most significant split of any level, again until none is; then
    each change tested again between its neighbouring levels, the weakest dropped until every one
    holds."""
    n_jobs = len(m)
    cuts: list[int] = []
    while True:
        bounds = [0, *cuts, n_jobs]
        parts = [_rss(m, w, bounds[i:i + 2]) for i in range(len(bounds) - 1)]
        total = sum(parts)
        best: tuple[int, float] | None = None
        for i in range(len(bounds) - 1):
            a, b = bounds[i], bounds[i + 1]
            if b - a < 2:
                continue
            found = _split(m[a:b], w[a:b], cnt[a:b], total - parts[i], n_jobs - len(bounds), min_log, alpha, floor)
            if found is not None and (best is None or found[1] < best[1]):
                best = (a + found[0], found[1])
        if best is None:
            break
        cuts = sorted([*cuts, best[0]])
    cuts = _more_levels(m, w, cnt, cuts, alpha, floor, step)
    while True:
        bounds = [0, *cuts, n_jobs]
        df = max(n_jobs - len(bounds) + 1, 1)
        scale = max(_rss(m, w, bounds) / df, floor)
        if not cuts:
            return cuts, scale, df
        tests = [_compare(m, w, cnt, bounds[i], bounds[i + 1], bounds[i + 2], scale, df) for i in range(len(cuts))]
        weak = [(p, i) for i, (d, _, p) in enumerate(tests) if p >= alpha or abs(d) < min_log]
        if not weak:
            return cuts, scale, df
        cuts.pop(max(weak)[1])


def fit_levels(values: Sequence[float], jobs: Sequence[Hashable | None] | None = None, *,
               alpha: float = ALPHA, min_change: float = MIN_CHANGE) -> LevelFit:
    """The levels, shifts and outliers of one series of throughputs (positive, in order; ``jobs``:
    each run's job id, ``None`` for a job of its own; without it, every run is its own job)."""
    import numpy as np  # here, not at the top: a report without history loads no numpy
    y = np.log(np.asarray(values, dtype=np.float64))
    n = len(y)
    if n == 0:
        return LevelFit((), (), (), Noise(0.0, 0.0, 1))
    job_all = _job_index(jobs, n)
    step_all = _step(y)
    outlier = _outliers(y, step_all)
    kept = np.flatnonzero(~outlier)
    # job numbers of kept runs, renumbered so that a job whose runs were all outliers is gone
    _, job = np.unique(job_all[kept], return_inverse=True)
    yk = y[kept]
    n_jobs = int(job.max()) + 1 if len(job) else 0
    cnt = np.bincount(job, minlength=n_jobs).astype(np.float64)
    m = np.bincount(job, weights=yk, minlength=n_jobs) / np.maximum(cnt, 1)
    spreads = _noise(yk, job, m, cnt)
    w = 1.0 / np.maximum(spreads.between ** 2 + spreads.within ** 2 / np.maximum(cnt, 1), _FLOOR ** 2)
    q = (step_all if len(kept) == n else _step(yk)) if n_jobs else 0.0
    rounding = _rounding(q, yk)
    # what the writing adds to each job's mean, at its own level (a series of 10s then of 100s: a tenth there)
    floor = max(_FLOOR ** 2 * float(w.max()), float(np.median(w * q * q / 12.0 / np.exp(2 * m) / cnt)) if q else 0.0) \
        if n_jobs else 0.0
    cuts, scale, df = _segment(m, w, cnt, math.log1p(min_change), alpha, floor, math.sqrt(12.0 * rounding))
    noise = Noise(within=spreads.within, between=spreads.between, df=df)
    first_run = np.searchsorted(job, np.arange(n_jobs)) if n_jobs else np.zeros(0, dtype=np.int64)
    bounds = [0, *cuts, n_jobs]
    levels = []
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        start = 0 if i == 0 else int(kept[first_run[a]])
        stop = n if b == n_jobs else int(kept[first_run[b]])
        value = math.exp(float((w[a:b] * m[a:b]).sum() / w[a:b].sum())) if b > a else float("nan")
        levels.append(Level(start, stop, value))
    t = _t975(df) if cuts else math.nan  # scipy only where there is a shift to give an interval of
    shifts = []
    for i, k in enumerate(cuts):
        diff, se, p = _compare(m, w, cnt, bounds[i], k, bounds[i + 2], scale, df)
        shifts.append(Shift(levels[i + 1].start, _exp(diff), _exp(diff - t * se), _exp(diff + t * se), p))
    return LevelFit(tuple(levels), tuple(shifts), tuple(int(i) for i in np.flatnonzero(outlier)), noise)


def _exp(x: float) -> float:
    """``math.exp``, the largest float where that is more (a ratio of 1e-300 and 1e17 images/sec, both
    figures the store takes, is past what a float holds)."""
    return math.exp(min(x, _MOST_LOG))


_MOST_LOG = math.log(sys.float_info.max)


def _t975(df: int) -> float:
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.975))


# --- series of records -----------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One point of a series: its record's run id, start, order value (``--order-by``), images/sec and job."""

    run_id: str
    started_at: str
    order: Any
    ips: float
    job: str | None


@dataclass(frozen=True)
class Suspect:
    """A field whose value differs between the two sides of a change (``before`` → ``after``)."""

    field: str
    before: Any
    after: Any

    def text(self) -> str:
        return f"{_suspect_name(self.field)} {_value_text(self.before)} -> {_value_text(self.after)}"


@dataclass(frozen=True)
class Change:
    """A lasting change in a series: between runs ``before`` and ``after``; ``ratio`` of the levels
    (after / before) with its 95% interval ``low``-``high``; ``p`` (adjusted); the ``suspects``."""

    series: str
    machine: str
    before: Run
    after: Run
    level_before: float
    level_after: float
    ratio: float
    low: float
    high: float
    p: float
    suspects: tuple[Suspect, ...]

    @property
    def percent(self) -> float:
        return (self.ratio - 1.0) * 100.0

    def text(self) -> str:
        """The change in one sentence (an observation)."""
        when = _day(self.after.started_at)
        line = (f"{self.series}: {_pct(self.ratio)} (95% CI {_pct(self.low)} to {_pct(self.high)}) "
                f"from {when}")
        if self.suspects:
            line += "; " + ", ".join(s.text() for s in self.suspects) + " between the two runs"
        return line + "."


@dataclass(frozen=True)
class Outlier:
    """A lone run far from its level (not a change): its images/sec against the level's."""

    series: str
    machine: str
    run: Run
    level: float

    @property
    def ratio(self) -> float:
        return self.run.ips / self.level


@dataclass(frozen=True)
class Series:
    """One machine's and configuration's runs in order, with its fit."""

    label: str
    machine: str
    identity: tuple[tuple[str, Any], ...]
    runs: tuple[Run, ...]
    jobs: int
    fit: LevelFit
    changes: tuple[Change, ...]
    outliers: tuple[Outlier, ...]

    def regression(self, threshold: float) -> Change | None:
        """The change into the newest level when it is a slowdown by more than ``threshold``
        (0.05 = 5%), else None (every change found is significant)."""
        if not self.changes:
            return None
        last = self.changes[-1]  # the last change always leads into the newest level
        return last if last.ratio < 1.0 - threshold else None


@dataclass(frozen=True)
class TooShort:
    """A series with fewer than :data:`MIN_POINTS` runs."""

    label: str
    machine: str
    points: int


@dataclass(frozen=True)
class History:
    """Every series of a set of records: those long enough, fitted; those too short; and how many
    records were left out (``no_start_time``: imported without a real start time; ``not_ok``:
    failed runs and records with no images/sec)."""

    series: tuple[Series, ...]
    too_short: tuple[TooShort, ...]
    no_start_time: int
    not_ok: int
    order_by: str | None = None

    @property
    def changes(self) -> list[Change]:
        return [c for s in self.series for c in s.changes]

    @property
    def outliers(self) -> list[Outlier]:
        return [o for s in self.series for o in s.outliers]

    def regressions(self, threshold: float) -> list[Change]:
        """The newest changes that are significant slowdowns by more than ``threshold`` (0.05 = 5%)."""
        found = (s.regression(threshold) for s in self.series)
        return [c for c in found if c is not None]

    def as_dict(self) -> dict[str, Any]:
        """The history as JSON-ready data (the keys ``docs/commands/history.md`` lists)."""
        return {
            "order_by": self.order_by,
            "series": [_series_dict(s) for s in self.series],
            "too_short": [{"series": t.label, "machine": t.machine, "points": t.points} for t in self.too_short],
            "left_out": {"no_start_time": self.no_start_time, "not_ok": self.not_ok},
        }


def build_history(records: Sequence[Mapping[str, Any]], *, order_by: str | None = None,
                  min_points: int = MIN_POINTS, alpha: float = ALPHA, min_change: float = MIN_CHANGE,
                  points: PointSet | None = None) -> History:
    """The history of ``records``: one series per identity (configuration and machine), in
    ``started_at`` order (or ``order_by``'s, then time), each fitted by :func:`fit_levels`.
    ``points``: ``build_points(records)``, where the caller has it already."""
    no_start = not_ok = 0
    usable: list[Mapping[str, Any]] = []
    starts: dict[int, _dt.datetime] = {}
    points = build_points(records) if points is None else points
    for point in points.points:
        for rec in point.records:
            if str(rec.get("status") or "ok") != "ok" or _ips(rec) is None:
                not_ok += 1
                continue
            when = start_time(rec)
            if when is None:
                no_start += 1
                continue
            starts[id(rec)] = when
            usable.append(rec)
    # grouped again only when runs were left out (a field may vary only among those); otherwise the
    # same groups (10,000 varied runs: 0.07 s each time)
    by_point = points if len(usable) == sum(len(p.records) for p in points.points) else build_points(usable)
    labels = _labels(by_point, points.key_fields)
    series: list[Series] = []
    short: list[TooShort] = []
    for point, label in zip(by_point.points, labels, strict=True):
        machine = str(point.get(F.MACHINE))
        recs = sorted(point.records, key=lambda r: (_order_key(get_value(r, order_by)) if order_by else (),
                                                    starts[id(r)]))
        if len(recs) < min_points:
            short.append(TooShort(label, machine, len(recs)))
            continue
        series.append(_series(label, machine, point.values, recs, order_by, alpha, min_change))
    series.sort(key=lambda s: (s.machine, s.label))  # the same order however the store's lines lie
    short.sort(key=lambda s: (s.machine, s.label))
    return History(tuple(series), tuple(short), no_start, not_ok, order_by)


def _series(label: str, machine: str, identity: Mapping[str, Any], recs: Sequence[Mapping[str, Any]],
            order_by: str | None, alpha: float, min_change: float) -> Series:
    runs = tuple(_run(r, order_by) for r in recs)
    fit = fit_levels([r.ips for r in runs], [r.job for r in runs], alpha=alpha, min_change=min_change)
    changes = _changes(label, machine, runs, recs, fit)
    outliers = tuple(Outlier(label, machine, runs[j], _level_of(fit, j).value) for j in fit.outliers)
    ident = tuple((k, v) for k, v in identity.items() if k.startswith("config.") or k in (F.MACHINE, F.SOURCE))
    return Series(label, machine, ident, runs, _job_count(runs), fit, changes, outliers)


def _run(record: Mapping[str, Any], order_by: str | None) -> Run:
    """A record as a point of its series (``order``: its ``order_by`` value, if any)."""
    return Run(str(record.get("run_id") or ""), str(record.get("started_at") or ""),
               get_value(record, order_by) if order_by else None, float(_ips(record) or 0.0),
               _text_or_none(record.get("session_id")))


def _job_count(runs: Sequence[Run]) -> int:
    """How many jobs the runs make (a run without a job id is a job of its own)."""
    return len(set(_job_index([r.job for r in runs], len(runs)).tolist()))


def _level_of(fit: LevelFit, index: int) -> Level:
    """The level run ``index`` lies in."""
    return next(lv for lv in fit.levels if lv.start <= index < lv.stop)


def _changes(label: str, machine: str, runs: Sequence[Run], recs: Sequence[Mapping[str, Any]],
             fit: LevelFit) -> tuple[Change, ...]:
    """Each shift of ``fit`` as a change: its last run before and first after, and the suspects
    between the runs of its two levels (outliers left out)."""
    outlier_set = set(fit.outliers)

    def kept(level: Level) -> list[int]:
        return [j for j in range(level.start, level.stop) if j not in outlier_set]

    changes = []
    for i, shift in enumerate(fit.shifts):
        before_level, after_level = fit.levels[i], fit.levels[i + 1]
        before, after = kept(before_level), kept(after_level)
        changes.append(Change(label, machine, runs[max(before)], runs[shift.index], before_level.value,
                              after_level.value, shift.ratio, shift.low, shift.high, shift.p,
                              suspects([recs[j] for j in before], [recs[j] for j in after])))
    return tuple(changes)


def _ips(rec: Mapping[str, Any]) -> float | None:
    value = (rec.get("metrics") or {}).get("total_images_per_sec")
    return float(value) if value.__class__ in (int, float) and value > 0 else None


def _text_or_none(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def start_time(record: Mapping[str, Any]) -> _dt.datetime | None:
    """A record's start (UTC; a time without a zone read as UTC), or None when it has no real one:
    ``started_at`` missing, blank or no time, or filled in by an import (``started_at_source``
    says so). A record's ``source_path`` is a name it holds, never a path looked at: a record
    imported before that mark existed keeps the start time it holds."""
    if record.get("started_at_source") == STARTED_AT_FILLED_IN:
        return None
    text = record.get("started_at")
    return _moment(text) if isinstance(text, str) else None


def _moment(text: str) -> _dt.datetime | None:
    """An ISO 8601 time (UTC when it names no zone), or None."""
    if not text.strip():
        return None
    try:
        when = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return when.replace(tzinfo=_dt.timezone.utc) if when.tzinfo is None else when


_VERSION_PART = re.compile(r"([0-9]+)")
_RELEASE = re.compile(r"[vV]?([0-9]+(?:\.[0-9]+)*)(.*)", re.ASCII | re.DOTALL)


_ISO_TIME = re.compile(r"\s*[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}")


def _order_key(value: Any) -> tuple:
    """Order values naturally: missing first, numbers by value, times (ISO 8601 with a time of day)
    by the moment they name (``-11:00`` and ``+00:00`` alike; without a zone, UTC), versions part by
    part (2.10 after 2.9, :func:`_version_key`), other text with its digit runs by value."""
    if value is None:
        return (0,)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, float(value))
    if isinstance(value, str) and _ISO_TIME.match(value):
        when = _moment(value)
        if when is not None:
            return (2, when.timestamp())
    text = str(value)
    release = _RELEASE.fullmatch(text.strip())
    if release is not None:
        return (4, *_version_key(release[1], release[2], text.strip()))
    parts = _VERSION_PART.split(text)  # the digit runs at odd places
    return (3, tuple((1, digits_key(p)) if i % 2 else (0, p) for i, p in enumerate(parts) if p))


_FINAL = ((2,), (0,), (2,))
"""The part of :func:`_version_key` after the release numbers of a final release: no pre-release
(after any), no post-release (before any), no development release (after any)."""


def _version_key(release: str, rest: str, text: str) -> tuple:
    """A version's release numbers by value (trailing zeros dropped: 2.10 is 2.10.0), then, as PEP 440
    orders them, ``2.10.0.dev20260101`` < ``2.10.0a1`` < ``2.10.0rc1`` < ``2.10.0`` <
    ``2.10.0.post1`` (``packaging``'s reading), the local part (``+cu130``) as text last; a rest PEP
    440 does not read (``2.1²``, ``12.4-custom``) after the release's own, in its text's order."""
    numbers = [digits_key(n) for n in release.split(".")]
    while len(numbers) > 1 and numbers[-1] == (0, ""):
        numbers.pop()
    head = tuple(numbers)
    if not rest:
        return (head, 0, _FINAL, "")
    if len(text) <= 256:  # what packaging reads in a moment (it makes ints of the digit runs)
        from packaging.version import InvalidVersion, Version

        try:
            v = Version(text)
        except (InvalidVersion, ValueError):
            pass
        else:
            pre = (2,) if v.pre is None else (1, *v.pre)
            if v.pre is None and v.post is None and v.dev is not None:
                pre = (0,)  # a development release of a final one comes before its pre-releases
            phase = (pre, (0,) if v.post is None else (1, v.post), (2,) if v.dev is None else (1, v.dev))
            return (head, 0, phase, v.local or "")
    parts = _VERSION_PART.split(rest)
    return (head, 1, tuple((1, digits_key(p)) if i % 2 else (0, p) for i, p in enumerate(parts) if p))


def _labels(points: Any, order: Sequence[str]) -> list[str]:
    """A name per series: model, precision, batch size, any other varying configuration (in
    ``order``: the store's, whichever runs were left out), the machine."""
    varying = [k for k in order if k.startswith("config.") and k not in (F.MODEL, F.PRECISION, F.BATCH)
               and k in points.key_fields and points.varies(k)]
    # the rest of a series' identity where it varies (the source: a store's own runs and imported ones of
    # one configuration are two series, which were named alike)
    varying += [k for k in points.key_fields if not k.startswith("config.") and k != F.MACHINE and points.varies(k)]
    out = []
    for p in points.points:
        parts = [str(p.get(F.MODEL))]
        if p.get(F.PRECISION) is not None:
            parts.append(str(p.get(F.PRECISION)))
        if p.get(F.BATCH) is not None:
            parts.append(f"b{p.get(F.BATCH)}")
        # a field this series lacks (an imported log's many) is left out: the label names what it has
        parts += [f"{k.split('.', 1)[-1]}={F.text(p.get(k))}" for k in varying if p.get(k) is not None]
        out.append(f"{' '.join(parts)} on {p.get(F.MACHINE)}")
    return out


def suspects(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> tuple[Suspect, ...]:
    """Fields that differ between two sides of a change: the value of the last run before against
    the first after, or the most common value on each side; kinds of warnings (the words before
    the first colon) present in most runs of one side and fewer than half of the other."""
    out: list[Suspect] = []
    if not before or not after:
        return ()
    for name in SUSPECT_FIELDS:
        a = [_field(r, name) for r in before]
        b = [_field(r, name) for r in after]
        common_a, common_b = _mode(a), _mode(b)
        if a[-1] != b[0] and (a[-1] is not None or b[0] is not None):
            out.append(Suspect(name, a[-1], b[0]))
        elif common_a != common_b:
            out.append(Suspect(name, common_a, common_b))
    kinds_a, kinds_b = _warning_shares(before), _warning_shares(after)
    for kind in sorted(set(kinds_a) | set(kinds_b)):
        sa, sb = kinds_a.get(kind, 0.0), kinds_b.get(kind, 0.0)
        if (sa >= 0.5) != (sb >= 0.5):
            out.append(Suspect(f"warnings: {kind}", f"{sa:.0%} of runs", f"{sb:.0%} of runs"))
    return tuple(out)


def _field(record: Mapping[str, Any], name: str) -> Any:
    if name.startswith("environment.gpus."):
        gpus = (record.get("environment") or {}).get("gpus")
        if not isinstance(gpus, list) or not gpus:
            return None
        values = tuple(F.hashable(g.get(name.rsplit(".", 1)[1])) if isinstance(g, dict) else None for g in gpus)
        return values[0] if len(set(values)) == 1 else values
    return F.hashable(get_value(record, name))


def _mode(values: Sequence[Any]) -> Any:
    return Counter(values).most_common(1)[0][0]


def _warning_shares(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    counts: Counter[str] = Counter()
    for rec in records:
        texts = (rec.get("metrics") or {}).get("warnings") or []
        kinds = {str(t).split(":", 1)[0].strip() for t in texts if isinstance(t, str) and ":" in t}
        counts.update(kinds)
    return {k: c / len(records) for k, c in counts.items()}


def _suspect_name(field: str) -> str:
    short = field.split(".")[-1]
    names = {"torch_version": "torch", "torchvision_version": "torchvision", "cuda_version": "CUDA",
             "cudnn_version": "cuDNN", "nccl_version": "NCCL", "gpu_driver": "driver",
             "cuda_driver_version": "CUDA driver", "python_version": "Python", "tool_version": "cnnbench"}
    return names.get(short, field if field.startswith("warnings") else short)


def _value_text(value: Any) -> str:
    return "none" if value is None else F.text(value)


def _pct(ratio: float) -> str:
    return f"{(ratio - 1.0) * 100.0:+.1f}%"


def _day(started_at: str) -> str:
    return started_at[:10] if started_at else "?"


def _run_dict(run: Run) -> dict[str, Any]:
    return {"run_id": run.run_id, "started_at": run.started_at, "images_per_sec": run.ips}


def _series_dict(s: Series) -> dict[str, Any]:
    return {
        "series": s.label,
        "machine": s.machine,
        "identity": {k: v for k, v in s.identity},
        "points": len(s.runs),
        "jobs": s.jobs,
        "noise": {"within_job": s.fit.noise.within, "between_jobs": s.fit.noise.between},
        "levels": [{"first_run": s.runs[lv.start].run_id, "last_run": s.runs[lv.stop - 1].run_id,
                    "runs": lv.stop - lv.start, "images_per_sec": lv.value} for lv in s.fit.levels],
        "changes": [{
            "before": _run_dict(c.before), "after": _run_dict(c.after),
            "level_before": c.level_before, "level_after": c.level_after,
            "ratio": c.ratio, "ratio_low": c.low, "ratio_high": c.high, "p": c.p,
            "suspects": [{"field": x.field, "before": x.before, "after": x.after} for x in c.suspects],
            "text": c.text(),
        } for c in s.changes],
        "outliers": [{**_run_dict(o.run), "level": o.level, "ratio": o.ratio} for o in s.outliers],
    }
