"""Speedup and efficiency of a rate at one device count against a base rate: the one definition.

``speedup = rate / base_rate``; ``efficiency = speedup / (devices / base_devices)``: 1.0 when each
added device adds the base's rate per device. The report's scaling tables, ``run --scaling``,
``predict`` and its naive baseline all compute them here. No torch here.
"""

from __future__ import annotations


def speedup_efficiency(rate: float, devices: int, base_rate: float, base_devices: int = 1) -> tuple[float, float]:
    """``(speedup, efficiency)`` of ``rate`` on ``devices`` against ``base_rate`` on ``base_devices``."""
    speedup = rate / base_rate
    return speedup, speedup * base_devices / devices
