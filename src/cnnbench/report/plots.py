"""PNG plots with matplotlib's Agg canvas (no display, no pyplot state).

* scaling: speedup against device count per model, one line per machine, with the ideal
  (linear) line dashed;
* throughput: images/sec per machine for each model of a configuration (one small panel
  per model, each on its own scale so small models stay readable; failed cells marked);
* training: test accuracy against elapsed time, one line per device count.

matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from cnnbench.report.document import Figure

log = logging.getLogger(__name__)

MAX_PANELS = 12
DPI = 100
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf"]


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _grid(n: int, max_cols: int = 4) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


def draw(figure: Figure, outdir: Path) -> Path:
    """Draw one figure to ``outdir/plots/<name>.png``; returns the path."""
    path = outdir / figure.path
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = {"scaling": _scaling, "throughput": _throughput, "training": _training}[figure.kind](figure)
    fig.savefig(path, dpi=DPI)
    log.debug("wrote %s", path)
    return path


def _short(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _scaling(figure: Figure) -> Any:
    models: dict[str, list[dict[str, Any]]] = figure.data["models"]
    devices: list[int] = figure.data["devices"]
    names = list(models)[:MAX_PANELS]
    rows, cols = _grid(len(names), 3)
    fig = _figure(3.6 * cols + 0.6, 3.0 * rows + 0.9)
    base = min(devices)
    labels = list(dict.fromkeys(s["label"] for name in names for s in models[name]))
    color = {lab: COLORS[i % len(COLORS)] for i, lab in enumerate(labels)}
    handles = {}
    for i, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, i + 1)
        ideal = [n / base for n in devices]
        h = ax.plot(devices, ideal, linestyle="--", color="#888888", linewidth=1.2, label="ideal (linear)")
        handles.setdefault("ideal (linear)", h[0])
        for s in models[name]:
            pts = s["points"]
            if not pts:
                continue
            h = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color[s["label"]],
                        linewidth=1.8, label=s["label"])
            handles.setdefault(s["label"], h[0])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(devices, [str(n) for n in devices])
        ax.set_yticks(ideal, [f"{v:g}" for v in ideal])
        ax.minorticks_off()
        ax.set_title(_short(name), fontsize=10)
        ax.set_xlabel("devices", fontsize=9)
        if i % cols == 0:
            ax.set_ylabel(f"speedup over {base} device{'s' if base > 1 else ''}", fontsize=9)
        ax.grid(True, alpha=0.3)
    title = figure.title + (f" (first {MAX_PANELS} of {len(models)} models)" if len(models) > MAX_PANELS else "")
    fig.suptitle(title, fontsize=11)
    fig.legend(list(handles.values()), [_short(k, 40) for k in handles], loc="lower center",
               ncol=min(4, len(handles)), fontsize=8, frameon=False)
    pass  # fig.tight_layout(rect=(0, 0.06 + 0.02 * math.ceil(len(handles) / 4), 1, 0.95))
    return fig


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _throughput(figure: Figure) -> Any:
    d = figure.data
    rows, columns, values, status = d["rows"], d["columns"], d["values"], d["status"]
    color = [COLORS[i % len(COLORS)] for i in range(len(columns))]
    if len(columns) == 1:
        return _single_column(figure, rows, columns[0], [v[0] for v in values], [s[0] for s in status])
    names = rows[:MAX_PANELS]
    nrows, ncols = _grid(len(names), 4)
    fig = _figure(max(3.0 * ncols, 6.0), 2.6 * nrows + 1.0)
    xs = list(range(len(columns)))
    for i, name in enumerate(names):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        vals = values[i]
        heights = [v if v is not None else 0.0 for v in vals]
        ax.bar(xs, heights, color=color, width=0.75)
        top = max((v for v in vals if v is not None), default=1.0)
        for x, v, s in zip(xs, vals, status[i]):
            if v is not None:
                ax.text(x, v, _fmt(v), ha="center", va="bottom", fontsize=7)
            else:
                ax.text(x, top * 0.04, s or "—", ha="center", va="bottom", fontsize=8, color="#b00000",
                        rotation=90)
        ax.set_ylim(0, top * 1.18)
        ax.set_xticks([])
        ax.set_title(_short(name), fontsize=10)
        if i % ncols == 0:
            ax.set_ylabel("images/sec", fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    handles = [fig.axes[0].patches[j] for j in range(len(columns))] if fig.axes else []
    title = figure.title + (f" (first {MAX_PANELS} of {len(rows)} models)" if len(rows) > MAX_PANELS else "")
    fig.suptitle(title, fontsize=11)
    fig.legend(handles, [_short(c, 32) for c in columns], loc="lower center", ncol=min(5, len(columns)),
               fontsize=8, frameon=False, title=d.get("column_name"), title_fontsize=8)
    pass
    return fig


def _single_column(figure: Figure, rows: list[str], column: str, vals: list[float | None],
                   status: list[str]) -> Any:
    rows, vals, status = rows[:40], vals[:40], status[:40]
    fig = _figure(7.0, 0.32 * len(rows) + 1.4)
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, [v or 0.0 for v in vals], color=COLORS[0], height=0.7)
    top = max((v for v in vals if v is not None), default=1.0)
    for y, v, s in zip(ys, vals, status):
        ax.text(v if v is not None else 0, y, f" {_fmt(v)}" if v is not None else f" {s or '—'}",
                va="center", fontsize=8, color="black" if v is not None else "#b00000")
    ax.set_yticks(ys, [_short(r) for r in rows], fontsize=8)
    ax.set_xlim(0, top * 1.2)
    ax.set_xlabel(f"images/sec on {column}", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(figure.title, fontsize=11)
    pass
    return fig


def _training(figure: Figure) -> Any:
    curves: dict[str, list[tuple[float, float]]] = figure.data["curves"]
    fig = _figure(7.0, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    for i, (label, pts) in enumerate(curves.items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                color=COLORS[i % len(COLORS)], label=label)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("test accuracy")
    ax.set_title(_short(figure.title, 90), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, title="devices", title_fontsize=8)
    pass
    return fig
