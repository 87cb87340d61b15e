"""Progress lines in tf_cnn_benchmarks' format (cnnbench.engine.log_format): an ETA on a
terminal only, so logs and pipes keep tf's exact fields."""

from __future__ import annotations

import sys

import pytest

from cnnbench.cli import main
from cnnbench.engine import log_format
from cnnbench.engine.log_format import duration, eta_s


def test_eta_only_for_long_runs_and_read_as_a_duration():
    assert eta_s(10, 100, [0.1] * 10) is None  # 10 s in all: short
    assert eta_s(10, 1000, [0.1] * 10) == pytest.approx(99.0)  # 100 s in all: 990 steps of 0.1 s left
    assert eta_s(1000, 1000, [0.1] * 1000) is None  # done
    assert [duration(s) for s in (5, 65, 3725)] == ["5s", "1m 05s", "1h 02m"]


@pytest.mark.parametrize("terminal", [True, False])
def test_the_eta_is_shown_on_a_terminal_only(tmp_path, capsys, monkeypatch, terminal):
    monkeypatch.setattr(log_format, "ETA_FROM_S", 0.0)  # as if the run were long
    monkeypatch.setattr(sys.stdout, "isatty", lambda: terminal)
    argv = ["run", "--model", "trivial", "--image-size", "32", "--batch-size", "2", "--num-batches", "3",
            "--num-warmup-batches", "1", "--display-every", "1", "--device", "cpu",
            "--results-dir", str(tmp_path / "r"), "--machine-label", "box"]
    assert main(argv) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "images/sec:" in ln and not ln.startswith("total")]
    assert len(lines) == 3
    if terminal:
        assert all(ln.split("\t")[3].startswith("eta ") for ln in lines[:2]) and "eta" not in lines[2]
    else:  # a log or a pipe: tf_cnn_benchmarks' fields exactly (step, images/sec, loss)
        assert all(len(ln.split("\t")) == 3 for ln in lines)


# --------------------------------------------------------------------------- the log's tail (issue 17, item 19)


def test_a_merged_log_ends_as_tf_cnn_benchmarks_does(tmp_path):
    """Vendors' scripts merge stdout and stderr (``|&``) and read the figure from the second-to-
    last line: warnings and the record's path come before the closing block."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "cnnbench", "run", "--model=trivial", "--batch_size=4", "--num_batches=3",
            "--num_warmup_batches=1", "--device=cpu", "--results-dir", str(tmp_path), "--machine-label", "box"]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.rstrip("\n").splitlines()
    assert lines[-1] == "-" * 64 and lines[-3] == "-" * 64, lines[-6:]
    assert lines[-2].startswith("total images/sec: ") and float(lines[-2].split(": ")[1]) > 0
    assert lines[-4].startswith("record ") and " appended to " in lines[-4]


def test_warnings_come_before_the_closing_block_with_both_streams_merged(monkeypatch):
    import io
    import sys
    from types import SimpleNamespace

    from cnnbench.cli import run_cmd

    merged = io.StringIO()
    monkeypatch.setattr(sys, "stdout", merged)
    monkeypatch.setattr(sys, "stderr", merged)
    record = SimpleNamespace(status="ok", error=None, run_id="r1", config={},
                             metrics={"total_images_per_sec": 12.5, "warnings": ["the machine was busy"]})
    assert run_cmd._report(record, "results/box.jsonl", quiet=False) == 0
    lines = merged.getvalue().splitlines()
    assert lines == ["cnnbench run: warning: the machine was busy", "record r1 appended to results/box.jsonl",
                     "-" * 64, "total images/sec: 12.50", "-" * 64]


def test_logs_import_in_the_old_order_and_the_new(tmp_path):
    """Before, the record's path came after the closing block; both orders import to the same run."""
    from pathlib import Path

    from cnnbench.results.importers.tf_cnn_benchmarks import record_from_log

    head = "\n".join(["PyTorch:     torch 2.4.0", "Model:       trivial", "Dataset:     synthetic (device)",
                      "Mode:        training", "Batch size:  4 global", "             4 per device",
                      "Devices:     ['cpu:0']", "==========", "1\timages/sec: 10.0 +/- 0.0 (jitter = 0.0)\t6.9"])
    block = ["-" * 64, "total images/sec: 9.50", "-" * 64]
    new = "\n".join([head, "record abc123 appended to results/box.jsonl", *block])
    old = "\n".join([head, *block, "record abc123 appended to results/box.jsonl"])
    for text in (new, old):
        rec = record_from_log(Path("run.log"), text)
        assert rec is not None and rec["run_id"] == "abc123" and rec["metrics"]["total_images_per_sec"] == 9.5
