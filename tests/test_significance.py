"""The significance test shared by `cnnbench compare` and the report: its parts against closed
forms and tables, and its behaviour on runs drawn from known distributions."""

from __future__ import annotations

import math
import random

import pytest

from cnnbench.analysis.ratio_tests import (
    MachineSpreads,
    RepeatSpread,
    lag1_autocorrelation,
    log_ratio_test,
    ratio_test,
    repeat_spread,
    t_critical,
    t_two_sided_p,
)
from cnnbench.analysis.samples import WIDE_CV, RunSample, blocks_from_series, blocks_from_step_times, run_sample
from cnnbench.analysis.significance import NONE, REPEATS, STEPS, compare_runs
from tests.report_fixtures import record

# --- the t distribution -------------------------------------------------------------

@pytest.mark.parametrize("t", [0.1, 0.5, 1.0, 3.0, 12.0])
def test_t_closed_forms_for_one_and_two_degrees_of_freedom(t):
    assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), rel=1e-9)
    assert t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-9)


@pytest.mark.parametrize("df, t95", [(1, 12.706), (2, 4.303), (5, 2.571), (10, 2.228), (30, 2.042),
                                     (100, 1.984), (1e6, 1.960)])
def test_critical_values_match_the_printed_table(df, t95):
    assert t_critical(df) == pytest.approx(t95, abs=1e-3)
    assert t_two_sided_p(t95, df) == pytest.approx(0.05, abs=2e-4)


def test_large_df_is_the_normal_and_p_falls_with_t():
    assert t_two_sided_p(1.0, 1e7) == pytest.approx(math.erfc(1 / math.sqrt(2)), rel=1e-6)
    ps = [t_two_sided_p(t, 7.3) for t in (0, 0.5, 1, 2, 4, 8)]
    assert ps[0] == pytest.approx(1.0) and ps == sorted(ps, reverse=True)
    assert t_two_sided_p(math.inf, 3) == 0.0 and t_two_sided_p(math.nan, 3) == 1.0


# --- the ratio test -----------------------------------------------------------------

def test_ratio_test_interval_excludes_one_exactly_when_p_is_below_alpha():
    rng = random.Random(7)
    for _ in range(300):
        shift = rng.uniform(0.9, 1.1)
        xs = [rng.gauss(10 * shift, 0.5) for _ in range(rng.randint(2, 12))]
        ys = [rng.gauss(10, 0.5) for _ in range(rng.randint(2, 12))]
        r = ratio_test(xs, ys)
        assert r.ratio == pytest.approx((sum(xs) / len(xs)) / (sum(ys) / len(ys)))
        assert r.low is not None and r.high is not None and r.low < r.ratio < r.high
        assert (r.p < 0.05) == (not r.low <= 1 <= r.high)


def test_ratio_test_without_spread_and_with_too_few_values():
    assert ratio_test([2.0, 2.0], [1.0, 1.0]).p == 0.0
    assert ratio_test([1.0, 1.0], [1.0, 1.0]).p == 1.0
    with pytest.raises(ValueError):
        ratio_test([1.0], [1.0, 2.0])


# --- blocks ---------------------------------------------------------------------------

def test_block_sizes_and_values():
    assert blocks_from_step_times([0.5] * 10, 5) == (0.1,) * 10  # 10 steps: blocks of 1
    blocks = blocks_from_step_times([0.1 * (i % 5 + 1) for i in range(100)], 10)
    assert len(blocks) == 20 and all(b == pytest.approx(0.03) for b in blocks)  # 100 steps: 20 blocks of 5
    assert len(blocks_from_step_times([0.1] * 10_000, 1)) == 454
    assert len(blocks_from_step_times([0.1] * 23, 1)) == 11  # blocks of 2, the first step left out
    assert blocks_from_step_times([], 4) == () and blocks_from_step_times([0.1], 0) == ()


