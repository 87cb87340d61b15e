"""Probes of numbers (issue 41, items 9 and 10): ``predict`` on one-device records no step comes
from, and options that leave it nothing to predict; ``--timeout`` of ``run`` and ``comm`` (and the
Python API) out of range. Each case gives one line naming the cause and exit 2 (or, for a record,
names it and leaves it out), never a traceback, before any work where the options alone decide it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cnnbench.api import run_config
from cnnbench.cli import main
from cnnbench.config import ConfigError
from cnnbench.config.parallel_options import MAX_TIMEOUT_S
from cnnbench.engine.comm.spec import CommConfig
from tests.report_fixtures import write_store
from tests.test_predict import _record

# --- item 9: predict ------------------------------------------------------------------------------------------


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _batch(size: object) -> dict:
    rec = _record(1, 400.0)
    rec["config"]["batch_size"] = size
    rec["run_id"] = "bad-run"
    return rec


def _zero_split() -> dict:
    rec = _record(1, 400.0)
    rec["metrics"].update(forward_time_s=0.0, backward_time_s=0, optimizer_time_s=0.0)
    rec["run_id"] = "bad-run"
    return rec


def _images_per_sec(value: float) -> dict:
    rec = _record(1, value)
    rec["run_id"] = "bad-run"
    return rec


UNUSABLE = [
    (_batch(0), "config.batch_size is 0"),
    (_batch(-4), "config.batch_size is -4"),
    (_zero_split(), "forward_time_s, backward_time_s and optimizer_time_s are all 0"),
    (_images_per_sec(0.0), "metrics.total_images_per_sec is 0.0"),
    (_images_per_sec(-5.0), "metrics.total_images_per_sec is -5.0"),
]
UNUSABLE_IDS = ["batch-0", "batch-negative", "zero-split", "ips-0", "ips-negative"]


@pytest.mark.parametrize(("bad", "why"), UNUSABLE, ids=UNUSABLE_IDS)
def test_a_one_device_record_no_step_comes_from_is_named_and_left_out(tmp_path, capsys, bad, why):
    """Beside a good record of another model, the bad one is named (its run_id, model, machine
    and cause) and left out; the good one is predicted as before."""
    write_store(tmp_path / "r", [bad, _record(1, 400.0, model="vgg16")])
    assert main(["predict", str(tmp_path / "r"), "--devices", "1,2", "--strategy", "replicated",
                 "--format", "json"]) == 0
    out, err = capsys.readouterr()
    line = _one_line(err)
    assert line.startswith("warning: left out record bad-run (resnet50 on box): ") and why in line
    assert '"vgg16"' in out and '"resnet50"' not in out


@pytest.mark.parametrize(("bad", "why"), UNUSABLE, ids=UNUSABLE_IDS)
def test_a_store_of_only_such_records_is_one_line_naming_the_first(tmp_path, capsys, bad, why):
    write_store(tmp_path / "r", [bad])
    assert main(["predict", str(tmp_path / "r"), "--devices", "1,2"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "no usable one-device training record" in line and "record bad-run" in line and why in line


def test_a_nan_figure_is_still_named_by_the_reader_and_left_out(tmp_path, capsys):
    """The path the others now follow: the reader names the NaN figure, predict leaves the record out."""
    write_store(tmp_path / "r", [_images_per_sec(math.nan), _record(1, 400.0, model="vgg16")])
    assert main(["predict", str(tmp_path / "r"), "--devices", "1,2", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert "metrics.total_images_per_sec is NaN: shown as not available" in _one_line(err)
    assert '"resnet50"' not in out


def test_a_split_with_some_zero_phases_is_still_a_base(tmp_path, capsys):
    """Only a split of all zeros is refused: an optimizer time of 0 (folded into the others) is fine."""
    rec = _record(1, 400.0)
    rec["metrics"].update(optimizer_time_s=0.0)
    write_store(tmp_path / "r", [rec])
    assert main(["predict", str(tmp_path / "r"), "--devices", "1,2", "--format", "json"]) == 0
    assert capsys.readouterr().err == ""


def test_a_split_of_the_smallest_floats_still_scales_to_the_step(tmp_path, capsys):
    """Times of 5e-324 s are not 0, but step x time underflows to 0: the split is scaled by its
    shares, so the step stays the record's."""
    rec = _record(1, 400.0)
    rec["metrics"].update(forward_time_s=5e-324, backward_time_s=5e-324, optimizer_time_s=5e-324)
    write_store(tmp_path / "r", [rec])
    assert main(["predict", str(tmp_path / "r"), "--devices", "1,2", "--strategy", "replicated",
                 "--format", "json"]) == 0
    assert '"predicted_images_per_sec": 400.0' in capsys.readouterr().out


