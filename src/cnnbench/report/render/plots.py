"""SVG plots with matplotlib (no display, no pyplot state).

SVG, with text kept as text (``svg.fonttype: none``): a figure is saved in about a third
of the time a PNG takes (no rasterising, no glyph rendering, no compression; measured in
``benchmarks/README.md``), is half the size, scales without blur, and shows in markdown
viewers and browsers alike; ``report.html`` embeds the same file.

* scaling: speedup against device count per model, one line per machine (with its batch
  when the machines ran different batches), the ideal (linear) line dashed, error bars
  over the repeats where there are several; the panels share their axes, so they compare;
* throughput: images/sec per machine for each model of a configuration (one small panel
  per model, each on its own scale so small models stay readable; failed cells marked;
  error bars: one relative stdev of the repeats either side, the tables' ±; the batch under
  each bar when a model ran different batches on different machines);
* training: test accuracy against elapsed time, one line per device count.

matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import logging
import math
import textwrap
from pathlib import Path
from typing import Any

from cnnbench.report.document import Figure
from cnnbench.words import plural

log = logging.getLogger(__name__)

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


def draw(figure: Figure, outdir: Path) -> Path:
    """Draw one figure to ``outdir/plots/<name>.svg``; returns the path."""
    import matplotlib

    path = outdir / figure.path
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = {"scaling": _scaling, "throughput": _throughput, "training": _training}[figure.kind](figure)
    from cnnbench.results.files import replacing

    # a unique temporary file renamed over the name: a symlink there is replaced, not written through
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": figure.name}), replacing(path) as f:
        fig.savefig(f, format="svg", metadata={"Date": None})
    log.debug("wrote %s", path)
    return path


def _short(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


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
    return [(n, sorted(vs)[len(vs) // 2] if len(vs) % 2 else sum(sorted(vs)[len(vs) // 2 - 1:len(vs) // 2 + 1]) / 2)
            for n, vs in sorted(by_n.items())]


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
            med = _median_curve(series)
            ax.plot([p[0] for p in med], [p[1] for p in med], marker="o", color=COLORS[0], linewidth=1.8,
                    label=f"median of {len(series)} series")
            lo = [min(v for s in series for m, v in s["points"] if m == n) for n, _ in med]
            hi = [max(v for s in series for m, v in s["points"] if m == n) for n, _ in med]
            ax.fill_between([p[0] for p in med], lo, hi, color=COLORS[0], alpha=0.2, label="range over series")
        else:
            for s in series:
                pts = s["points"]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color[s["label"]],
                        linewidth=1.8, label=s["label"])
                if s.get("note") and pts:  # the batch, at the line's end, when machines ran different ones
                    ax.annotate(s["note"], pts[-1], xytext=(-4, 4), textcoords="offset points", fontsize=7,
                                ha="right", color=color[s["label"]])
                ranges = s.get("ranges") or []
                if ranges:  # one collection of segments per series: cheap to draw
                    ax.vlines([r[0] for r in ranges], [r[1] for r in ranges], [r[2] for r in ranges],
                              color=color[s["label"]], linewidth=1.2)
        ax.set_title(_short(name), fontsize=10)
        ax.set_xlabel("devices", fontsize=9)
        if i % cols == 0:
            ax.set_ylabel(ylabel, fontsize=9)
    top = _title(fig, figure.title)
    handles, texts = fig.axes[0].get_legend_handles_labels()
    if not many:
        seen = dict(zip(texts, handles, strict=False))
        for ax in fig.axes[1:]:
            for h, t in zip(*ax.get_legend_handles_labels(), strict=False):
                seen.setdefault(t, h)
        texts, handles = list(seen), list(seen.values())
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
    ax.set_xlabel("devices", fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    more = f" (first {MAX_LINES_OVERVIEW} of {len(models)} models)" if len(models) > MAX_LINES_OVERVIEW else ""
    top = _title(fig, figure.title + more)
    _layout(fig, top=top, bottom=0.6, left=0.8, right=2.9)
    return fig


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


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
        vals = values[i]
        errs = errors[i]
        ax.bar(xs, [v if v is not None else 0.0 for v in vals], color=color, width=0.75,
               yerr=errs if any(errs) else None, error_kw={"elinewidth": 1.0, "capsize": 2})
        top = max((v + e for v, e in zip(vals, errs, strict=False) if v is not None), default=1.0)
        for x, v, s, e, b in zip(xs, vals, status[i], errs, batches[i], strict=False):
            if v is not None:
                ax.text(x, v + e, _fmt(v) + (f"\nbatch {b}" if b else ""), ha="center", va="bottom", fontsize=7)
            else:
                ax.text(x, top * 0.04, s or "—", ha="center", va="bottom", fontsize=8, color=FAIL_COLOR,
                        rotation=90)
        ax.set_ylim(0, top * (1.3 if any(batches[i]) else 1.18))
        ax.set_xticks([])
        ax.yaxis.set_major_locator(_locator())
        ax.set_title(_short(name), fontsize=10)
        if i % ncols == 0:
            ax.set_ylabel("images/sec", fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    handles = [fig.axes[0].patches[j] for j in range(len(columns))]
    top = _title(fig, figure.title)
    fig.legend(handles, [_short(c, 32) for c in columns], loc="lower center", ncol=min(5, len(columns)),
               fontsize=8, frameon=False, title=d.get("column_name"), title_fontsize=8)
    _layout(fig, top=top + 0.1, bottom=0.45 + 0.2 * legend_rows, hspace=0.45, wspace=0.35)
    return fig


def _locator() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(5)


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
    width = 0.8 / k
    fig = _figure(min(max(6.5, 0.45 * len(rows) * max(1, k / 4) + 2.5), 16.0), 4.8)
    ax = fig.add_subplot(1, 1, 1)
    present = [v for row in values for v in row if v is not None]
    log_scale = bool(present) and max(present) / min(present) > 20
    base = min(present) / 2 if log_scale else 0.0
    # One collection for all bars: hundreds of separate patches would cost far more to draw.
    verts, colors = [], []
    bars: list[tuple[float, float, float]] = []  # (x, value, error) of the bars with error bars
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
    ax.add_collection(PolyCollection(verts, facecolors=colors, edgecolors="none"))
    if bars:  # one errorbar call for all of them: one collection, cheap to draw
        lows = [min(e, v - base * 1.01) if log_scale else e for _, v, e in bars]  # none below a log axis
        ax.errorbar([b[0] for b in bars], [b[1] for b in bars], yerr=[lows, [b[2] for b in bars]], fmt="none",
                    ecolor="black", elinewidth=0.8, capsize=1.5)
    highest = max((v + e for row, errs in zip(values, errors, strict=False)
                   for v, e in zip(row, errs, strict=False) if v is not None), default=max(present, default=1.0))
    ax.set_ylim(base, highest * (1.5 if log_scale else 1.08))
    handles = [Patch(color=COLORS[j % len(COLORS)], label=_short(c, 32)) for j, c in enumerate(columns)]
    if log_scale:
        ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), [_short(r, 18) for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("images/sec" + (" (log scale)" if log_scale else ""), fontsize=9)
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
            xerr=errs if any(errs) else None, error_kw={"elinewidth": 1.0, "capsize": 2})
    top = max((v + e for v, e in zip(vals, errs, strict=False) if v is not None), default=1.0)
    for y, v, s, e in zip(ys, vals, status, errs, strict=False):
        ax.text(v + e if v is not None else 0, y, f" {_fmt(v)}" if v is not None else f" {s or '—'}",
                va="center", fontsize=8, color="black" if v is not None else FAIL_COLOR)
    ax.set_yticks(ys, [_short(r) for r in rows], fontsize=8)
    ax.set_xlim(0, top * 1.2)
    ax.set_xlabel(f"images/sec on {column}", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    top = _title(fig, figure.title)
    _layout(fig, top=top, bottom=0.55, left=0.3 + 0.065 * max(len(_short(r)) for r in rows))
    return fig


def _training(figure: Figure) -> Any:
    curves: dict[str, list[tuple[float, float]]] = figure.data["curves"]
    fig = _figure(7.5, 4.6)
    ax = fig.add_subplot(1, 1, 1)
    for i, (label, pts) in enumerate(curves.items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                color=COLORS[i % len(COLORS)], label=label)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("test accuracy")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, title="devices", title_fontsize=8)
    top = _title(fig, figure.title)
    _layout(fig, top=top, bottom=0.6, left=0.8)
    return fig
