"""The scaling figure: speedup against device count per model, one line per machine (with its
batch when the machines ran different batches), the ideal (linear) line dashed, error bars over
the repeats where there are several; the panels share their axes, so they compare."""

from __future__ import annotations

import math
import statistics
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.report.document import Figure
from cnnbench.report.render.plot_style import (
    COLORS,
    MAX_LINES,
    MAX_LINES_OVERVIEW,
    MAX_PANELS_SMALL,
    _figure,
    _grid,
    _layout,
    _legend_columns,
    _short,
    _title,
)
from cnnbench.words import plural

MAX_EXTRA_TICKS = 6
"""Powers of two added to the ideal line's ticks to reach speedups beyond it (at most this many)."""


def _speedups(models: dict[str, list[dict[str, Any]]]) -> list[float]:
    """Every speedup a scaling figure draws: its points and the ends of its ranges (positive ones:
    the axis is logarithmic)."""
    out = [v for series in models.values() for s in series for _, v in s["points"]]
    out += [v for series in models.values() for s in series for r in s.get("ranges") or [] for v in r[1:]]
    return [v for v in out if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]


def _speedup_ticks(ideal: list[float], values: list[float]) -> list[float]:
    """The ideal line's speedups, and powers of two out to the farthest drawn speedup beyond them
    (a point at 13x on a 1-2 device plot gets ticks 4, 8, 16), so the labelled axis covers every point."""
    ticks = set(ideal)
    lo, hi = min(ideal), max(ideal)
    if values and max(values) > hi:
        first, last = math.floor(math.log2(hi)) + 1, math.ceil(math.log2(max(values)))
        step = max(1, math.ceil((last - first + 1) / MAX_EXTRA_TICKS))
        ticks |= {2.0 ** k for k in range(last, first - 1, -step)}
    if values and min(values) < lo:
        first, last = math.ceil(math.log2(lo)) - 1, math.floor(math.log2(min(values)))
        step = max(1, math.ceil((first - last + 1) / MAX_EXTRA_TICKS))
        ticks |= {2.0 ** k for k in range(last, first + 1, step)}
    return sorted(ticks)


def _speedup_axes(ax: Any, devices: list[int], base: int, values: list[float]) -> list[float]:
    """Log-log axes with the ideal line; ``values``: every speedup the figure draws (its panels
    share this axis), which the y axis and its labels cover."""
    ideal = [n / base for n in devices]
    ax.plot(devices, ideal, linestyle="--", color="#888888", linewidth=1.2, label="ideal (linear)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(devices, [str(n) for n in devices])
    ticks = _speedup_ticks(ideal, values)
    ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
    ax.set_ylim(min(ticks) / 1.15, max(ticks) * 1.15)
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)
    return ideal


def _median_curve(series: list[dict[str, Any]]) -> list[tuple[int, float]]:
    by_n: dict[int, list[float]] = {}
    for s in series:
        for n, v in s["points"]:
            by_n.setdefault(n, []).append(v)
    return [(n, statistics.median(vs)) for n, vs in sorted(by_n.items())]


def _median_and_range(ax: Any, series: list[dict[str, Any]]) -> None:
    med = _median_curve(series)
    ax.plot([p[0] for p in med], [p[1] for p in med], marker="o", color=COLORS[0], linewidth=1.8,
            label=f"median of {len(series)} series")
    lo = [min(v for s in series for m, v in s["points"] if m == n) for n, _ in med]
    hi = [max(v for s in series for m, v in s["points"] if m == n) for n, _ in med]
    ax.fill_between([p[0] for p in med], lo, hi, color=COLORS[0], alpha=0.2, label="range over series")


def _series_line(ax: Any, s: dict[str, Any], color: str) -> None:
    pts = s["points"]
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color, linewidth=1.8, label=s["label"])
    if s.get("note") and pts:  # the batch, at the line's end, when machines ran different ones
        ax.annotate(s["note"], pts[-1], xytext=(-4, 4), textcoords="offset points", fontsize=7,
                    ha="right", color=color)
    ranges = s.get("ranges") or []
    if ranges:  # one collection of segments per series: cheap to draw
        ax.vlines([r[0] for r in ranges], [r[1] for r in ranges], [r[2] for r in ranges], color=color,
                  linewidth=1.2)


