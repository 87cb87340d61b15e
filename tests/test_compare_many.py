"""The effect tables test all their pairs at once (issue 22 item 2): every p-value in one call
over arrays. The comparisons are the same, to the bit, as testing each pair on its own."""

from __future__ import annotations

import random

from cnnbench.analysis.ratio_tests import RepeatSpread, t_two_sided_p, t_two_sided_ps
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
