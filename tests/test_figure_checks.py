"""The reader's quick bound on figures (issue 22 item 3): a line orjson reads is walked for
unusable figures only when a metric may be over MAX_FIGURE; whatever the shape of the metric
(a number, a list of numbers, numbers nested in objects or lists of objects), a figure over
the bound is still found and shown as not available, and nothing else is touched."""

from __future__ import annotations

import json

import pytest

from cnnbench.results.store import StoreNotice, read_records
from tests.report_fixtures import record

BIG = 2e18


@pytest.mark.parametrize(("metrics", "where", "after"), [
    ({"loss_last": BIG}, "metrics.loss_last is 2e+18", None),
    ({"step_times_s": [0.1, 0.2, -BIG]}, "metrics.step_times_s is -2e+18", [0.1, 0.2, None]),
    ({"telemetry": [{"power_w": 300.0}, {"power_w": BIG}]}, "metrics.telemetry.power_w is 2e+18",
     [{"power_w": 300.0}, {"power_w": None}]),
    ({"series": {"rate": [1.0, "x", None, BIG]}}, "metrics.series.rate is 2e+18", {"rate": [1.0, "x", None, None]}),
    ({"nested": [[1.0], [BIG]]}, "metrics.nested is 2e+18", [[1.0], [None]]),
])
def test_a_metric_over_the_bound_is_found_in_any_shape(tmp_path, metrics, where, after):
    (tmp_path / "m.jsonl").write_text(json.dumps(record(metrics=metrics, learning_rate=1e300)) + "\n")
    (got,), problems = read_records(tmp_path)
    name = next(iter(metrics))
    assert got["metrics"][name] == after
    assert got["config"]["learning_rate"] == 1e300  # a config value may be as large as a float goes
    assert problems == [f"{tmp_path / 'm.jsonl'}:1: {where}: shown as not available"]
    assert type(problems[0]) is StoreNotice


def test_figures_within_the_bound_are_left_alone(tmp_path):
    metrics = {"loss_last": 1e18, "step_times_s": [0.1, 1e-300, 1e18], "telemetry": [{"w": [1, True, "x"]}]}
    (tmp_path / "m.jsonl").write_text(json.dumps(record(metrics=metrics)) + "\n")
    (got,), problems = read_records(tmp_path)
    assert problems == []
    assert {k: got["metrics"][k] for k in metrics} == metrics


def test_a_section_whose_null_is_a_nan_is_not_shared_with_one_whose_null_is_null():
    from cnnbench.results.cache import CachedRecords

    cached = CachedRecords()
    null, nan = record(learning_rate=None), record(learning_rate=float("nan"))
    cached.add(null)
    cached.add(nan)  # the same text as the first (orjson writes NaN as null), not the same values
    assert cached.refs[0] == [0, -1]
    (_, back), = [cached.take_records(step_times=False)]
    assert back["config"]["learning_rate"] != back["config"]["learning_rate"]  # still NaN
