"""The report's plot budget: which figures (:class:`~cnnbench.report.document.Figure`) are drawn.

Each kind of table makes its own figures (its ``plot``: :mod:`cnnbench.report.kinds`) and
declares their place in the budget (its ``plot_order``); render/plots.py draws them.
"""

from __future__ import annotations

from collections.abc import Sequence

from cnnbench.report.document import Figure


def budgeted(figures: Sequence[Figure], max_plots: int) -> list[Figure]:
    """The figures a budget of ``max_plots`` draws: the kinds of figure in their ``plot_order``
    (scaling first, then training curves, then throughput, then bandwidth, then history
    timelines; any other last), each kind in the report's order."""
    from cnnbench.report.kinds import plot_orders

    order = plot_orders()
    last = max(order.values(), default=0) + 1
    return sorted(figures, key=lambda f: order.get(f.kind, last))[:max(0, max_plots)]
