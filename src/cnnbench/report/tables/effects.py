"""One factor at a time: "speedup from A vs B" over pairs that agree on everything else.

For a field F with values A and B, a *pair* is two points whose identities are equal
except for F (and the fields the user chose to ignore; see :mod:`cnnbench.analysis.pairing`);
its ratio is images/sec with A over images/sec with B, and whether that ratio is
significant comes from :func:`cnnbench.analysis.significance.compare_runs` (all pairs at once:
:func:`~cnnbench.analysis.significance.compare_many`), the test
``cnnbench compare`` uses. When F describes the machine (machine, GPU, CPU), the machine
label leaves the identity too, so a pair is the same configuration on two machines.
Tables: one row per device count (or the remaining dimension that varies), one column per
pair, a median column, and an ``all`` row of medians over all pairs; ratios that are not
significant read ``n.s.``. Fields with more than two values compare each value with a
baseline (``--baseline FIELD=VALUE``; default: the first value in natural order, fp32 for
precision).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import followers
from cnnbench.analysis.marks import (
    NO_SAMPLES,
    NOT_SIGNIFICANT,
    combined,
    legend,
    measure_marks,
    symbols_of,
    warnings_behind,
)
from cnnbench.analysis.pairing import (
    default_baseline,
    differing_fields,
    find_value,
    ignored_differences,
    pair_key_fields,
    pair_points,
    pooled_pairs,
)
from cnnbench.analysis.points import ATTRIBUTE_FIELDS, Measure, PointSet, combine, machine_spreads, machines_of
from cnnbench.analysis.ratio_tests import ALPHA
from cnnbench.analysis.repeat_stats import median
from cnnbench.analysis.significance import NONE, Comparison, compare_many
from cnnbench.config.run_config import dependent_fields
from cnnbench.report.document import Bullets, Heading, Report, TableBlock
from cnnbench.report.kinds import Inputs, Observes, TableKind, register
from cnnbench.report.observations import Observation, Ref, pct
from cnnbench.report.options import ReportError
from cnnbench.report.table import Cell, Table, label_cell, missing, number
from cnnbench.words import plural

ROW_PREFERENCE = (F.DEVICES, F.BATCH, F.MODEL)
DDP_KNOBS = frozenset(f"config.{name}" for name in dependent_fields("variable_update"))
"""Options of the gradient exchange: they do nothing in a 1-device run, so its labels leave them out."""
NOT_DEFAULT = frozenset({F.DEVICES})  # scaling covers it


@dataclass
class Pair:
    """Two points (or groups of points) that differ only in the effect's field."""

    key: tuple
    """Values of :attr:`fields`, on which both sides agree."""
    fields: tuple[str, ...]
    a: Measure
    b: Measure
    comparison: Comparison | None = None
    """A against B (B the baseline), from the shared significance test."""

    def get(self, name: str) -> Any:
        return self.key[self.fields.index(name)]

    @functools.cached_property
    def ratio(self) -> float | None:
        ma, mb = self.a.median, self.b.median
        return ma / mb if ma is not None and mb else None

    @property
    def significant(self) -> bool:
        return self.comparison is not None and self.comparison.significant

    @property
    def warned(self) -> bool:
        return bool(measure_marks(self.a).warned or measure_marks(self.b).warned)


@dataclass
class Effect:
    """The pairs, table and summary of one "A vs B" comparison."""

    field: str
    a: Any
    b: Any
    pairs: list[Pair]
    table: Table
    noise: float
    """The smallest relative difference called significant."""
    row_field: str | None
    ratios: list[float] = dataclasses.field(default_factory=list)
    ignored: tuple[str, ...] = ()
    """Fields left out of the pairing (``--ignore``)."""

    @property
    def median(self) -> float | None:
        return median(self.ratios)

    @property
    def summary_row(self) -> str:
        """The row label whose ``median`` cell is the overall median."""
        return self.table.rows[-1][0].text

    @property
    def title(self) -> str:
        return f"{F.label(self.field, self.a)} vs {F.label(self.field, self.b)}"


def _signature(points: PointSet, name: str) -> tuple[int, ...]:
    index: dict[Any, int] = {}
    return tuple(index.setdefault(p.values.get(name), len(index)) for p in points.points)