def _legend_entries(fig: Any, many: bool) -> tuple[list[Any], list[str]]:
    """The legend's handles and texts: the first panel's, or (one line per series) every panel's, once each."""
    handles, texts = fig.axes[0].get_legend_handles_labels()
    if not many:
        seen = dict(zip(texts, handles, strict=False))
        for ax in fig.axes[1:]:
            for h, t in zip(*ax.get_legend_handles_labels(), strict=False):
                seen.setdefault(t, h)
        texts, handles = list(seen), list(seen.values())
    return handles, texts


def _scaling(figure: Figure) -> Any:
    models: dict[str, list[dict[str, Any]]] = figure.data["models"]
    devices: list[int] = figure.data["devices"]
    base = min(devices)
    ylabel = f"speedup over {plural(base, 'device')}"
    if len(models) > MAX_PANELS_SMALL:
        return _scaling_overview(figure, models, devices, base, ylabel)
    names = list(models)
    rows, cols = _grid(len(names), 3)
    labels = list(dict.fromkeys(s["label"] for name in names for s in models[name]))
    many = max(len(models[n]) for n in names) > MAX_LINES
    width = 3.6 * cols + 0.8
    legend_rows = 1 if many else math.ceil((len(labels) + 1) / _legend_columns(width, labels))
    fig = _figure(width, 2.9 * rows + 1.3 + 0.22 * legend_rows)
    color = {lab: COLORS[i % len(COLORS)] for i, lab in enumerate(labels)}
    values = _speedups(models)
    first_ax = None
    for i, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, i + 1, sharex=first_ax, sharey=first_ax)  # panels compare
        first_ax = first_ax or ax
        _speedup_axes(ax, devices, base, values)
        series = [s for s in models[name] if s["points"]]
        if many:  # too many lines to tell apart: the median and the range over series
            _median_and_range(ax, series)
        else:
            for s in series:
                _series_line(ax, s, color[s["label"]])
        ax.set_title(_short(name), fontsize=10)
        ax.set_xlabel(F.field(F.DEVICES).label, fontsize=9)
        if i % cols == 0:
            ax.set_ylabel(ylabel, fontsize=9)
    top = _title(fig, figure.title)
    handles, texts = _legend_entries(fig, many)
    ncol = _legend_columns(fig, texts)
    fig.legend(handles, [_short(t, 40) for t in texts], loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    _layout(fig, top=top + 0.1, bottom=0.55 + 0.22 * math.ceil(len(handles) / ncol), hspace=0.45, wspace=0.25)
    return fig


def _scaling_overview(figure: Figure, models: dict[str, list[dict[str, Any]]], devices: list[int], base: int,
                      ylabel: str) -> Any:
    """Many models: one axes, one line per model (median over its series)."""
    names = list(models)[:MAX_LINES_OVERVIEW]
    fig = _figure(9.0, 5.6)
    ax = fig.add_subplot(1, 1, 1)
    _speedup_axes(ax, devices, base, _speedups({n: models[n] for n in names}))
    styles = ["-", "--", ":", "-."]
    for i, name in enumerate(names):
        series = [s for s in models[name] if s["points"]]
        if not series:
            continue
        med = _median_curve(series)
        suffix = f" (median of {len(series)})" if len(series) > 1 else ""
        ax.plot([p[0] for p in med], [p[1] for p in med], marker="o", markersize=3, linewidth=1.4,
                color=COLORS[i % len(COLORS)], linestyle=styles[(i // len(COLORS)) % len(styles)],
                label=_short(name, 24) + suffix)
    ax.set_xlabel(F.field(F.DEVICES).label, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    more = f" (first {MAX_LINES_OVERVIEW} of {len(models)} models)" if len(models) > MAX_LINES_OVERVIEW else ""
    top = _title(fig, figure.title + more)
    _layout(fig, top=top, bottom=0.6, left=0.8, right=2.9)
    return fig
