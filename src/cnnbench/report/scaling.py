"""Scaling over device counts: images/sec, speedup and efficiency against the 1-device run.

A *series* is one model at one batch size on one machine in one configuration, at several
device counts. Speedup is over the series' smallest device count that ran (normally 1);
efficiency = speedup / (devices / that count). Series are gathered per configuration
(without its device count) into one long table and two summary tables (rows = device
counts, one column per series, and a median column), as in the scaling spreadsheet.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from cnnbench.report import fields as F
from cnnbench.report.labels import Namer, join_labels, unique_names
from cnnbench.report.marks import legend_for, symbols_of
from cnnbench.report.points import Measure, Point, PointSet, combine
from cnnbench.report.stats import median
from cnnbench.report.table import Cell, Table, failed, label_cell, missing, number, percent, throughput


@dataclass
class Series:
    """One model/batch/machine at several device counts."""

    label: str
    values: dict[str, Any]
    measures: dict[int, Measure]
    base: int | None = None
    speedup: dict[int, float] = field(default_factory=dict)
    efficiency: dict[int, float] = field(default_factory=dict)

    def compute(self) -> None:
        ok = {n: m.median for n, m in self.measures.items() if m.median is not None}
        if not ok:
            return
        self.base = min(ok)
        base_ips = ok[self.base]
        for n, ips in ok.items():
            self.speedup[n] = ips / base_ips
            self.efficiency[n] = self.speedup[n] / (n / self.base)


@dataclass
class ScalingGroup:
    """All series of one configuration (without its device count)."""

    name: str
    series: list[Series]
    devices: list[int]
    table: Table
    efficiency: Table
    speedup: Table


SERIES_FIELDS = (F.MODEL, F.MACHINE, F.BATCH)


def scaling_groups(points: PointSet, noise: float) -> list[ScalingGroup]:
    """Scaling groups for every configuration run at two or more device counts."""
    group_fields = [f for f in points.key_fields if f not in (F.DEVICES, *SERIES_FIELDS)]
    namer = Namer(points, exclude=(F.DEVICES, *SERIES_FIELDS))
    groups = points.group_by(group_fields)
    out = []
    names = unique_names(namer, [g[0].values for g in groups.values()])
    for name, group in zip(names, groups.values(), strict=False):
        series = _series(points, group)
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
    label_fields = [F.MODEL] + [f for f in (F.MACHINE, F.BATCH) if points.varies(f, group)]
    result = []
    for ps in by_series.values():
        measures: dict[int, list[Point]] = defaultdict(list)
        for p in ps:
            measures[_device_count(p)].append(p)
        if len(measures) < 2:
            continue
        s = Series(join_labels(ps[0].values, label_fields), ps[0].values,
                   {n: combine(measures[n]) for n in sorted(measures)})
        s.compute()
        result.append(s)
    order = {m: i for i, m in enumerate(points.distinct(F.MODEL))}
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


def _build(name: str, series: list[Series], noise: float) -> ScalingGroup:
    devices = sorted({n for s in series for n in s.measures})
    rows = []
    for s in series:
        for n, m in s.measures.items():
            rows.append([
                label_cell(s.values.get(F.MODEL)), label_cell(s.values.get(F.MACHINE)),
                Cell(F.text(s.values.get(F.BATCH)), s.values.get(F.BATCH)), Cell(str(n), n),
                throughput(m, noise),
                _with_marks(number(s.speedup.get(n)), s, n) if n in s.speedup else _status_or_missing(m),
                _with_marks(percent(s.efficiency.get(n)), s, n) if n in s.efficiency else _status_or_missing(m),
            ])
    bases = {s.base for s in series if s.base is not None}
    base_note = ("the 1-device run" if bases == {1} else
                 "each series' smallest device count that ran (" + ", ".join(map(str, sorted(bases))) + ")")
    table = Table(f"scaling-{F.slug(name)}", f"Scaling: {name}", "scaling",
                  ["model", "machine", "batch", "devices", "images/sec", "speedup", "efficiency"], rows,
                  [f"Speedup over {base_note}; efficiency = speedup / (devices / base devices)."]
                  + legend_for([m for s in series for m in s.measures.values()]),
                  label_columns=4)
    eff = _summary(name, series, devices, "efficiency", base_note)
    spd = _summary(name, series, devices, "speedup", base_note)
    return ScalingGroup(name, series, devices, table, eff, spd)


def _summary(name: str, series: list[Series], devices: list[int], what: str, base_note: str) -> Table:
    rows = []
    for n in devices:
        row = [Cell(str(n), n)]
        xs = []
        for s in series:
            value = (s.efficiency if what == "efficiency" else s.speedup).get(n)
            if value is None:
                row.append(_status_or_missing(s.measures.get(n)))
                continue
            xs.append(value)
            row.append(_with_marks(percent(value) if what == "efficiency" else number(value), s, n))
        med = median(xs)
        row.append(percent(med) if what == "efficiency" else number(med))
        rows.append(row)
    title = f"Scaling {what}: {name}"
    note = (f"Rows: device count; one column per series; median over series. "
            f"{what.capitalize()} relative to {base_note}.")
    return Table(f"scaling-{what}-{F.slug(name)}", title, "scaling-summary",
                 ["devices"] + [s.label for s in series] + ["median"], rows,
                 [note] + legend_for([m for s in series for m in s.measures.values()]))