def default_effect_fields(points: PointSet) -> list[str]:
    """Fields taking exactly two values in the selection (configuration first, then GPU,
    CPU, machine, source); a field splitting the points exactly as an earlier one does
    (e.g. the machine when each machine has its own GPU) is left out."""
    candidates = [f for f in points.key_fields if f.startswith("config.") and f not in NOT_DEFAULT]
    candidates += [f for f in (F.GPU, F.CPU, F.MACHINE, F.SOURCE)]
    candidates += [f for f in points.key_fields if f not in candidates and f not in NOT_DEFAULT]
    chosen: list[str] = []
    seen: set[tuple[int, ...]] = set()
    source_sig = _signature(points, F.SOURCE)
    for name in candidates:
        values = points.distinct(name)
        if len(values) != 2:
            continue
        sig = _signature(points, name)
        if None in values and name != F.SOURCE and sig == source_sig:
            continue  # a field one source records and the other does not
        if sig in seen:
            continue
        seen.add(sig)
        chosen.append(name)
    return chosen


def compute_effects(points: PointSet, names: Sequence[str], baselines: Mapping[str, str],
                    noise: float, explain: bool = True, ignore: Sequence[str] = ()) -> tuple[list[Effect], list[str]]:
    """Effects for each field in ``names``; with ``explain``, also notes on the fields that
    gave no pair (for fields the user named; default fields without pairs are just left out).
    ``ignore``: fields two results may differ in and still pair (besides the effect's)."""
    effects: list[Effect] = []
    notes: list[str] = []
    unpaired: list[str] = []
    for name in names:
        values = points.distinct(name)
        short = F.short_name(name)
        if len(values) < 2:
            if explain:
                notes.append(f"{short} takes one value in this selection; there is no effect to show.")
            continue
        base = find_value(values, baselines[name], name) if name in baselines else default_baseline(name, values)
        others = [v for v in sorted(values, key=F.sort_key) if v != base]
        for a in others:
            effect = _effect(points, name, a, base, noise, tuple(f for f in ignore if f != name))
            if effect is None:
                if explain:
                    but = f" but {', '.join(map(F.short_name, ignore))}" if ignore else ""
                    notes.append(f"{F.label(name, a)} vs {F.label(name, base)}: no two results agree on "
                                 f"every other field{but}, so there is no pair to compare"
                                 + _why_unpaired(points, name, a, base, ignore) + ".")
                else:
                    unpaired.append(F.short_name(name))
            else:
                effects.append(effect)
    if unpaired:
        notes.append(f"No effect table for {', '.join(unpaired)}: each takes two values, but no two results "
                     f"differ in that field alone.")
    return effects, notes


def _why_unpaired(points: PointSet, name: str, a: Any, b: Any, ignore: Sequence[str]) -> str:
    """``; they differ in batch_size (12 results): --ignore batch_size pairs them anyway``, or empty."""
    ignore = tuple(f for f in ignore if f in points.key_fields and f != name)
    key_fields = pair_key_fields(points.key_fields, name, ignore, points=points)
    pairing = pair_points(points, name, a, b, key_fields)
    differs = differing_fields(pairing.unmatched_a, pairing.unmatched_b, key_fields)
    if not differs:
        return ""
    listed = ", ".join(f"{F.short_name(f)} ({plural(n, 'result')})" for f, n in list(differs.items())[:3])
    hint = next((F.short_name(f) for f in differs if f not in (F.MACHINE, F.DEVICES)), None)
    return f"; they differ in {listed}" + (f" (--ignore {hint} pairs results whatever their {hint})" if hint else "")


def _layout(key_fields: Sequence[str], pairs: Sequence[Pair]) -> tuple[int | None, list[int]]:
    """The key field of the rows (the first of :data:`ROW_PREFERENCE` that varies) and those of the columns."""
    varying = [i for i in range(len(key_fields)) if len({p.key[i] for p in pairs}) > 1]
    by_name = {key_fields[i]: i for i in varying}
    row = next((by_name[f] for f in ROW_PREFERENCE if f in by_name), varying[0] if varying else None)
    return row, [i for i in varying if i != row]


