"""Points: the repeats of one configuration on one machine, grouped and summarised.

A record's *identity* is its configuration (every ``config`` field except those that only
say how long or where a run went: seed, step counts, folders), its machine label and its
source. Records with the same identity are repeats of one :class:`Point`; the point's
figure is the median ``total_images_per_sec`` of its ``ok`` repeats. Fields that describe
the machine (GPU and CPU model) travel with the point as attributes. Every table is built
from points, so repeats are folded the same way everywhere.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from cnnbench.report import fields as F
from cnnbench.report.stats import median, relative_spread

log = logging.getLogger(__name__)

# config fields that do not change what is measured (only how long, where, or which draw).
IGNORED_CONFIG = frozenset({
    "seed", "num_batches", "num_warmup_batches", "display_every", "data_dir", "results_dir",
    "machine_label", "repeat", "repeats", "num_repeats", "timeout", "timeout_s", "trace",
    "trace_dir", "profile", "profile_dir", "output", "skip_bad_images", "log_every",
})

# Machine descriptors kept on each point (taken from its first record), never in its key.
ATTRIBUTE_FIELDS = ("environment.gpu_model", "environment.cpu_model", "environment.hostname")

STATUS_WORDS = {"oom": "OOM", "error": "error", "timeout": "timeout"}


def status_word(status: str) -> str:
    """How a failed status reads in a cell: ``OOM``, ``error``, ``timeout``."""
    return STATUS_WORDS.get(status, status)


@dataclass
class Measure:
    """Throughputs of ``ok`` repeats and the statuses of all repeats of one cell."""

    ips: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)

    @property
    def n(self) -> int:
        return sum(self.statuses.values())

    @property
    def median(self) -> float | None:
        return median(self.ips)

    @property
    def spread(self) -> float | None:
        """``(max - min) / median`` over ``ok`` repeats (``None`` with fewer than two)."""
        return relative_spread(self.ips)

    @property
    def failures(self) -> Counter:
        return Counter({s: c for s, c in self.statuses.items() if s != "ok"})

    def failure_text(self) -> str:
        """``OOM``, or ``OOM/error`` for mixed failures (most frequent first); empty if none."""
        fails = self.failures
        return "/".join(status_word(s) for s, _ in fails.most_common())

    def add(self, other: "Measure") -> None:
        self.ips.extend(other.ips)
        self.statuses.update(other.statuses)


def combine(points: Iterable["Point"]) -> Measure:
    """One measure over several points (e.g. several machines with the same GPU in a cell)."""
    m = Measure()
    for p in points:
        m.add(p.measure)
    return m


@dataclass
class Point:
    """All repeats of one identity: its field values, records and measure."""

    values: dict[str, Any]
    records: list[Mapping[str, Any]] = field(default_factory=list)
    measure: Measure = field(default_factory=Measure)

    def get(self, name: str) -> Any:
        return self.values.get(name)


@dataclass
class PointSet:
    """The points of a selection and the fields that make up their identity."""

    key_fields: tuple[str, ...]
    points: list[Point]
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

    def varies(self, name: str, points: Sequence[Point] | None = None) -> bool:
        return len(self.distinct(name, points)) > 1


def _metric(record: Mapping[str, Any]) -> float | None:
    metrics = record.get("metrics") or {}
    value = metrics.get("total_images_per_sec")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
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
    version named by ``--effect``)."""
    config_keys: dict[str, None] = {}
    for rec in records:
        cfg = rec.get("config")
        if isinstance(cfg, Mapping):
            for k in cfg:
                if k not in IGNORED_CONFIG:
                    config_keys.setdefault(k, None)
    ckeys = list(config_keys)
    key_fields = [f"config.{k}" for k in ckeys] + [F.MACHINE, F.SOURCE]
    extras = [f for f in identity_extras(extra_fields) if f not in key_fields]
    key_fields += extras
    hashable = F.hashable
    groups: dict[tuple, Point] = {}
    for rec in records:
        cfg = rec.get("config") or {}
        env = rec.get("environment") or {}
        machine = env.get("machine") or env.get("hostname") or "unknown"
        key = tuple(hashable(cfg.get(k)) for k in ckeys) + (machine, rec.get("source") or "cnnbench")
        if extras:
            key += tuple(hashable(F.get_value(rec, f)) for f in extras)
        point = groups.get(key)
        if point is None:
            values = dict(zip(key_fields, key))
            for attr in ATTRIBUTE_FIELDS:
                values[attr] = hashable(F.get_value(rec, attr))
            point = groups[key] = Point(values)
        point.records.append(rec)
        status = str(rec.get("status") or "ok")
        point.measure.statuses[status] += 1
        if status == "ok":
            ips = _metric(rec)
            if ips is not None:
                point.measure.ips.append(ips)
    log.debug("%d records -> %d points over %d identity fields", len(records), len(groups), len(key_fields))
    return PointSet(tuple(key_fields), list(groups.values()))
