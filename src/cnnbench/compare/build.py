"""``cnnbench compare``: the same configurations in two sets of results, side by side.

    from cnnbench.compare.build import CompareOptions, compare_records, split_records
    result = compare_records(baseline_records, candidate_records, CompareOptions(ignore=["batch_size"]))
    for pair in result.pairs:
        print(pair.name, pair.comparison.ratio, pair.comparison.verdict)

The two sides are pooled into one point set with a side field, then paired as effect tables
pair results (:mod:`cnnbench.analysis.pairing`): two results match when they agree on every
field of their identity (the configuration fields that change what is measured, the machine
unless ``across_machines``, the source), except the fields in ``ignore``. Repeats of one
configuration on one side are folded together; each pair gets the significance test of
:mod:`cnnbench.analysis.significance`. Rendering lives in :mod:`cnnbench.compare.render`.
No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import Namer
from cnnbench.analysis.marks import Marks, measure_marks, measure_warnings
from cnnbench.analysis.pairing import Pairing, default_baseline, differing_fields, pair_key_fields, pair_points
from cnnbench.analysis.points import Measure, Point, build_points, combine, machine_spreads, machines_of
from cnnbench.analysis.ratio_tests import ALPHA, MachineSpreads
from cnnbench.analysis.significance import DEFAULT_NOISE, Comparison, compare_runs
from cnnbench.compare.bandwidth import BandwidthPair, compare_bandwidth
from cnnbench.results.query import parse_where, select, value_matches
from cnnbench.results.record import record_kind
from cnnbench.words import plural

SIDE = "compare_side"
"""The field that tells the two sides apart when they come from two sets of results."""
BASELINE, CANDIDATE = "baseline", "candidate"


class CompareError(ValueError):
    """A comparison that cannot be made as asked (one line, for the user)."""


@dataclass
class CompareOptions:
    """How to match results (the ``cnnbench compare`` flags)."""

    ignore: Sequence[str] = ()
    """Fields two results may differ in and still be compared."""
    across_machines: bool = False
    """Match results from different machines (the machine leaves the identity)."""
    where: Sequence[str] = ()
    """``FIELD=VALUE`` conditions both sides must meet."""
    noise: float = DEFAULT_NOISE
    """The smallest relative difference called significant."""
    alpha: float = ALPHA


@dataclass
class Side:
    """One side of the comparison: its name and its records."""

    label: str
    records: list[Mapping[str, Any]]


@dataclass
class ComparedPair:
    """One configuration on both sides."""

    model: str
    batch: str
    """The per-device batch (``256 → 512`` when an ignored batch size differs)."""
    configuration: str
    """The configuration's name without model and batch (``syn-replicated-1gpus``)."""
    machine: str
    """The machine (``A → B`` across machines)."""
    values: dict[str, Any]
    """The identity values the two sides share."""
    base: Measure
    cand: Measure
    comparison: Comparison
    marks: Marks
    warnings: list[str] = field(default_factory=list)
    """Distinct warnings recorded by the runs of either side."""

    @property
    def name(self) -> str:
        return f"{self.model} · batch {self.batch} · {self.configuration}"

    @property
    def warned(self) -> bool:
        return self.marks.warned > 0


@dataclass
class CompareResult:
    """Every pair, what was matched on, and what found no partner."""

    baseline: Side
    candidate: Side
    matched_on: tuple[str, ...]
    ignored: tuple[str, ...]
    across_machines: bool
    pairs: list[ComparedPair]
    noise: float
    alpha: float
    unmatched_base: int = 0
    """Configurations of the baseline with no partner."""
    unmatched_cand: int = 0
    why_unmatched: dict[str, int] = field(default_factory=dict)
    """Fields in which unmatched configurations differ from their nearest partner (counts)."""
    split: str | None = None
    """The field that splits one set of results into the two sides (``--by``)."""
    bandwidth: list[BandwidthPair] = field(default_factory=list)
    """``cnnbench comm`` records matched per collective and size (:mod:`cnnbench.compare.bandwidth`)."""

    @property
    def ratios(self) -> list[float]:
        return [p.comparison.ratio for p in self.pairs if p.comparison.ratio is not None]

    @property
    def geomean(self) -> float | None:
        """The geometric mean of the ratios (candidate over baseline)."""
        xs = self.ratios
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None

    def count(self, verdict: str) -> int:
        return sum(1 for p in self.pairs if p.comparison.verdict == verdict)

    def slowdowns(self, threshold: float) -> list[ComparedPair | BandwidthPair]:
        """Pairs (of runs, and of comm records' bus bandwidth) significantly slower than the
        baseline by more than ``threshold`` (0.1 = 10%)."""
        both: list[ComparedPair | BandwidthPair] = [*self.pairs, *self.bandwidth]
        return [p for p in both if p.comparison.significant and p.comparison.ratio is not None
                and p.comparison.ratio < 1.0 - threshold]