def _effect(points: PointSet, name: str, a: Any, b: Any, noise: float, ignore: tuple[str, ...]) -> Effect | None:
    ignore = tuple(f for f in ignore if f in points.key_fields)
    key_fields = pair_key_fields(points.key_fields, name, ignore, points=points)
    pairing = pair_points(points, name, a, b, key_fields)
    if not pairing.pairs:
        return None
    measures = [(pp.key, combine(pp.a), combine(pp.b)) for pp in pairing.pairs]
    spreads = machine_spreads(m for _, ma, mb in measures for m in (ma, mb))
    tests = compare_many([(mb.samples, ma.samples, spreads.for_pair(machines_of(ma, mb))) for _, ma, mb in measures],
                         noise, p_values=False)  # verdicts only: scipy for the few a table cannot decide
    pairs = [Pair(key, key_fields, ma, mb, test) for (key, ma, mb), test in zip(measures, tests, strict=True)]
    row, cols = _layout(key_fields, pairs)
    cols = _without_followers(points, key_fields, row, cols)
    order = {v: i for i, v in enumerate(points.distinct(key_fields[row]))} if row is not None else {}
    table, ratios = _table(name, a, b, pairs, row, cols, noise, order)
    if ignore:
        table.title += f" ({', '.join(map(F.short_name, ignore))} ignored)"
        table.notes.append(_ignore_note(pairing.pairs, ignore))
    row_field = key_fields[row] if row is not None else None
    return Effect(name, a, b, pairs, table, noise, row_field, ratios, ignore)


def _without_followers(points: PointSet, key_fields: Sequence[str], row: int | None, cols: list[int]) -> list[int]:
    """The column fields less those that only follow from the other shown fields (replicated's
    all-reduce, which parameter_server runs do not record): naming those names them."""
    follow = followers(points)
    shown = {key_fields[i] for i in cols} | ({key_fields[row]} if row is not None else set())

    def follows_shown(i: int) -> bool:
        deps = follow.get(key_fields[i])
        return deps is not None and set(deps) <= shown - {key_fields[i]}

    return [i for i in cols if not follows_shown(i)]


def _ignore_note(pairs: Sequence[Any], ignore: tuple[str, ...]) -> str:
    differs = ignored_differences(pairs, ignore)
    parts = [f"{F.short_name(f)} (differs in {n} of {len(pairs)} pairs)" for f, n in differs.items()]
    text = f"Pairs ignore {', '.join(parts)}: results pair whatever these fields say."
    pooled = pooled_pairs(pairs, ignore)
    if pooled:
        text += (f" In {plural(pooled, 'pair')} a side holds several values of an ignored "
                 f"field; its results are pooled.")
    return text


def _ratio_text(pair: Pair, ratio: float) -> str:
    text = f"{ratio:.2f}"
    c = pair.comparison
    if c is not None and not c.significant:
        text += f" ({NO_SAMPLES})" if c.basis == NONE else f" {NOT_SIGNIFICANT}"
    return text


def _pair_cell(pair: Pair, name: str, a: Any, b: Any) -> Cell:
    ratio = pair.ratio
    if ratio is not None:
        marks = symbols_of(pair.a, pair.b)
        text = _ratio_text(pair, ratio) + (f" {marks}" if marks else "")
        return Cell(text, ratio, 0, "", marks)
    for side, m in ((a, pair.a), (b, pair.b)):
        word = m.failure_text() if m.median is None else ""
        if word:
            return Cell(f"{F.label(name, side)}: {word}", None, 0, word)
    return missing()


def significance_legend(pairs: Sequence[Pair], noise: float) -> list[str]:
    """Lines that explain ``n.s.`` and ``no samples`` where they appear."""
    lines = []
    shown = [p for p in pairs if p.ratio is not None and p.comparison is not None]
    if any(not p.significant and p.comparison.basis != NONE for p in shown):  # type: ignore[union-attr]
        lines.append(f"{NOT_SIGNIFICANT} not significant: a t-test finds no difference at the "
                     f"{ALPHA * 100:g}% level (on the runs' images/sec where each side has two or more, their "
                     f"spread pooled per machine over the table, else on block means of the step times), "
                     f"or the ratio is within {noise * 100:g}% of 1.")
    if any(p.comparison.basis == NONE for p in shown):  # type: ignore[union-attr]
        lines.append(f"({NO_SAMPLES}) nothing to test with: one run per side and no step times; never called "
                     f"significant.")
    return lines


