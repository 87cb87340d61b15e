"""The bandwidth figure: bus bandwidth (GB/s) against message size (bytes, log scale), a line
per machine, for one collective in one setting (``cnnbench comm`` records)."""

from __future__ import annotations

from typing import Any

from cnnbench.report.document import Figure
from cnnbench.report.render.plot_style import COLORS, _figure, _layout, _legend_columns, _short, _title

_UNITS = ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))


def size_label(n: int) -> str:
    """``512``, ``1K``, ``64M``, ``1G`` (powers of 1024, as nccl-tests' sizes are given)."""
    for unit, word in _UNITS:
        if n >= unit and n % unit == 0:
            return f"{n // unit}{word}"
    return str(n)


def _ticks(sizes: list[int], most: int = 9) -> list[int]:
    step = max(1, -(-len(sizes) // most))
    return sizes[::step]


def _bandwidth(figure: Figure) -> Any:
    lines: dict[str, list[tuple[int, float]]] = figure.data["lines"]
    labels = list(lines)
    fig = _figure(7.5, 4.4 + 0.22 * (len(labels) // 4))
    ax = fig.add_subplot(1, 1, 1)
    for i, label in enumerate(labels):
        pts = sorted(lines[label])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, linewidth=1.6,
                color=COLORS[i % len(COLORS)], label=_short(label, 40))
    sizes = sorted({p[0] for pts in lines.values() for p in pts})
    ax.set_xscale("log", base=2)
    if sizes:
        ticks = _ticks(sizes)
        ax.set_xticks(ticks, [size_label(s) for s in ticks])
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.set_xlabel("size (bytes)", fontsize=9)
    ax.set_ylabel("bus bandwidth (GB/s)", fontsize=9)
    ax.grid(True, alpha=0.3)
    ncol = _legend_columns(fig, labels)
    if labels:
        ax.legend(fontsize=8, ncol=ncol, loc="upper left", frameon=False)
    top = _title(fig, figure.title)
    _layout(fig, top=top, bottom=0.6, left=0.8)
    return fig
