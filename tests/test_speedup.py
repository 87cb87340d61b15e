"""Speedup and efficiency have one definition (``cnnbench.analysis.speedup``), which the report,
``run --scaling`` and ``predict`` use."""

from __future__ import annotations

import pytest

from cnnbench.analysis.speedup import speedup_efficiency


@pytest.mark.parametrize(("rate", "devices", "base_rate", "base_devices", "speedup", "efficiency"), [
    (200.0, 2, 100.0, 1, 2.0, 1.0),
    (300.0, 4, 100.0, 1, 3.0, 0.75),
    (400.0, 8, 200.0, 2, 2.0, 0.5),   # against a 2-device base: 4x the devices for 2x the rate
    (100.0, 1, 100.0, 1, 1.0, 1.0),
])
def test_speedup_is_the_rate_over_the_base_and_efficiency_the_speedup_per_added_device(
        rate, devices, base_rate, base_devices, speedup, efficiency):
    assert speedup_efficiency(rate, devices, base_rate, base_devices) == (pytest.approx(speedup),
                                                                       pytest.approx(efficiency))


def _spy(calls):
    def spy(rate, devices, base_rate, base_devices=1):
        calls.append((rate, devices, base_rate, base_devices))
        return 7.0, 0.25
    return spy


def test_the_reports_scaling_series_compute_them_here(monkeypatch):
    import cnnbench.report.tables.scaling_series as scaling_series
    from cnnbench.analysis.points import Measure

    calls = []
    monkeypatch.setattr(scaling_series, "speedup_efficiency", _spy(calls))
    series = scaling_series.Series("s", {}, {1: Measure([100.0]), 4: Measure([300.0])})
    series.compute()
    assert (series.speedup[4], series.efficiency[4]) == (7.0, 0.25)
    assert (300.0, 4, 100.0, 1) in calls


def test_run_scaling_cells_compute_them_here(monkeypatch):
    from types import SimpleNamespace

    import cnnbench.analysis.speedup
    from cnnbench.cli import run_cmd

    calls = []
    monkeypatch.setattr(cnnbench.analysis.speedup, "speedup_efficiency", _spy(calls))
    record = SimpleNamespace(metrics={"total_images_per_sec": 300.0, "warnings": []})
    cells = run_cmd._scaling_cells(4, record, (1, 100.0, False))
    assert cells[1] == "7.00x" and cells[2].startswith("25.0%")
    assert calls == [(300.0, 4, 100.0, 1)]


def test_predicts_two_device_efficiency_is_computed_here(monkeypatch):
    import cnnbench.predict.scaling as scaling
    from cnnbench.predict.bases import Measured

    calls = []
    monkeypatch.setattr(scaling, "speedup_efficiency", _spy(calls))
    base = SimpleBase(key=(("model", "m"),), images_per_sec=100.0)
    measured = [Measured(base.key, "replicated", 2, 1, 190.0, 1)]
    assert scaling.two_device_efficiency(base, "replicated", measured) == 0.25
    assert calls == [(190.0, 2, 100.0, 1)]


class SimpleBase:
    def __init__(self, key, images_per_sec):
        self.key, self.images_per_sec = key, images_per_sec
