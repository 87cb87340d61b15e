"""The throughput figure: images/sec per machine for each model of a configuration (one small panel
per model, each on its own scale so small models stay readable; failed cells marked; error bars:
one relative stdev of the repeats either side, the tables' ±; the batch under each bar when a
model ran different batches on different machines), or one axes of grouped bars for many."""

from __future__ import annotations

import math
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.report.document import Figure
from cnnbench.report.render.plot_style import (
    COLORS,
    FAIL_COLOR,
    MAX_GROUPS,
    MAX_LINES,
    MAX_PANELS_SMALL,
    _figure,
    _fmt,
    _grid,
    _layout,
    _locator,
    _short,
    _title,
)

CAPSIZE = 2.0
"""Half the width of an error bar's cap, in points."""
LABEL_GAP = CAPSIZE + 2.0
"""Points between the end of a bar's error bar (its cap) and the bar's value label: clear of the cap."""


def _panel_bars(ax: Any, xs: list[int], color: list[str], vals: list[float | None], errs: list[float],
                status: list[str], batches: list[Any]) -> None:
    """One model's bars, each with its value (and batch) above it, or its failure where it has none."""
    ax.bar(xs, [v if v is not None else 0.0 for v in vals], color=color, width=0.75,
           yerr=errs if any(errs) else None, error_kw={"elinewidth": 1.0, "capsize": CAPSIZE})
    top = max((v + e for v, e in zip(vals, errs, strict=False) if v is not None), default=1.0)
    for x, v, s, e, b in zip(xs, vals, status, errs, batches, strict=False):
        if v is not None:  # above the error bar's cap, LABEL_GAP points clear of it
            ax.annotate(_fmt(v) + (f"\nbatch {b}" if b else ""), (x, v + e), xytext=(0, LABEL_GAP),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7)
        else:
            ax.text(x, top * 0.04, s or "—", ha="center", va="bottom", fontsize=8, color=FAIL_COLOR,
                    rotation=90)
    ax.set_ylim(0, top * (1.3 if any(batches) else 1.18))