def _column_labels(pairs: list[Pair], cols: list[int]) -> list[str]:
    """Each pair's column label (the DDP knobs left out of columns whose pairs are all of one device)."""
    fields = pairs[0].fields
    labels: dict[tuple, str] = {}
    col_label = []
    many: set[tuple] = set()  # columns with a pair of more than one device (where the DDP knobs mean something)
    for p in pairs:
        if F.DEVICES not in fields or int(p.key[fields.index(F.DEVICES)] or 1) > 1:
            many.add(tuple(p.key[i] for i in cols))
    single = {tuple(p.key[i] for i in cols) for p in pairs} - many
    for p in pairs:
        ck = tuple(p.key[i] for i in cols)
        lab = labels.get(ck)
        if lab is None:
            lab = labels[ck] = " · ".join(F.label(fields[i], v) for i, v in zip(cols, ck, strict=False)
                                          if not (ck in single and fields[i] in DDP_KNOBS)) or "all"
        col_label.append(lab)
    return col_label


def _grid_rows(name: str, a: Any, b: Any, grid: dict[tuple[Any, str], Pair], row: int | None, row_values: list,
               columns: list[str]) -> tuple[list[list[Cell]], list[float]]:
    """The rows of ratio cells with their medians, the ``all`` row of medians, and every ratio."""
    rows: list[list[Cell]] = []
    by_column: dict[str, list[float]] = defaultdict(list)
    all_ratios: list[float] = []
    for rv in row_values:
        cells = [label_cell(F.text(rv) if row is not None else "all")]
        xs = []
        for c in columns:
            found = grid.get((rv, c))
            if found is None:
                cells.append(missing())
                continue
            cells.append(_pair_cell(found, name, a, b))
            ratio = found.ratio
            if ratio is not None:
                xs.append(ratio)
                by_column[c].append(ratio)
        all_ratios += xs
        cells.append(number(median(xs)))
        rows.append(cells)
    if row is not None and len(row_values) > 1:
        rows.append([label_cell("all")] + [number(median(by_column[c])) for c in columns]
                    + [number(median(all_ratios))])
    return rows, all_ratios


def _table_notes(name: str, a: Any, b: Any, pairs: list[Pair], row_name: str, col_fields: list[str],
                 noise: float) -> list[str]:
    a_label, b_label = F.label(name, a), F.label(name, b)
    pairing = ("the same configuration on two machines" if name in F.HARDWARE_FIELDS or name in ATTRIBUTE_FIELDS
               else "results that agree on every other configuration field and the machine")
    notes = [f"Ratio of images/sec with {a_label} over images/sec with {b_label} (> 1: {a_label} is faster), "
             f"for each pair of {pairing}. Rows: {row_name or 'all pairs'}; "
             f"columns: {', '.join(F.short_name(f) for f in col_fields) or 'the pair'}; 'all': medians over "
             f"every pair."]
    notes += significance_legend(pairs, noise)
    notes += legend(combined([m for p in pairs for m in (p.a, p.b)]))
    return notes


def _table(name: str, a: Any, b: Any, pairs: list[Pair], row: int | None, cols: list[int], noise: float,
           order: dict[Any, int]) -> tuple[Table, list[float]]:
    fields = pairs[0].fields
    col_fields = [fields[i] for i in cols]
    col_label = _column_labels(pairs, cols)
    columns: list[str] = list(dict.fromkeys(col_label))
    row_values = sorted({p.key[row] for p in pairs}, key=lambda v: order.get(v, len(order))) if row is not None \
        else [None]
    grid: dict[tuple[Any, str], Pair] = {}
    for p, c in zip(pairs, col_label, strict=False):
        grid[(p.key[row] if row is not None else None, c)] = p
    rows, all_ratios = _grid_rows(name, a, b, grid, row, row_values, columns)
    a_label, b_label = F.label(name, a), F.label(name, b)
    short = F.short_name(name)
    row_name = F.short_name(fields[row]) if row is not None else ""
    notes = _table_notes(name, a, b, pairs, row_name, col_fields, noise)
    table = Table(f"effect-{F.slug(short)}-{F.slug(F.text(a))}-vs-{F.slug(F.text(b))}",
                  f"Speedup from {a_label} vs {b_label}", "effect",
                  [row_name] + columns + ["median"], rows, notes)
    return table, all_ratios