def test_tf_progress_lines_give_the_block_means_back():
    rng = random.Random(3)
    times = [0.2 * (1 + 0.1 * rng.random()) for _ in range(100)]
    batch = 256
    steps = [1] + list(range(10, 101, 10))
    cumulative = [round(batch / (sum(times[:s]) / s), 1) for s in steps]  # tf prints one decimal
    blocks = blocks_from_series(steps, cumulative)
    expected = [sum(times[i:i + 10]) / 10 / batch for i in range(0, 100, 10)]
    assert len(blocks) == 10
    assert blocks == pytest.approx(expected, rel=2e-3)
    assert blocks_from_series([1, 10], [5.0, 5.0]) == ()


def test_lag1_autocorrelation():
    assert lag1_autocorrelation([1, 2, 1, 2, 1, 2, 1, 2]) == 0.0  # negative: kept at 0
    assert lag1_autocorrelation(list(range(20))) == 0.9  # a trend: capped
    assert lag1_autocorrelation([1, 2, 3]) == 0.0


# --- runs drawn from known distributions -------------------------------------------------

def ar1_times(rng: random.Random, n: int = 100, level: float = 1.0, sd: float = 0.05, rho: float = 0.6,
              mean_time: float = 0.1) -> list[float]:
    """Step times with autocorrelated noise (a slow phase lasts several steps)."""
    x = rng.gauss(0, sd)
    out = []
    for _ in range(n):
        x = rho * x + rng.gauss(0, sd * math.sqrt(1 - rho * rho))
        out.append(mean_time * level * math.exp(x))
    return out


def sample(times: list[float], images: int = 32) -> RunSample:
    return RunSample(images / (sum(times) / len(times)), blocks_from_step_times(times, images))


def test_single_runs_from_the_same_distribution_are_rarely_significant():
    rng = random.Random(11)
    trials = 200
    called = naive = 0
    for _ in range(trials):
        a, b = ar1_times(rng, rho=0.8), ar1_times(rng, rho=0.8)
        called += compare_runs([sample(a)], [sample(b)], noise=0.0).significant
        naive += ratio_test([1 / t for t in b], [1 / t for t in a]).p < 0.05  # every step as a sample
    assert called / trials <= 0.10
    assert naive / trials >= 0.3  # why the test works on blocks: trusting every step calls noise a difference


def test_a_25_percent_slower_run_is_significant_with_steps_and_with_repeats():
    rng = random.Random(5)
    base = [sample(ar1_times(rng)) for _ in range(3)]
    slow = [sample(ar1_times(rng, level=1.25)) for _ in range(3)]
    one = compare_runs(base[:1], slow[:1])
    assert (one.basis, one.verdict) == (STEPS, "slower")
    assert one.ratio == pytest.approx(0.8, abs=0.03) and one.p < 0.001
    assert one.low is not None and one.high is not None and one.low < one.ratio < one.high < 1
    many = compare_runs(base, slow)
    assert (many.basis, many.verdict, many.n_base, many.n_cand) == (REPEATS, "slower", 3, 3)


def test_repeats_from_the_same_distribution_are_not_significant():
    rng = random.Random(9)
    trials, called = 200, 0
    for _ in range(trials):  # runs that differ by ~3% from one to the next, as machines do
        a = [sample(ar1_times(rng, level=rng.gauss(1, 0.03))) for _ in range(3)]
        b = [sample(ar1_times(rng, level=rng.gauss(1, 0.03))) for _ in range(3)]
        c = compare_runs(a, b)
        assert c.basis == REPEATS
        called += c.significant
    assert called / trials <= 0.07  # about the test's 5% level, less what the 3% minimum effect takes away


def test_two_repeats_a_side_find_a_clear_difference():
    # the quick suite's two repeats on a noisy machine: runs ±10% apart, a 2x effect
    base = [RunSample(r) for r in (100.0, 120.0)]
    cand = [RunSample(r) for r in (210.0, 245.0)]
    c = compare_runs(base, cand)
    assert (c.basis, c.verdict) == (REPEATS, "faster")
    assert c.p is not None and c.p < 0.05
    assert c.low is not None and c.high is not None and 1 < c.low < c.ratio < c.high


