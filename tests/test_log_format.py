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
