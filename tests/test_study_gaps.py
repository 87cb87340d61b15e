"""Issue 20, items 4, 5, 7 and 8: memory as the studies count it, model cost as its readers
expect, configuration names people recognise, and --local-parameter-device refused on a CPU."""

from __future__ import annotations

import subprocess
import sys

import pytest

import cnnbench
from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.engine.metrics import WorkerMeasure, measured_metrics
from cnnbench.report.build import build_report
from cnnbench.report.document import Paragraph
from tests.report_fixtures import record

MIB = 2**20


def _tables(report, kind):
    return [t for t in report.tables if t.kind == kind]


def _common_line(report) -> str:
    [line] = [b.text for b in report.blocks if isinstance(b, Paragraph) and b.text.startswith("Common to all")]
    return line


# --------------------------------------------------------------------------- 4: memory


def _worker(peak_mib: float) -> WorkerMeasure:
    hooks = {"peak_device_memory_bytes": int(peak_mib * MIB), "peak_device_reserved_bytes": int(peak_mib * MIB),
             "peak_host_memory_bytes": 2000 * MIB}
    return WorkerMeasure([0.1, 0.1], 0.2, 0.0, 0.0, [1.0, 1.0], images=8, hook_metrics=hooks)


def test_memory_peaks_are_kept_per_device_and_summed_over_workers():
    m = measured_metrics([_worker(719), _worker(721)], 4, first_step_s=None, compiled=False, check_spread=False)
    assert m["peak_device_memory_bytes"] == 721 * MIB  # per device: the largest worker's
    assert m["peak_device_memory_total_bytes"] == (719 + 721) * MIB  # what the run held in all
    assert m["peak_host_memory_total_bytes"] == 4000 * MIB
    one = measured_metrics([_worker(719)], 4, first_step_s=None, compiled=False, check_spread=False)
    assert one["peak_device_memory_total_bytes"] == one["peak_device_memory_bytes"] == 719 * MIB


def _training(num_devices: int, per_device_mib: float) -> dict:
    metrics = {"epochs": [{"epoch": 1, "time_s": 10.0, "test_accuracy": 0.5}], "total_time_s": 10.0,
               "test_accuracy": 0.5, "peak_device_memory_bytes": per_device_mib * MIB,
               "peak_device_memory_total_bytes": per_device_mib * MIB * num_devices}
    return record(ips=100.0 * num_devices, num_devices=num_devices, data_name="cifar10", num_epochs=1,
                  metrics=metrics)


def test_training_table_shows_memory_per_device_and_in_total_labelled():
    [t] = _tables(build_report([_training(1, 719), _training(2, 721)]), "training")
    per_device, total = "Maximum device memory per device (MiB)", "Maximum device memory, total over devices (MiB)"
    assert (t.cell(per_device, "GPU (1)").value, t.cell(per_device, "GPU (2)").value) == (719, 721)
    assert (t.cell(total, "GPU (1)").value, t.cell(total, "GPU (2)").value) == (719, 1442)
    assert any("summed over all of them" in n for n in t.notes)


def test_an_older_multi_device_record_without_a_total_shows_none_rather_than_a_guess():
    old = _training(2, 721)
    del old["metrics"]["peak_device_memory_total_bytes"]
    [t] = _tables(build_report([_training(1, 719), old]), "training")
    assert t.cell("Maximum device memory, total over devices (MiB)", "GPU (2)").text == "—"
    assert t.cell("Maximum device memory, total over devices (MiB)", "GPU (1)").value == 719


# --------------------------------------------------------------------------- 5: model cost


