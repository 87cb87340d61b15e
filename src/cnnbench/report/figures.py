"""The report's plot budget: which figures (:class:`~cnnbench.report.document.Figure`) are drawn.

Each kind of table makes its own figures (its ``plot``: :mod:`cnnbench.report.kinds`); render/plots.py draws them.
"""

from __future__ import annotations

from collections.abc import Sequence

from cnnbench.report.document import Figure

PLOT_ORDER = {"scaling": 0, "training": 1, "throughput": 2, "bandwidth": 3, "history": 4}
"""The order in which a plot budget (``--max-plots``) takes the kinds of figure (any other: last)."""


def budgeted(figures: Sequence[Figure], max_plots: int) -> list[Figure]:
    """The figures a budget of ``max_plots`` draws: scaling first, then training curves, then
    throughput, then bandwidth, then history timelines, each kind in the report's order."""
    return sorted(figures, key=lambda f: PLOT_ORDER.get(f.kind, len(PLOT_ORDER)))[:max(0, max_plots)]
