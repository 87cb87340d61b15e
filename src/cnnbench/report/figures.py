"""The report's figures: what each plot shows, as data (:class:`~cnnbench.report.document.Figure`).

Pure computation from the tables and their points; render/plots.py draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.report.document import Figure
from cnnbench.report.tables.scaling import ScalingGroup
from cnnbench.report.tables.throughput import Section
from cnnbench.report.tables.training import TrainingResult

PLOT_ORDER = {"scaling": 0, "training": 1, "throughput": 2, "bandwidth": 3}
"""The order in which a plot budget (``--max-plots``) takes the kinds of figure."""


def budgeted(figures: Sequence[Figure], max_plots: int) -> list[Figure]:
    """The figures a budget of ``max_plots`` draws: scaling first, then training curves, then
    throughput, then bandwidth, each kind in the report's order."""
    return sorted(figures, key=lambda f: PLOT_ORDER[f.kind])[:max(0, max_plots)]


def figures_ahead(sections: Sequence[Section], groups: Sequence[ScalingGroup], trainings: Sequence[TrainingResult],
                  max_plots: int) -> list[Figure]:
    """The figures of ``groups``, ``trainings`` and ``sections`` that a report with these tables
    draws, made before its other tables (to be drawn meanwhile): every kind but bandwidth, which
    comes last in the budget, so that the budget takes the same of these either way. They are
    the report's own where their tables' ids are final (see :func:`cnnbench.report.build_report`)."""
    made = ([scaling_figure(g) for g in groups] + [f for f in map(training_figure, trainings) if f]
            + [f for f in map(throughput_figure, sections) if f])
    return budgeted(made, max_plots)


def throughput_figure(s: Section) -> Figure | None:
    """The bar chart of a configuration section (``None`` for a table of one cell or row)."""
    t = s.table
    cols = t.columns[t.label_columns:]
    if not t.rows or (len(cols) < 2 and len(t.rows) < 2):
        return None
    values = [[c.value if c.is_number else None for c in row[t.label_columns:]] for row in t.rows]
    status = [[c.status for c in row[t.label_columns:]] for row in t.rows]
    # error bars: one relative stdev of the repeats either side (the table's ±), where there are repeats
    errors = [[c.value * c.spread if c.is_number and c.spread else 0.0 for c in row[t.label_columns:]]
              for row in t.rows]
    data = {"rows": [s.row_label(i) for i in range(len(t.rows))], "columns": cols, "values": values,
            "status": status, "errors": errors, "column_name": s.layout.column_name, "batches": _batches(s, cols)}
    return Figure("throughput", t.id, f"images/sec: {s.name}", data)


def _batches(s: Section, cols: list[str]) -> list[list[str]]:
    """Per row, the batch of each column's cell; a row's batches are blanked when they are all alike."""
    batch_of: dict[tuple[str, str], Any] = {}
    layout = s.layout
    for p in s.points:
        cell = (layout.row_label(layout.row_key(p.values)), layout.column_label(layout.column_key(p.values)))
        batch_of.setdefault(cell, p.values.get(F.BATCH))
    labels = [s.row_label(i) for i in range(len(s.table.rows))]
    batches = [[F.text(batch_of.get((label, c))) if batch_of.get((label, c)) is not None else ""
                for c in cols] for label in labels]
    return [b if len({x for x in b if x}) > 1 else [""] * len(b) for b in batches]


def scaling_figure(g: ScalingGroup) -> Figure:
    """The speedup curves of a scaling group, one line per machine (and batch) of each model."""
    by_model: dict[str, list[Any]] = {}
    for s in g.series:
        by_model.setdefault(str(s.values.get(F.MODEL)), []).append(s)
    models: dict[str, list[dict[str, Any]]] = {}
    for model, series in by_model.items():
        machines = [str(s.values.get(F.MACHINE)) for s in series]
        batches = {s.values.get(F.BATCH) for s in series}
        # the batch joins the label when the machines ran different batches (or one machine several)
        plain = len(set(machines)) == len(machines) and len(batches) == 1
        models[model] = [{"label": m, "note": "" if plain else f"batch {F.text(s.values.get(F.BATCH))}",
                          "points": sorted(s.speedup.items()), "ranges": _speedup_ranges(s)}
                         for m, s in zip(machines, series, strict=False)]
    return Figure("scaling", g.table.id, f"Scaling: {g.name}", {"models": models, "devices": g.devices})


def _speedup_ranges(s: Any) -> list[tuple[int, float, float]]:
    """(devices, lowest, highest speedup) over the repeats at each device count that has two or more."""
    base = s.measures[s.base].median if s.base is not None else None
    if not base:
        return []
    return [(n, min(m.ips) / base, max(m.ips) / base) for n, m in sorted(s.measures.items()) if len(m.ips) > 1]


def training_figure(r: TrainingResult) -> Figure | None:
    """The accuracy curves of a training table (``None`` without curves)."""
    if not r.curves:
        return None
    return Figure("training", f"training-{r.table.id[len('training-'):]}", r.table.title, {"curves": r.curves})
