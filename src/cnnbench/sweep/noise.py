"""The repeats' check: when the last repeat of a configuration has run, a relative stdev of
its repeats' images/sec (sample standard deviation over the mean,
:func:`cnnbench.analysis.repeat_stats.relative_stdev`) above the noise threshold becomes a
one-line warning, as ``cnnbench report`` shows the same figure as the cell's ``±x%``."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cnnbench.analysis.repeat_stats import SPREAD_NAME, relative_stdev, spread_percent
from cnnbench.sweep.suite import Case


def repeat_warnings(case: Case, cases: list[Case], figures: Mapping[tuple[str, str], float],
                    machine: Callable[[Case], str], noise: float) -> list[str]:
    """A line when the repeats of ``case``'s configuration disagree by more than ``noise``."""
    keys = [(c.key, machine(c)) for c in cases if c.index == case.index]
    values = [figures[k] for k in keys if k in figures]
    spread = relative_stdev(values)
    if spread is None or spread <= noise:
        return []
    mean = sum(values) / len(values)
    return [f"repeats of {case.label.rsplit(' #', 1)[0]} disagree: {SPREAD_NAME} {spread_percent(spread)} "
            f"({min(values):.1f} to {max(values):.1f} images/sec, mean {mean:.1f}; noise threshold "
            f"{noise * 100:g}%)"]
