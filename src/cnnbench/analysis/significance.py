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

The tests themselves (and Student's t distribution, from scipy) are in
:mod:`cnnbench.analysis.ratio_tests`; a table of its critical values that gives most verdicts
without scipy, for callers that need no p-value (the report), in
:mod:`cnnbench.analysis.t_table`; what is read from each run (its images/sec, block means and
the coefficient of variation of its step times, which reports mark when it is over 10%) is in
:mod:`cnnbench.analysis.samples`. No torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.analysis.ratio_tests import (
    ALPHA,
    RatioTest,
    RepeatSpread,
    log_ratio_statistic,
    log_ratio_test,
    ratio_statistic,
    ratio_test,
    sides,
    t_two_sided_p,
    t_two_sided_ps,
    welch_statistic,
)
from cnnbench.analysis.samples import RunSample
from cnnbench.analysis.t_table import below_level

DEFAULT_NOISE = 0.03
"""The smallest relative difference ever called significant."""

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


def compare_runs(base: Sequence[RunSample], cand: Sequence[RunSample], noise: float = DEFAULT_NOISE,
                 alpha: float = ALPHA, interval: bool = True, spread: RepeatSpread | None = None,
                 p_value: bool = True) -> Comparison:
    """Is the candidate's images/sec different from the baseline's? (see the module docstring;
    ``interval=False``: no interval of the ratio, for callers that only need the verdict;
    ``spread``: the run-to-run spread pooled over the pairs being compared on the same machine, see
    :func:`log_ratio_test`; ``p_value=False`` with ``interval=False``: the p-value only where a
    table of Student's critical values cannot give the verdict, as in :func:`compare_many`)."""
    head = _untested(base, cand)
    if head.ratio is None or head.basis == NONE:
        return head
    if not interval and abs(head.ratio - 1.0) < noise:  # never significant: spare the test
        return head
    if not interval and not p_value:
        return _verdict_only(head.ratio, head.basis, base, cand, noise, alpha, spread)
    return _tested(head.ratio, head.basis, base, cand, noise, alpha, interval, spread)


def _verdict_only(ratio: float, basis: str, base: Sequence[RunSample], cand: Sequence[RunSample], noise: float,
                  alpha: float, spread: RepeatSpread | None) -> Comparison:
    """The comparison of a tested pair without an interval, its p-value computed only where a table
    of Student's critical values cannot give the verdict."""
    nb, nc = len(base), len(cand)
    stats: Any = (log_ratio_statistic([r.rate for r in cand], [r.rate for r in base], spread) if basis == REPEATS
                  else ratio_statistic(_all_blocks(base), _all_blocks(cand), autocorrelated=True))
    decided = _decided(ratio, basis, stats, nb, nc, noise, alpha, p_values=False)
    if decided is not None:
        return decided
    test_ratio, t, df, _ = stats
    return _verdict(ratio, basis, test_ratio, t_two_sided_p(t, df), nb, nc, noise, alpha)


def _tested(ratio: float, basis: str, base: Sequence[RunSample], cand: Sequence[RunSample], noise: float,
            alpha: float, interval: bool, spread: RepeatSpread | None) -> Comparison:
    """The comparison of a tested pair from the whole test: its p-value and (with ``interval``)
    the interval of the ratio."""
    if basis == REPEATS:
        test = log_ratio_test([r.rate for r in cand], [r.rate for r in base], alpha, interval, spread)
    else:
        # seconds per image, baseline over candidate: the ratio of rates
        test = ratio_test([x for r in base for x in r.blocks], [x for r in cand for x in r.blocks], alpha,
                          autocorrelated=True, interval=interval)
    same_direction = (test.ratio - 1.0) * (ratio - 1.0) > 0
    significant = test.p < alpha and abs(ratio - 1.0) >= noise and same_direction
    return Comparison(ratio, significant, basis, test.p, test.low, test.high, len(base), len(cand))


def compare_many(pairs: Sequence[tuple[Sequence[RunSample], Sequence[RunSample], RepeatSpread | None]],
                 noise: float = DEFAULT_NOISE, alpha: float = ALPHA, p_values: bool = True) -> list[Comparison]:
    """:func:`compare_runs` without intervals for many ``(base, cand, spread)`` pairs at once
    (an effect table): the step blocks of every pair in one pass over arrays, each pair's
    statistic, then every p-value in one call. The same comparisons, to the bit, as one
    :func:`compare_runs` call per pair.

    ``p_values=False`` (a caller that shows verdicts only): a statistic that a table of Student's
    critical values decides (:func:`cnnbench.analysis.t_table.below_level`) gets its verdict
    without its p-value (``p`` None), so that scipy is imported only for those it cannot; the
    verdicts are the same."""
    out = [_untested(base, cand) for base, cand, _ in pairs]
    tested: list[tuple[int, float, Any]] = []  # where, ratio, statistic (None: from the step blocks)
    blocks: list[Sequence[float]] = []  # the sides of the pairs tested on step blocks: base, candidate, base, ...
    for at, ((base, cand, spread), c) in enumerate(zip(pairs, out, strict=True)):
        if c.ratio is None or c.basis == NONE or abs(c.ratio - 1.0) < noise:  # nothing to test, or never significant
            continue
        if c.basis == REPEATS:
            tested.append((at, c.ratio, log_ratio_statistic([r.rate for r in cand], [r.rate for r in base], spread)))
        else:
            tested.append((at, c.ratio, None))
            blocks += [_all_blocks(base), _all_blocks(cand)]
    side = iter(sides(blocks, autocorrelated=True))
    pending = []
    for at, ratio, stats in tested:
        c = out[at]
        if stats is None:
            stats = welch_statistic(next(side), next(side))
        decided = _decided(ratio, c.basis, stats, c.n_base, c.n_cand, noise, alpha, p_values)
        if decided is None:
            pending.append((at, ratio, stats))
        else:
            out[at] = decided
    ps = t_two_sided_ps([stats[1] for *_, stats in pending], [stats[2] for *_, stats in pending])
    for (at, ratio, stats), p in zip(pending, ps, strict=True):
        c = out[at]
        out[at] = _verdict(ratio, c.basis, stats[0], p, c.n_base, c.n_cand, noise, alpha)
    return out


def _decided(ratio: float, basis: str, stats: Any, nb: int, nc: int, noise: float, alpha: float,
             p_values: bool) -> Comparison | None:
    """The comparison of a tested pair from its statistic where no p-value needs computing: no
    spread at all (the whole test, ``stats`` a :class:`RatioTest`), or (without ``p_values``) a
    statistic that :func:`cnnbench.analysis.t_table.below_level` decides; else None."""
    if isinstance(stats, RatioTest):
        return _verdict(ratio, basis, stats.ratio, stats.p, nb, nc, noise, alpha, stats.low, stats.high)
    below = None if p_values else below_level(stats[1], stats[2], alpha)
    return None if below is None else _verdict(ratio, basis, stats[0], None, nb, nc, noise, alpha, below=below)


def _all_blocks(runs: Sequence[RunSample]) -> Sequence[float]:
    """The block means of every run of a side, in order (one run's own tuple, not a copy)."""
    return runs[0].blocks if len(runs) == 1 else [x for r in runs for x in r.blocks]


def _untested(base: Sequence[RunSample], cand: Sequence[RunSample]) -> Comparison:
    """The ratio and the basis of a pair, not (yet) called significant."""
    nb, nc = len(base), len(cand)
    if not nb or not nc:
        return Comparison(None, False, NONE, n_base=nb, n_cand=nc)
    ratio = statistics.median([r.rate for r in cand]) / statistics.median([r.rate for r in base])
    if not 0 < ratio < math.inf:  # rates so far apart (a figure of 5e-324) that their ratio over- or underflows
        return Comparison(None, False, NONE, n_base=nb, n_cand=nc)
    return Comparison(ratio, False, _basis(base, cand), n_base=nb, n_cand=nc)


def _verdict(ratio: float, basis: str, test_ratio: float, p: float | None, nb: int, nc: int, noise: float,
             alpha: float, low: float | None = None, high: float | None = None, below: bool | None = None
             ) -> Comparison:
    """The comparison of a tested pair: ``below``, whether its p-value is below ``alpha``, when
    known without ``p`` (None: ``p < alpha``)."""
    same_direction = (test_ratio - 1.0) * (ratio - 1.0) > 0
    below = (p is not None and p < alpha) if below is None else below
    significant = below and abs(ratio - 1.0) >= noise and same_direction
    return Comparison(ratio, significant, basis, p, low, high, nb, nc)


def _basis(base: Sequence[RunSample], cand: Sequence[RunSample]) -> str:
    """What the test can use: repeats on both sides, else step blocks on every run, else nothing."""
    if len(base) >= 2 and len(cand) >= 2:
        return REPEATS
    if all(r.has_blocks for r in base) and all(r.has_blocks for r in cand):
        return STEPS
    return NONE