def test_two_repeats_a_side_from_the_same_distribution_are_rarely_significant():
    rng = random.Random(21)
    trials, called = 2000, 0
    for _ in range(trials):
        a = [RunSample(100.0 * rng.lognormvariate(0, 0.08)) for _ in range(2)]
        b = [RunSample(100.0 * rng.lognormvariate(0, 0.08)) for _ in range(2)]
        called += compare_runs(a, b).significant
    assert called / trials <= 0.06  # the test's 5% level, less what the 3% minimum effect takes away


def noisy_pairs(rng: random.Random, effect: float, sd: float, configs: int = 10):
    return [([RunSample(100.0 * rng.lognormvariate(0, sd)) for _ in range(2)],
             [RunSample(100.0 * effect * rng.lognormvariate(0, sd)) for _ in range(2)]) for _ in range(configs)]


def test_the_spread_pooled_over_a_table_finds_a_2x_effect_in_noisy_pairs_of_two_repeats():
    # ±15% between repeats: one pair alone (2 df) cannot tell, ten pairs pooled (20 df) can
    rng = random.Random(4)
    pairs = noisy_pairs(rng, 2.0, 0.15)
    spread = repeat_spread(s for pair in pairs for s in pair)
    assert spread is not None and spread.df == 20
    assert spread.var == pytest.approx(0.15 ** 2, rel=0.6)
    alone = [compare_runs(a, b).significant for a, b in pairs]
    pooled = [compare_runs(a, b, spread=spread).verdict for a, b in pairs]
    assert sum(alone) < len(pairs) and pooled == ["faster"] * len(pairs)


def test_the_pooled_spread_keeps_the_false_positive_rate():
    rng = random.Random(8)
    called = total = 0
    for _ in range(300):
        pairs = noisy_pairs(rng, 1.0, 0.08)
        spread = repeat_spread(s for pair in pairs for s in pair)
        called += sum(compare_runs(a, b, spread=spread).significant for a, b in pairs)
        total += len(pairs)
    assert called / total <= 0.06


def test_a_pair_whose_repeats_disagree_keeps_its_own_larger_spread():
    quiet = repeat_spread([[RunSample(100.0), RunSample(100.5)]] * 10)
    assert quiet is not None and quiet.df == 10
    wild = ([RunSample(60.0), RunSample(140.0)], [RunSample(80.0), RunSample(190.0)])
    assert not compare_runs(*wild, spread=quiet).significant
    assert repeat_spread([[RunSample(1.0)], []]) is None


def test_spreads_are_pooled_per_machine_and_not_across_machines():
    quiet = [[RunSample(100.0), RunSample(101.0)]] * 5
    loud = [[RunSample(100.0), RunSample(150.0)]] * 5
    spreads = MachineSpreads([(g, ["a", "a"]) for g in quiet] + [(g, ["b", "b"]) for g in loud]
                             + [([RunSample(1.0), RunSample(9.0)], ["a", "b"])])  # across machines: joins none
    a, b = spreads.for_pair(["a"]), spreads.for_pair({"b"})
    assert a is not None and b is not None and a.df == b.df == 5
    assert a.var == pytest.approx(math.log(1.01) ** 2 / 2) and b.var > 100 * a.var
    assert spreads.for_pair(["a", "b"]) is None and spreads.for_pair(["c"]) is None


def test_a_pooled_spread_never_makes_a_pair_look_more_precise_than_its_own_repeats():
    pair = ([RunSample(100.0), RunSample(110.0)], [RunSample(125.0), RunSample(135.0)])
    own = compare_runs(*pair)
    tighter = compare_runs(*pair, spread=RepeatSpread(1e-6, 40))  # its own variance, the pool's df
    wider = compare_runs(*pair, spread=RepeatSpread(0.05, 40))
    assert own.p is not None and tighter.p is not None and wider.p is not None
    assert tighter.p < own.p < wider.p and tighter.p > 1e-4


