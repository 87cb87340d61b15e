"""Importers: tf_cnn_benchmarks logs (real logs, trimmed, in tests/fixtures) and flat CSV tables."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.results.importers import ImportOptions, get_importer, importers
from cnnbench.results.importers.tf_cnn_benchmarks import parse_log, record_from_log
from cnnbench.results.store import read_records

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf_cnn_benchmarks_logs"

# Rows of the published tables that come from the fixture machines' logs.
CSV_ROWS = {
    "3960X-GeForce_RTX_3080_XLA": {1: "RTX 3080", 2: "2x RTX 3080"},
    "LambdaCloud-RTX_A6000": {
        1: "Lambda Cloud — RTX A6000",
        2: "Lambda Cloud — 2x RTX A6000",
        4: "Lambda Cloud — 4x RTX A6000",
    },
}
A6000_4GPU_RESNET50 = "LambdaCloud-RTX_A6000.logs/syn-replicated-fp32-4gpus/resnet50-256/throughput/1"


@pytest.fixture(scope="module")
def imported():
    return get_importer("tf-cnn-benchmarks").run([FIXTURES], ImportOptions())


def test_registry_lists_both_importers():
    assert {"tf-cnn-benchmarks", "csv"} <= set(importers())
    with pytest.raises(KeyError, match="unknown importer 'nope'"):
        get_importer("nope")


@pytest.mark.parametrize("precision,table", [("fp32", "fp32"), ("amp_fp16", "fp16")])
def test_training_figures_equal_the_published_table(imported, precision, table):
    published = {
        row["name_gpu"]: row
        for row in csv.DictReader((FIXTURES / f"lambda-tf-train-throughput-{table}.csv").open(encoding="utf-8"))
    }
    compared = 0
    for rec in imported.records:
        config = rec["config"]
        if config["forward_only"] or config["precision"] != precision:
            continue
        row = published[CSV_ROWS[rec["environment"]["machine"]][config["num_devices"]]]
        assert round(rec["metrics"]["total_images_per_sec"]) == int(row[config["model"]]), rec["source_path"]
        compared += 1
    assert compared == 30  # 5 machine/GPU-count rows x 6 models


def test_header_folder_and_metadata_fields(imported):
    assert imported.problems == []
    assert len(imported.records) == 120
    rec = next(r for r in imported.records if r["source_path"].endswith(A6000_4GPU_RESNET50))
    assert rec["status"] == "ok" and rec["error"] is None
    assert rec["config"] == {
        "model": "resnet50",
        "batch_size": 256,
        "forward_only": False,
        "num_batches": 100,
        "device": "cuda",
        "num_devices": 4,
        "variable_update": "replicated",
        "all_reduce": "nccl",
        "data_format": "NCHW",
        "optimizer": "sgd",
        "data_name": "synthetic",
        "precision": "fp32",
        "distortions": False,
    }
    assert rec["case_name"] == "syn-replicated-nccl-4gpus"
    env = rec["environment"]
    assert env["machine"] == "LambdaCloud-RTX_A6000"
    assert (env["gpu_model"], env["gpu_count"]) == ("RTX A6000", 4)
    assert (env["cuda_version"], env["gpu_driver"], env["framework"]) == ("11.1.105", "460.56", "tensorflow 2.4.1")
    m = rec["metrics"]
    assert m["total_images_per_sec"] == 2039.38
    assert (m["images_per_sec_mean"], m["images_per_sec_stderr"], m["images_per_sec_jitter"]) == (2040.1, 1.9, 11.0)
    assert m["step_series"]["step"] == [1] + list(range(10, 101, 10))
    assert m["step_series"]["images_per_sec"][0] == 2064.2
    assert (m["loss_first"], m["loss_last"]) == (7.815, 7.534)
    assert "step_times_s" not in m  # tf_cnn_benchmarks prints running means, not step times
    assert rec["source"] == "tf_cnn_benchmarks" and rec["source_iteration"] == 1
    assert rec["source_global_batch_size"] == 1024
    assert rec["started_at"] == "2021-04-11T05:28:31+00:00"


def test_inference_fp16_and_the_older_tf_machine(imported):
    rec = next(r for r in imported.records
               if "3960X" in r["source_path"] and "syn-replicated-fp16-1gpus-inference/resnet50" in r["source_path"])
    assert rec["config"]["forward_only"] is True
    assert rec["config"]["precision"] == "amp_fp16"  # tf's --use_fp16 is mixed precision
    assert rec["source_config"] == "syn-replicated-fp16-1gpus-inference"
    assert rec["environment"]["framework"] == "tensorflow 1.15.4"
    assert rec["environment"]["gpu_model"] == "GeForce RTX 3080"
    assert "loss" not in rec["metrics"]["step_series"]
    assert rec["case_name"] == "syn-replicated-1gpus"  # one device: no all-reduce to name


def test_a_diverged_loss_is_null_not_nan(imported):
    rec = next(r for r in imported.records if r["source_path"].endswith(
        "LambdaCloud-RTX_A6000.logs/syn-replicated-fp32-2gpus/alexnet-2048/throughput/1"))
    assert rec["status"] == "ok"
    assert rec["metrics"]["step_series"]["loss"][0] is None
    assert "loss_last" not in rec["metrics"]


def _fixture_text() -> str:
    return (FIXTURES / A6000_4GPU_RESNET50).read_text()


def test_a_log_without_total_is_an_error_record_never_zero(tmp_path):
    lines = _fixture_text().splitlines()
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("60\timages/sec"))
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines[: cut + 1]) + "\n")
    result = get_importer("tf-cnn-benchmarks").run([log], ImportOptions(machine_label="my-box"))
    (rec,) = result.records
    assert rec["status"] == "error"
    assert "total_images_per_sec" not in rec["metrics"]
    assert "total images/sec" in rec["error"] and "60\timages/sec" in rec["error"]
    assert rec["environment"]["machine"] == "my-box"
    assert rec["config"]["model"] == "resnet50" and rec["config"]["num_devices"] == 4
    assert "precision" not in rec["config"]  # neither the header nor a folder says


def test_an_out_of_memory_log_is_an_oom_record(tmp_path):
    text = _fixture_text().split("Done warm up")[0]
    text += "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor\n"
    log = tmp_path / "oom.log"
    log.write_text(text)
    (rec,) = get_importer("tf-cnn-benchmarks").run([log], ImportOptions()).records
    assert rec["status"] == "oom" and "total_images_per_sec" not in rec["metrics"]
    assert rec["environment"]["machine"] == "unknown"
    assert rec["environment"]["gpu_model"] == "RTX A6000"  # from the log's device lines


def test_parse_a_minimal_plain_log():
    text = (
        "TensorFlow:  1.9\nModel:       vgg16\nDataset:     imagenet\nMode:        training\n"
        "Batch size:  128 global\n             32 per device\nDevices:     ['/gpu:0', '/gpu:1', '/gpu:2', '/gpu:3']\n"
        "Data format: NCHW\nVariables:   parameter_server\n==========\n"
        "10\timages/sec: 100.0 +/- 1.0 (jitter = 2.0)\t7.0\n"
        "----------------------------------------------------------------\n"
        "total images/sec: 399.50\n"
    )
    parsed = parse_log(text)
    assert parsed.per_device_batch == 32 and parsed.global_batch == 128
    rec = record_from_log(Path("/somewhere/vgg.log"), text)
    assert rec is not None
    assert rec["config"]["data_name"] == "imagenet"
    assert rec["config"]["variable_update"] == "parameter_server"
    assert rec["metrics"]["total_images_per_sec"] == 399.5
    assert rec["metrics"]["step_series"]["loss"] == [7.0]
    assert record_from_log(Path("x.txt"), "just some text\n") is None


def test_cli_import_is_idempotent_and_takes_labels_and_overrides(tmp_path, capsys):
    src = FIXTURES / "LambdaCloud-RTX_A6000.logs" / "syn-replicated-fp32-1gpus"
    results = tmp_path / "results"
    assert main(["import", "tf-cnn-benchmarks", str(src), "--results-dir", str(results)]) == 0
    assert "imported 6 records (6 ok)" in capsys.readouterr().out
    assert main(["import", "tf-cnn-benchmarks", str(src), "--results-dir", str(results)]) == 0
    assert "imported 0 records" in capsys.readouterr().out
    records, problems = read_records(results)
    assert len(records) == 6 and problems == []
    assert all(r["environment"]["machine"] == "LambdaCloud-RTX_A6000" for r in records)

    other = tmp_path / "other"
    plain = tmp_path / "plain.log"
    plain.write_text(_fixture_text())
    assert main(["import", "tf-cnn-benchmarks", str(plain), "--results-dir", str(other),
                 "--machine-label", "lab-1", "--set", "config.precision=fp16"]) == 0
    (rec,), _ = read_records(other)
    assert rec["environment"]["machine"] == "lab-1" and rec["config"]["precision"] == "fp16"
    assert (other / "lab-1.jsonl").is_file()


def test_cli_import_errors(tmp_path, capsys):
    assert main(["import", "tf-cnn-benchmarks", str(tmp_path / "missing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    assert main(["import", "tf-cnn-benchmarks", str(notes), "--results-dir", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "not a tf_cnn_benchmarks log" in err and "nothing to import" in err
    assert main(["import", "spreadsheet", str(notes)]) == 2
    assert "unknown importer" in capsys.readouterr().err


@pytest.mark.parametrize("value, message", [
    ("[" * 10_000, "--set config.precision: nested too deeply"),
    ("[&a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], *b]",
     "--set config.precision: a YAML alias"),
    ("2024-13-01", "invalid choice '2024-13-01'"),  # a date YAML cannot make: the text, as any text
    ("9" * 5000, "invalid choice '9999"),  # a number Python will not read from so many digits: the text
    ("*nightly", "invalid choice '*nightly'"),  # an alias of no anchor: the text, as before
])
def test_a_set_value_yaml_cannot_make_is_one_line_or_the_text(tmp_path, capsys, value, message):
    """``--set`` values are read as a suite's are: an alias (nine levels in 250 characters stood for a
    line of gigabytes, and hung a dry run) or deep nesting is refused in one line, before any work; a
    value YAML cannot make is the text as written (these were tracebacks)."""
    log = next((FIXTURES / "LambdaCloud-RTX_A6000.logs").glob("syn-replicated-fp32-1gpus/*/throughput/1"))
    code = main(["import", "tf-cnn-benchmarks", str(log), "--results-dir", str(tmp_path / "r"), "--dry-run",
                 "--set", f"config.precision={value}"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert len(err) < 1000


# --------------------------------------------------------------------------- csv


def test_csv_round_trip_through_export(tmp_path, capsys):
    results = tmp_path / "a"
    src = FIXTURES / "3960X-GeForce_RTX_3080_XLA.logs" / "syn-replicated-fp16-2gpus"
    assert main(["import", "tf-cnn-benchmarks", str(src), "--results-dir", str(results)]) == 0
    table = tmp_path / "t.csv"
    assert main(["results", "export", str(results), "--format", "csv", "-o", str(table)]) == 0
    copy = tmp_path / "b"
    assert main(["import", "csv", str(table), "--results-dir", str(copy)]) == 0
    capsys.readouterr()
    before, _ = read_records(results)
    after, problems = read_records(copy)
    assert problems == []
    key = lambda r: r["run_id"]  # noqa: E731
    for a, b in zip(sorted(before, key=key), sorted(after, key=key), strict=False):
        assert b["config"] == a["config"]
        assert b["environment"] == a["environment"]  # versions stay text: "11.1.74", "3.6.9"
        assert b["metrics"] == a["metrics"]
        assert b["source"] == "tf_cnn_benchmarks" and b["status"] == "ok"


def test_csv_rows_are_typed_and_missing_figures_are_errors(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(
        "config.model,config.batch_size,config.forward_only,environment.machine,environment.cuda_version,"
        "metrics.total_images_per_sec\n"
        "resnet50,64,true,dgx,11.1,1234.5\n"
        "vgg16,32,false,dgx,11.1,0\n"
        "alexnet,x,false,dgx,11.1,5\n"
    )
    result = get_importer("csv").run([table], ImportOptions())
    ok, zero = result.records
    assert ok["config"] == {"model": "resnet50", "batch_size": 64, "forward_only": True}
    assert ok["environment"] == {"machine": "dgx", "cuda_version": "11.1"}
    assert ok["status"] == "ok" and ok["source"] == "csv" and ok["source_line"] == 2
    assert zero["status"] == "error" and "total_images_per_sec" not in zero["metrics"]
    assert len(result.problems) == 1 and "t.csv:4: column 'config.batch_size'" in result.problems[0]
    again = get_importer("csv").run([table], ImportOptions())
    assert [r["run_id"] for r in again.records] == [ok["run_id"], zero["run_id"]]


def test_csv_with_bare_field_names_is_refused(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("model,metrics.total_images_per_sec\nresnet50,1\n")
    result = get_importer("csv").run([table], ImportOptions())
    assert result.records == []
    assert "did you mean config.model?" in result.problems[0]
    bad = tmp_path / "s.csv"
    bad.write_text("config.model,status\nresnet50,fine\n")
    result = get_importer("csv").run([bad], ImportOptions())
    assert "'fine' is not one of" in result.problems[0]


def test_copying_a_fixture_folder_keeps_the_layout(tmp_path):
    dst = tmp_path / "x" / "MyBox.logs"
    config_dir = "syn-replicated-fp16-4gpus"
    shutil.copytree(FIXTURES / "LambdaCloud-RTX_A6000.logs" / config_dir, dst / config_dir)
    result = get_importer("tf-cnn-benchmarks").run([tmp_path / "x"], ImportOptions())
    assert len(result.records) == 6
    assert {r["environment"]["machine"] for r in result.records} == {"MyBox"}
    assert all("cuda_version" not in r["environment"] for r in result.records)  # no metadata file
    assert {r["environment"]["gpu_count"] for r in result.records} == {4}  # from the log's device lines


@pytest.mark.parametrize("model", ["trivial", "resnet18"])
def test_cnnbench_run_output_imports_back_to_the_same_figures(tmp_path, capsys, model):
    """Round trip: what ``cnnbench run`` prints is a log ``cnnbench import tf-cnn-benchmarks`` reads."""
    argv = ["run", "--model", model, "--image-size", "32", "--batch-size", "2", "--num-batches", "3",
            "--num-warmup-batches", "1", "--device", "cpu", "--results-dir", str(tmp_path / "ran"),
            "--machine-label", "box"]
    assert main(argv) == 0
    log_file = tmp_path / "run.log"
    log_file.write_text(capsys.readouterr().out)
    assert main(["import", "tf-cnn-benchmarks", str(log_file), "--results-dir", str(tmp_path / "imported"),
                 "--machine-label", "box"]) == 0
    (ran,), _ = read_records(tmp_path / "ran")
    (back,), problems = read_records(tmp_path / "imported")
    assert problems == []
    assert back["source"] == "cnnbench" and back["environment"]["torch_version"] == ran["environment"]["torch_version"]
    for name in ("model", "batch_size", "image_size", "device", "num_devices", "precision", "compile",
                 "forward_only", "data_format", "num_batches", "num_warmup_batches", "optimizer",
                 "variable_update", "data_name", "synthetic_location"):
        assert back["config"][name] == ran["config"][name], name
    assert back["metrics"]["total_images_per_sec"] == round(ran["metrics"]["total_images_per_sec"], 2)
    assert back["run_id"] == ran["run_id"]  # the log names the record it stored: the same run
    assert main(["import", "tf-cnn-benchmarks", str(log_file), "--results-dir", str(tmp_path / "ran"),
                 "--machine-label", "box"]) == 0
    assert [r["run_id"] for r in read_records(tmp_path / "ran")[0]] == [ran["run_id"]]  # not stored twice


def test_cnnbench_headers_read_their_own_words():
    text = "\n".join([
        "PyTorch:     torch 2.4.0", "Model:       resnet50", "Dataset:     synthetic (loader)",
        "Mode:        forward-only", "Batch size:  64 global", "             32 per device",
        "Image size:  224x224", "Devices:     ['cuda:0', 'cuda:1']", "Precision:   fp16 (torch.compile)",
        "==========", "10\timages/sec: 100.0 +/- 1.0 (jitter = 2.0)\t0.000\teta 1m 05s",
        "total images/sec: 199.50",
    ])
    rec = record_from_log(Path("x.log"), text)
    assert rec is not None
    assert {k: rec["config"][k] for k in ("device", "num_devices", "precision", "compile", "synthetic_location",
                                          "forward_only", "image_size")} == {
        "device": "cuda", "num_devices": 2, "precision": "fp16", "compile": True, "synthetic_location": "loader",
        "forward_only": True, "image_size": 224}
    assert rec["metrics"]["images_per_sec_mean"] == 100.0 and rec["metrics"]["total_images_per_sec"] == 199.5


def test_progress_lines_with_an_eta_still_import(tmp_path, capsys, monkeypatch):
    from cnnbench.engine import log_format

    monkeypatch.setattr(log_format, "ETA_FROM_S", 0.0)  # as if the run were long
    monkeypatch.setattr(log_format, "eta_shown", lambda: True)  # as if on a terminal (a session captured by `script`)
    argv = ["run", "--model", "trivial", "--image-size", "32", "--batch-size", "2", "--num-batches", "3",
            "--num-warmup-batches", "1", "--display-every", "1", "--device", "cpu",
            "--results-dir", str(tmp_path / "ran"), "--machine-label", "box"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    steps = [ln for ln in out.splitlines() if "images/sec:" in ln and not ln.startswith("total")]
    assert len(steps) == 3 and all("\teta " in ln for ln in steps[:2]) and "eta" not in steps[2]
    rec = record_from_log(Path("run.log"), out)
    assert rec is not None
    assert rec["metrics"]["step_series"]["step"] == [1, 2, 3]
    assert all(loss is not None for loss in rec["metrics"]["step_series"]["loss"])
