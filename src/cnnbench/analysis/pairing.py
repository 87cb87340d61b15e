"""Pairing: which results answer "A vs B" together.

Two points pair when their identities (:attr:`PointSet.key_fields`: every configuration
field that changes what is measured, the machine and the source) agree on every field except

- the field that tells the sides apart (the effect's field, or the side of ``cnnbench compare``),
- the options that apply only with some of its values, or whose default follows it (the DDP
  knobs when comparing ``variable_update``; loader processes per device count; declared with
  ``option(depends_on=...)`` in the configuration), where they take one value for each of its
  values,
- the machine, when the field describes the machine (GPU, CPU) or when asked
  (``--across-machines``),
- the fields the user chose to ignore (``--ignore batch_size``: tf_cnn_benchmarks' fp16
  runs used twice the fp32 batch).

Used by the effect tables and by ``cnnbench compare``; no torch here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import followers
from cnnbench.analysis.points import Point, PointSet
from cnnbench.config.run_config import dependent_fields
from cnnbench.results.query import value_matches


def pair_key_fields(key_fields: Sequence[str], split: str, ignore: Collection[str] = (),
                    across_machines: bool = False, points: PointSet | None = None) -> tuple[str, ...]:
    """The identity fields two results must agree on to pair across ``split``. A field that
    depends on ``split`` is left out, but, given the ``points``, only where it follows the
    fields it depends on (one value for each combination of them: loader processes left to
    their default, one count per device count): a value the user varied at one ``split`` value
    (``--num-workers 4`` and ``16`` at each device count) keeps its runs apart, never pooled as
    repeats of one."""
    drop = {split, *ignore}
    if split in F.HARDWARE_FIELDS or across_machines:
        drop.add(F.MACHINE)
    if split.startswith("config."):
        follow = followers(points) if points is not None else {}
        drop.update(f for f in (f"config.{dep}" for dep in dependent_fields(split.split(".", 1)[1]))
                    if points is None or not points.varies(f) or f in follow)
    return tuple(f for f in key_fields if f not in drop)


@dataclass
class PointPair:
    """The points of side A and of side B that agree on :attr:`fields` (``key``: their values)."""

    key: tuple
    fields: tuple[str, ...]
    a: list[Point]
    b: list[Point]

    def get(self, name: str) -> Any:
        return self.key[self.fields.index(name)]


@dataclass
class Pairing:
    """Every pair, and the points of each side that found no partner."""

    fields: tuple[str, ...]
    pairs: list[PointPair]
    unmatched_a: list[Point] = field(default_factory=list)
    unmatched_b: list[Point] = field(default_factory=list)


def pair_points(points: PointSet, split: str, a: Any, b: Any, fields: Sequence[str]) -> Pairing:
    """Pair the points whose ``split`` value is ``a`` with those whose value is ``b``, on
    ``fields`` (see :func:`pair_key_fields`). A side may hold several points for one key (two
    machines with the same GPU, several values of an ignored field); they are pooled."""
    fields = tuple(fields)
    idx = [points.key_fields.index(f) for f in fields]
    getter = itemgetter(*idx) if len(idx) > 1 else (lambda k: tuple(k[i] for i in idx))
    buckets: dict[tuple, tuple[list[Point], list[Point]]] = {}
    for p in points.points:
        v = p.values.get(split)
        side = 0 if v == a else 1 if v == b else -1
        if side < 0:
            continue
        k = getter(p.key)
        slot = buckets.get(k)
        if slot is None:
            slot = buckets[k] = ([], [])
        slot[side].append(p)
    result = Pairing(fields, [])
    for key, (pa, pb) in buckets.items():
        if pa and pb:
            result.pairs.append(PointPair(key, fields, pa, pb))
        else:
            result.unmatched_a += pa
            result.unmatched_b += pb
    return result


def ignored_differences(pairs: Sequence[PointPair], ignore: Sequence[str]) -> dict[str, int]:
    """For each ignored field, in how many pairs its value differs between (or within) the sides."""
    counts = {}
    for name in ignore:
        counts[name] = sum(1 for p in pairs if len({q.values.get(name) for q in p.a + p.b}) > 1)
    return counts


def pooled_pairs(pairs: Sequence[PointPair], ignore: Sequence[str]) -> int:
    """How many pairs pool several values of an ignored field on one side."""
    return sum(1 for p in pairs
               if any(len({q.values.get(name) for q in side}) > 1 for side in (p.a, p.b) for name in ignore))


def differing_fields(unmatched: Sequence[Point], others: Sequence[Point], fields: Sequence[str],
                     limit: int = 200_000) -> dict[str, int]:
    """Why results found no partner: for each unmatched point, the fields in which it differs
    from its nearest point on the other side; counted per field (``{}`` when too many to scan)."""
    if not unmatched or not others or len(unmatched) * len(others) > limit:
        return {}
    counts: dict[str, int] = {}
    for p in unmatched:
        best: list[str] | None = None
        for q in others:
            diff = [f for f in fields if p.values.get(f) != q.values.get(f)]
            if best is None or len(diff) < len(best):
                best = diff
        for f in best or ():
            counts[f] = counts.get(f, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def default_baseline(name: str, values: Sequence[Any]) -> Any:
    """The value others are compared with: fp32 for precision, else the first in natural order."""
    if name == F.PRECISION and "fp32" in values:
        return "fp32"
    return sorted(values, key=F.sort_key)[0]


def find_value(values: Sequence[Any], wanted: str, name: str = "") -> Any:
    for v in values:
        if value_matches(v, wanted):
            return v
    short = F.short_name(name) if name else "this field"
    raise F.FieldError(f"--baseline {F.short_name(name) + '=' if name else ''}{wanted}: not a value of {short} "
                       f"in these results (values: {', '.join(F.text(v) for v in values)})")
