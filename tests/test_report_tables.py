"""Report tables from hand-made records: cost, configurations, scaling, implementations, training."""

from __future__ import annotations

import pytest

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import Namer
from cnnbench.analysis.points import build_points
from cnnbench.report import ReportError, ReportOptions, build_report
from cnnbench.report.render.markdown import render_markdown
from cnnbench.report.tables.scaling import scaling_groups
from cnnbench.report.tables.throughput import configuration_sections
from cnnbench.results.naming import case_name
from tests.report_fixtures import record, scaling_records, training_record


def _kind(report, kind):
    return [t for t in report.tables if t.kind == kind]


def test_cost_table_lists_models_with_units_and_tf_names_like_native_ones():
    recs = [record("resnet50"), record("vgg16"), record("alexnet", source="tf_cnn_benchmarks", compile=None),
            record("inception3", source="tf_cnn_benchmarks", compile=None),
            record("inception4", source="tf_cnn_benchmarks", compile=None)]
    t = build_report(recs).table("model-cost")
    assert [r[0].text for r in t.rows] == ["alexnet", "inception3", "inception4", "resnet50", "vgg16"]
    assert t.cell("inception3", "input size").text == "299 x 299"
    assert t.cell("inception3", "params").text == "27.2 M"
    [note] = [n for n in t.notes if n.startswith("Imported tf_cnn_benchmarks models")]
    assert "inception3 = inception_v3 (torchvision's counts include its auxiliary classifier" in note
    # tf's AlexNet is wider than torchvision's (64-192-384-384-256): no borrowed cost, and a note says why
    assert "alexnet" not in note
    assert all(c.text == "—" and c.value is None for c in t.row("alexnet")[1:])
    [why] = [n for n in t.notes if n.startswith("Imported tf_cnn_benchmarks alexnet: no cost")]
    assert "64-192-384-384-256" in why
    assert all(c.text == "—" and c.value is None for c in t.row("inception4")[1:])  # timm: not measured
    assert t.cell("resnet50", "input size").text == "224 x 224"
    assert t.cell("resnet50", "param memory (MiB)").text == "97.5"
    assert t.cell("resnet50", "forward MACs").text == "4.1 GMACs"
    assert t.cell("resnet50", "forward FLOPs").text == "8.2 GFLOPs"
    assert t.cell("resnet50", "top-1 / top-5 error (%)").text == "23.87 / 7.14"


def test_no_cost_table_when_no_record_has_a_cost():
    report = build_report([record(cost=False)])
    assert not _kind(report, "cost")


def test_configuration_table_rows_models_columns_machines_and_status_cells():
    recs = [
        record("resnet50", "m-fast", 400.0), record("resnet50", "m-slow", 200.0),
        record("vgg16", "m-fast", status="oom"), record("vgg16", "m-slow", status="error"),
        record("alexnet", "m-fast", 900.0), record("alexnet", "m-slow", status="timeout"),
        record("inception3", "m-fast", 300.0),
    ]
    [t] = _kind(build_report(recs), "configuration")
    assert t.title == "syn-replicated-1gpus"
    assert t.columns == ["model", "batch", "m-fast", "m-slow"]
    assert [r[0].text for r in t.rows] == ["alexnet", "inception3", "resnet50", "vgg16"]
    assert t.cell("resnet50", "m-fast").text == "400.0"
    assert t.cell("vgg16", "m-fast").text == "OOM" and t.cell("vgg16", "m-fast").value == "OOM"
    assert t.cell("vgg16", "m-slow").text == "error"
    assert t.cell("alexnet", "m-slow").text == "timeout"
    missing = t.cell("inception3", "m-slow")
    assert missing.text == "—" and missing.value is None
    assert t.cell("resnet50", "batch").value == 64
    for row in t.rows:  # never a 0 for a failed or missing cell
        for c in row[2:]:
            assert c.value != 0 and c.text not in ("0", "0.00")


