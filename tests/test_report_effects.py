"""Effect tables: "speedup from A vs B" over pairs that agree on every other field."""

from __future__ import annotations

import pytest

from cnnbench.analysis import fields as F
from cnnbench.analysis.points import build_points
from cnnbench.cli import main
from cnnbench.report import ReportError, ReportOptions, build_report
from cnnbench.report.tables.effects import compute_effects, default_effect_fields
from tests.report_fixtures import record, scaling_records, write_store


def _effects(report):
    return [t for t in report.tables if t.kind == "effect"]


def data_records():
    """resnet50/vgg16 x 1/2 devices on m-fast, synthetic and real data; plus strays that must not pair."""
    recs = []
    for model, base in (("resnet50", 400.0), ("vgg16", 250.0)):
        for n in (1, 2):
            recs.append(record(model, ips=base * n, num_devices=n))
            recs.append(record(model, ips=base * n * 0.8, num_devices=n, data_name="imagenet"))
    # differs in data AND batch size: no partner that agrees on everything else
    recs.append(record("resnet50", ips=999.0, num_devices=4, batch_size=32, data_name="imagenet"))
    recs.append(record("resnet50", ips=111.0, num_devices=4, batch_size=64))
    return recs


def test_pairs_agree_on_every_other_field():
    points = build_points(data_records())
    [effect], _ = compute_effects(points, ["config.data_name"], {}, 0.03)
    assert (effect.a, effect.b) == ("synthetic", "imagenet")
    assert len(effect.pairs) == 4
    # every pair's two sides share every identity field except the effect's
    index = {id(p.measure): p for p in points.points}
    for pair in effect.pairs:
        pa, pb = index[id(pair.a)], index[id(pair.b)]
        diff = {f for f in points.key_fields if pa.values.get(f) != pb.values.get(f)}
        assert diff == {"config.data_name"}
    assert all(r == pytest.approx(1.25) for r in effect.ratios)


def test_effect_table_rows_devices_columns_pairs_and_median():
    report = build_report(data_records(), ReportOptions(effects=["data"]))
    [t] = _effects(report)
    assert t.title == "Speedup from synthetic vs imagenet"
    assert t.columns == ["num_devices", "resnet50", "vgg16", "median"]
    assert [r[0].text for r in t.rows] == ["1", "2", "all"]
    assert t.cell("1", "resnet50").value == pytest.approx(1.25)
    assert t.cell("all", "median").text == "1.25"
    assert "4" not in [r[0].text for r in t.rows]  # the strays had no partner


def test_median_over_pairs_with_odd_and_even_counts():
    recs = []
    for i, (a, b) in enumerate([(110.0, 100.0), (130.0, 100.0), (120.0, 100.0)]):
        recs += [record(f"m{i}", ips=a, precision="amp_fp16"), record(f"m{i}", ips=b)]
    [t] = _effects(build_report(recs, ReportOptions(effects=["precision"])))
    assert t.title == "Speedup from amp_fp16 vs fp32"
    assert t.cell("all", "median").value == pytest.approx(1.2)
    recs += [record("m3", ips=150.0, precision="amp_fp16"), record("m3", ips=100.0)]
    [t] = _effects(build_report(recs, ReportOptions(effects=["precision"])))
    assert t.cell("all", "median").value == pytest.approx(1.25)  # (1.2 + 1.3) / 2


def test_machine_effect_pairs_the_same_configuration_on_two_machines():
    points = build_points(scaling_records())
    [effect], _ = compute_effects(points, ["environment.gpu_model"], {}, 0.03)
    assert (effect.a, effect.b) == ("GPU-P100", "GPU-K80")
    assert effect.row_field == F.DEVICES
    # vgg16 at 4 devices: OOM on the K80 machine, shown, not counted
    assert effect.table.cell("4", "vgg16").text == "GPU-K80: OOM"
    assert len(effect.ratios) == 5
    assert effect.table.cell("1", "resnet50").value == pytest.approx(2.0)


def test_default_effects_are_the_two_valued_fields_without_duplicates():
    recs = data_records()[:-2] + [record("resnet50", "m-slow", ips=200.0)]
    points = build_points(recs)
    fields = default_effect_fields(points)
    # model and data take two values; machine and gpu split points the same way: gpu is kept
    assert fields == ["config.model", "config.data_name", "environment.gpu_model"]
    assert F.DEVICES not in fields


def test_default_effects_skip_fields_only_one_source_records():
    recs = [record(ips=100.0), record(ips=95.0, source="tf_cnn_benchmarks", compile=None)]
    assert default_effect_fields(build_points(recs)) == ["source"]


def test_more_than_two_values_compare_with_a_baseline():
    recs = [record(ips=v, batch_size=b) for b, v in ((32, 100.0), (64, 150.0), (128, 180.0))]
    report = build_report(recs, ReportOptions(effects=["batch_size"]))
    assert [t.title for t in _effects(report)] == ["Speedup from batch_size=64 vs batch_size=32",
                                                   "Speedup from batch_size=128 vs batch_size=32"]
    report = build_report(recs, ReportOptions(effects=["batch_size"], baselines={"batch_size": "64"}))
    titles = [t.title for t in _effects(report)]
    assert titles == ["Speedup from batch_size=32 vs batch_size=64", "Speedup from batch_size=128 vs batch_size=64"]
    assert _effects(report)[1].cell("all", "median").value == pytest.approx(1.2)


