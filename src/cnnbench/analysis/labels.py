"""Names of configurations and series, in the style of vendor tf_cnn_benchmarks reports.

``<data>-<variable_update>[-<all_reduce>][-distortions][-<precision>]-<N><device>s[-inference]``,
made by :func:`cnnbench.results.naming.config_name` (the name records carry), with the
precision and the mode when they vary in the selection, and ``(field=value, ...)`` for any other identity field
that varies. Fields a table shows elsewhere (its rows, its columns) are left out; a left-out
device count reads ``N<device>s``. Real data reads ``real`` (:func:`data_set_note` names the
data set in a table's notes), and a one-device configuration names no gradient-exchange
option (:data:`EXCHANGE_FIELDS`), here or in the report's "Common to all results" line
(:func:`common_fields`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.points import PointSet
from cnnbench.config.run_config import config_fields, unnamed_values
from cnnbench.config.strategy_rules import STRATEGY_OPTIONS
from cnnbench.results.naming import config_name, data_kind, one_device

DATA = F.DATA
VARIABLE_UPDATE = F.VARIABLE_UPDATE
ALL_REDUCE = F.ALL_REDUCE
DISTORTIONS = F.DISTORTIONS
PRECISION = F.PRECISION
FORWARD_ONLY = F.FORWARD_ONLY
DEVICE = F.DEVICE

NAME_FIELDS = frozenset({DATA, VARIABLE_UPDATE, ALL_REDUCE, DISTORTIONS, PRECISION, FORWARD_ONLY,
                         DEVICE, F.DEVICES})
EXCHANGE_FIELDS = frozenset(f"config.{name}" for name in STRATEGY_OPTIONS)
"""How devices exchange gradients (back end, parameter device, DDP's knobs): nothing to a one-device run."""


class Namer:
    """Names configurations of one point set, leaving out the fields in ``exclude``."""

    def __init__(self, points: PointSet, exclude: Collection[str] = ()) -> None:
        self.exclude = frozenset(exclude)
        varying = [f for f in points.key_fields if points.varies(f)]
        self.varying = [f for f in varying if not _explained(points, f, varying)]
        real = {v for v in points.distinct(DATA) if v not in (None, "synthetic")}
        self._several_real_sets = len(real) > 1

    def name(self, values: Mapping[str, Any], full: bool = False) -> str:
        """The configuration name of a point's values (:func:`cnnbench.results.naming.config_name`).
        Unless ``full``, other varying fields are named only where they are not at their
        default (unset, false, source cnnbench)."""
        ex = self.exclude
        config = {field.removeprefix("config."): values.get(field) for field in NAME_FIELDS}
        name = config_name(
            config, values.get(F.SOURCE), omit={field.removeprefix("config.") for field in ex & NAME_FIELDS},
            precision=PRECISION in self.varying, inference=FORWARD_ONLY in self.varying,
        )
        quiet = not full and F.DEVICES not in ex and one_device(config)  # a one-device run exchanges nothing
        skip = NAME_FIELDS | EXCHANGE_FIELDS if quiet else NAME_FIELDS
        extras = [F.label(f, values.get(f)) for f in self.varying
                  if f not in skip and f not in ex and f != F.MACHINE
                  and (full or not _is_default(f, values.get(f)))]
        if full and self._several_real_sets and DATA not in ex and data_kind(config) == "real":
            extras.insert(0, F.label(DATA, values.get(DATA)))  # two tables would read alike
        if extras:
            name += f" ({', '.join(extras)})"
        if F.MACHINE in self.varying and F.MACHINE not in ex:
            name += f" on {values.get(F.MACHINE)}"
        return name


_UNNAMED = {f"config.{name}": values for name, values in unnamed_values().items()}
_DEPENDS_ON = {f"config.{f.name}": tuple(f"config.{d}" for d in f.metadata.get("depends_on", ()))
               for f in config_fields() if f.metadata.get("depends_on")}


def _explained(points: PointSet, name: str, varying: Collection[str]) -> bool:
    """Does ``name`` vary only with the fields it depends on (the optimizer of training runs,
    unset for inference; ``num_workers``, set for ``synthetic_location=loader`` alone), so that
    naming those fields (or showing them as a table's rows or columns) names it too?"""
    deps = _DEPENDS_ON.get(name, ())
    return any(d in varying for d in deps) and _follows(points, name, deps)


def _follows(points: PointSet, name: str, deps: Sequence[str]) -> bool:
    return all(len({p.values.get(name) for p in group}) == 1 for group in points.group_by(deps).values())


def followers(points: PointSet) -> dict[str, tuple[str, ...]]:
    """The identity fields that vary but take one value for each combination of the fields they
    depend on, with those fields: declared with ``depends_on``, and the source where a source does
    not record the field. They never tell two configurations apart by themselves
    (``num_workers=2`` comes with ``synthetic_location=loader``, no ``compile`` with
    ``source=tf_cnn_benchmarks``), so they need not split tables."""
    deps = {f: _DEPENDS_ON.get(f, ()) for f in points.key_fields}
    if points.varies(F.SOURCE):
        by_source = list(points.group_by([F.SOURCE]).values())
        for f in points.key_fields:
            if f != F.SOURCE and any(all(p.values.get(f) is None for p in g) for g in by_source):
                deps[f] = (*deps[f], F.SOURCE)  # a field one source does not record
    return {f: d for f, d in deps.items() if d and points.varies(f) and _follows(points, f, d)}


def _is_default(name: str, value: Any) -> bool:
    return (value is None or value is False or (name == F.SOURCE and value == "cnnbench")
            or value in _UNNAMED.get(name, ()))


def unique_names(namer: Namer, values: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names for several configurations; those that would read alike are named in full."""
    names = [namer.name(v) for v in values]
    counts = Counter(names)
    return [namer.name(v, full=True) if counts[n] > 1 else n for n, v in zip(names, values, strict=False)]


def join_labels(values: Mapping[str, Any], fields: Collection[str]) -> str:
    """``resnet50 · DGX1 · batch_size=64``: the labels of ``fields`` in a point's values."""
    return " · ".join(F.label(f, values.get(f)) for f in fields) or "all"


def data_set_note(values: Mapping[str, Any]) -> list[str]:
    """The line that names a real data set under a table whose configuration name reads ``real``."""
    config = {"data_name": values.get(DATA)}
    return [f"Data: {F.text(values.get(DATA))} (real)."] if data_kind(config) == "real" else []


def common_fields(points: PointSet) -> list[str]:
    """Identity fields with one value over every point (the machine aside): the report's "Common
    to all results". When every point ran on one device, gradient-exchange options are left out
    (nothing was exchanged)."""
    constant = [f for f in points.key_fields if len(points.distinct(f)) == 1 and points.distinct(f)[0] is not None
                and f != F.MACHINE]
    if all(one_device({"num_devices": d}) for d in points.distinct(F.DEVICES)):
        constant = [f for f in constant if f not in EXCHANGE_FIELDS]
    return constant