def test_ok_record_without_throughput_is_missing_not_zero():
    recs = [record("resnet50", "m-fast", None), record("resnet50", "m-slow", 0.0)]
    [t] = _kind(build_report(recs), "configuration")
    assert t.cell("resnet50", "m-fast").text == "—"
    assert t.cell("resnet50", "m-slow").text == "—"


def test_repeats_fold_to_median_with_spread_and_partial_failures():
    recs = [record(ips=v) for v in (100.0, 106.0, 101.0)]  # relative stdev 3.1% > 2% (half the range: 3.0%)
    recs += [record(machine="m-slow", ips=v) for v in (50.0, 50.5)]  # relative stdev 0.7%: not shown
    recs += [record(machine="m-slow", status="oom")]
    [t] = _kind(build_report(recs), "configuration")
    fast = t.cell("resnet50", "m-fast")
    assert fast.value == 101.0 and fast.text == "101.0 ±3.1%"
    slow = t.cell("resnet50", "m-slow")
    assert slow.value == 50.25 and slow.text == "50.25 (1/3 OOM)" and slow.failed_repeats == 1
    wider = build_report(recs, ReportOptions(repeat_noise=0.05))
    assert _kind(wider, "configuration")[0].cell("resnet50", "m-fast").text == "101.0"


def test_seed_and_step_counts_do_not_split_repeats():
    recs = [record(ips=100.0, seed=1, num_batches=50), record(ips=110.0, seed=2, num_batches=200)]
    [t] = _kind(build_report(recs), "configuration")
    assert t.cell("resnet50", "m-fast").value == 105.0


def test_batch_size_per_machine_goes_into_cells_and_batch_sweep_into_rows():
    recs = [record("alexnet", "m-fast", 900.0, batch_size=2048), record("alexnet", "m-slow", 400.0, batch_size=448)]
    recs += [record("vgg16", "m-fast", 100.0, batch_size=32), record("vgg16", "m-fast", 120.0, batch_size=64)]
    [t] = _kind(build_report(recs), "configuration")
    assert t.cell("alexnet", "batch").text == "varies"
    assert t.cell("alexnet", "m-slow").text == "400.0 (batch 448)"
    assert t.cell("vgg16, batch 32", "m-fast").value == 100.0
    assert t.cell("vgg16, batch 64", "m-fast").value == 120.0
    assert t.cell("vgg16, batch 64", "m-slow").text == "—"


def test_one_section_per_configuration_named_like_seed_000():
    recs = []
    for data, vu, ar, dist in [("synthetic", "parameter_server", None, False),
                               ("synthetic", "replicated", "gloo", False),
                               ("imagenet", "replicated", None, True), ("imagenet", "parameter_server", None, False)]:
        for m in ("m-fast", "m-slow"):
            recs.append(record("resnet50", m, 100.0, num_devices=4, data_name=data, variable_update=vu,
                               all_reduce=ar, distortions=dist))
    titles = {t.title for t in _kind(build_report(recs), "configuration")}
    assert titles == {"syn-parameter_server-4gpus", "syn-replicated-gloo-4gpus",
                      "real-replicated-distortions-4gpus", "real-parameter_server-4gpus"}
    points = build_points(recs)
    namer = Namer(points, exclude=(F.MODEL, F.BATCH, F.MACHINE))
    for p in points.points:
        cfg = {k.split(".", 1)[1]: v for k, v in p.values.items() if k.startswith("config.")}
        assert namer.name(p.values) == case_name(cfg)


def test_the_devices_own_all_reduce_is_not_named_for_cnnbench_records():
    assert case_name({"variable_update": "replicated", "all_reduce": "nccl", "device": "cuda", "num_devices": 4}) \
        == "syn-replicated-4gpus"
    assert case_name({"variable_update": "replicated", "all_reduce": "gloo", "device": "cpu", "num_devices": 2}) \
        == "syn-replicated-2cpus"
    assert case_name({"variable_update": "replicated", "all_reduce": "gloo", "device": "cuda", "num_devices": 4}) \
        == "syn-replicated-gloo-4gpus"
    tf = {"variable_update": "replicated", "all_reduce": "nccl", "device": "cuda", "num_devices": 4}
    assert case_name(tf, source="tf_cnn_benchmarks") == "syn-replicated-nccl-4gpus"


