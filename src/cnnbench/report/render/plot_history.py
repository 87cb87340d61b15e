"""The history figure: one series' runs in time order (images/sec), each level as a step line,
each change point as a dashed vertical line with its size, and outliers marked apart."""

from __future__ import annotations

from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.report.document import Figure
from cnnbench.report.render.plot_style import COLORS, FAIL_COLOR, _figure, _layout, _title

MAX_DATE_TICKS = 8
"""At most this many runs on the x axis are labelled with their day."""


def _date_ticks(days: list[str]) -> list[int]:
    """The runs whose day labels the axis: evenly spaced, the first and the last included."""
    n = len(days)
    if n <= MAX_DATE_TICKS:
        return list(range(n))
    step = (n - 1) / (MAX_DATE_TICKS - 1)
    return sorted({round(i * step) for i in range(MAX_DATE_TICKS)})


def _history(figure: Figure) -> Any:
    ips: list[float] = figure.data["ips"]
    days: list[str] = figure.data["days"]
    outliers = set(figure.data["outliers"])
    fig = _figure(7.5, 4.4)
    ax = fig.add_subplot(1, 1, 1)
    kept = [i for i in range(len(ips)) if i not in outliers]
    ax.plot(kept, [ips[i] for i in kept], linestyle="none", marker="o", markersize=3.5, color=COLORS[0],
            label="run")
    if outliers:
        ax.plot(sorted(outliers), [ips[i] for i in sorted(outliers)], linestyle="none", marker="x", markersize=7,
                markeredgewidth=1.6, color=FAIL_COLOR, label="outlier (not a change)")
    levels = figure.data["levels"]
    if levels:  # one step line: a level from its first run to its last, joined at each change
        edges = [start - 0.5 for start, _, _ in levels] + [levels[-1][1] - 0.5]
        ax.stairs([value for _, _, value in levels], edges, baseline=None, color=COLORS[1], linewidth=2.0,
                  label="level")
    for k, (index, text) in enumerate(figure.data["changes"]):
        ax.axvline(index - 0.5, color=COLORS[3], linestyle="--", linewidth=1.2,
                   label="change" if k == 0 else None)
        ax.annotate(text, (index - 0.5, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -3),
                    textcoords="offset points", va="top", fontsize=8, color=COLORS[3])
    ticks = _date_ticks(days)
    ax.set_xticks(ticks, [days[i] or "?" for i in ticks], rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.5 - 0.02 * len(ips), len(ips) - 0.5 + 0.02 * len(ips))
    ax.set_xlabel("runs in time order", fontsize=9)
    ax.set_ylabel(F.field(F.IPS).label, fontsize=9)
    ax.grid(True, alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=8, frameon=False)
    top = _title(fig, figure.title)
    _layout(fig, top=top, bottom=1.15, left=0.8)
    return fig