def split_records(records: Sequence[Mapping[str, Any]], by: str, baseline: str | None = None,
                  candidate: str | None = None, where: Sequence[str] = ()) -> tuple[Side, Side, str]:
    """One set of records split into two sides by the values of ``by`` (returns the sides and the
    resolved field). With two values, the baseline is ``baseline`` or the default (fp32 for
    precision, else the first in natural order); with more, both must be named. A record without
    ``by`` is on neither side."""
    records = list(records)
    try:
        name = F.resolve_field(by, records)
        records = select(records, parse_where(where, lambda field: F.resolve_field(field, records)))
    except ValueError as exc:  # a malformed --where, or a FieldError naming the nearest fields
        raise CompareError(str(exc)) from exc
    # a record without the field (a data or comm record in a store of runs) is on neither side; one
    # that holds it as null (an eager run's compile_mode) is on the side of null
    records = [r for r in records if _holds(r, name)]
    values = list(dict.fromkeys(F.hashable(F.get_value(r, name)) for r in records))
    values.sort(key=F.sort_key)
    shown = ", ".join(F.text(v) for v in values)
    if len(values) < 2:
        raise CompareError(f"--by {by}: the results take {plural(len(values), 'value')} "
                           f"({shown or 'none'}); two are needed")
    base = _value(values, baseline, by, "--baseline")
    cand = _value(values, candidate, by, "--candidate")
    if base is _UNSET and cand is _UNSET:
        if len(values) > 2:
            raise CompareError(f"--by {by}: the results take {len(values)} values ({shown}); name the two to "
                               f"compare with --baseline VALUE and --candidate VALUE")
        base = default_baseline(name, values)
    if base is _UNSET or cand is _UNSET:
        known = cand if base is _UNSET else base
        others = [v for v in values if v != known]
        if len(others) != 1:
            flag = "--baseline" if base is _UNSET else "--candidate"
            raise CompareError(f"--by {by}: the results take {len(values)} values ({shown}); name the other "
                               f"side with {flag} VALUE")
        base, cand = (others[0], cand) if base is _UNSET else (base, others[0])
    if base == cand:
        raise CompareError(f"--by {by}: the baseline and the candidate are the same value ({F.text(base)})")

    def side(value: Any) -> Side:
        return Side(F.label(name, value), [r for r in records if F.hashable(F.get_value(r, name)) == value])

    return side(base), side(cand), name


def _holds(record: Mapping[str, Any], name: str) -> bool:
    """Whether ``record`` has the dotted field ``name`` at all, null or not (the source and the
    machine every record has: :func:`~cnnbench.analysis.fields.get_value` gives their defaults)."""
    if name in (F.SOURCE, F.MACHINE):
        return True
    node: Any = record
    for part in name.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


_UNSET: Any = object()


def _value(values: Sequence[Any], wanted: str | None, by: str, flag: str) -> Any:
    if wanted is None:
        return _UNSET
    for v in values:
        if value_matches(v, wanted):
            return v
    raise CompareError(f"{flag} {wanted!r} is not a value of {by} (values: {', '.join(F.text(v) for v in values)})")


def compare_records(baseline: Side, candidate: Side, options: CompareOptions | None = None,
                    split: str | None = None) -> CompareResult:
    """Match the two sides' results and test each pair (raises :class:`CompareError`)."""
    opts = options or CompareOptions()
    for s in (baseline, candidate):
        if not s.records:
            raise CompareError(f"no results on the {s.label} side")
    both, split_field, a, b = _pooled(baseline, candidate, split)
    both, ignore = _selected(both, opts, split)
    points = build_points(both, [split_field, *ignore])
    fields = pair_key_fields(points.key_fields, split_field, ignore, opts.across_machines, points=points)
    pairing = pair_points(points, split_field, a, b, fields)
    exclude = {F.MODEL, F.BATCH, F.MACHINE, split_field, *ignore}  # the machine has its own column
    namer = Namer(points, exclude)
    spreads = machine_spreads(combine(side) for pp in pairing.pairs for side in (pp.a, pp.b))
    pairs = [_pair(pp.a, pp.b, pp.key, fields, namer, opts, spreads) for pp in pairing.pairs]
    pairs.sort(key=lambda p: (F.sort_key(p.model), F.sort_key(p.configuration), F.sort_key(p.batch),
                              F.sort_key(p.machine)))
    bandwidth = compare_bandwidth(*_sides(both, split_field, a, b), noise=opts.noise, alpha=opts.alpha,
                                  across_machines=opts.across_machines)
    return CompareResult(baseline, candidate, fields, ignore, opts.across_machines, pairs, opts.noise, opts.alpha,
                         len(pairing.unmatched_a), len(pairing.unmatched_b), _why_unmatched(pairing, fields), split,
                         bandwidth)


def _sides(both: list[Mapping[str, Any]], split_field: str, a: Any, b: Any) -> tuple[list[Any], list[Any]]:
    """The selected comm records of each side, for :func:`compare_bandwidth` (which reads no other)."""
    comm = [r for r in both if record_kind(r) == "comm"]

    def side(value: Any) -> list[Any]:
        return [r for r in comm if F.hashable(F.get_value(r, split_field)) == value]
    return side(a), side(b)


