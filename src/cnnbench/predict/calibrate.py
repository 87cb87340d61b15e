"""``--calibrate``: one effective bandwidth per link, fitted to the measured multi-device points.

For the points of one machine on one node (the link within a node), and then those on several
nodes (the link between them, the first fixed), the bandwidth is the one that minimises the sum
of squared relative errors of the predicted step times against the measured ones (golden-section
search over the logarithm of the bandwidth, 1 MB/s to 10 TB/s). The latency, the overlap and
the split stay as described: one number per link is all a few points can fix (one 2-device
point fixes exactly one). :class:`Fit` keeps every point's residual, so the output can say how
well one number explains them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cnnbench.predict.bases import Measured
from cnnbench.predict.links import Link
from cnnbench.predict.model import Base, Scenario, predict

LOW, HIGH = -3.0, 4.0
"""log10 of the bandwidths searched, GB/s."""
ITERATIONS = 80


@dataclass(frozen=True)
class Residual:
    model: str
    strategy: str
    devices: int
    nodes: int
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """Predicted over measured images/sec, minus one."""
        return self.predicted / self.measured - 1


@dataclass(frozen=True)
class Fit:
    """The fitted link and how well it explains the points it was fitted to."""

    link: Link
    residuals: list[Residual]

    @property
    def rms(self) -> float:
        return math.sqrt(sum(r.error ** 2 for r in self.residuals) / len(self.residuals)) if self.residuals else 0.0


Pair = tuple[Base, Measured]


def fit_link(pairs: Sequence[Pair], scenario: Scenario, which: str) -> Fit | None:
    """Fit ``scenario``'s ``which`` link (``intra`` or ``inter``) to ``pairs``; None without pairs."""
    if not pairs:
        return None
    link: Link = getattr(scenario, which)

    def with_bandwidth(log_b: float) -> Scenario:
        fitted = link.with_bandwidth(10 ** log_b, "calibrated")
        return Scenario(**{**scenario.__dict__, which: fitted})

    def loss(log_b: float) -> float:
        s = with_bandwidth(log_b)
        return sum((_step(base, m, s) / _measured_step(base, m) - 1) ** 2 for base, m in pairs)

    best = _golden_min(loss, LOW, HIGH)
    fitted_scenario = with_bandwidth(best)
    text = (f"calibrated on {len(pairs)} point{'s' if len(pairs) > 1 else ''} "
            f"(was {link.bandwidth_gbps:.3g} GB/s, {link.source})")
    fitted_link = link.with_bandwidth(10 ** best, text)
    residuals = [Residual(base.model, m.strategy, m.devices, m.nodes, m.images_per_sec,
                          predict(base, m.strategy, m.devices, m.nodes, fitted_scenario).images_per_sec)
                 for base, m in pairs]
    return Fit(fitted_link, residuals)


def check_pair(base: Base, m: Measured, scenario: Scenario) -> None:
    """``ArithmeticError`` where :func:`fit_link` could not compute this pair's part of its loss at
    some bandwidth it tries (its range's ends, on either link): figures no float computes with."""
    for which in ("intra", "inter"):
        link: Link = getattr(scenario, which)
        for log_b in (LOW, HIGH):
            tried = Scenario(**{**scenario.__dict__, which: link.with_bandwidth(10 ** log_b, "tried")})
            _ = (_step(base, m, tried) / _measured_step(base, m) - 1) ** 2


def _step(base: Base, m: Measured, scenario: Scenario) -> float:
    return predict(base, m.strategy, m.devices, m.nodes, scenario).step_time_s


def _measured_step(base: Base, m: Measured) -> float:
    return m.devices * base.batch_size / m.images_per_sec


def _golden_min(f: Callable[[float], float], lo: float, hi: float) -> float:
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(ITERATIONS):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    return (a + b) / 2