def test_log_ratio_test_matches_a_textbook_value():
    # Student's t on logs: a ln 2 difference, each side's log variance 0.02, df 2:
    # se = sqrt(0.02 (1/2 + 1/2)), t = ln 2 / se = 4.90, p = 1 - t / sqrt(2 + t^2) = 0.039
    t = log_ratio_test([2 * math.exp(0.1), 2 * math.exp(-0.1)], [math.exp(0.1), math.exp(-0.1)])
    stat = math.log(2) / math.sqrt(0.02)
    assert t.ratio == pytest.approx(2.0) and t.df == 2
    assert t.p == pytest.approx(1 - stat / math.sqrt(2 + stat * stat), rel=1e-9)
    assert t.low == pytest.approx(2 * math.exp(-4.303 * math.sqrt(0.02)), rel=1e-3)


def test_repeats_that_disagree_outweigh_tight_step_times():
    # each run is steady, but runs differ by ±6%: one run per side would look significant
    base = [RunSample(r, tuple([1 / r] * 5 + [1.001 / r] * 5)) for r in (94.0, 106.0)]
    cand = [RunSample(r, tuple([1 / r] * 5 + [1.001 / r] * 5)) for r in (99.0, 111.0)]
    assert compare_runs(base[:1], cand[:1]).significant
    both = compare_runs(base, cand)
    assert both.basis == REPEATS and not both.significant


def test_the_minimum_effect():
    rng = random.Random(2)
    a = sample(ar1_times(rng, sd=0.002))
    b = sample(ar1_times(rng, sd=0.002, level=1 / 1.02))  # 2% faster, measured very precisely
    assert compare_runs([a], [b], noise=0.03).p < 0.001
    assert compare_runs([a], [b], noise=0.03).verdict == "not significant"
    assert compare_runs([a], [b], noise=0.01).verdict == "faster"


def test_runs_without_step_samples_are_never_significant():
    a, b = RunSample(100.0), RunSample(200.0)
    c = compare_runs([a], [b])
    assert (c.basis, c.significant, c.verdict, c.p) == (NONE, False, "no samples", None)
    assert c.ratio == pytest.approx(2.0)
    assert compare_runs([a, a], [b]).verdict == "no samples"
    assert compare_runs([], [b]).verdict == "—"


def test_step_times_without_a_batch_size_are_no_samples():
    a = RunSample(100.0, step_times=[0.32] * 10, images_per_step=0.0)  # step times, no batch size to divide by
    b = RunSample(200.0, step_times=[0.16] * 10, images_per_step=0.0)
    assert not a.has_blocks and a.blocks == ()
    assert compare_runs([a], [b]).verdict == "no samples"  # one run a side: no ValueError


def test_run_sample_from_records():
    s = run_sample(record(ips=400.0, batch_size=32, num_devices=2))
    assert s is not None and s.rate == 400.0 and len(s.blocks) == 10
    assert sum(s.blocks) / len(s.blocks) == pytest.approx(1 / 400.0, rel=1e-3)  # seconds per image
    assert s.cv is not None and s.cv < 0.01 and not s.wide
    wide = run_sample(record(ips=100.0, metrics={"step_times_s": [0.5, 0.7] * 10}))
    assert wide is not None and wide.wide
    assert run_sample(record(status="oom")) is None
    tf = run_sample(record(ips=958.77, source="tf_cnn_benchmarks", metrics={
        "images_per_sec_mean": 959.1, "images_per_sec_stderr": 0.3, "step_times_s": None,
        "step_series": {"step": [1, 10, 20, 30], "images_per_sec": [965.4, 963.9, 963.5, 962.7]}}))
    assert tf is not None and len(tf.blocks) == 3
    assert tf.cv == pytest.approx(0.3 * 10 / 959.1)  # tf's +/- over sqrt(100 steps), relative


def test_the_wide_mark_and_the_runs_unstable_warning_measure_the_spread_alike():
    from cnnbench.engine.stability import MAX_CV, coefficient_of_variation

    times = [0.1, 0.12, 0.09, 0.11, 0.1, 0.13, 0.08]
    s = run_sample(record(ips=100.0, metrics={"step_times_s": times}))
    assert s is not None and s.cv == pytest.approx(coefficient_of_variation(times), rel=1e-9)
    assert WIDE_CV == MAX_CV