def _throughput(figure: Figure) -> Any:
    d = figure.data
    rows, columns, values, status = d["rows"], d["columns"], d["values"], d["status"]
    errors = d.get("errors") or [[0.0] * len(columns) for _ in rows]
    if len(columns) == 1:
        return _single_column(figure, rows, columns[0], [v[0] for v in values], [s[0] for s in status],
                              [e[0] for e in errors])
    if len(rows) > MAX_PANELS_SMALL or len(columns) > MAX_LINES:
        return _grouped_bars(figure, rows, columns, values, status, d.get("column_name"), errors)
    color = [COLORS[i % len(COLORS)] for i in range(len(columns))]
    nrows, ncols = _grid(len(rows), 3)
    legend_rows = math.ceil(len(columns) / 5)
    fig = _figure(max(3.0 * ncols, 6.5), 2.5 * nrows + 1.4 + 0.2 * legend_rows)
    xs = list(range(len(columns)))
    batches = d.get("batches") or [[""] * len(columns) for _ in rows]
    for i, name in enumerate(rows):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        _panel_bars(ax, xs, color, values[i], errors[i], status[i], batches[i])
        ax.set_xticks([])
        ax.yaxis.set_major_locator(_locator())
        ax.set_title(_short(name), fontsize=10)
        if i % ncols == 0:
            ax.set_ylabel(F.field(F.IPS).label, fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    handles = [fig.axes[0].patches[j] for j in range(len(columns))]
    top = _title(fig, figure.title)
    fig.legend(handles, [_short(c, 32) for c in columns], loc="lower center", ncol=min(5, len(columns)),
               fontsize=8, frameon=False, title=d.get("column_name"), title_fontsize=8)
    _layout(fig, top=top + 0.1, bottom=0.45 + 0.2 * legend_rows, hspace=0.45, wspace=0.35)
    return fig


def _bar_shapes(ax: Any, values: list[list[float | None]], status: list[list[str]], errors: list[list[float]],
                k: int, base: float) -> tuple[list[Any], list[str], list[tuple[float, float, float]]]:
    """The corners and colour of every bar, the (x, value, error) of those with an error bar; an
    ``x`` where a cell failed."""
    width = 0.8 / k
    verts, colors = [], []
    bars: list[tuple[float, float, float]] = []
    for j in range(k):
        for i, row in enumerate(values):
            x = i + (j - (k - 1) / 2) * width
            half = width * 0.95 / 2
            top = row[j]
            if top is not None:
                verts.append([(x - half, base), (x - half, top), (x + half, top), (x + half, base)])
                colors.append(COLORS[j % len(COLORS)])
                err = errors[i][j] if i < len(errors) and j < len(errors[i]) else 0.0
                if err:
                    bars.append((x, top, err))
            elif status[i][j]:
                ax.text(x, base, "x", ha="center", va="bottom", fontsize=7, color=FAIL_COLOR)
    return verts, colors, bars


def _error_bars(ax: Any, bars: list[tuple[float, float, float]], base: float, log_scale: bool) -> None:
    if bars:  # one errorbar call for all of them: one collection, cheap to draw
        lows = [min(e, v - base * 1.01) if log_scale else e for _, v, e in bars]  # none below a log axis
        ax.errorbar([b[0] for b in bars], [b[1] for b in bars], yerr=[lows, [b[2] for b in bars]], fmt="none",
                    ecolor="black", elinewidth=0.8, capsize=1.5)


def _grouped_bars(figure: Figure, rows: list[str], columns: list[str], values: list[list[float | None]],
                  status: list[list[str]], column_name: str | None, errors: list[list[float]]) -> Any:
    """Many models or columns: one axes, a group of bars per model (log scale when the models'
    throughputs span more than 20x, so small models stay visible), error bars where there are
    repeats."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    n_models = len(rows)
    rows, values, status, errors = rows[:MAX_GROUPS], values[:MAX_GROUPS], status[:MAX_GROUPS], errors[:MAX_GROUPS]
    k = len(columns)
    fig = _figure(min(max(6.5, 0.45 * len(rows) * max(1, k / 4) + 2.5), 16.0), 4.8)
    ax = fig.add_subplot(1, 1, 1)
    present = [v for row in values for v in row if v is not None]
    log_scale = bool(present) and max(present) / min(present) > 20
    base = min(present) / 2 if log_scale else 0.0
    # One collection for all bars: hundreds of separate patches would cost far more to draw.
    verts, colors, bars = _bar_shapes(ax, values, status, errors, k, base)
    ax.add_collection(PolyCollection(verts, facecolors=colors, edgecolors="none"))
    _error_bars(ax, bars, base, log_scale)
    highest = max((v + e for row, errs in zip(values, errors, strict=False)
                   for v, e in zip(row, errs, strict=False) if v is not None), default=max(present, default=1.0))
    ax.set_ylim(base, highest * (1.5 if log_scale else 1.08))
    handles = [Patch(color=COLORS[j % len(COLORS)], label=_short(c, 32)) for j, c in enumerate(columns)]
    if log_scale:
        ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), [_short(r, 18) for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(F.field(F.IPS).label + (" (log scale)" if log_scale else ""), fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ncol = min(k, 8)
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=ncol, fontsize=7,
              frameon=False, title=column_name, title_fontsize=7)
    failed = any(st for row in status for st in row)
    more = f" (first {MAX_GROUPS} of {n_models} models)" if n_models > MAX_GROUPS else ""
    top = _title(fig, figure.title + more + (" — x: failed" if failed else ""))
    _layout(fig, top=top, bottom=1.3 + 0.16 * math.ceil(k / ncol), left=0.8)
    return fig


def _single_column(figure: Figure, rows: list[str], column: str, vals: list[float | None],
                   status: list[str], errs: list[float]) -> Any:
    """One machine (one column): a bar per model, error bars where there are repeats."""
    rows, vals, status = rows[:40], vals[:40], status[:40]
    errs = [e or 0.0 for e in errs[:40]] + [0.0] * (len(rows) - len(errs[:40]))
    fig = _figure(7.5, 0.3 * len(rows) + 1.6)
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, [v or 0.0 for v in vals], color=COLORS[0], height=0.7,
            xerr=errs if any(errs) else None, error_kw={"elinewidth": 1.0, "capsize": CAPSIZE})
    top = max((v + e for v, e in zip(vals, errs, strict=False) if v is not None), default=1.0)
    for y, v, s, e in zip(ys, vals, status, errs, strict=False):  # right of the error bar's cap
        ax.annotate(_fmt(v) if v is not None else s or "—", (v + e if v is not None else 0, y),
                    xytext=(LABEL_GAP, 0), textcoords="offset points", va="center", fontsize=8,
                    color="black" if v is not None else FAIL_COLOR)
    ax.set_yticks(ys, [_short(r) for r in rows], fontsize=8)
    ax.set_xlim(0, top * 1.2)
    ax.set_xlabel(f"{F.field(F.IPS).label} on {column}", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    top = _title(fig, figure.title)
    _layout(fig, top=top, bottom=0.55, left=0.3 + 0.065 * max(len(_short(r)) for r in rows))
    return fig