def test_a_field_of_three_values_says_how_to_ask_for_its_effects():
    """A third batch size made the batch size's effect table go without a word."""
    from cnnbench.report.document import Bullets

    recs = [record(model=m, batch_size=b, ips=100.0 * b) for m in ("resnet50", "vgg16") for b in (32, 64, 128)]
    notes = [t for block in build_report(recs).blocks if isinstance(block, Bullets) for t in block.items]
    assert ("batch_size takes 3 values (32, 64, 128): an effect table compares two, so none is made for it unasked; "
            "--effect batch_size --baseline batch_size=32 compares each other value with 32.") in notes, notes
    asked = build_report(recs, ReportOptions(effects=["batch_size"], baselines={"batch_size": "32"}))
    assert [t.id for t in asked.tables if t.kind == "effect"] == [
        "effect-batch_size-64-vs-32", "effect-batch_size-128-vs-32"]
    two = [r for r in recs if r["config"]["batch_size"] != 128]
    assert not any("takes 3 values" in t for b in build_report(two).blocks if isinstance(b, Bullets) for t in b.items)
    # none pairs with the lowest, two others do: the note names one of those as the baseline
    some = [record(model="resnet50", batch_size=b, ips=100.0 * b) for b in (64, 128)]
    some.append(record(model="vgg16", batch_size=32, ips=50.0))
    notes = [t for block in build_report(some).blocks if isinstance(block, Bullets) for t in block.items]
    assert any("--effect batch_size --baseline batch_size=64 " in t for t in notes), notes
    # three values, but no two results that differ in it alone (each model at its own batch): nothing to ask for
    apart = [record(model=m, batch_size=b, ips=100.0) for m, b in (("resnet50", 32), ("vgg16", 64), ("alexnet", 128))]
    assert not any("takes 3 values" in t for b in build_report(apart).blocks if isinstance(b, Bullets)
                   for t in b.items)


def test_bad_baseline_and_unpaired_explicit_effect_are_explained():
    recs = [record(ips=100.0, batch_size=32), record(ips=100.0, batch_size=64)]
    with pytest.raises(ReportError, match=r"--baseline batch_size=48: not a value of batch_size in these results "
                                          r"\(values: 32, 64\)"):
        build_report(recs, ReportOptions(effects=["batch_size"], baselines={"batch_size": "48"}))
    recs = [record(ips=100.0, batch_size=32), record(ips=120.0, batch_size=64, precision="fp16")]
    report = build_report(recs, ReportOptions(effects=["precision", "compile"]))
    assert not _effects(report)
    text = "\n".join(i for b in report.blocks if hasattr(b, "items") for i in b.items)
    assert "fp16 vs fp32: no two results agree on every other field" in text
    assert "they differ in batch_size (1 result) (--ignore batch_size pairs results whatever their batch_size)" \
        in text
    assert "compile takes one value" in text


def test_software_version_effect_keeps_the_machine():
    recs = [record("resnet50", m, ips=v, environment={"torch_version": t})
            for m, t, v in (("m-fast", "2.4", 100.0), ("m-fast", "2.5", 90.0), ("m-slow", "2.4", 50.0))]
    [t] = _effects(build_report(recs, ReportOptions(effects=["torch_version"], baselines={"torch_version": "2.4"})))
    assert t.title == "Speedup from torch_version=2.5 vs torch_version=2.4"
    assert t.cell("all", "median").value == pytest.approx(0.9)
    assert t.columns == ["", "all", "median"]


def test_a_baseline_no_effect_uses_is_said_in_one_line(tmp_path, capsys):
    recs = [record(ips=100.0), record(ips=150.0, precision="amp_fp16"), record(ips=110.0, machine="m-slow")]
    report = build_report(recs, ReportOptions(effects=["machine"], baselines={"precision": "amp_fp16"}))
    assert report.warnings == ["--baseline precision=amp_fp16 is not used: no effect table compares precision "
                               "(add --effect precision)."]
    one = build_report([record(ips=100.0)], ReportOptions(baselines={"precision": "fp32"}))
    assert one.warnings == ["--baseline precision=fp32 is not used: precision takes one value in these results."]
    store = write_store(tmp_path / "results", recs)
    assert main(["report", str(store), "-o", str(tmp_path / "out"), "--effect", "machine",
                 "--baseline", "precision=amp_fp16", "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: --baseline precision=amp_fp16 is not used")


def test_effect_columns_of_one_device_runs_do_not_name_ddp_knobs():
    recs = []
    for i, bucket in enumerate((25, 50)):
        recs.append(record("resnet50", f"box{i}", 100.0, bucket_cap_mb=bucket))
        recs.append(record("resnet50", f"box{i}", 150.0, precision="amp_fp16", bucket_cap_mb=bucket))
        recs.append(record("vgg16", f"box{i}", 100.0, bucket_cap_mb=bucket))
        recs.append(record("vgg16", f"box{i}", 150.0, precision="amp_fp16", bucket_cap_mb=bucket))
    [t] = _effects(build_report(recs, ReportOptions(effects=["precision"])))
    assert not any("bucket_cap_mb" in c for c in t.columns), t.columns
