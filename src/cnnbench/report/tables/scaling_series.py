"""Scaling series: one model/batch/machine at several device counts (:class:`Series`), and the
series of one configuration (:class:`ScalingGroup`).

:mod:`cnnbench.report.tables.scaling` gathers and prints them; :mod:`cnnbench.report.tables.predicted`
puts ``report --predict``'s prediction beside each series.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis.points import Measure
from cnnbench.analysis.speedup import speedup_efficiency
from cnnbench.report.table import Table


@dataclass
class Series:
    """One model/batch/machine at several device counts."""

    label: str
    values: dict[str, Any]
    measures: dict[int, Measure]
    base: int | None = None
    speedup: dict[int, float] = field(default_factory=dict)
    efficiency: dict[int, float] = field(default_factory=dict)
    predicted: dict[int, tuple[float, float, str]] = field(default_factory=dict)
    """With ``report --predict``: per device count, predicted images/sec, efficiency and bound."""
    batch_in_label: bool = False
    """The label names the batch (``resnet50 · batch_size=64``: one model on one machine at
    several batch sizes), so the summary has no batch column to say it again."""

    def compute(self) -> None:
        ok = {n: m.median for n, m in self.measures.items() if m.median is not None}
        if not ok:
            return
        self.base = min(ok)
        base_ips = ok[self.base]
        for n, ips in ok.items():
            self.speedup[n], self.efficiency[n] = speedup_efficiency(ips, n, base_ips, self.base)


@dataclass
class ScalingGroup:
    """All series of one configuration (without its device count)."""

    name: str
    series: list[Series]
    devices: list[int]
    table: Table
    """Long form, one row per series and device count (images/sec, speedup, efficiency):
    written to CSV/JSON, not printed."""
    summary: Table
    """What the report prints: one row per series, speedup and efficiency per device count."""