@dataclass
class Effects:
    """The effect tables, the notes under them, and the warnings about unused ``--baseline`` values."""

    effects: list[Effect]
    notes: list[str] = field(default_factory=list)
    baseline_warnings: list[str] = field(default_factory=list)


def _effects(inputs: Inputs) -> Effects:
    """The effect tables, the notes under them, and the warnings about unused ``--baseline`` values."""
    points, opts = inputs.points, inputs.options
    names = inputs.effect_fields if inputs.effect_fields is not None else default_effect_fields(points)
    try:
        effects, effect_notes = compute_effects(points, names, inputs.baselines, opts.noise,
                                                explain=inputs.effect_fields is not None, ignore=inputs.ignore)
    except F.FieldError as exc:
        raise ReportError(str(exc)) from exc
    baseline_warnings = _unused_baselines(inputs.baselines, names, effects, points)
    effect_notes += baseline_warnings
    if inputs.effect_fields is None:
        effect_notes += _many_valued(points, [*inputs.layout.rows, *inputs.layout.columns], opts.noise,
                                     inputs.ignore)
    inert = [F.short_name(f) for f in inputs.ignore if f not in points.key_fields]
    if inert:
        effect_notes.append(f"--ignore {', '.join(inert)}: not part of what pairs results (it never kept two "
                            f"results apart), so ignoring it changes nothing.")
    return Effects(effects, effect_notes, baseline_warnings)


def _many_valued(points: PointSet, laid_out: Sequence[str], noise: float, ignore: Sequence[str]) -> list[str]:
    """A line for each configuration field of three values or more, which no default effect table
    compares (a third batch size made the batch size's table go without a word), saying how to ask,
    where asking would give a table (two results that differ in that field alone)."""
    lines = []
    for name in points.key_fields:
        values = [v for v in points.distinct(name) if v is not None]
        if not name.startswith("config.") or name in NOT_DEFAULT or name in laid_out or len(values) < 3:
            continue
        others = tuple(f for f in ignore if f != name)
        base = next((b for b in [default_baseline(name, values), *values]  # the default first, else one that pairs
                     if any(_effect(points, name, v, b, noise, others) is not None for v in values if v != b)), None)
        if base is None:
            continue
        short = F.short_name(name)
        shown = ", ".join(F.text(v) for v in values[:6]) + (", ..." if len(values) > 6 else "")
        lines.append(f"{short} takes {len(values)} values ({shown}): an effect table compares two, so none is "
                     f"made for it unasked; --effect {short} --baseline {short}={F.text(base)} compares each "
                     f"other value with {F.text(base)}.")
    return lines


def _unused_baselines(baselines: Mapping[str, str], names: Sequence[str], effects: list[Effect],
                      points: PointSet) -> list[str]:
    """One line for each ``--baseline`` that no effect table uses, saying why."""
    used = {e.field for e in effects}
    lines = []
    for f, value in baselines.items():
        if f in used:
            continue
        short = F.short_name(f)
        if len(points.distinct(f)) < 2:
            why = f"{short} takes one value in these results"
        elif f not in names:
            why = f"no effect table compares {short} (add --effect {short})"
        else:
            why = f"no two results differ in {short} alone"
        lines.append(f"--baseline {short}={value} is not used: {why}.")
    return lines


def _effects_section(report: Report, found: Effects, inputs: Inputs) -> None:
    b = report.blocks
    report.warnings += found.baseline_warnings
    if found.effects or found.notes:
        b.append(Heading("Effects (one factor at a time)"))
        for e in found.effects:
            b += [Heading(e.table.title, 3), TableBlock(e.table)]
        if found.notes:
            b.append(Bullets(found.notes))


MAX_EFFECT_BULLETS = 10


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
        return tail + (f"; the median is within the {pct(e.noise)} minimum effect)" if abs(med - 1) < e.noise else ")")
    if med >= 1.5:
        return f"{a} is {med:.2f}× as fast as {b} ({counted})"
    if med > 1:
        return f"{a} is {pct(med - 1)} faster than {b} ({counted})"
    return f"{a} is {pct(1 - med)} slower than {b} ({counted})"


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


def _observe(found: Effects, inputs: Inputs, warned: bool) -> list[Observation]:
    return effect_observations(found.effects, warned)


register(TableKind("effects", 40, _effects, _effects_section, lambda found: [e.table for e in found.effects],
                   observes=(Observes("effects", 20, _observe),)))