def test_models_takes_several_names_and_patterns_in_the_order_given(capsys):
    assert main(["models", "vgg19", "resnet50", "vgg1[13]", "--format", "csv"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == ["vgg19", "resnet50", "vgg11", "vgg13"]


def test_models_names_the_pattern_that_matches_nothing(capsys):
    assert main(["models", "resnet50", "zzz*"]) == 2
    assert "no model matches 'zzz*'" in capsys.readouterr().err


def test_no_aux_costs_inception_and_googlenet_as_published_tables_do():
    from cnnbench.models.cost import model_cost

    with_aux, without = model_cost("inception_v3"), model_cost("inception3", aux=False)
    assert with_aux.params == 27_161_264 and without.params == 23_834_568
    assert round(without.param_memory_mib) == 91  # the published table's 91 "MB"
    assert without.forward_macs == with_aux.forward_macs  # evaluation never ran the head
    assert without.train_flops < with_aux.train_flops
    assert model_cost("googlenet", aux=False).params == 6_624_904
    assert model_cost("resnet50", aux=False) == model_cost("resnet50")  # no heads: nothing changes


def test_models_no_aux_flag_says_which_rows_it_changed(capsys):
    assert main(["models", "inception_v3", "resnet50", "--no-aux", "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "| inception_v3 | 299x299 | 23.8 | 90.9 |" in out
    assert "inception_v3: without auxiliary heads (--no-aux)" in out and "resnet50: without" not in out


def test_report_cost_table_shows_macs_and_flops_apart_and_memory_in_mib():
    t = build_report([record("resnet50")]).table("model-cost")
    for column in ("param memory (MiB)", "feature memory (MiB)", "forward MACs", "forward FLOPs"):
        assert column in t.columns
    assert t.cell("resnet50", "param memory (MiB)").text == "97.5"
    assert t.cell("resnet50", "forward MACs").text == "4.1 GMACs"
    assert t.cell("resnet50", "forward FLOPs").text == "8.2 GFLOPs"
    assert any("FLOPs = 2 x MACs" in n for n in t.notes)


# --------------------------------------------------------------------------- 7: names


def test_real_data_reads_real_whatever_other_records_are_present_and_the_notes_name_the_set():
    cifar = record(data_name="cifar10")
    alone = {t.title for t in _tables(build_report([cifar]), "configuration")}
    with_others = build_report([cifar, record(data_name="imagefolder", num_devices=2), record(num_devices=4)])
    titles = {t.title for t in _tables(with_others, "configuration")}
    assert alone == {"real-replicated-1gpus"}
    assert titles == {"real-replicated-1gpus", "real-replicated-2gpus", "syn-replicated-4gpus"}
    notes = {t.title: t.notes for t in _tables(with_others, "configuration")}
    assert "Data: cifar10 (real)." in notes["real-replicated-1gpus"]
    assert "Data: imagefolder (real)." in notes["real-replicated-2gpus"]
    assert not any(n.startswith("Data:") for n in notes["syn-replicated-4gpus"])


def test_one_device_runs_name_no_gradient_exchange():
    recs = [record(num_devices=n, all_reduce="gloo", bucket_cap_mb=b) for n in (1, 2) for b in (25.0, 50.0)]
    titles = {t.title for t in _tables(build_report(recs[1:]), "configuration")}
    # bucket_cap_mb varies (50 at one device); a one-device name says neither it nor gloo
    assert "syn-replicated-1gpus" in titles
    assert {"syn-replicated-gloo-2gpus", "syn-replicated-gloo-2gpus (bucket_cap_mb=50)"} <= titles


def test_common_line_of_one_device_runs_lists_no_ddp_options():
    ddp = {"bucket_cap_mb": 25.0, "gradient_as_bucket_view": False, "static_graph": False,
           "gradient_compression": "none", "all_reduce": "gloo"}
    line = _common_line(build_report([record(m, device="cpu", **ddp) for m in ("resnet50", "vgg16")]))
    for name in ddp:
        assert name not in line, line
    assert "replicated" in line  # how variables are kept is still said
    two = _common_line(build_report([record(m, device="cpu", num_devices=n, **ddp)
                                     for m in ("resnet50", "vgg16") for n in (1, 2)]))
    assert "bucket_cap_mb=25" in two  # several devices: the exchange is part of what ran


def test_a_real_single_cpu_run_is_named_and_described_without_ddp_detail():
    rec = cnnbench.run(model="trivial", device="cpu", batch_size=2, num_batches=3, num_warmup_batches=1)
    assert rec.status == "ok"
    report = build_report([rec.to_dict()])
    [t] = _tables(report, "configuration")
    assert t.title == "syn-replicated-1cpus"
    line = _common_line(report)
    assert not any(k in line for k in ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph",
                                       "gradient_compression", "all_reduce")), line


# --------------------------------------------------------------------------- 8: --local-parameter-device


def test_local_parameter_device_cpu_on_a_cpu_run_is_refused():
    with pytest.raises(ConfigError) as info:
        RunConfig(model="trivial", device="cpu", num_devices=2, variable_update="parameter_server",
                  local_parameter_device="cpu")
    assert str(info.value).startswith("--local-parameter-device:") and "no effect" in str(info.value)
    RunConfig(model="trivial", device="cuda", variable_update="parameter_server", local_parameter_device="cpu")


def test_local_parameter_device_on_a_cpu_run_is_one_line_before_any_work(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cnnbench", "run", "--model", "trivial", "--device", "cpu",
                           "--variable-update", "parameter_server", "--local-parameter-device", "cpu",
                           "--results-dir", str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--local-parameter-device" in proc.stderr
    assert not (tmp_path / "r").exists()
