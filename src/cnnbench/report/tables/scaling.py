"""Scaling over device counts: images/sec, speedup and efficiency against the 1-device run.

A *series* is one model at one batch size on one machine in one configuration, at several
device counts. Speedup is over the series' smallest device count that ran (normally 1);
efficiency = speedup / (devices / that count). Series are gathered per configuration
(without its device count) into one printed table (a row per series: the base run's
images/sec, then speedup and efficiency per device count in one cell; a median row), a long
table of images/sec, speedup and efficiency per series and device count (written to CSV/JSON,
not printed), and, over all configurations, a table of the median efficiencies at a glance.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import Namer, join_labels, unique_names
from cnnbench.analysis.marks import WARNED, RunWarnings, is_warned, legend_for, symbols_of, warnings_behind
from cnnbench.analysis.points import Measure, Point, PointSet, combine
from cnnbench.analysis.repeat_stats import median
from cnnbench.config.parallel_options import thread_rule
from cnnbench.report.document import Figure, Heading, Report, TableBlock
from cnnbench.report.kinds import Inputs, Observes, TableKind, register
from cnnbench.report.observations import Observation, Ref, pct, usable
from cnnbench.report.table import Cell, Table, failed, field_number, label_cell, missing, number, percent, throughput
from cnnbench.report.tables.predicted import predict_series, predicted_text, prediction_observations
from cnnbench.report.tables.scaling_series import ScalingGroup, Series
from cnnbench.results.record import record_kind
from cnnbench.words import plural

SERIES_FIELDS = (F.MODEL, F.MACHINE, F.BATCH)
PREDICTED_COLUMNS = ("predicted images/sec", "predicted efficiency", "predicted bound")
DEVICE, THREADS = F.DEVICE, F.THREADS_PER_WORKER

SUPERLINEAR = 1.05
"""Efficiency over this is superlinear: more than each added device can give."""
SUPERLINEAR_CAUSE = ("likely a slow or busy 1-device baseline, or a cache effect (each device's share of "
                     "the work fits a faster cache)")


def superlinear_note(efficiencies: list[float]) -> list[str]:
    """The note under a table with an efficiency over 105% (none otherwise)."""
    if not any(e > SUPERLINEAR for e in efficiencies):
        return []
    return [f"Efficiency over {SUPERLINEAR * 100:.0f}% is superlinear: more than each added device can give, "
            f"{SUPERLINEAR_CAUSE}."]


def threads_note(series: list[Series]) -> list[str]:
    """On CPU, the rule that gave each worker its torch threads (``--threads-per-worker`` fixed,
    or the default: the host's cores divided among the workers), for the series' records."""
    if not any(s.values.get(DEVICE) == "cpu" for s in series):
        return []
    rules = sorted({thread_rule(s.values.get(THREADS)) for s in series if s.values.get(DEVICE) == "cpu"})
    return [f"CPU threads: {'; '.join(rules)}."]


def _warned_at(series: list[Series], n: int) -> bool:
    """Does a figure over ``series`` at ``n`` devices rest on warned runs (at ``n`` or at a base)?"""
    return any(WARNED in symbols_of(s.measures.get(n), s.measures.get(s.base) if s.base is not None else None)
               for s in series if n in s.efficiency and n != s.base)


def _with_warned(cell: Cell, warned: bool) -> Cell:
    return cell._replace(text=f"{cell.text} {WARNED}", marks=WARNED) if warned and cell.is_number else cell


def scaling_groups(points: PointSet, noise: float, predict: bool = False,
                   comm: Sequence[Mapping[str, Any]] = ()) -> list[ScalingGroup]:
    """Scaling groups for every configuration run at two or more device counts (``predict``: with
    :mod:`cnnbench.report.tables.predicted`'s prediction beside each series, its links from the
    ``cnnbench comm`` records ``comm`` where they measured the machine)."""
    group_fields = [f for f in points.key_fields if f not in (F.DEVICES, *SERIES_FIELDS)]
    namer = Namer(points, exclude=(F.DEVICES, *SERIES_FIELDS))
    groups = points.group_by(group_fields)
    out = []
    names = unique_names(namer, [g[0].values for g in groups.values()])
    for name, group in zip(names, groups.values(), strict=False):
        series = _series(points, group)
        if series and predict:
            predict_series(series, comm)
        if series:
            out.append(_build(name, series, noise))
    out.sort(key=lambda g: F.sort_key(g.name))
    return out


def _device_count(p: Point) -> int:
    return int(p.values.get(F.DEVICES) or 1)


def _series(points: PointSet, group: list[Point]) -> list[Series]:
    by_series: dict[tuple, list[Point]] = defaultdict(list)
    for p in group:
        by_series[tuple(p.values.get(f) for f in SERIES_FIELDS)].append(p)
    label_fields = [F.MODEL] + [F.MACHINE] * points.varies(F.MACHINE, group)
    pairs = [tuple(ps[0].values.get(f) for f in label_fields) for ps in by_series.values()]
    if len(set(pairs)) < len(pairs):  # one model on one machine at several batch sizes: the batch tells them apart
        label_fields.append(F.BATCH)
    result = []
    for ps in by_series.values():
        measures: dict[int, list[Point]] = defaultdict(list)
        for p in ps:
            measures[_device_count(p)].append(p)
        if len(measures) < 2:
            continue
        s = Series(join_labels(ps[0].values, label_fields), ps[0].values,
                   {n: combine(measures[n]) for n in sorted(measures)}, batch_in_label=F.BATCH in label_fields)
        s.compute()
        result.append(s)
    order = {m: i for i, m in enumerate(sorted(points.distinct(F.MODEL), key=F.sort_key))}
    mach = {m: i for i, m in enumerate(points.distinct(F.MACHINE))}
    result.sort(key=lambda s: (order.get(s.values.get(F.MODEL), 0), mach.get(s.values.get(F.MACHINE), 0),
                               F.sort_key(s.values.get(F.BATCH))))
    return result


def _with_marks(cell: Cell, s: Series, n: int) -> Cell:
    """A speedup or efficiency cell, marked when its run or the base run is."""
    symbols = symbols_of(s.measures.get(n), s.measures.get(s.base) if s.base is not None else None)
    return cell._replace(text=f"{cell.text} {symbols}", marks=symbols) if symbols and cell.is_number else cell


def _status_or_missing(m: Measure | None) -> Cell:
    if m is None or m.n == 0:
        return missing()
    word = m.failure_text()
    return failed(word) if word else missing()


def device_column(n: int) -> str:
    return plural(n, "device")


def _base_note(series: list[Series]) -> str:
    bases = {s.base for s in series if s.base is not None}
    return ("the 1-device run" if bases == {1} else
            "each series' smallest device count that ran (" + ", ".join(map(str, sorted(bases))) + ")")


def _build(name: str, series: list[Series], noise: float) -> ScalingGroup:
    devices = sorted({n for s in series for n in s.measures})
    predicted = any(s.predicted for s in series)
    rows = []
    for s in series:
        for n, m in s.measures.items():
            rows.append([
                label_cell(s.values.get(F.MODEL)), label_cell(s.values.get(F.MACHINE)),
                Cell(F.text(s.values.get(F.BATCH)), s.values.get(F.BATCH)), Cell(str(n), n),
                throughput(m, noise),
                _with_marks(number(s.speedup.get(n)), s, n) if n in s.speedup else _status_or_missing(m),
                _with_marks(percent(s.efficiency.get(n)), s, n) if n in s.efficiency else _status_or_missing(m),
            ] + _predicted_cells(s, n, predicted))
    base_note = _base_note(series)
    legend = legend_for([m for s in series for m in s.measures.values()])
    table = Table(f"scaling-{F.slug(name)}", f"Scaling: {name}", "scaling",
                  F.headers(F.MODEL, F.MACHINE, F.BATCH, F.DEVICES, F.IPS) + ["speedup", "efficiency"]
                  + (list(PREDICTED_COLUMNS) if predicted else []), rows,
                  [f"Speedup over {base_note}; efficiency = speedup / (devices / base devices)."]
                  + threads_note(series) + legend,
                  label_columns=4)
    return ScalingGroup(name, series, devices, table, _summary(name, series, devices, noise, base_note, legend))


def _predicted_cells(s: Series, n: int, shown: bool) -> list[Cell]:
    """``report --predict``'s cells of the long table: predicted images/sec, efficiency, bound."""
    if not shown:
        return []
    if n not in s.predicted:
        return [missing(), missing(), missing()]
    ips, efficiency, bound = s.predicted[n]
    return [field_number(F.IPS, ips), percent(efficiency), Cell(bound, bound)]


def speedup_text(speedup: float, efficiency: float) -> str:
    """``1.92× · 96.1%``."""
    return f"{speedup:.2f}× · {efficiency * 100:.1f}%"


def _series_row(s: Series, first: int, counts: list[int], noise: float, batch_column: bool) -> list[Cell]:
    """A series (its batch too, with ``batch_column``): its base run's images/sec, then per larger
    device count speedup · efficiency."""
    base = s.base if s.base is not None else first
    m = s.measures.get(base)
    base_cell = throughput(m, noise, "" if base == first else f"({device_column(base)})")
    batch = [Cell(F.text(s.values.get(F.BATCH)), s.values.get(F.BATCH))] if batch_column else []
    row = [label_cell(s.label), *batch, base_cell]
    for n in counts:
        if n in s.efficiency and n != s.base:
            cell = Cell(speedup_text(s.speedup[n], s.efficiency[n]) + predicted_text(s, n), s.efficiency[n])
            row.append(_with_marks(cell, s, n))
        elif n == s.base:
            row.append(Cell("base", None))
        else:
            row.append(_status_or_missing(s.measures.get(n)))
    return row


def _median_row(series: list[Series], counts: list[int], batch_column: bool) -> list[Cell]:
    """The medians over the series per device count, ``⚠`` where a series they are over is warned."""
    med_row = [label_cell("median"), *([Cell("", None)] if batch_column else []), missing()]
    for n in counts:
        effs = [s.efficiency[n] for s in series if n in s.efficiency and n != s.base]
        spds = [s.speedup[n] for s in series if n in s.speedup and n != s.base]
        e, sp = median(effs), median(spds)
        med = Cell(speedup_text(sp, e), e) if e is not None and sp is not None else missing()
        med_row.append(_with_warned(med, _warned_at(series, n)))
    return med_row


def _summary(name: str, series: list[Series], devices: list[int], noise: float, base_note: str,
             legend: list[str]) -> Table:
    """Rows: series (model, machine and batch where they vary); their batch, unless the series
    name it; the images/sec of the base run, then per larger device count its speedup and
    efficiency in one cell (value: the efficiency); a last ``median`` row over the series (marked
    ``⚠`` where it rests on a warned series)."""
    first = devices[0]
    counts = devices[1:]
    batch_column = not any(s.batch_in_label for s in series)
    rows = [_series_row(s, first, counts, noise, batch_column) for s in series]
    if len(series) > 1:
        rows.append(_median_row(series, counts, batch_column))
    warned_median = len(series) > 1 and any(WARNED in c.marks for c in rows[-1])
    note = (f"Each cell: speedup over {base_note} · efficiency (speedup / (devices / base devices))"
            + (f"; {WARNED} on a median: a series it is over rests on warned runs" if warned_median else "")
            + f". Images/sec at every device count: tables/scaling-{F.slug(name)}.csv and .json.")
    effs_all = [e for s in series for n, e in s.efficiency.items() if n != s.base]
    return Table(f"scaling-summary-{F.slug(name)}", f"Scaling: {name}", "scaling-summary",
                 ["series", *(F.headers(F.BATCH) if batch_column else []),
                  f"{F.field(F.IPS).label}, {device_column(first)}"]
                 + [device_column(n) for n in counts],
                 rows, [note] + superlinear_note(effs_all) + threads_note(series) + legend,
                 label_columns=1 + batch_column, written=False)


def overview(groups: list[ScalingGroup]) -> Table | None:
    """Scaling at a glance: one row per configuration, per device count the median efficiency
    over its series and their range (value: the median)."""
    if not groups:
        return None
    counts = sorted({n for g in groups for n in g.devices[1:]})
    rows = []
    for g in groups:
        row = [label_cell(g.name), Cell(str(len(g.series)), len(g.series))]
        for n in counts:
            effs = [s.efficiency[n] for s in g.series if n in s.efficiency and n != s.base]
            med = median(effs)
            if med is None:
                row.append(missing())
                continue
            lo, hi = min(effs), max(effs)
            text = f"{med * 100:.1f}%" + (f" ({lo * 100:.1f}–{hi * 100:.1f}%)" if len(effs) > 1 else "")
            row.append(_with_warned(Cell(text, med), _warned_at(g.series, n)))
        rows.append(row)
    note = ("Median scaling efficiency over each configuration's series (model × machine × batch) at each "
            "device count, and its range; the tables below give each series.")
    if any(WARNED in c.marks for r in rows for c in r):
        note += f" {WARNED} on a median: a series it is over rests on warned runs."
    effs_all = [e for g in groups for s in g.series for n, e in s.efficiency.items() if n != s.base]
    return Table("scaling-overview", "Scaling at a glance", "scaling-overview",
                 ["configuration", "series"] + [device_column(n) for n in counts], rows,
                 [note] + superlinear_note(effs_all), label_columns=2)


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


@dataclass
class Scaling:
    """The scaling groups and the table of them at a glance."""

    groups: list[ScalingGroup]
    glance: Table | None


def _build_scaling(inputs: Inputs) -> Scaling:
    opts = inputs.options
    comm = [r for r in inputs.records if record_kind(r) == "comm"] if opts.predict else []
    groups = scaling_groups(inputs.points, opts.repeat_noise, predict=opts.predict, comm=comm)
    return Scaling(groups, overview(groups))


def _scaling_tables(s: Scaling) -> list[Table]:
    out: list[Table] = [s.glance] if s.glance else []
    for g in s.groups:
        out += [g.summary, g.table]
    return out


def _scaling_section(report: Report, s: Scaling, inputs: Inputs) -> None:
    if not s.groups:
        return
    b = report.blocks
    b.append(Heading("Scaling"))
    if s.glance and len(s.groups) > 1:
        b.append(TableBlock(s.glance, caption=True))
    for g in s.groups:
        fig = scaling_figure(g)
        b += [Heading(g.name, 3), TableBlock(g.summary), fig]
        report.figures.append(fig)


MAX_SCALING_BULLETS = 6


def verdict(efficiency: float) -> str:
    """Plain words for a median scaling efficiency (over 105%: superlinear, with its likely causes)."""
    if efficiency > SUPERLINEAR:
        return f"superlinear: more than each added device can give, {SUPERLINEAR_CAUSE}"
    if efficiency >= 0.9:
        return "near-linear: each added device is almost fully used"
    if efficiency >= 0.75:
        return "good: most of each added device is used"
    if efficiency >= 0.5:
        return "moderate: a large share of each added device is lost"
    return "poor: adding devices gains little"


LOW_EFFICIENCY = 0.75
"""Series below this efficiency at any device count are named in the scaling bullet."""
MAX_LOW_LISTED = 4


def _median_cell(cells: list[tuple[str, Cell]], all_numbers: int, med: Cell) -> Cell:
    """The summary's median cell, or, when warned cells were left out, the lower median of the
    cells left (itself a cell of the table)."""
    if len(cells) == all_numbers:
        return med
    ordered = sorted(cells, key=lambda c: c[1].value)
    return ordered[(len(ordered) - 1) // 2][1]


def _eff(cell: Cell) -> str:
    """The efficiency of a scaling cell (its value: ``1.92× · 96.1%`` -> ``96.1%``), with ``⚠``
    when it rests on warned runs."""
    return pct(cell.value) + (f" {WARNED}" if is_warned(cell.marks) else "")


_Part = tuple[str, list[tuple[str, Cell]], Cell, str]
"""One device count of a scaling summary: its column, the usable cells, the median cell and its row."""


def _scaling_part(t: Table, series_rows: list[tuple[str, list[Cell]]], med_row: Any, i: int,
                  include_warned: bool) -> _Part | None:
    col = t.columns[i]
    cells = [(label, r[i]) for label, r in series_rows if r[i].is_number and usable(r[i], include_warned)]
    if not cells:
        return None
    n_numbers = sum(1 for _, r in series_rows if r[i].is_number)
    med = med_row[i] if med_row is not None and med_row[i].is_number else cells[0][1]
    med = _median_cell(cells, n_numbers, med)
    med_ref = "median" if med_row is not None and med is med_row[i] else \
        next(label for label, c in cells if c is med)
    return col, cells, med, med_ref


def _scaling_parts(g: ScalingGroup, include_warned: bool) -> list[_Part]:
    """The summary's rows are its series, in order, then the median row where there are two or more."""
    t, n = g.summary, len(g.series)
    series_rows = [(s.label, row) for s, row in zip(g.series, t.rows, strict=False)]
    med_row = t.rows[n] if len(t.rows) > n else None
    parts = (_scaling_part(t, series_rows, med_row, i, include_warned)
             for i in range(t.label_columns + 1, len(t.columns)))
    return [part for part in parts if part is not None]


def _listed_cells(label: str, found: list[tuple[str, str, Cell]], reverse: bool) -> tuple[str, list[tuple[str, str]]]:
    """`` Below 75%: a at 2 devices (1.00× · 50.0%); ...``, furthest out first, and the cells it names."""
    shown = sorted(found, key=lambda x: x[2].value, reverse=reverse)[:MAX_LOW_LISTED]
    listed = [f"{name} at {col} ({c.text})" for name, col, c in shown]
    more = f" and {len(found) - MAX_LOW_LISTED} more" if len(found) > MAX_LOW_LISTED else ""
    return f" {label}: " + "; ".join(listed) + more + ".", [(name, col) for name, col, _ in shown]


def _scaling_runs(g: ScalingGroup, parts: list[_Part]) -> RunWarnings:
    """The warnings of the runs behind the parts' cells: each series' runs at the part's device
    count and at its base."""
    by_label = {s.label: s for s in g.series}
    by_column = {device_column(n): n for n in g.devices}
    measures = []
    for col, cells, _, _ in parts:
        n = by_column.get(col)
        for label, _ in cells:
            s = by_label.get(label)
            if s is not None and n is not None:
                measures += [s.measures.get(n), s.measures.get(s.base) if s.base is not None else None]
    return warnings_behind(measures)


def _scaling_bullet(g: ScalingGroup, t: Table, parts: list[_Part]) -> Observation:
    refs: list[Ref] = []
    counts = []
    lows: list[tuple[str, str, Cell]] = []
    highs: list[tuple[str, str, Cell]] = []
    for col, cells, med, med_ref in parts:
        lo = min(cells, key=lambda c: c[1].value)
        hi = max(cells, key=lambda c: c[1].value)
        refs += [Ref(t.id, med_ref, col)]
        if len(cells) == 1:
            counts.append(f"{_eff(med)} at {col}")
        else:
            refs += [Ref(t.id, lo[0], col), Ref(t.id, hi[0], col)]
            counts.append(f"{_eff(med)} at {col} (range {_eff(lo[1])}–{_eff(hi[1])} over {len(cells)} series)")
        lows += [(label, col, c) for label, c in cells if c.value < LOW_EFFICIENCY]
        highs += [(label, col, c) for label, c in cells if c.value > SUPERLINEAR]
    what = "median efficiency" if any(len(c) > 1 for _, c, _, _ in parts) else "efficiency"
    final = parts[-1][2].value
    text = f"Scaling, {g.name}: {what} " + ", ".join(counts) + f" — {verdict(final)}."
    for label, found, reverse in ((f"Below {LOW_EFFICIENCY * 100:.0f}%", lows, False),
                                  (f"Superlinear, over {SUPERLINEAR * 100:.0f}%"
                                   + ("" if final > SUPERLINEAR else f" ({SUPERLINEAR_CAUSE})"), highs, True)):
        if found:
            more, named = _listed_cells(label, found, reverse)
            text += more
            refs += [Ref(t.id, row, col) for row, col in named]
    return Observation(text, refs, _scaling_runs(g, parts))


def _scaling_rest(rest: list[tuple[ScalingGroup, Table, list[_Part]]]) -> Observation:
    last = [(t, parts[-1]) for _, t, parts in rest]
    lowest = min(last, key=lambda x: x[1][2].value)
    highest = max(last, key=lambda x: x[1][2].value)
    overall = median([x[1][2].value for x in last])
    over = (f" Over {SUPERLINEAR * 100:.0f}% is superlinear, {SUPERLINEAR_CAUSE}."
            if highest[1][2].value > SUPERLINEAR else "")
    return Observation(
        f"Scaling, {len(rest)} further configurations: median efficiency at their largest device count "
        f"ranges {_eff(lowest[1][2])}–{_eff(highest[1][2])} (overall median {pct(overall or 0.0)}).{over}",
        [Ref(t.id, part[3], part[0]) for t, part in last], _rest_runs(rest))


def _rest_runs(rest: list[tuple[ScalingGroup, Table, list[_Part]]]) -> RunWarnings:
    """The warnings of the runs behind the largest device count of each configuration of ``rest``."""
    total = RunWarnings()
    for g, _, parts in rest:
        w = _scaling_runs(g, parts[-1:])
        total.runs += w.runs
        total.warned += w.warned
        total.reasons.update(w.reasons)
        total.kinds.update(w.kinds)
    return total


def scaling_observations(groups: Sequence[ScalingGroup], include_warned: bool = False) -> list[Observation]:
    """Per scaling configuration, the efficiency at every device count (median and range over
    its series), the verdict at the largest, and the series below 75% at any count (warned
    cells left out: then the median quoted is the lower median of the cells left, itself a cell)."""
    summaries = []
    for g in groups:
        parts = _scaling_parts(g, include_warned)
        if parts:
            summaries.append((g, g.summary, parts))
    out = [_scaling_bullet(g, t, parts) for g, t, parts in summaries[:MAX_SCALING_BULLETS]]
    rest = summaries[MAX_SCALING_BULLETS:]
    if rest:
        out.append(_scaling_rest(rest))
    return out


def _observe(s: Any, inputs: Inputs, warned: bool) -> list[Observation]:
    return scaling_observations(s.groups, warned)


def _observe_predicted(s: Any, inputs: Inputs, warned: bool) -> list[Observation]:
    return prediction_observations(s.groups, inputs.options.noise) if inputs.options.predict else []


register(TableKind("scaling", 20, _build_scaling, _scaling_section, _scaling_tables,
                   plot=lambda s: [scaling_figure(g) for g in s.groups],
                   plot_order=0, draw="cnnbench.report.render.plot_scaling:_scaling",
                   observes=(Observes("scaling", 10, _observe),  # --predict: after the implementations
                             Observes("scaling", 50, _observe_predicted))))
