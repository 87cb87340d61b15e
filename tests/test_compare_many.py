"""The effect tables test all their pairs at once (issue 22 item 2): every pair's step blocks in
one pass over arrays, every p-value in one call, each measure's share of the pooled run-to-run
spread computed once. The comparisons are the same, to the bit, as testing each pair on its own."""

from __future__ import annotations

import random

import pytest

from cnnbench.analysis.points import Measure, machine_spreads
from cnnbench.analysis.ratio_tests import (
    MachineSpreads,
    RepeatSpread,
    group_spread,
    lag1_autocorrelation,
    repeat_spread,
    sides,
    t_two_sided_p,
    t_two_sided_ps,
)
from cnnbench.analysis.samples import RunSample
from cnnbench.analysis.significance import compare_many, compare_runs


def sample(rng: random.Random, rate: float, kind: str) -> RunSample:
    if kind == "steps":
        times = [rng.lognormvariate(-2.3, rng.choice([0.0, 0.01, 0.2])) for _ in range(rng.choice([10, 23, 100]))]
        return RunSample(rate, cv=0.01, step_times=times, images_per_step=rng.choice([0.0, 32.0]))
    if kind == "flat":
        return RunSample(rate, step_times=[0.1] * 20, images_per_step=32.0)
    return RunSample(rate)


def test_many_pairs_at_once_equal_each_pair_on_its_own():
    rng = random.Random(5)
    pairs = []
    for _ in range(600):
        kind = rng.choice(["steps", "flat", "none"])
        effect = rng.choice([1.0, 1.01, 1.05, 1.5, 0.7])
        nb, nc = rng.choice([(0, 1), (1, 1), (1, 2), (2, 2), (3, 2), (2, 0)])
        base = [sample(rng, 100.0 * rng.lognormvariate(0, rng.choice([0.0, 0.02])), kind) for _ in range(nb)]
        cand = [sample(rng, 100.0 * effect * rng.lognormvariate(0, rng.choice([0.0, 0.02])), kind) for _ in range(nc)]
        spread = rng.choice([None, RepeatSpread(0.0004, 30), RepeatSpread(0.01, 1)])
        pairs.append((base, cand, spread))
    together = compare_many(pairs, 0.03)
    alone = [compare_runs(b, c, 0.03, interval=False, spread=s) for b, c, s in pairs]
    assert together == alone
    verdicts = {c.verdict for c in together}
    assert {"faster", "slower", "not significant", "no samples", "—"} <= verdicts
    assert {c.basis for c in together} == {"repeats", "steps", "none"}


def test_p_values_over_arrays_equal_one_by_one():
    ts = [0.0, 1.5, -2.5, 40.0, float("nan"), 1e-9, -0.3]
    dfs = [1.0, 2.5, 10.0, 3.0, 4.0, 1e6, 7.0]
    assert t_two_sided_ps(ts, dfs) == [t_two_sided_p(t, df) for t, df in zip(ts, dfs, strict=True)]
    assert t_two_sided_ps([], []) == []


def _lag1_one_by_one(xs):
    """The lag-1 autocorrelation as it was computed before it ran over arrays (plain Python)."""
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
    return max(0.0, min(r, 0.9))


def _side_one_by_one(xs, autocorrelated):
    """A side as it was computed before it ran over arrays (one sample, plain Python)."""
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    n_eff = float(n)
    if autocorrelated:
        r = _lag1_one_by_one(xs)
        n_eff = max(2.0, n_eff * (1.0 - r) / (1.0 + r))
    return mean, var / n_eff, n_eff


