"""Points: the repeats of one configuration on one machine, grouped and summarised.

A record's *identity* is its configuration (every ``config`` field except those that only
say how long or where a run went: seed, step counts, folders), its machine label and its
source. Records with the same identity are repeats of one :class:`Point`; the point's
figure is the median ``total_images_per_sec`` of its ``ok`` repeats; its ``ok`` records are
kept for the significance test (their step times) and for the marks of untrustworthy runs
(wide spread, warnings). Fields that describe the machine (GPU and CPU model) travel with the
point as attributes. Every table is built from points, so repeats are folded the same way
everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.ratio_tests import GroupSpread, MachineSpreads, group_spread
from cnnbench.analysis.repeat_stats import median, relative_stdev
from cnnbench.analysis.samples import RunSample, run_sample
from cnnbench.config.choices import DEFAULT_INPUT_PIPELINE, SYNTHETIC
from cnnbench.results.fields import IGNORED_CONFIG as IGNORED_CONFIG
from cnnbench.results.record import RUN_KIND, record_kind

log = logging.getLogger(__name__)

# IGNORED_CONFIG (config keys that do not change what is measured) is the field registry's.
ABSENT_MEANS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "input_pipeline": lambda rec: DEFAULT_INPUT_PIPELINE if (rec.get("source") or "cnnbench") == "cnnbench" and (
        rec.get("config") or {}).get("data_name") not in (None, SYNTHETIC) else None,
}
"""What a config field that older records of cnnbench's own lack means for them, by the record: a
run on real data made before ``--input-pipeline`` used the CPU pipeline, and is the same
configuration as one that records it (an imported run used another tool's pipeline: none of ours)."""

# Machine descriptors kept on each point (taken from its first record), never in its key.
ATTRIBUTE_FIELDS = (F.GPU, F.CPU, F.HOSTNAME)

STATUS_WORDS = {"oom": "OOM", "error": "error", "timeout": "timeout"}


def status_word(status: str) -> str:
    """How a failed status reads in a cell: ``OOM``, ``error``, ``timeout``."""
    return STATUS_WORDS.get(status, status)


_UNSET = object()


class Measure:
    """Throughputs of ``ok`` repeats and the statuses of all repeats of one cell."""

    __slots__ = ("ips", "statuses", "runs", "_median", "_spread", "_samples", "_ok_samples", "marks", "warnings",
                 "_machines", "_spread_part")

    def __init__(self, ips: list[float] | None = None, statuses: dict[str, int] | None = None,
                 runs: list[Mapping[str, Any]] | None = None) -> None:
        self.ips: list[float] = ips if ips is not None else []
        self.statuses: dict[str, int] = statuses if statuses is not None else {}
        self.runs: list[Mapping[str, Any]] = runs if runs is not None else []
        """The ``ok`` records behind :attr:`ips`."""
        self._median: Any = _UNSET
        self._spread: Any = _UNSET
        self._samples: list[RunSample | None] | None = None if self.runs else []
        self._ok_samples: list[RunSample] | None = None
        self.marks: Any = None
        """Set by :func:`cnnbench.analysis.marks.measure_marks` (a cache)."""
        self.warnings: list[tuple[str, ...]] | None = None
        """Each run's warnings, set by :func:`cnnbench.analysis.marks.measure_warnings` (a cache)."""
        self._machines: list[Any] | None = None
        self._spread_part: tuple[set[Any], GroupSpread | None] | None = None

    def __repr__(self) -> str:
        return f"Measure(ips={self.ips!r}, statuses={self.statuses!r})"

    @property
    def n(self) -> int:
        return sum(self.statuses.values())

    @property
    def median(self) -> float | None:
        if self._median is _UNSET:
            self._median = median(self.ips)
        return self._median

    @property
    def spread(self) -> float | None:
        """The relative stdev of the ``ok`` repeats (:func:`cnnbench.analysis.repeat_stats.relative_stdev`:
        stdev / mean; ``None`` with fewer than two)."""
        if self._spread is _UNSET:
            self._spread = relative_stdev(self.ips)
        return self._spread

    @property
    def failures(self) -> dict[str, int]:
        return {s: c for s, c in self.statuses.items() if s != "ok"}

    def failure_text(self) -> str:
        """``OOM``, or ``OOM/error`` for mixed failures (most frequent first); empty if none."""
        fails = sorted(self.failures.items(), key=lambda kv: -kv[1])
        return "/".join(status_word(s) for s, _ in fails)

    @property
    def run_samples(self) -> list[RunSample | None]:
        """What the significance test needs from each of :attr:`runs` (in the same order)."""
        if self._samples is None:
            self._samples = [run_sample(r) for r in self.runs]
        return self._samples

    @property
    def samples(self) -> list[RunSample]:
        """The samples of the runs that have one."""
        if self._ok_samples is None:
            self._ok_samples = [s for s in self.run_samples if s is not None]
        return self._ok_samples

    def record(self, status: str, ips: float | None, run: Mapping[str, Any] | None = None) -> None:
        """Count one repeat (``run``: its record, kept when it has a throughput)."""
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if ips is not None:
            self.ips.append(ips)
            if run is not None:
                self.runs.append(run)
            self._median = self._spread = _UNSET
            self._samples = self._ok_samples = self.marks = self._machines = self._spread_part = None

    def add(self, other: Measure) -> None:
        # the samples are kept (the other's computed once, on its own measure, and reused)
        samples = self._samples + other.run_samples if self._samples is not None else None
        self.ips.extend(other.ips)
        self.runs.extend(other.runs)
        for s, c in other.statuses.items():
            self.statuses[s] = self.statuses.get(s, 0) + c
        self._median = self._spread = _UNSET
        self._samples, self._ok_samples, self.marks, self._machines = samples, None, None, None
        self._spread_part = None


def run_machines(measure: Measure) -> list[Any]:
    """The machine of each of a measure's runs (in :attr:`Measure.run_samples` order; computed once)."""
    if measure._machines is None:
        measure._machines = [F.get_value(r, F.MACHINE) for r in measure.runs]
    return measure._machines


def machines_of(*measures: Measure) -> set[Any]:
    """The machines the runs of these measures come from."""
    return {m for measure in measures for m in run_machines(measure)}


def machine_spreads(measures: Iterable[Measure]) -> MachineSpreads:
    """The run-to-run spread pooled per machine over these measures' groups of repeats."""
    return MachineSpreads(parts=(spread_part(m) for m in measures))


def spread_part(measure: Measure) -> tuple[set[Any], GroupSpread | None]:
    """The machines of a measure's runs with a sample, and their share of a pooled spread
    (computed once per measure)."""
    if measure._spread_part is None:
        samples = measure.run_samples
        measure._spread_part = (
            {machine for machine, s in zip(run_machines(measure), samples, strict=True) if s is not None},
            group_spread([s for s in samples if s is not None]))
    return measure._spread_part


def combine(points: Sequence[Point]) -> Measure:
    """One measure over several points (e.g. several machines with the same GPU in a cell).
    For a single point, its own measure (do not modify it)."""
    if len(points) == 1:
        return points[0].measure
    m = Measure()
    for p in points:
        m.add(p.measure)
    return m


@dataclass
class Point:
    """All repeats of one identity: its field values, records and measure."""

    values: dict[str, Any]
    key: tuple = ()
    """The identity values in :attr:`PointSet.key_fields` order."""
    records: list[Mapping[str, Any]] = field(default_factory=list)
    measure: Measure = field(default_factory=Measure)

    def get(self, name: str) -> Any:
        return self.values.get(name)


@dataclass
class PointSet:
    """The points of a selection and the fields that make up their identity."""

    key_fields: tuple[str, ...]
    points: list[Point]
    extra: tuple[str, ...] = ()
    """Of :attr:`key_fields`, those beyond the configuration, machine and source (the
    ``extra_fields`` of :func:`build_points` that tell points apart)."""
    _distinct: dict[str, list[Any]] = field(default_factory=dict, repr=False)

    def distinct(self, name: str, points: Sequence[Point] | None = None) -> list[Any]:
        """Distinct values of a field: numbers and booleans in order, text in order of
        first appearance (so models and machines keep the order they were run in)."""
        if points is None and name in self._distinct:
            return self._distinct[name]
        seen: dict[Any, None] = {}
        for p in self.points if points is None else points:
            seen.setdefault(p.values.get(name), None)
        values = list(seen)
        if all(v is None or isinstance(v, (int, float)) for v in values):
            values.sort(key=F.sort_key)
        if points is None:
            self._distinct[name] = values
        return values

    def getter(self, names: Sequence[str]) -> Callable[[Point], tuple]:
        """A fast ``point -> tuple of the values of names`` (identity fields read from the key)."""
        if all(n in self.key_fields for n in names):
            idx = [self.key_fields.index(n) for n in names]
            if len(idx) > 1:
                get = itemgetter(*idx)
                return lambda p: get(p.key)
            return lambda p: tuple(p.key[i] for i in idx)
        return lambda p: tuple(p.values.get(n) for n in names)

    def varies(self, name: str, points: Sequence[Point] | None = None) -> bool:
        return len(self.distinct(name, points)) > 1

    def group_by(self, names: Sequence[str]) -> dict[tuple, list[Point]]:
        """Points grouped by the values of ``names``, groups in order of first appearance."""
        key = self.getter(names)
        groups: dict[tuple, list[Point]] = {}
        for p in self.points:
            groups.setdefault(key(p), []).append(p)
        return groups


def _metric(record: Mapping[str, Any]) -> float | None:
    metrics = record.get("metrics") or {}
    value = metrics.get("total_images_per_sec")
    if value.__class__ in (int, float) and value > 0:
        return float(value)
    return None


def identity_extras(fields: Iterable[str]) -> tuple[str, ...]:
    """Of the fields a report compares by, those that must join the identity key
    (everything except machine descriptors, which come with the machine label)."""
    out: list[str] = []
    for name in fields:
        if name in F.HARDWARE_FIELDS or name in out:
            continue
        out.append(name)
    return tuple(out)


def build_points(records: Sequence[Mapping[str, Any]], extra_fields: Iterable[str] = ()) -> PointSet:
    """Group records into points by identity (plus ``extra_fields``, e.g. a software
    version named by ``--effect``). Records of another kind than a run (``cnnbench comm``'s
    bandwidth, :func:`~cnnbench.results.record.record_kind`) are left out."""
    records = [r for r in records if record_kind(r) == RUN_KIND]
    ckeys = _config_keys(records)
    key_fields = [f"config.{k}" for k in ckeys] + [F.MACHINE, F.SOURCE]
    extras = [f for f in identity_extras(extra_fields) if f not in key_fields]
    key_fields += extras
    groups: dict[tuple, Point] = {}
    for rec in records:
        env = rec.get("environment") or {}
        if not isinstance(env, dict):
            env = {}
        key = _identity(rec, env, ckeys, extras)
        point = groups.get(key)
        if point is None:
            values = dict(zip(key_fields, key, strict=False))
            for attr in ATTRIBUTE_FIELDS:
                values[attr] = _hashable(env.get(attr.split(".", 1)[1]))
            point = groups[key] = Point(values, key)
        point.records.append(rec)
        status = str(rec.get("status") or "ok")
        point.measure.record(status, _metric(rec) if status == "ok" else None, rec)
    log.debug("%d records -> %d points over %d identity fields", len(records), len(groups), len(key_fields))
    return PointSet(tuple(key_fields), list(groups.values()), tuple(extras))


def _config_keys(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The config keys of the identity, in first-seen order (those in :data:`IGNORED_CONFIG` left out)."""
    config_keys: dict[str, None] = {}
    seen: set[str] = set()
    for rec in records:
        cfg = rec.get("config")
        if isinstance(cfg, dict) and not seen.issuperset(cfg):  # new keys: keep first-seen order
            for k in cfg:
                if k not in seen:
                    seen.add(k)
                    if k not in IGNORED_CONFIG:
                        config_keys[k] = None
    return list(config_keys)


_SCALAR = (str, int, float, bool, type(None))


def _hashable(value: Any) -> Any:
    return value if value.__class__ in _SCALAR else F.hashable(value)


def _identity(rec: Mapping[str, Any], env: Mapping[str, Any], ckeys: list[str], extras: list[str]) -> tuple:
    """A record's point key: its config values, machine label and source, then the ``extras``."""
    cfg = rec.get("config") or {}
    machine = env.get("machine") or env.get("hostname") or "unknown"
    ckey = tuple(map(cfg.get, ckeys))
    if not cfg.keys() >= ABSENT_MEANS.keys():  # an older record: what its absent fields mean
        ckey = tuple(ABSENT_MEANS[k](rec) if k in ABSENT_MEANS and k not in cfg else v
                     for k, v in zip(ckeys, ckey, strict=True))
    try:
        hash(ckey)
    except TypeError:  # a list or object value: use its JSON text
        ckey = tuple(_hashable(v) for v in ckey)
    key = ckey + (machine, rec.get("source") or "cnnbench")
    if extras:
        key += tuple(_hashable(F.get_value(rec, f)) for f in extras)
    return key
