"""Implementations side by side (as in tensorpack's comparison with tf_cnn_benchmarks):
the same benchmark from different sources
(cnnbench, imported tf_cnn_benchmarks logs) or backends (eager, torch.compile).

Results are matched on the fields every implementation records the same way (model, batch
per device, precision, training or inference, variable update, synthetic or real data,
distortions, machine); one table per such group, rows = device counts, one column per
implementation (with the synthetic-input location where it varies, like tensorpack's
GPU/CPU/Python), and the ratio of the two when there are two.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.marks import NO_SAMPLES, NOT_SIGNIFICANT, is_warned, legend_for, warnings_behind
from cnnbench.analysis.points import Measure, Point, PointSet, combine
from cnnbench.analysis.repeat_stats import median
from cnnbench.analysis.significance import DEFAULT_NOISE, NONE, compare_runs
from cnnbench.report.document import Heading, Report, TableBlock
from cnnbench.report.kinds import Inputs, Observes, TableKind, register
from cnnbench.report.observations import Observation, Ref
from cnnbench.report.table import Cell, Table, missing, number, throughput
from cnnbench.results.naming import data_kind

COMPILE = F.COMPILE
LOCATION = F.SYNTHETIC_LOCATION
CORE = (F.MODEL, F.BATCH, F.PRECISION, F.FORWARD_ONLY, F.VARIABLE_UPDATE,
        "data_kind", F.DISTORTIONS, F.MACHINE)


def has_implementations(points: PointSet) -> bool:
    """Do the records come from more than one source or backend?"""
    compiles = {v for v in points.distinct(COMPILE) if v is not None}
    return len(points.distinct(F.SOURCE)) > 1 or len(compiles) > 1


def _labeller(points: PointSet):
    compiles = {v for v in points.distinct(COMPILE) if v is not None}
    locations: dict[Any, set] = defaultdict(set)
    for p in points.points:
        if p.values.get(LOCATION) is not None:
            locations[p.values.get(F.SOURCE)].add(p.values.get(LOCATION))

    def label(p: Point) -> str:
        source = str(p.values.get(F.SOURCE))
        extra = []
        if len(compiles) > 1 and p.values.get(COMPILE) is not None:
            extra.append("compile" if p.values.get(COMPILE) else "eager")
        if len(locations[p.values.get(F.SOURCE)]) > 1:
            extra.append(f"input on {p.values.get(LOCATION)}")
        return f"{source} ({', '.join(extra)})" if extra else source

    return label


def _core(p: Point) -> tuple:
    v = p.values
    return (v.get(F.MODEL), v.get(F.BATCH), v.get(F.PRECISION), bool(v.get(F.FORWARD_ONLY)),
            v.get(F.VARIABLE_UPDATE) or "replicated", data_kind({"data_name": v.get(F.DATA)}),
            bool(v.get(F.DISTORTIONS)), v.get(F.MACHINE))


def _title(core: tuple) -> str:
    model, batch, precision, forward, vu, data, distortions, machine = core
    name = f"{data}-{vu}" + ("-distortions" if distortions else "")
    mode = "inference" if forward else "training"
    return f"{model}, {name}, batch {F.text(batch)} per device, {F.text(precision)}, {mode}, on {machine}"


def _ratio(a: Measure | None, b: Measure | None, min_effect: float) -> tuple[Cell, bool | None]:
    """``a / b`` of two implementations, ``n.s.`` when the test finds no significant difference,
    and whether it is significant (``None`` without a ratio)."""
    if a is None or b is None or a.median is None or not b.median:
        return missing(), None
    c = compare_runs(b.samples, a.samples, min_effect, interval=False, p_value=False)
    cell = number(a.median / b.median)
    if c.significant:
        return cell, True
    return cell._replace(text=cell.text + (f" ({NO_SAMPLES})" if c.basis == NONE else f" {NOT_SIGNIFICANT}")), False


def _rows(by_impl: dict[str, dict[int, list[Point]]], impls: list[str], noise: float,
          min_effect: float, measures: list[list[Measure]], verdicts: list[bool | None]) -> list[list[Cell]]:
    """One row per device count: each implementation's images/sec, and the ratio of two (the
    measures behind each row appended to ``measures``, whether its ratio is significant to ``verdicts``)."""
    rows = []
    for n in sorted({n for d in by_impl.values() for n in d}):
        row = [Cell(str(n), n)]
        ms: list[Measure | None] = []
        for impl in impls:
            ps = by_impl[impl].get(n)
            m = combine(ps) if ps else None
            row.append(throughput(m, noise) if m else missing())
            ms.append(m)
        verdict = None
        if len(impls) == 2:
            cell, verdict = _ratio(ms[0], ms[1], min_effect)
            row.append(cell)
        rows.append(row)
        verdicts.append(verdict)
        measures.append([m for m in ms if m is not None])
    return rows


def implementation_tables(points: PointSet, noise: float, min_effect: float = DEFAULT_NOISE,
                          measures: dict[tuple[str, str], list[Measure]] | None = None,
                          significant: dict[tuple[str, str], bool | None] | None = None) -> list[Table]:
    """Side-by-side tables wherever two or more implementations ran the same benchmark (the
    ratio of two marked ``n.s.`` where not significant, ``min_effect``: the smallest difference
    ever called significant); ``measures``, when given, gets the measures behind each row, and
    ``significant`` whether its ratio is significant (``None``: no ratio), by (table title, row label)."""
    if not has_implementations(points):
        return []
    label = _labeller(points)
    groups: dict[tuple, list[Point]] = defaultdict(list)
    for p in points.points:
        groups[_core(p)].append(p)
    order = {s: i for i, s in enumerate(points.distinct(F.SOURCE))}
    tables = []
    for core, group in groups.items():
        by_impl: dict[str, dict[int, list[Point]]] = defaultdict(lambda: defaultdict(list))
        sort_of: dict[str, tuple] = {}
        for p in group:
            lab = label(p)
            by_impl[lab][int(p.values.get(F.DEVICES) or 1)].append(p)
            sort_of[lab] = (order.get(p.values.get(F.SOURCE), 0), F.sort_key(p.values.get(COMPILE)),
                            F.sort_key(p.values.get(LOCATION)))
        if len(by_impl) < 2:
            continue
        impls = sorted(by_impl, key=lambda k: sort_of[k])
        ratio = len(impls) == 2
        behind: list[list[Measure]] = []
        verdicts: list[bool | None] = []
        rows = _rows(by_impl, impls, noise, min_effect, behind, verdicts)
        columns = [F.field(F.DEVICES).label] + impls + ([f"{impls[0]} / {impls[1]}"] if ratio else [])
        untested = any(v is False for v in verdicts) and ratio
        notes = ["images/sec over all devices, median of repeats; rows: device count."
                 + (f" {NOT_SIGNIFICANT}: the ratio is not significant (the test of cnnbench compare)."
                    if untested else "")]
        notes += legend_for([p.measure for p in group])
        title = _title(core)
        tables.append(Table(f"implementations-{F.slug(title)}", f"Implementations: {title}", "implementation",
                            columns, rows, notes))
        if measures is not None:
            measures.update(((tables[-1].title, row[0].text), ms) for row, ms in zip(rows, behind, strict=True))
        if significant is not None:
            significant.update(((tables[-1].title, row[0].text), v) for row, v in zip(rows, verdicts, strict=True))
    tables.sort(key=lambda t: F.sort_key(t.title))
    return tables


@dataclass
class Implementations:
    """The side-by-side tables, and behind each row (by table title and row label) its measures
    and whether its ratio is significant (``None``: no ratio)."""

    tables: list[Table]
    measures: dict[tuple[str, str], list[Measure]] = field(default_factory=dict)
    significant: dict[tuple[str, str], bool | None] = field(default_factory=dict)


def _build(inputs: Inputs) -> Implementations:
    found = Implementations([])
    found.tables = implementation_tables(inputs.points, inputs.options.repeat_noise, inputs.options.noise,
                                         measures=found.measures, significant=found.significant)
    return found


def _section(report: Report, found: Implementations, inputs: Inputs) -> None:
    b = report.blocks
    if found.tables:
        b.append(Heading("Implementations side by side"))
        for t in found.tables:
            b += [Heading(t.title.split(": ", 1)[-1], 3), TableBlock(t)]


def implementation_observations(found: Implementations, include_warned: bool = False,
                                noise: float = 0.03) -> list[Observation]:
    """Median ratio of two implementations over all their side-by-side device counts (rows with a
    warned cell left out), named only when at least half of the ratios are significant in the
    median's direction (as the test found them: :attr:`Implementations.significant`; a ratio
    marked ``n.s.``/``no samples`` is not) and the median is at least ``noise`` from 1; otherwise
    "no significant difference". The warnings of the runs behind an observation are those of
    :attr:`Implementations.measures`."""
    by_pair: dict[str, list[tuple[Table, str, Cell]]] = defaultdict(list)
    for t in found.tables:
        if len(t.columns) != 4:
            continue
        ratio_col = t.columns[-1]
        for row in t.rows:
            if row[-1].is_number and all(include_warned or not is_warned(c.marks) for c in row):
                by_pair[ratio_col].append((t, row[0].text, row[-1]))
    out = []
    for col, items in by_pair.items():
        xs = [c.value for _, _, c in items]
        med = median(xs)
        assert med is not None
        refs = [Ref(t.id, r, col) for t, r, _ in items]
        significant = [found.significant.get((t.title, r)) is True for t, r, _ in items]
        agreeing = sum(1 for (_, _, c), sig in zip(items, significant, strict=True)
                       if sig and (c.value > 1) == (med > 1))
        said = (f"median ratio {med:.2f} over {len(xs)} side-by-side results (range {min(xs):.2f}–{max(xs):.2f}; "
                f"{sum(significant)} of {len(xs)} significant)")
        if agreeing * 2 < len(xs) or abs(med - 1) < noise:
            said += ": no significant difference"
        behind = [m for t, r, _ in items for m in found.measures.get((t.title, r), ())]
        out.append(Observation(f"Implementations {col}: {said}.", refs, warnings_behind(behind)))
    return out


def _observe(found: Implementations, inputs: Inputs, warned: bool) -> list[Observation]:
    return implementation_observations(found, warned, inputs.options.noise)


register(TableKind("implementations", 50, _build, _section, lambda found: found.tables,
                   observes=(Observes("implementations", 40, _observe),)))
