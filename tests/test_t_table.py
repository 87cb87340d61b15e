"""The table of Student's critical values decides most of an effect table's tests without scipy
(issue 22: a report's tables), and never decides one otherwise than the exact p-value does."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import stdtr, stdtrit

from cnnbench.analysis import significance, t_table
from cnnbench.analysis.samples import RunSample
from cnnbench.analysis.significance import compare_many, compare_runs
from tests.test_compare_many import sample


def exact_t_star(df: np.ndarray) -> np.ndarray:
    return stdtrit(df, 1 - t_table.LEVEL / 2)


def test_the_table_holds_scipys_critical_values():
    assert len(t_table.NODES) == len(t_table.CRITICAL)
    assert list(t_table.NODES) == sorted(set(t_table.NODES)) and t_table.NODES[0] == 1
    np.testing.assert_allclose(t_table.CRITICAL, exact_t_star(np.array(t_table.NODES)), rtol=1e-13, atol=0)


def test_the_bounds_hold_t_star_everywhere():
    """Between the nodes (every 1/400 of a degree of freedom up to 200) and beyond them (to 10^9
    and infinity), the exact t* lies within the bounds; they meet at the nodes."""
    dfs = np.concatenate([np.arange(1.0, 200.0, 1 / 400), np.geomspace(200.0, 1e9, 20_000)])
    exact = exact_t_star(dfs)
    bounds = np.array([t_table.critical_bounds(float(df)) for df in dfs])
    assert (bounds[:, 0] <= exact + 1e-12).all(), dfs[bounds[:, 0] > exact + 1e-12][:5]
    assert (bounds[:, 1] >= exact - 1e-12).all(), dfs[bounds[:, 1] < exact - 1e-12][:5]
    assert (bounds[:, 1] - bounds[:, 0]).max() < 3.5  # widest between 1 and 1.25 degrees of freedom
    at_nodes = np.array([t_table.critical_bounds(float(df)) for df in t_table.NODES[:-1]])
    np.testing.assert_allclose(at_nodes[:, 1], t_table.CRITICAL[:-1], rtol=1e-15)
    z = t_table.critical_bounds(math.inf)
    assert z[0] == z[1] and abs(z[0] - 1.959963984540054) < 1e-12


def test_its_verdicts_are_the_exact_tests_and_leave_few_undecided():
    rng = np.random.default_rng(7)
    dfs = np.exp(rng.uniform(0.0, math.log(5000.0), 100_000))
    near = exact_t_star(dfs) * (1 + rng.normal(0, 1e-3, dfs.size))  # the hard ones: next to t*
    ts = np.where(rng.random(dfs.size) < 0.5, near, rng.uniform(0, 8, dfs.size)) * rng.choice([-1, 1], dfs.size)
    exact = 2 * stdtr(dfs, -np.abs(ts)) < t_table.LEVEL
    decided = [t_table.below_level(float(t), float(df), t_table.LEVEL) for t, df in zip(ts, dfs, strict=True)]
    told = np.array([d is not None for d in decided])
    assert all(d == e for d, e in zip(decided, exact, strict=True) if d is not None)
    assert told.mean() > 0.8  # most are decided, though half of them are within about 0.1% of t*
    far = np.abs(np.abs(ts) - exact_t_star(dfs)) > 0.05 * exact_t_star(dfs)
    assert told[far & (dfs >= 2)].all()


def test_what_the_table_leaves_to_the_exact_p_value():
    assert t_table.below_level(3.0, 10.0, 0.01) is None  # another level
    assert t_table.below_level(3.0, 0.5, 0.05) is None  # under one degree of freedom
    assert t_table.below_level(math.nan, 10.0, 0.05) is None
    assert t_table.below_level(3.0, math.nan, 0.05) is None
    assert t_table.below_level(float(exact_t_star(np.array(12.3))), 12.3, 0.05) is None  # right at t*
    assert t_table.below_level(3.0, 10.0, np.float32(0.05)) is None  # its p-value would compare in float32
    assert t_table.below_level(3.0, 10.0, np.float64(0.05)) is True
    with pytest.raises(ValueError, match="starts at 1"):
        t_table.critical_bounds(0.99)
    assert t_table.below_level(math.inf, 3.0, 0.05) is True
    assert t_table.below_level(-2.5, 1e6, 0.05) is True and t_table.below_level(1.9, math.inf, 0.05) is False


Pair = tuple[list[RunSample], list[RunSample], None]


def random_pairs(n: int) -> list[Pair]:
    """Pairs tested on repeats and on step blocks, with effects near and beyond the minimum."""
    rng = random.Random(11)
    pairs: list[Pair] = []
    for _ in range(n):
        kind = rng.choice(["steps", "steps", "none"])
        effect = rng.choice([1.0, 1.04, 1.05, 1.08, 1.5, 0.93])
        nb, nc = rng.choice([(1, 1), (1, 2), (2, 2), (3, 2), (4, 4)])
        base = [sample(rng, 100.0 * rng.lognormvariate(0, rng.choice([0.01, 0.03])), kind) for _ in range(nb)]
        cand = [sample(rng, 100.0 * effect * rng.lognormvariate(0, rng.choice([0.01, 0.03])), kind) for _ in range(nc)]
        pairs.append((base, cand, None))
    return pairs


def test_many_pairs_give_the_same_verdicts_without_p_values():
    pairs = random_pairs(800)
    exact = compare_many(pairs, 0.03)
    quick = compare_many(pairs, 0.03, p_values=False)
    assert [c.significant for c in quick] == [c.significant for c in exact]
    assert [c.verdict for c in quick] == [c.verdict for c in exact]
    tested = [i for i, c in enumerate(exact) if c.p is not None]
    assert len({exact[i].significant for i in tested}) == 2  # both verdicts among the tested pairs
    assert sum(quick[i].p is None for i in tested) > 0.9 * len(tested)  # decided by the table


def test_one_pair_gives_the_same_verdict_without_its_p_value(monkeypatch):
    """``compare_runs(interval=False, p_value=False)`` (the report's fastest-configuration and
    implementation observations): the verdict of ``compare_runs(interval=False)``, its p-value
    where the table cannot decide, which is then computed as before."""
    pairs = random_pairs(300)
    exact = [compare_runs(b, c, 0.03, interval=False) for b, c, _ in pairs]
    quick = [compare_runs(b, c, 0.03, interval=False, p_value=False) for b, c, _ in pairs]
    assert [(c.ratio, c.basis, c.significant) for c in quick] == [(c.ratio, c.basis, c.significant) for c in exact]
    tested = [i for i, c in enumerate(exact) if c.p is not None]
    assert len({exact[i].significant for i in tested}) == 2 and all(quick[i].p is None for i in tested)
    monkeypatch.setattr(significance, "below_level", lambda t, df, alpha: None)  # the table decides nothing
    undecided = [compare_runs(b, c, 0.03, interval=False, p_value=False) for b, c, _ in pairs]
    assert undecided == exact


def test_a_report_of_decided_pairs_does_not_import_scipy():
    """A report whose tests the table decides (effect tables, the fastest machine per model)
    leaves scipy unimported; one this small (a few dozen step blocks per test) numpy too
    (:data:`cnnbench.analysis.ratio_tests.PLAIN_VALUES`)."""
    code = (
        "import sys\n"
        "from tests.report_fixtures import record, step_times\n"
        "from cnnbench.report import build_report, ReportOptions\n"
        "recs = [record(m, machine, ips * speed, batch_size=32, precision=p,\n"
        "               metrics={'step_times_s': step_times(ips * speed, 32, n=60, jitter=0.01 * (1 + k))})\n"
        "        for k, (m, base) in enumerate([('resnet50', 100.0), ('vgg16', 50.0), ('alexnet', 400.0)])\n"
        "        for p, ips in (('fp32', base), ('amp_fp16', base * 1.8))\n"
        "        for machine, speed in (('m-fast', 1.0), ('m-slow', 0.6))]\n"
        "report = build_report(recs, ReportOptions(max_plots=0))\n"
        "effects = [t for t in report.tables if t.kind == 'effect']\n"
        "assert effects, [t.id for t in report.tables]\n"
        "told = sum('n.s.' not in c.text for t in effects for r in t.rows for c in r[1:])\n"
        "fastest = [o.text for o in report.observations if 'fastest' in o.text.lower()]\n"
        "assert fastest, [o.text for o in report.observations]\n"
        "print('scipy.special' in sys.modules, 'numpy' in sys.modules, told)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    assert done.returncode == 0, done.stderr
    scipy, numpy, cells = done.stdout.split()
    assert (scipy, numpy) == ("False", "False") and int(cells) > 0
