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
* training: test accuracy against elapsed time, one line per device count;
* bandwidth: bus bandwidth against message size (log scale), a line per machine, per
  collective (``cnnbench comm`` records);
* history: one series' runs in time order, its levels as a step line, change points and outliers.

Each kind of table names the function that draws its figures (its ``draw``:
:mod:`cnnbench.report.kinds`), in a module of its own here (training's is below).
matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.report.document import Figure
from cnnbench.report.kinds import drawer
from cnnbench.report.render.plot_style import COLORS, _figure, _layout, _title

log = logging.getLogger(__name__)


def draw(figure: Figure, outdir: Path, key: str | None = None) -> Path:
    """Draw one figure to ``outdir/plots/<name>.svg``; returns the path. ``key``: what it shows
    (:func:`cnnbench.report.render.drawing.figure_key`), written into its metadata so that the
    next report in this folder can keep the file when its figure has the same key."""
    return save(figure, outdir, render(figure, key))


def save(figure: Figure, outdir: Path, svg: bytes) -> Path:
    """Write a figure's SVG (:func:`render`) to ``outdir/plots/<name>.svg``; returns the path."""
    from cnnbench.results.files import real_folder_inside, write_replacing

    path = outdir / figure.path
    real_folder_inside(outdir, *Path(figure.path).parent.parts)  # plots/: a real folder, never a link
    # a unique temporary file renamed over the name: a symlink there is replaced, not written through
    write_replacing(path, svg, outdir)
    log.debug("wrote %s", path)
    return path


def render(figure: Figure, key: str | None = None) -> bytes:
    """One figure's SVG, as :func:`draw` writes it (``key``: see there)."""
    import io

    import matplotlib

    draw_kind = drawer(figure.kind)  # the kind of table's ``draw`` (cnnbench.report.kinds)
    out = io.BytesIO()
    # labels come from records (a machine's name, a CPU model): a $ in them is text, never mathtext
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": figure.name, "text.parse_math": False}):
        fig = draw_kind(figure)
        metadata = {"Date": None} if key is None else {"Date": None, "Description": f"cnnbench-plot-key:{key}"}
        fig.savefig(out, format="svg", metadata=metadata)
    return out.getvalue()


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
    ax.legend(fontsize=8, title=F.field(F.DEVICES).label, title_fontsize=8)
    top = _title(fig, figure.title)
    _layout(fig, top=top, bottom=0.6, left=0.8)
    return fig
