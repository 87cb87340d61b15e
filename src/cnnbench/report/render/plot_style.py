"""What every plot shares: matplotlib figures without pyplot state, fixed margins, wrapped titles,
legend columns, the colours and the limits on panels and lines (matplotlib imported only to draw)."""

from __future__ import annotations

import math
import textwrap
from typing import Any

MAX_PANELS_SMALL = 6
"""More models than this: one axes instead of a panel per model (axes are what costs time)."""
MAX_LINES = 8
"""More series than this in a panel: their median and range instead of one line each."""
MAX_LINES_OVERVIEW = 40
MAX_GROUPS = 30
FAIL_COLOR = "#b00000"
DPI = 100
"""The figures' size in pixels per inch (SVG keeps it as their nominal size)."""
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf"]


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _layout(fig: Any, *, top: float, bottom: float, left: float = 0.75, right: float = 0.25,
            hspace: float = 0.55, wspace: float = 0.3) -> None:
    """Fixed margins in inches (tight_layout would draw every figure twice)."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h,
                        hspace=hspace, wspace=wspace)


def _title(fig: Any, text: str) -> float:
    """A wrapped figure title; returns the inches it takes."""
    width = int(fig.get_size_inches()[0] * 11)
    wrapped = textwrap.fill(text, width=max(width, 30))
    fig.suptitle(wrapped, fontsize=11, y=1 - 0.12 / fig.get_size_inches()[1], va="top")
    return 0.25 + 0.22 * wrapped.count("\n") + 0.3


def _legend_columns(fig_or_width: Any, labels: list[str], most: int = 4) -> int:
    """How many legend columns fit the figure's width for these labels (8 pt text)."""
    width = fig_or_width if isinstance(fig_or_width, (int, float)) else fig_or_width.get_size_inches()[0]
    longest = max((min(len(t), 40) for t in labels), default=10)
    per_column = 0.5 + 0.075 * longest  # inches: marker + text
    return max(1, min(most, len(labels) or 1, int(width / per_column)))


def _grid(n: int, max_cols: int = 4) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


def _short(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _locator() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(5)