def test_precision_and_mode_named_when_they_vary():
    recs = [record(precision=p, forward_only=f, ips=100.0) for p in ("fp32", "amp_fp16") for f in (False, True)]
    titles = {t.title for t in _kind(build_report(recs), "configuration")}
    assert titles == {"syn-replicated-fp32-1gpus", "syn-replicated-amp_fp16-1gpus",
                      "syn-replicated-fp32-1gpus-inference", "syn-replicated-amp_fp16-1gpus-inference"}


def test_columns_by_gpu_fold_machines_with_the_same_gpu():
    recs = [record(machine="a1", ips=100.0, environment={"gpu_model": "A100"}),
            record(machine="a2", ips=110.0, environment={"gpu_model": "A100"}),
            record(machine="h1", ips=300.0, environment={"gpu_model": "H100"})]
    [t] = _kind(build_report(recs, ReportOptions(columns="gpu")), "configuration")
    assert t.columns == ["model", "batch", "A100", "H100"]
    assert t.cell("resnet50", "A100").value == 105.0


def test_columns_by_num_devices_and_sections_per_machine():
    sections = configuration_sections(build_points(scaling_records()), F.DEVICES, 0.03)
    assert {s.name for s in sections} == {"syn-replicated-Ngpus on m-fast", "syn-replicated-Ngpus on m-slow"}
    slow = next(s.table for s in sections if s.name.endswith("m-slow"))
    assert slow.columns == ["model", "batch", "1", "2", "4"]
    assert slow.cell("vgg16", "4").text == "OOM"


def test_unknown_column_field_is_a_one_line_error():
    with pytest.raises(ReportError, match="unknown field 'machin'.*machine"):
        build_report([record()], ReportOptions(columns="machin"))


def test_scaling_speedup_and_efficiency_in_one_printed_table():
    report = build_report(scaling_records())
    [long] = _kind(report, "scaling")
    [summary] = _kind(report, "scaling-summary")
    assert summary.title == "Scaling: syn-replicated-Ngpus"
    assert summary.columns == ["series", "batch", "images/sec, 1 device", "2 devices", "4 devices"]
    assert [r[0].text for r in summary.rows] == ["resnet50 · m-fast", "resnet50 · m-slow", "vgg16 · m-fast",
                                                 "vgg16 · m-slow", "median"]
    assert summary.cell("resnet50 · m-fast", "4 devices").value == pytest.approx(0.90)
    assert summary.cell("resnet50 · m-fast", "4 devices").text == "3.60× · 90.0%"
    assert summary.cell("resnet50 · m-fast", "images/sec, 1 device").text == "400.0"
    assert summary.cell("vgg16 · m-slow", "4 devices").text == "OOM"
    assert summary.cell("median", "2 devices").value == pytest.approx(0.95)
    # the long form (images/sec, speedup, efficiency per device count) is written, not printed
    assert long.written and not summary.written
    rows = [r for r in long.rows if r[0].text == "vgg16" and r[1].text == "m-slow"]
    assert [r[3].value for r in rows] == [1, 2, 4]
    assert rows[-1][4].text == "OOM" and rows[-1][5].text == "OOM"
    md = render_markdown(report)
    # the figures of a series appear once, not in three tables (efficiency, speedup, long form)
    assert "Scaling efficiency" not in md and "Scaling speedup" not in md and "| resnet50 | m-fast | 64 | 4 |" not in md
    assert md.count("| resnet50 · m-fast | 64 | 400.0 | 1.90× · 95.0% | 3.60× · 90.0% |") == 1
    [glance] = _kind(report, "scaling-overview")
    assert glance.cell("syn-replicated-Ngpus", "4 devices").value == pytest.approx(0.90)


