"""--profile-steps: a torch.profiler trace of a few steps after warm-up, with the tiny model."""

from __future__ import annotations

import json

import pytest

from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.engine import run_and_append


def tiny(results_dir, **changes) -> RunConfig:
    base = dict(model="trivial", batch_size=4, num_batches=5, num_warmup_batches=1, device="cpu",
                results_dir=str(results_dir))
    base.update(changes)
    return RunConfig(**base)


def test_profiled_steps_write_a_trace_and_rank_operators(results_dir):
    lines: list[str] = []
    record, path = run_and_append(tiny(results_dir, profile_steps=2), emit=lines.append)
    assert record.status == "ok", record.error
    m = record.metrics
    assert m["profile_trace"] == f"traces/{record.run_id}.pt.trace.json"
    trace = json.loads((path.parent / m["profile_trace"]).read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"ProfilerStep#0", "ProfilerStep#1"} <= names  # one marker per profiled step
    assert "ProfilerStep#2" not in names
    assert any(str(n).startswith("aten::") for n in names)
    top = m["profile_top_operators"]
    assert 0 < len(top) <= 10
    assert [r["self_cpu_ms"] for r in top] == sorted((r["self_cpu_ms"] for r in top), reverse=True)
    assert not any(r["name"].startswith("ProfilerStep") for r in top)
    assert sum(r["self_share"] for r in top) <= 1.0 and top[0]["self_device_ms"] is None
    # the profiled steps come after warm-up and before the timed ones, which they leave alone
    assert lines.index("Done warm up") < lines.index("Profiling 2 steps") < lines.index("Done profiling") \
        < lines.index("Step\tImg/sec\ttotal_loss")
    assert len(m["step_times_s"]) == 5
    assert record.config["profile_steps"] == 2


def test_no_profile_by_default_or_with_zero(results_dir):
    for changes in ({}, {"profile_steps": 0}):
        record, _ = run_and_append(tiny(results_dir, **changes))
        assert "profile_trace" not in record.metrics
    assert not (results_dir / "traces").exists()


@pytest.mark.parametrize("changes, needle", [
    ({"profile_steps": -1}, "must be >= 0"),
    ({"profile_steps": 2, "num_epochs": 1, "num_batches": None, "num_warmup_batches": None}, "no warm-up"),
])
def test_bad_profile_options_are_rejected_before_work(results_dir, changes, needle):
    with pytest.raises(ConfigError, match=needle):
        tiny(results_dir, **changes)


def test_cli_prints_the_top_operators_after_the_result(tmp_path, capsys):
    code = main(["run", "--model", "trivial", "--batch-size", "4", "--num-batches", "4", "--num-warmup-batches",
                 "1", "--device", "cpu", "--profile-steps", "2", "--results-dir", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert out.index("Top operators by self CPU time (2 profiled steps)") < out.index("total images/sec")
    assert "aten::" in out and "profiler trace (Chrome trace JSON): " + str(tmp_path / "traces") in out


def test_two_workers_profile_on_rank_zero_only(results_dir):
    record, path = run_and_append(tiny(results_dir, num_devices=2, oversubscribe=True, profile_steps=2, image_size=16))
    assert record.status == "ok", record.error
    traces = list((results_dir / "traces").iterdir())
    assert [p.name for p in traces] == [f"{record.run_id}.pt.trace.json"]
    assert record.metrics["profile_top_operators"]