def test_each_samples_side_is_the_same_alone_among_many_or_value_by_value():
    rng = random.Random(7)
    sizes = [2, 3, 4, 5, 10, 27, 129, 454, 9000]
    samples = [[rng.lognormvariate(-2.3, 0.1) + (0.01 * i if trend else 0.0) for i in range(n)]
               for n, trend in ((rng.choice(sizes), rng.random() < 0.3) for _ in range(300))]
    samples += [[rng.lognormvariate(-7.0, 0.05) for _ in range(rng.randint(2, 40))] for _ in range(3000)]  # blocks
    samples += [[0.1] * 12, [0.2, 0.2], [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]]  # no spread; two values; anticorrelated
    for autocorrelated in (True, False):
        together = sides(samples, autocorrelated)
        assert together == [sides([x], autocorrelated)[0] for x in samples]  # to the bit
        assert together == [_side_one_by_one(x, autocorrelated) for x in samples]  # to the bit, as before
    assert [lag1_autocorrelation(x) for x in samples] == [_lag1_one_by_one(x) for x in samples]
    assert sides([], True) == []
    with pytest.raises(ValueError, match="two or more"):
        sides([[1.0, 2.0], [3.0]], True)


def test_machine_spreads_from_each_measures_share_equal_pooling_the_runs():
    rng = random.Random(3)
    groups = []
    for _ in range(200):
        n = rng.choice([0, 1, 2, 3])
        machines = [rng.choice(["a", "b"]) if rng.random() < 0.2 else "a" for _ in range(n)]
        groups.append(([RunSample(100.0 * rng.lognormvariate(0, 0.03)) for _ in range(n)], machines))
    at_once = MachineSpreads(groups)
    from_parts = MachineSpreads(parts=[(set(m), group_spread(s)) for s, m in groups])
    for machines in (["a"], ["b"], ["a", "a"], ["a", "b"]):
        assert at_once.for_pair(machines) == from_parts.for_pair(machines)
    assert at_once.for_pair(["a"]) == repeat_spread(s for s, m in groups if set(m) == {"a"})
    assert at_once.for_pair(["a", "b"]) is None


def test_a_measures_share_of_the_spread_follows_its_runs():
    def run(rate, machine="a"):
        return {"status": "ok", "metrics": {"total_images_per_sec": rate}, "environment": {"machine": machine}}

    m = Measure()
    for rate in (100.0, 102.0):
        m.record("ok", rate, run(rate))
    first = machine_spreads([m]).for_pair(["a"])
    assert first == repeat_spread([m.samples])
    m.record("ok", 90.0, run(90.0))  # a third repeat
    assert machine_spreads([m]).for_pair(["a"]) == repeat_spread([m.samples]) != first
    other = Measure()
    other.record("ok", 95.0, run(95.0, "b"))
    m.add(other)  # now across two machines: in no machine's pool
    assert machine_spreads([m]).for_pair(["a"]) is None


def test_a_few_values_in_plain_python_equal_the_arrays_on_odd_input(monkeypatch):
    """Up to ``PLAIN_VALUES`` values, the sides are added in plain Python: the same floats as over
    arrays even where a square overflows (numpy gives inf; Python's ``**`` raises), or the values
    are ints, bools or float32 (the arrays take them as float64)."""
    import math
    import struct

    import numpy as np

    from cnnbench.analysis import ratio_tests

    odd = [[1e200, 1.0], [1.4e154, -1.4e154, 0.0, 0.0, 0.0], [1.2e154, -1.2e154, 1.0, 2.0, 3.0, 4.0], [2**53, 1, 1],
           [True, True, False, True, False], np.array([0.1, 0.2, 0.7], dtype=np.float32), (0.5, 0.25, 0.125),
           [-0.0, -0.0, -0.0], [1.0, math.inf, 2.0, 3.0, 4.0], [1.5e154] + [0.0] * 4000]  # one square overflows

    def bits(sides_: list) -> list:
        return [struct.pack("<3d", *side) for side in sides_]

    for autocorrelated in (True, False):
        plain = [sides([x], autocorrelated)[0] for x in odd]
        lags = [lag1_autocorrelation(x) for x in odd]
        monkeypatch.setattr(ratio_tests, "PLAIN_VALUES", -1)
        with np.errstate(all="ignore"):
            arrays = [sides([x], autocorrelated)[0] for x in odd]
            lags_arrays = [lag1_autocorrelation(x) for x in odd]
        monkeypatch.undo()
        assert bits(plain) == bits(arrays)
        assert all(type(v) is float for side in plain for v in side)
        assert struct.pack(f"<{len(odd)}d", *lags) == struct.pack(f"<{len(odd)}d", *lags_arrays)
