"""Observations: every bullet follows from cells of the report's tables."""

from __future__ import annotations

import re

import pytest

from cnnbench.report import ReportOptions, build_report
from cnnbench.report.tables.scaling import verdict
from tests.report_fixtures import record, scaling_records

NUMBER = re.compile(r"\d+(?:\.\d+)?%?")


def _cells(report, obs):
    return [report.table(r.table).cell(r.row, r.column) for r in obs.refs]


def _only(report, start):
    [obs] = [o for o in report.observations if o.text.startswith(start)]
    return obs


def test_every_reference_resolves_and_decimals_come_from_referenced_cells():
    recs = scaling_records() + [record("resnet50", "m-fast", 300.0, data_name="imagenet"),
                                record("resnet50", "m-slow", 150.0, data_name="imagenet")]
    report = build_report(recs)
    assert report.observations
    for obs in report.observations:
        assert obs.refs, obs.text
        texts = " ".join(c.text for c in _cells(report, obs))
        for token in NUMBER.findall(obs.text):
            if "." in token and "faster" not in obs.text and "slower" not in obs.text:
                assert token in texts, (token, obs.text)


def test_scaling_bullet_speaks_of_every_device_count_and_names_low_series():
    report = build_report(scaling_records())
    obs = _only(report, "Scaling")
    t = report.table(obs.refs[0].table)
    for col in ("2 devices", "4 devices"):
        values = [r[t.column_index(col)].value for r in t.rows[:-1] if r[t.column_index(col)].is_number]
        cells = [c for ref, c in zip(obs.refs, _cells(report, obs), strict=True) if ref.column == col]
        assert min(values) in [c.value for c in cells] and max(values) in [c.value for c in cells]
    assert "95.0% at 2 devices (range 95.0%–95.0% over 4 series)" in obs.text
    assert "90.0% at 4 devices (range 90.0%–90.0% over 3 series)" in obs.text
    assert verdict(t.cell("median", "4 devices").value) in obs.text
    assert "Below 75%" not in obs.text


def test_a_poor_two_device_series_is_news_even_when_more_devices_ran():
    recs = scaling_records() + [record("alexnet", "m-slow", 100.0), record("alexnet", "m-slow", 100.0, num_devices=2)]
    obs = _only(build_report(recs), "Scaling")
    assert "Below 75%: alexnet · m-slow at 2 devices (1.00× · 50.0%)" in obs.text


@pytest.mark.parametrize("median, expected", [(0.95, "near-linear"), (0.8, "good"), (0.6, "moderate"),
                                              (0.3, "poor")])
def test_scaling_verdict_words(median, expected):
    assert verdict(median).startswith(expected)


def _precision_records(ratios, spread=0.0):
    recs = []
    for i, r in enumerate(ratios):
        machine = f"box{i}"
        for k in (-1, 1) if spread else (0,):
            recs.append(record(machine=machine, ips=100.0 * r * (1 + k * spread / 2), precision="amp_fp16"))
            recs.append(record(machine=machine, ips=100.0 * (1 + k * spread / 2)))
    return recs


def test_effect_within_noise_is_no_significant_effect():
    report = build_report(_precision_records([1.02, 1.01, 0.99]))
    obs = _only(report, "amp_fp16 vs fp32")
    assert "median 1.01 over 3 pairs (range 0.99–1.02)" in obs.text
    assert "no significant effect (0 of 3 pairs significant; the median is within the 3.0% minimum effect)" \
        in obs.text
    [median_ref] = [r for r in obs.refs if r.column == "median"]
    assert report.table(median_ref.table).cell(median_ref.row, "median").text == "1.01"


def test_effect_beyond_noise_is_named_with_its_size():
    report = build_report(_precision_records([1.05, 1.06, 1.04]))
    obs = _only(report, "amp_fp16 vs fp32")
    assert "amp_fp16 is 5.0% faster than fp32" in obs.text
    report = build_report(_precision_records([1.6, 1.7, 1.5]))
    assert "amp_fp16 is 1.60× as fast as fp32" in _only(report, "amp_fp16 vs fp32").text
    report = build_report(_precision_records([0.9, 0.9, 0.9]))
    assert "amp_fp16 is 10.0% slower than fp32" in _only(report, "amp_fp16 vs fp32").text


