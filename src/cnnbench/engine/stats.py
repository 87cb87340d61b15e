"""Throughput statistics over per-step times, as tf_cnn_benchmarks computes them.

With per-step speeds ``s_i = images / t_i``:
- mean = images / mean(t)  (the rate of the whole series, not the mean of rates)
- stderr = std(s) / sqrt(n)  (population std, as numpy's default)
- jitter = 1.4826 * median(|s - median(s)|)  (a robust standard deviation)
plus the median and the 10th/90th percentiles of ``s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class ThroughputStats:
    mean: float
    stderr: float
    jitter: float
    median: float
    p10: float
    p90: float

    def as_metrics(self) -> dict[str, float]:
        return {f"images_per_sec_{k}": v for k, v in asdict(self).items()}


def throughput_stats(step_times_s: Sequence[float], images_per_step: int) -> ThroughputStats:
    times = np.asarray(step_times_s, dtype=np.float64)
    if times.size == 0:
        raise ValueError("no step times")
    speeds = images_per_step / times
    median = float(np.median(speeds))
    p10, p90 = np.percentile(speeds, [10, 90])
    return ThroughputStats(
        mean=float(images_per_step / times.mean()),
        stderr=float(speeds.std() / np.sqrt(speeds.size)),
        jitter=float(1.4826 * np.median(np.abs(speeds - median))),
        median=median,
        p10=float(p10),
        p90=float(p90),
    )
