"""Which change-point method ``cnnbench history`` should use, measured on series shaped like a fleet's (issue 46).

Each series is the log of images/sec of one configuration on one machine, run after run:

- runs come in **jobs** of 1-5 runs (a nightly sweep, a Slurm job) that share a job offset: the
  drift between jobs, which is not a change. ``--drift range`` (default): the job offsets of a
  series span about ``d`` (2-5%, drawn per series; offsets ~ N(0, d/4)); ``--drift sd``: their
  standard deviation is ``d`` itself (harsher);
- each run has its own noise, a standard deviation of 1-3% (drawn per series);
- 0-2 lone outliers per series, 10-30% off (mostly slower);
- a planted step of 3%, 5% or 10% (either sign), at a job boundary between 20% and 80% of the series;
- series of 20-200 runs (steps), 50 runs (no step: false changes), 100 runs (timing).

Then, on the same series, side by side:

- **cnnbench**: :func:`cnnbench.analysis.history.fit_levels` with the job ids, and without them
  (every run a job, as older records without a ``session_id``);
- a **Conbench-style lookback z-score**, reimplemented here only: each run against the mean and
  standard deviation of up to 100 runs before it (at least 5), flagged at ``|z| > 5`` (Conbench's
  default); a change is the first run of an episode of flagged runs;
- **asv**'s ``step_detect.detect_steps`` (asv 0.6.6: the L1 Potts model with its own penalty);
- **Apache Otava** at its defaults (``otava.analysis.compute_change_points``: window 50, p 0.001),
  and at p 1e-6 (its false changes nearest cnnbench's: about 2 per 100 series here);
- **E-Divisive** of MongoDB's ``signal-processing-algorithms`` (2.1.6, its C extension) at its
  defaults (p 0.05, 100 permutations);
- **ruptures** PELT, ``l2`` cost on the runs, penalty ``2 sigma^2 log n`` (sigma from the
  successive differences): a penalised piecewise-constant fit with no job model.

Figures: a step is found when a change of the right sign lies within 3 runs of it (also shown:
3% steps found anywhere with the right sign, and 5% steps found in the series of 60 runs or
more, as short series with few jobs cannot tell a step from the drift); false changes
are changes in a series with no step (drift and outliers only), and changes further than 3 runs
from the step in a series with one; the time is for 1,000 series of 100 runs (the fit only; wall clock, and the
process's CPU time, which a shared machine's load disturbs less).

The other methods are imported from ``--site`` folders (``pip install --target DIR ruptures
asv==0.6.6`` and ``apache-otava``), so they need not be in the project's environment; a method
that does not import is said so and skipped.

    python benchmarks/history_methods.py --series 300 --seed 1 --site /tmp/histbench_pkgs --site /tmp/histbench_otava
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Detector = Callable[[np.ndarray, np.ndarray], list[tuple[int, int]]]
"""``(values, job ids) -> [(index of the first run after a change, sign of the change)]``."""


@dataclass
class Case:
    values: np.ndarray
    jobs: np.ndarray
    step_at: int | None
    step_sign: int


def make_case(rng: np.random.Generator, n: int, step: float | None, drift: str) -> Case:
    run_sd = rng.uniform(0.01, 0.03)
    d = rng.uniform(0.02, 0.05)
    job_sd = d / 4 if drift == "range" else d
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(1, 6)))
    jobs = np.repeat(np.arange(len(sizes)), sizes)[:n]
    offsets = rng.normal(0.0, job_sd, len(sizes))
    y = math.log(1000.0) + offsets[jobs] + rng.normal(0.0, run_sd, n)
    step_at, sign = None, 0
    if step is not None:
        bounds = np.flatnonzero(np.diff(jobs)) + 1
        bounds = bounds[(bounds >= 0.2 * n) & (bounds <= 0.8 * n)]
        step_at = int(rng.choice(bounds))
        sign = 1 if rng.random() < 0.5 else -1
        y[step_at:] += sign * math.log1p(step)
    for _ in range(int(rng.integers(0, 3))):
        i = int(rng.integers(0, n))
        size = rng.uniform(0.10, 0.30)
        y[i] += math.log1p(size) if rng.random() < 0.25 else math.log1p(-size)
    return Case(np.exp(y), jobs, step_at, sign)


# --- the methods ---------------------------------------------------------------------------

def cnnbench_jobs(values: np.ndarray, jobs: np.ndarray) -> list[tuple[int, int]]:
    from cnnbench.analysis.history import fit_levels

    fit = fit_levels(values, jobs.tolist())
    return [(s.index, 1 if s.ratio > 1 else -1) for s in fit.shifts]


def cnnbench_runs(values: np.ndarray, jobs: np.ndarray) -> list[tuple[int, int]]:
    from cnnbench.analysis.history import fit_levels

    fit = fit_levels(values, None)
    return [(s.index, 1 if s.ratio > 1 else -1) for s in fit.shifts]


def conbench_z(values: np.ndarray, jobs: np.ndarray, threshold: float = 5.0, lookback: int = 100,
               minimum: int = 5) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    flagged = False
    for i in range(minimum, len(values)):
        base = values[max(0, i - lookback):i]
        sd = base.std(ddof=1)
        z = (values[i] - base.mean()) / sd if sd > 0 else 0.0
        now = abs(z) > threshold
        if now and not flagged:
            out.append((i, 1 if z > 0 else -1))
        flagged = now
    return out


def asv_steps(values: np.ndarray, jobs: np.ndarray) -> list[tuple[int, int]]:
    from asv.step_detect import detect_steps

    steps = detect_steps(values.tolist())
    return [(int(b[0]), 1 if b[2] > a[2] else -1) for a, b in zip(steps, steps[1:], strict=False)]


def otava_defaults(values: np.ndarray, jobs: np.ndarray) -> list[tuple[int, int]]:
    from otava.analysis import compute_change_points

    cps, _ = compute_change_points(values.tolist(), window_len=50, max_pvalue=0.001, min_magnitude=0.0)
    return [(int(c.index), 1 if c.stats.mean_2 > c.stats.mean_1 else -1) for c in cps]


def otava_strict(values: np.ndarray, jobs: np.ndarray) -> list[tuple[int, int]]:
    from otava.analysis import compute_change_points

    cps, _ = compute_change_points(values.tolist(), window_len=50, max_pvalue=1e-6, min_magnitude=0.0)
    return [(int(c.index), 1 if c.stats.mean_2 > c.stats.mean_1 else -1) for c in cps]


def e_divisive_spa(values: np.ndarray, jobs: np.ndarray) -> list[tuple[int, int]]:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    cuts = sorted(int(k) for k in e_divisive(values.tolist()))
    bounds = [0, *cuts, len(values)]
    return [(k, 1 if values[k:bounds[i + 2]].mean() > values[bounds[i]:k].mean() else -1)
            for i, k in enumerate(cuts)]


def ruptures_pelt(values: np.ndarray, jobs: np.ndarray) -> list[tuple[int, int]]:
    import ruptures

    y = np.log(values)
    sigma = 1.4826 * np.median(np.abs(np.diff(y))) / math.sqrt(2)
    cuts = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(y.reshape(-1, 1)).predict(
        pen=2 * sigma ** 2 * math.log(len(y)))[:-1]
    bounds = [0, *cuts, len(y)]
    out = []
    for i, k in enumerate(cuts):
        before, after = y[bounds[i]:k].mean(), y[k:bounds[i + 2]].mean()
        out.append((int(k), 1 if after > before else -1))
    return out


METHODS: dict[str, tuple[Detector, str]] = {
    "cnnbench (job model)": (cnnbench_jobs, "cnnbench"),
    "cnnbench, no job ids": (cnnbench_runs, "cnnbench"),
    "Conbench lookback z (|z|>5)": (conbench_z, "numpy"),
    "asv 0.6.6 detect_steps": (asv_steps, "asv"),
    "Apache Otava (defaults)": (otava_defaults, "otava"),
    "Apache Otava (p 1e-6)": (otava_strict, "otava"),
    "E-Divisive (MongoDB's s-p-a)": (e_divisive_spa, "signal_processing_algorithms"),
    "ruptures PELT (l2, BIC)": (ruptures_pelt, "ruptures"),
}


def available(module: str) -> str | None:
    try:
        __import__(module)
    except Exception as exc:  # a method that does not install or import is skipped, and said so
        return f"{type(exc).__name__}: {exc}"
    return None


def found(changes: Sequence[tuple[int, int]], case: Case, within: int = 3) -> tuple[bool, int, bool]:
    """Whether the planted step was found (right sign, within ``within`` runs), how many other
    changes, and whether a change of the right sign was found anywhere."""
    if case.step_at is None:
        return False, len(changes), False
    hits = [c for c in changes if abs(c[0] - case.step_at) <= within and c[1] == case.step_sign]
    near = [c for c in changes if abs(c[0] - case.step_at) <= within]
    anywhere = any(c[1] == case.step_sign for c in changes)
    return bool(hits), len(changes) - len(near), anywhere


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=300, help="Series per step size and without a step (default 300).")
    ap.add_argument("--timing-series", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--drift", choices=("range", "sd"), default="range")
    ap.add_argument("--site", action="append", default=[], help="A folder to import the other methods from.")
    ap.add_argument("--only", nargs="*", default=None, help="Methods to run (names as printed).")
    args = ap.parse_args(argv)
    sys.path[1:1] = args.site
    np.random.seed(args.seed)  # E-Divisive's permutations draw from numpy's global generator
    rng = np.random.default_rng(args.seed)
    steps = {s: [make_case(rng, int(rng.integers(20, 201)), s, args.drift) for _ in range(args.series)]
             for s in (0.03, 0.05, 0.10)}
    null = [make_case(rng, 50, None, args.drift) for _ in range(args.series)]
    timing = [make_case(rng, 100, 0.05 if i % 2 else None, args.drift) for i in range(args.timing_series)]
    print(f"seed {args.seed}, drift {args.drift}, {args.series} series per step size, {len(null)} without; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    header = f"{'method':30} {'3% found':>9} {'5% found':>9} {'10% found':>9} {'false/100':>9} " \
             f"{'extra/100':>9} {'1,000x100 s':>11} {'(CPU s)':>8} {'3% anywhere':>11} {'5%, >=60 runs':>13}"
    print(header)
    print("-" * len(header))
    for name, (method, module) in METHODS.items():
        if args.only is not None and name not in args.only:
            continue
        why = available(module)
        if why:
            print(f"{name:30} not available ({why})")
            continue
        rates = []
        extra = 0
        loose = long_hits = long_cases = 0
        for cases in steps.values():
            hits = 0
            for case in cases:
                hit, others, anywhere = found(method(case.values, case.jobs), case)
                hits += hit
                extra += others
                loose += anywhere and cases is steps[0.03]
                if cases is steps[0.05] and len(case.values) >= 60:
                    long_hits += hit
                    long_cases += 1
            rates.append(hits / len(cases))
        false = sum(len(method(c.values, c.jobs)) for c in null) / len(null) * 100
        start, cpu = time.perf_counter(), time.process_time()
        for case in timing:
            method(case.values, case.jobs)
        took = (time.perf_counter() - start) * 1000 / len(timing)
        took_cpu = (time.process_time() - cpu) * 1000 / len(timing)
        print(f"{name:30} {rates[0]:9.1%} {rates[1]:9.1%} {rates[2]:9.1%} {false:9.1f} "
              f"{extra / (3 * args.series) * 100:9.1f} {took:11.2f} {took_cpu:8.2f} {loose / args.series:11.1%} "
              f"{long_hits / max(long_cases, 1):13.1%}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
