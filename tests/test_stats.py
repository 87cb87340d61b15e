"""Throughput statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from cnnbench.engine.stats import throughput_stats


def test_hand_computed():
    # speeds with 10 images/step: 100, 50, 25, 100 images/sec
    s = throughput_stats([0.1, 0.2, 0.4, 0.1], images_per_step=10)
    assert s.mean == pytest.approx(10 / 0.2)  # images over mean step time
    speeds = [100, 50, 25, 100]
    mu = sum(speeds) / 4
    std = math.sqrt(sum((x - mu) ** 2 for x in speeds) / 4)
    assert s.stderr == pytest.approx(std / 2)
    assert s.median == pytest.approx(75)
    # |s - 75| = 25, 25, 50, 25 -> median 25
    assert s.jitter == pytest.approx(1.4826 * 25)
    assert s.p10 == pytest.approx(32.5)  # numpy linear interpolation between 25 and 50
    assert s.p90 == pytest.approx(100)


def test_single_step_has_no_spread():
    s = throughput_stats([0.5], images_per_step=4)
    assert (s.mean, s.stderr, s.jitter, s.median) == (8, 0, 0, 8)


def test_as_metrics_names():
    names = set(throughput_stats([1.0, 2.0], 2).as_metrics())
    assert {"images_per_sec_mean", "images_per_sec_stderr", "images_per_sec_jitter", "images_per_sec_median"} <= names


def test_empty_is_an_error():
    with pytest.raises(ValueError):
        throughput_stats([], 1)
