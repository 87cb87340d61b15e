"""Written observations drawn from the tables, each with references to the cells it quotes.

Every bullet is computed from the numbers of table cells and the verdicts behind them (its
:class:`Ref` list names the cells: table id, row label, column), never from their text (a bullet
may quote it), and says nothing that no number supports: scaling efficiency at the
largest device count with a plain verdict (over 105%: superlinear, with its likely causes),
each effect's median and how many of its pairs differ significantly (an effect is named only
when at least half of its pairs are significant in the direction of the median),
implementation ratios (named the same way), and failures; the fastest machine (or other
column value) per model is in :mod:`cnnbench.report.fastest`. Cells marked as warned (a run
recorded warnings or was throttled) are left out unless ``include_warned``; when every figure
is warned, the observations that hold with the warnings are given. An observation that rests on
warned runs begins with why it cannot be trusted (:func:`lead_with_warnings`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.marks import (
    WARNED,
    RunWarnings,
    is_warned,
    untrusted,
    warnings_behind,
)
from cnnbench.analysis.repeat_stats import median
from cnnbench.report.table import Cell, Table
from cnnbench.report.tables.effects import Effect
from cnnbench.report.tables.implementations import Implementations
from cnnbench.report.tables.scaling import SUPERLINEAR, SUPERLINEAR_CAUSE, ScalingGroup, device_column
from cnnbench.report.tables.throughput import Section
from cnnbench.words import plural

MAX_SCALING_BULLETS = 6
MAX_EFFECT_BULLETS = 10
MAX_FAILURES_LISTED = 5


@dataclass(frozen=True)
class Ref:
    """A table cell an observation quotes."""

    table: str
    row: str
    column: str


@dataclass
class Observation:
    """One bullet and the cells it rests on."""

    text: str
    refs: list[Ref] = field(default_factory=list)
    warnings: RunWarnings = field(default_factory=RunWarnings)
    """The warnings of the runs behind its figures; when one of them was warned, :attr:`text` begins
    with why it cannot be trusted (:func:`lead_with_warnings`)."""


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


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def usable(cell: Cell, include_warned: bool) -> bool:
    """A number cell, not warned unless ``include_warned``."""
    return cell.is_number and (include_warned or not is_warned(cell.marks))


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
    return _pct(cell.value) + (f" {WARNED}" if is_warned(cell.marks) else "")


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
        f"ranges {_eff(lowest[1][2])}–{_eff(highest[1][2])} (overall median {_pct(overall or 0.0)}).{over}",
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


def _locate(table: Table, value: float) -> Ref | None:
    for row in table.rows:
        for i, c in enumerate(row[1:-1], 1):
            if c.is_number and c.value == value:
                return Ref(table.id, row[0].text, table.columns[i])
    return None


def _effect_tail(e: Effect, pairs: list, med: float, n: int) -> str:
    """What the effect's median says, with how many of its pairs are significant."""
    faster = sum(1 for p in pairs if p.significant and p.ratio is not None and p.ratio > 1)
    slower = sum(1 for p in pairs if p.significant and p.ratio is not None and p.ratio < 1)
    agreeing = faster if med > 1 else slower
    counted = f"{faster + slower} of {plural(n, 'pair')} significant"
    a, b = F.label(e.field, e.a), F.label(e.field, e.b)
    if abs(med - 1) < e.noise or agreeing * 2 < n:
        tail = f"no significant effect ({counted}"
        return tail + (f"; the median is within the {_pct(e.noise)} minimum effect)" if abs(med - 1) < e.noise else ")")
    if med >= 1.5:
        return f"{a} is {med:.2f}× as fast as {b} ({counted})"
    if med > 1:
        return f"{a} is {_pct(med - 1)} faster than {b} ({counted})"
    return f"{a} is {_pct(1 - med)} slower than {b} ({counted})"


