"""The timed loop end to end on CPU: output format, record contract, precisions, failures."""

from __future__ import annotations

import json
import re

import pytest
import torch
from torch import nn

from cnnbench.config import ConfigError, RunConfig
from cnnbench.engine import log_format, run_and_append, run_in_process
from cnnbench.models import register_model
from cnnbench.results.record import ENVIRONMENT_FIELDS, METRIC_FIELDS

STEP_LINE = re.compile(r"^(\d+)\timages/sec: (\d+\.\d) \+/- (\d+\.\d) \(jitter = (\d+\.\d)\)\t(-?\d+\.\d{3})$")


def tiny(**changes) -> RunConfig:
    base = dict(model="trivial", batch_size=4, num_batches=6, num_warmup_batches=2, display_every=3, device="cpu")
    base.update(changes)
    return RunConfig(**base)


class _Exploding(nn.Module):
    def __init__(self, error: BaseException, num_classes: int) -> None:
        super().__init__()
        self.lin = nn.Linear(3, num_classes)
        self.error = error
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 2:
            raise self.error
        return self.lin(x.mean((2, 3)))


@register_model("test_raises", default_image_size=16)
def _raises(num_classes=1000, image_size=16):
    return _Exploding(ValueError("boom in the model"), num_classes)


@register_model("test_oom", default_image_size=16)
def _oom(num_classes=1000, image_size=16):
    return _Exploding(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"), num_classes)


def test_output_follows_tf_cnn_benchmarks_format():
    lines: list[str] = []
    record = run_in_process(tiny(), emit=lines.append)
    assert record.status == "ok"
    assert "Model:       trivial" in lines and "Mode:        training" in lines
    assert "Batch size:  4 global" in lines
    i = lines.index("Done warm up")
    assert lines[i + 1] == "Step\tImg/sec\ttotal_loss"
    steps = [int(m.group(1)) for m in map(STEP_LINE.match, lines) if m]
    assert steps == [1, 3, 6]
    assert not any(line.startswith("total images/sec") for line in lines)  # the reporter's to print, last
    closing = log_format.closing_lines(record.metrics)
    assert closing[0] == closing[2] == "-" * 64
    assert re.fullmatch(r"total images/sec: \d+\.\d\d", closing[1])
    assert float(closing[1].split(": ")[1]) == pytest.approx(record.metrics["total_images_per_sec"], abs=0.006)


def test_record_contract(results_dir):
    record, path = run_and_append(tiny(results_dir=str(results_dir), machine_label="test box"))
    assert path.parent == results_dir and path.name == "test_box.jsonl"
    (line,) = path.read_text().splitlines()
    data = json.loads(line)
    for key in ("schema_version", "tool_version", "run_id", "started_at", "status", "error",
                "config", "environment", "metrics"):
        assert key in data, key
    assert data["status"] == "ok" and data["error"] is None
    cfg = data["config"]
    for key in ("model", "batch_size", "num_devices", "device", "num_batches", "num_warmup_batches",
                "image_size", "data_format", "precision", "compile", "forward_only", "variable_update",
                "data_name", "synthetic_location", "distortions", "optimizer", "seed"):
        assert key in cfg, key
    assert (cfg["batch_size"], cfg["image_size"], cfg["device"], cfg["data_name"]) == (4, 32, "cpu", "synthetic")
    assert set(ENVIRONMENT_FIELDS) <= set(data["environment"])
    assert data["environment"]["machine"] == "test box" and data["environment"]["gpu_model"] is None
    m = data["metrics"]
    assert set(METRIC_FIELDS) <= set(m)
    assert len(m["step_times_s"]) == 6 and all(t > 0 for t in m["step_times_s"])
    assert m["peak_device_memory_bytes"] is None and m["peak_host_memory_bytes"] > 0
    assert 0 <= m["input_wait_fraction"] < 1
    assert m["images_per_sec_mean"] == pytest.approx(4 / (sum(m["step_times_s"]) / 6))


def test_records_append_without_touching_earlier_ones(results_dir):
    _, path = run_and_append(tiny(results_dir=str(results_dir), machine_label="m"))
    first = path.read_text()
    run_and_append(tiny(results_dir=str(results_dir), machine_label="m", forward_only=True))
    text = path.read_text()
    assert text.startswith(first) and len(text.splitlines()) == 2


def test_warmup_is_excluded_from_figures():
    record = run_in_process(tiny(num_warmup_batches=3, num_batches=4))
    assert len(record.metrics["step_times_s"]) == 4
    assert record.metrics["first_step_time_s"] > 0


@pytest.mark.parametrize("location", ["device", "host", "loader"])
def test_synthetic_locations_run(location):
    workers = {"num_workers": 1} if location == "loader" else {}
    record = run_in_process(tiny(synthetic_location=location, **workers))
    assert record.status == "ok", record.error
    assert record.config["synthetic_location"] == location


@pytest.mark.parametrize(
    "changes",
    [
        {"precision": "amp_bf16"},
        {"precision": "bf16"},
        {"data_format": "NHWC"},
        {"forward_only": True},
        {"optimizer": "momentum"},
        {"optimizer": "rmsprop"},
        {"optimizer": "adam"},
    ],
)
def test_modes_run_on_cpu(changes):
    record = run_in_process(tiny(**changes))
    assert record.status == "ok", record.error
    assert all(record.config[k] == v for k, v in changes.items())


def test_aux_heads_are_trained():
    record = run_in_process(tiny(model="googlenet", image_size=64, batch_size=2, num_batches=1,
                                 num_warmup_batches=1))
    assert record.status == "ok", record.error


def test_same_seed_same_loss():
    a = run_in_process(tiny(seed=3)).metrics
    b = run_in_process(tiny(seed=3)).metrics
    assert (a["loss_first"], a["loss_last"]) == (b["loss_first"], b["loss_last"])


def test_model_error_still_writes_a_record(results_dir):
    record, path = run_and_append(tiny(model="test_raises", results_dir=str(results_dir)))
    assert record.status == "error" and "boom in the model" in record.error
    assert json.loads(path.read_text())["status"] == "error"


def test_out_of_memory_is_recorded_as_oom(results_dir):
    record, _ = run_and_append(tiny(model="test_oom", results_dir=str(results_dir)))
    assert record.status == "oom" and "out of memory" in record.error


def test_machine_checks_happen_before_work(results_dir):
    with pytest.raises(ConfigError, match="--precision"):
        run_and_append(tiny(precision="tf32", results_dir=str(results_dir)))
    with pytest.raises(ConfigError, match="--image-size: 20 is too small for alexnet"):
        run_and_append(tiny(model="alexnet", image_size=20, results_dir=str(results_dir)))
    assert not results_dir.exists()


@pytest.mark.slow
def test_compile_reports_compile_time_apart():
    record = run_in_process(tiny(compile=True, num_warmup_batches=1, num_batches=3))
    assert record.status == "ok", record.error
    assert record.metrics["compile_time_s"] > 0
    assert len(record.metrics["step_times_s"]) == 3


def test_records_carry_model_cost_and_flop_rates():
    record = run_in_process(tiny(model="resnet18", image_size=64, batch_size=2, num_batches=2,
                                 num_warmup_batches=1))
    cost = record.to_dict()["model_cost"]
    assert cost["name"] == "resnet18" and cost["image_size"] == 64
    m = record.metrics
    assert m["train_flops_per_image"] == cost["train_flops"] > cost["forward_flops"]
    assert m["achieved_tflops"] == pytest.approx(cost["train_flops"] * m["total_images_per_sec"] / 1e12)
    assert m["mfu"] is None  # a CPU has no entry in the table of peaks