@pytest.mark.parametrize(("flags", "why"), [
    (["--devices", "3", "--nodes", "2"], "--nodes 2: divides none of --devices 3"),
    (["--devices", "3,5", "--nodes", "2"], "--nodes 2: divides none of --devices 3,5"),
    (["--devices", "5", "--devices-per-node", "3"], "--devices-per-node 3: none of --devices 5"),
    (["--strategy", ","], "--strategy: names no strategy"),
    (["--strategy", ""], "--strategy: names no strategy"),
])
def test_options_that_leave_no_point_are_refused_before_the_store_is_read(tmp_path, capsys, flags, why):
    """Refused whatever the records: even a store that does not exist is not looked at."""
    write_store(tmp_path / "r", [_record(1, 400.0)])
    for store in (tmp_path / "r", tmp_path / "missing"):
        assert main(["predict", str(store), *flags]) == 2
        line = _one_line(capsys.readouterr().err)
        assert why in line and "missing" not in line


@pytest.mark.parametrize("options", [{"nodes": 0}, {"devices_per_node": 0}, {"strategies": ()}, {"devices": ()}])
def test_the_library_refuses_the_same_options_with_its_error(options):
    from cnnbench.predict import PredictError, PredictOptions, predict_scaling

    with pytest.raises(PredictError, match="^--"):
        predict_scaling([_record(1, 400.0)], PredictOptions(**options), lambda model: None)


def test_device_counts_no_gpu_node_spreads_evenly_are_one_line(tmp_path, capsys):
    """Without --nodes or --devices-per-node, GPUs go 8 a node: 9 and 11 devices fill no node
    evenly, so nothing is left to predict."""
    write_store(tmp_path / "r", [_record(1, 400.0)])
    assert main(["predict", str(tmp_path / "r"), "--devices", "9,11"]) == 2
    assert "--devices 9,11: no count spreads evenly" in _one_line(capsys.readouterr().err)


def test_counts_some_of_which_spread_evenly_keep_those(tmp_path, capsys):
    write_store(tmp_path / "r", [_record(1, 400.0)])
    assert main(["predict", str(tmp_path / "r"), "--devices", "3,4", "--nodes", "2", "--strategy", "replicated",
                 "--format", "json"]) == 0
    assert '"devices": 4' in capsys.readouterr().out


# --- item 10: --timeout ---------------------------------------------------------------------------------------

OUT_OF_RANGE = [math.nan, math.inf, -math.inf, 1e300, MAX_TIMEOUT_S + 1, 0.0, -1.0]
OUT_IDS = ["nan", "inf", "-inf", "1e300", "week+1", "0", "-1"]


@pytest.mark.parametrize("value", OUT_OF_RANGE, ids=OUT_IDS)
@pytest.mark.parametrize("build", ["run", "comm"])
def test_a_timeout_out_of_range_is_refused_the_same_way_by_run_and_comm(build, value):
    with pytest.raises(ConfigError) as caught:
        if build == "run":
            run_config(model="trivial", device="cpu", timeout=value)
        else:
            CommConfig(device="cpu", timeout=value)
    assert caught.value.field == "timeout"
    assert str(caught.value).startswith("--timeout: ")


@pytest.mark.parametrize("value", [0.5, 60, MAX_TIMEOUT_S])
def test_a_timeout_up_to_a_week_is_accepted_by_both(value):
    assert run_config(model="trivial", device="cpu", timeout=value).timeout == value
    assert CommConfig(device="cpu", timeout=value).timeout == value


def test_the_bound_is_one_week_and_both_name_it(tmp_path):
    assert MAX_TIMEOUT_S == 7 * 24 * 3600
    messages = []
    for build in (lambda: run_config(model="trivial", timeout=1e300), lambda: CommConfig(timeout=1e300)):
        with pytest.raises(ConfigError) as caught:
            build()
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "604800" in messages[0] and "1e+300" in messages[0]


@pytest.mark.parametrize("value", ["nan", "inf", "1e300", "604801"])
@pytest.mark.parametrize("command", ["run", "comm"])
def test_the_commands_refuse_it_in_one_line_with_exit_2_and_write_nothing(tmp_path, capsys, command, value):
    store = tmp_path / "results"
    argv = {"run": ["run", "--model", "trivial", "--device", "cpu", "--num-batches", "2"],
            "comm": ["comm", "--device", "cpu", "--max-bytes", "1K"]}[command]
    assert main([*argv, "--results-dir", str(store), f"--timeout={value}"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"cnnbench {command}: error: --timeout: " in line
    assert not store.exists()


def test_the_python_api_refuses_it_before_any_work(tmp_path):
    import cnnbench

    with pytest.raises(ConfigError, match="--timeout: .*one week"):
        cnnbench.run(model="trivial", device="cpu", timeout=1e300, results_dir=tmp_path / "r")
    assert not Path(tmp_path / "r").exists()