def test_repeat_spread_makes_an_effect_insignificant():
    tight = build_report(_precision_records([1.05, 1.05, 1.05]))
    assert "amp_fp16 is 5.0% faster than fp32 (3 of 3 pairs significant)" in _only(tight, "amp_fp16 vs fp32").text
    # two repeats per side spreading ±4%: a 5% difference is within what repeats do
    noisy = build_report(_precision_records([1.05, 1.05, 1.05], spread=0.08))
    text = _only(noisy, "amp_fp16 vs fp32").text
    assert "no significant effect (0 of 3 pairs significant)" in text
    t = noisy.table(_only(noisy, "amp_fp16 vs fp32").refs[0].table)
    assert [row[1].text for row in t.rows[:-1]] == ["1.05 n.s."] * 3
    assert any("n.s. not significant: a t-test" in n for n in t.notes)
    explicit = build_report(_precision_records([1.05, 1.05, 1.05]), ReportOptions(noise=0.06))
    assert "the median is within the 6.0% minimum effect" in _only(explicit, "amp_fp16 vs fp32").text


def test_fastest_machine_is_said_once_and_points_at_the_row_maximum():
    report = build_report(scaling_records())
    obs = _only(report, "Fastest machine")
    assert obs.text == "Fastest machine: m-fast, for every model (2 models, 5 comparisons)."
    assert obs.text.count("m-fast") == 1
    for ref in obs.refs:
        t = report.table(ref.table)
        row = t.row(ref.row)
        best = max(c.value for c in row[t.label_columns:] if c.is_number)
        assert t.cell(ref.row, ref.column).value == best


def test_fastest_machine_counts_models_and_batch_series_apart():
    """A batch sweep gives a model a row per batch size: 2 models at 3 batch sizes are 2 models
    and 6 series, not "6 models" (issue 20 item 9)."""
    recs = [record(model, machine, ips * (1 + batch / 1000), batch_size=batch)
            for model in ("resnet50", "vgg16") for batch in (32, 64, 128)
            for machine, ips in (("m-fast", 400.0), ("m-slow", 300.0))]
    report = build_report(recs)
    obs = _only(report, "Fastest machine")
    assert obs.text == ("Fastest machine: m-fast, for every model and batch "
                        "(2 models, 6 model × batch series, 6 comparisons).")
    [t] = [report.table(r.table) for r in obs.refs[:1]]
    assert len({r.row for r in obs.refs}) == len(t.rows) == 6  # the series are the table's rows


def test_fastest_machines_are_grouped_by_winner():
    recs = [record("resnet50", "m-fast", 400.0), record("resnet50", "m-slow", 300.0),
            record("vgg16", "m-fast", 100.0), record("vgg16", "m-slow", 200.0),
            record("alexnet", "m-fast", 900.0), record("alexnet", "m-slow", 800.0)]
    obs = _only(build_report(recs), "Fastest machine per model")
    assert obs.text.startswith("Fastest machine per model: m-fast for alexnet (900.0 images/sec")
    assert "resnet50 (400.0 images/sec in syn-replicated-1gpus); m-slow for vgg16" in obs.text
    assert obs.text.count("m-fast") == 1


def test_fastest_with_one_configuration_quotes_the_figure():
    report = build_report([record(machine="m-fast", ips=757.49), record(machine="m-slow", ips=726.86)])
    obs = _only(report, "Fastest machine per model")
    assert "m-fast for resnet50 (757.5 images/sec in syn-replicated-1gpus)" in obs.text


def test_failures_are_counted_from_status_cells():
    recs = scaling_records() + [record("alexnet", "m-fast", status="error"), record("alexnet", "m-slow", 50.0),
                                record("alexnet", "m-slow", status="timeout")]
    report = build_report(recs)
    obs = _only(report, "Failures")
    assert obs.text.startswith("Failures: 2 cells where every repeat failed (1 OOM, 1 error)") or \
        obs.text.startswith("Failures: 2 cells where every repeat failed (1 error, 1 OOM)")
    assert "1 more cell had some repeats fail" in obs.text
    cells = _cells(report, obs)
    assert sorted(c.text for c in cells if isinstance(c.value, str)) == ["OOM", "error"]
    assert [c.text for c in cells if c.is_number] == ["50.00 (1/2 timeout)"]


def test_no_failures_no_failure_bullet_and_no_canned_text_for_single_figure():
    report = build_report([record()])
    assert report.observations == []
    assert any("Nothing to observe" in getattr(b, "text", "") for b in report.blocks)


def test_implementation_ratio_bullet():
    recs = [record(ips=228.0), record(ips=225.73, source="tf_cnn_benchmarks", compile=None),
            record(ips=427.0, num_devices=2), record(ips=424.54, num_devices=2, source="tf_cnn_benchmarks",
                                                     compile=None)]
    obs = _only(build_report(recs), "Implementations")
    assert "cnnbench / tf_cnn_benchmarks: median ratio 1.01 over 2 side-by-side results" in obs.text