def test_scaling_base_is_smallest_device_count_that_ran():
    recs = [record(ips=190.0, num_devices=2), record(ips=360.0, num_devices=4), record(status="oom", num_devices=1)]
    [g] = scaling_groups(build_points(recs), 0.03)
    [s] = g.series
    assert s.base == 2
    assert s.speedup[4] == pytest.approx(360 / 190)
    assert s.efficiency[4] == pytest.approx(360 / 190 / 2)
    assert "smallest device count" in g.table.notes[0]


def test_implementations_side_by_side_per_device_count():
    recs = [record(ips=v, num_devices=n) for n, v in ((1, 228.0), (2, 427.0))]
    recs += [record(ips=v, num_devices=n, source="tf_cnn_benchmarks", compile=None)
             for n, v in ((1, 225.73), (2, 424.54))]
    recs += [record(ips=240.0, compile=True)]
    [t] = _kind(build_report(recs), "implementation")
    assert t.columns == ["devices", "cnnbench (eager)", "cnnbench (compile)", "tf_cnn_benchmarks"]
    assert t.cell("1", "tf_cnn_benchmarks").value == 225.73
    assert t.cell("2", "cnnbench (compile)").text == "—"
    two = build_report(recs[:4])
    [t2] = _kind(two, "implementation")
    assert t2.columns[-1] == "cnnbench / tf_cnn_benchmarks"
    assert t2.cell("1", "cnnbench / tf_cnn_benchmarks").value == pytest.approx(228.0 / 225.73)


def test_no_implementation_table_for_one_source_and_backend():
    assert not _kind(build_report(scaling_records()), "implementation")


def test_training_to_accuracy_table_in_seed_004_layout():
    recs = [training_record(n) for n in (1, 2, 4)] + [training_record(2, seconds_per_epoch=120.0)]
    report = build_report(recs)
    [t] = _kind(report, "training")
    assert t.columns == ["", "GPU (1)", "GPU (2)", "GPU (4)"]
    assert [r[0].text for r in t.rows] == ["Training time (s)", "Average time per epoch (s)", "Images/sec",
                                           "Training accuracy", "Test accuracy",
                                           "Maximum device memory per device (MiB)",
                                           "Maximum device memory, total over devices (MiB)"]
    assert t.cell("Training time (s)", "GPU (1)").value == 300.0
    assert t.cell("Average time per epoch (s)", "GPU (2)").value == pytest.approx((50.0 + 60.0) / 2)  # median
    assert t.cell("Test accuracy", "GPU (4)").text == "0.650"
    assert t.cell("Maximum device memory per device (MiB)", "GPU (4)").value == pytest.approx(1020)
    assert t.cell("Maximum device memory, total over devices (MiB)", "GPU (4)").value == pytest.approx(1020 * 4)
    [fig] = [f for f in report.figures if f.kind == "training"]
    assert set(fig.data["curves"]) == {"1 gpu", "2 gpus", "4 gpus"}
    assert fig.data["curves"]["1 gpu"] == [(100.0, 0.45), (200.0, 0.55), (300.0, 0.65)]


def test_training_table_from_totals_only_and_failed_column():
    ok = record(ips=None, metrics={"total_time_s": 50.0, "train_accuracy": 0.9, "test_accuracy": 0.8},
                data_name="cifar10", num_epochs=2)
    bad = record(status="oom", num_devices=2, data_name="cifar10", num_epochs=2,
                 metrics={"test_accuracy": None})
    bad["metrics"]["test_accuracy"] = 0.1  # a failed run's stray value is not shown
    [t] = _kind(build_report([ok, bad]), "training")
    assert t.cell("Training time (s)", "GPU (1)").value == 50.0
    assert t.cell("Average time per epoch (s)", "GPU (1)").text == "—"
    assert t.cell("Test accuracy", "GPU (2)").text == "OOM"