def _pooled(baseline: Side, candidate: Side, split: str | None) -> tuple[list[Mapping[str, Any]], str, Any, Any]:
    """Both sides' records in one list, the field that tells them apart, and its value on each side."""
    if split is None:
        both: list[Mapping[str, Any]] = [{**r, SIDE: BASELINE} for r in baseline.records]
        both += [{**r, SIDE: CANDIDATE} for r in candidate.records]
        return both, SIDE, BASELINE, CANDIDATE
    return ([*baseline.records, *candidate.records], split, F.hashable(F.get_value(baseline.records[0], split)),
            F.hashable(F.get_value(candidate.records[0], split)))


def _selected(both: list[Mapping[str, Any]], opts: CompareOptions,
              split: str | None) -> tuple[list[Mapping[str, Any]], tuple[str, ...]]:
    """The records ``--where`` keeps (split sides are selected already) and the ``--ignore`` fields, resolved."""
    try:
        if split is None and opts.where:
            both = select(both, parse_where(opts.where, lambda field: F.resolve_field(field, both)))
        ignore = tuple(dict.fromkeys(F.resolve_field(f, both) for f in opts.ignore))
    except ValueError as exc:  # a malformed --where, or a FieldError naming the nearest fields
        raise CompareError(str(exc)) from exc
    if split is not None and split in ignore:
        raise CompareError(f"--ignore {F.short_name(split)}: it is the field that splits the sides (--by)")
    return both, ignore


def _why_unmatched(pairing: Pairing, fields: tuple[str, ...]) -> dict[str, int]:
    """Fields in which the unmatched configurations of either side differ from their nearest partner."""
    all_a = pairing.unmatched_a + [q for pp in pairing.pairs for q in pp.a]
    all_b = pairing.unmatched_b + [q for pp in pairing.pairs for q in pp.b]
    why = differing_fields(pairing.unmatched_a, all_b, fields)
    for name, n in differing_fields(pairing.unmatched_b, all_a, fields).items():
        why[name] = why.get(name, 0) + n
    return why


def _values_text(points: Sequence[Point], name: str) -> str:
    return "/".join(F.text(v) for v in dict.fromkeys(p.values.get(name) for p in points))


def _two(base: str, cand: str) -> str:
    return base if base == cand else f"{base} → {cand}"


def _pair(base_points: list[Point], cand_points: list[Point], key: tuple, fields: tuple[str, ...], namer: Namer,
          opts: CompareOptions, spreads: MachineSpreads) -> ComparedPair:
    # pair_points puts the split's first value (baseline) in .a
    base, cand = combine(base_points), combine(cand_points)
    comparison = compare_runs(base.samples, cand.samples, opts.noise, opts.alpha,
                              spread=spreads.for_pair(machines_of(base, cand)))
    values = dict(zip(fields, key, strict=False))
    marks = Marks()
    marks.add(measure_marks(base))
    marks.add(measure_marks(cand))
    warnings = list(dict.fromkeys(w for m in (base, cand) for run in measure_warnings(m) for w in run))
    first = base_points[0].values
    return ComparedPair(
        model=F.text(first.get(F.MODEL)),
        batch=_two(_values_text(base_points, F.BATCH), _values_text(cand_points, F.BATCH)),
        configuration=namer.name(first),
        machine=_two(_values_text(base_points, F.MACHINE), _values_text(cand_points, F.MACHINE)),
        values=values, base=base, cand=cand, comparison=comparison, marks=marks, warnings=warnings)


def verdict_counts(result: CompareResult) -> dict[str, int]:
    """How many pairs are significantly faster, slower, not significant, without samples."""
    return {v: result.count(v) for v in ("faster", "slower", "not significant", "no samples")}


def summary_line(result: CompareResult) -> str:
    """``Geometric mean of 12 ratios: 0.79 (candidate 21.0% slower); significant: ...``."""
    g = result.geomean
    if g is None:
        return "No pair has a throughput on both sides."
    c = verdict_counts(result)
    if not c["faster"] and not c["slower"]:
        direction = "no pair differs significantly"
    elif g >= 1.5:
        direction = f"the candidate is {g:.2f}× as fast"
    elif abs(g - 1) >= 0.0005:
        direction = f"the candidate is {abs(g - 1) * 100:.1f}% {'faster' if g > 1 else 'slower'}"
    else:
        direction = "no change"
    n = len(result.ratios)
    parts = [f"{c['faster']} faster", f"{c['slower']} slower", f"{c['not significant']} not significant"]
    if c["no samples"]:
        parts.append(f"{c['no samples']} without samples to test")
    return (f"Geometric mean of {plural(n, 'ratio')}: {g:.3f} ({direction}); significant: "
            + ", ".join(parts) + ".")


__all__ = [
    "BASELINE", "CANDIDATE", "CompareError", "CompareOptions", "CompareResult", "ComparedPair", "Side",
    "compare_records", "split_records", "summary_line", "verdict_counts",
]