def _effect_observation(e: Effect, include_warned: bool) -> Observation | None:
    pairs = [p for p in e.pairs if p.ratio is not None and (include_warned or not p.warned)]
    if not pairs:
        return None
    ratios = [p.ratio for p in pairs if p.ratio is not None]
    left_out = len(e.ratios) - len(ratios)
    med = e.median if not left_out else median(ratios)
    if med is None:
        return None
    t = e.table
    refs = [Ref(t.id, e.summary_row, "median")] if not left_out else []
    n = len(ratios)
    head = f"{e.title} ({F.short_name(e.field)}"
    head += f"; {', '.join(map(F.short_name, e.ignored))} ignored)" if e.ignored else ")"
    head += f": median {med:.2f}"
    if n > 1:
        lo, hi = min(ratios), max(ratios)
        head += f" over {n} pairs (range {lo:.2f}–{hi:.2f})"
        refs += [r for r in (_locate(t, lo), _locate(t, hi)) if r is not None]
    else:
        head += " from 1 pair"
        refs += [r for r in (_locate(t, med),) if r is not None]
    if left_out:
        head += f", {plural(left_out, 'pair')} with warned runs left out"
    return Observation(f"{head}: {_effect_tail(e, pairs, med, n)}.", refs,
                       warnings_behind(m for p in pairs for m in (p.a, p.b)))


def effect_observations(effects: Sequence[Effect], include_warned: bool = False) -> list[Observation]:
    """Each effect's median over its pairs, named only when the pairs bear it out: at least
    half of them significant in the direction of the median (the test of
    :mod:`cnnbench.analysis.significance`), and the median beyond the minimum effect."""
    found = (_effect_observation(e, include_warned) for e in effects[:MAX_EFFECT_BULLETS])
    return [o for o in found if o is not None]


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


def failure_observations(sections: Sequence[Section]) -> list[Observation]:
    """Cells where every repeat failed (by status) and cells with some failed repeats."""
    failed: Counter = Counter()
    partial = 0
    examples: list[tuple[str, Ref]] = []
    refs: list[Ref] = []
    for s in sections:
        t = s.table
        for k, row in enumerate(t.rows):
            label = s.row_label(k)
            for i in range(t.label_columns, len(t.columns)):
                c = row[i]
                ref = Ref(t.id, label, t.columns[i])
                if c.status:
                    failed[c.status] += 1
                    refs.append(ref)
                    if len(examples) < MAX_FAILURES_LISTED:
                        examples.append((f"{label} on {t.columns[i]} in {t.title} ({c.status})", ref))
                elif c.is_number and c.failed_repeats:
                    partial += 1
                    refs.append(ref)
    if not failed and not partial:
        return []
    counts = ", ".join(f"{k} {w}" for w, k in failed.most_common())
    total = sum(failed.values())
    text = f"Failures: {plural(total, 'cell')} where every repeat failed"
    text += f" ({counts})" if counts else ""
    if examples:
        text += ": " + "; ".join(e for e, _ in examples)
        if total > len(examples):
            text += f"; {total - len(examples)} more in the tables"
    if partial:
        text += f". {plural(partial, 'more cell', 'more cells')} had some repeats fail (shown as k/n)"
    return [Observation(text + ".", refs)]


ALL_WARNED = (f"Every figure in this report rests on runs that recorded warnings ({WARNED}; see Marks), so "
              f"the observations below hold only with those warnings, and each that rests on figures "
              f"begins with {WARNED} and the warnings of its runs.")


def all_warned(sections: Sequence[Section]) -> bool:
    """Is every figure of the throughput tables warned (and there is one)?"""
    cells = [c for s in sections for row in s.table.rows for c in row[s.table.label_columns:] if c.is_number]
    return bool(cells) and all(is_warned(c.marks) for c in cells)


def lead_with_warnings(observations: Sequence[Observation]) -> list[Observation]:
    """The observations, each that rests on warned runs beginning with why it cannot be trusted
    (:func:`cnnbench.analysis.marks.untrusted`: the warnings its runs recorded), so that it does not
    read as a finding."""
    return [Observation(untrusted(o.warnings) + o.text, o.refs, o.warnings) if o.warnings.warned else o
            for o in observations]