def test_columns_by_batch_size_and_not_by_model():
    recs = [record(ips=100.0, batch_size=32), record(ips=150.0, batch_size=64)]
    [t] = _kind(build_report(recs, ReportOptions(columns="batch_size")), "configuration")
    assert t.columns == ["model", "32", "64"]  # each column names its batch: no "batch" column reading "varies"
    assert t.cell("resnet50", "64").text == "150.0"
    with pytest.raises(ReportError, match="rows are the models"):
        build_report(recs, ReportOptions(columns="model"))


def test_implementations_name_the_synthetic_input_location_where_it_varies():
    recs = [record(ips=v, synthetic_location=loc) for loc, v in (("device", 228.0), ("host", 227.0),
                                                                  ("loader", 219.0))]
    recs += [record(ips=225.73, source="tf_cnn_benchmarks", compile=None, synthetic_location=None)]
    [t] = _kind(build_report(recs), "implementation")
    assert t.columns == ["devices", "cnnbench (input on device)", "cnnbench (input on host)",
                         "cnnbench (input on loader)", "tf_cnn_benchmarks"]
    assert [c.value for c in t.row("1")[1:]] == [228.0, 227.0, 219.0, 225.73]


def test_a_missing_precision_is_left_out_of_the_name():
    recs = [record(precision=None, ips=100.0), record(precision="amp_fp16", ips=150.0)]
    titles = {t.title for t in _kind(build_report(recs), "configuration")}
    assert titles == {"syn-replicated-1gpus", "syn-replicated-amp_fp16-1gpus"}


def test_a_training_only_field_is_not_named_when_the_mode_names_it():
    # tf_cnn_benchmarks logs: training runs record their optimizer, inference runs none
    recs = [record(ips=100.0, optimizer="sgd"), record(ips=300.0, forward_only=True, optimizer=None)]
    titles = sorted(t.title for t in build_report(recs).tables if t.kind == "configuration")
    assert titles == ["syn-replicated-1gpus", "syn-replicated-1gpus-inference"]
    # a field that varies within one mode is still named
    recs.append(record(ips=90.0, optimizer="momentum"))
    titles = sorted(t.title for t in build_report(recs).tables if t.kind == "configuration")
    assert "syn-replicated-1gpus (optimizer=momentum)" in titles


def test_a_plain_log_without_precision_has_no_dash_in_its_name():
    recs = [record(ips=100.0, precision=None), record(ips=200.0, precision="fp16")]
    titles = {t.title for t in build_report(recs).tables if t.kind == "configuration"}
    assert titles == {"syn-replicated-1gpus", "syn-replicated-fp16-1gpus"}
    assert not any("—" in t for t in titles)


def test_training_on_a_cpu_labels_its_memory_as_host_rss():
    recs = []
    for n in (1, 2):
        r = training_record(n)
        r["config"]["device"] = "cpu"
        for e in r["metrics"]["epochs"]:
            e["peak_host_memory_bytes"] = 3000 * 2**20
        recs.append(r)
    [t] = _kind(build_report(recs), "training")
    labels = [r[0].text for r in t.rows]
    assert "Maximum host memory per worker, RSS (MiB)" in labels and not any("device memory" in x for x in labels)
    assert t.cell("Maximum host memory per worker, RSS (MiB)", "CPU (1)").value == 3000
    assert t.cell("Maximum host memory, total over workers, RSS (MiB)", "CPU (1)").value == 3000
    assert any("resident memory of each worker process" in n for n in t.notes)


def test_model_rows_sort_naturally():
    recs = [record(m, ips=100.0) for m in ("resnet101", "resnet18", "vgg16", "resnet50")]
    report = build_report(recs)
    [t] = _kind(report, "configuration")
    assert [r[0].text for r in t.rows] == ["resnet18", "resnet50", "resnet101", "vgg16"]


def test_memory_of_tiny_and_large_models_reads_in_mib_as_the_column_says():
    from cnnbench.report.tables.cost import _mib

    assert _mib(0.02).text == "0.0200"  # the column's unit, never switched to KiB or GiB
    assert _mib(0.02).value == 0.02
    assert _mib(97.49).text == "97.5"
    assert _mib(527.79).text == "528"
    assert _mib(2048.0).text == "2,048"
