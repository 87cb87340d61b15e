"""Non-finite numbers never lose a result: NaN/inf options are refused before work, a run
whose loss diverges keeps its record (non-finite values stored as null, the divergence
noted), and imported tables or ``--set`` with nan/inf give one line, never a traceback."""

from __future__ import annotations

import json

import pytest

from cnnbench.cli import main
from cnnbench.results.record import Record
from cnnbench.results.store import append_record, append_records, read_records
from cnnbench.sweep.runner import SweepOptions, run_suite
from cnnbench.sweep.suite import parse_suite
from tests.sweep_fakes import nan_worker, probe


def diverged_record() -> dict:
    return Record(
        config={"model": "resnet18", "batch_size": 8},
        environment={"machine": "box"},
        metrics={"total_images_per_sec": 50.0, "loss_first": 2.3, "loss_last": float("nan"),
                 "step_times_s": [0.1, float("inf"), 0.1], "epochs": [{"train_loss": float("-inf")}]},
    ).to_dict()


def test_a_record_with_nan_and_inf_is_kept_with_nulls_and_a_warning(tmp_path):
    rec = diverged_record()
    append_record(tmp_path, rec)
    append_records(tmp_path, [diverged_record()])
    assert rec["metrics"]["loss_last"] != rec["metrics"]["loss_last"]  # the caller's record is not changed
    for line in (tmp_path / "box.jsonl").read_text().splitlines():  # strict JSON: no NaN, no Infinity
        json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} written"))
    records, problems = read_records(tmp_path)
    assert problems == [] and len(records) == 2
    m = records[0]["metrics"]
    assert m["total_images_per_sec"] == 50.0 and m["loss_first"] == 2.3
    assert m["loss_last"] is None and m["step_times_s"] == [0.1, None, 0.1]
    assert m["epochs"] == [{"train_loss": None}]
    (warning,) = m["warnings"]
    assert "stored as null" in warning
    assert "metrics.loss_last" in warning and "metrics.step_times_s" in warning
    assert "metrics.epochs.train_loss" in warning


@pytest.mark.parametrize("flag", ["--learning-rate", "--weight-decay", "--momentum", "--timeout",
                                  "--bucket-cap-mb"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nan_and_inf_options_are_refused_before_work(tmp_path, capsys, flag, value):
    args = ["run", "--model", "trivial", "--device", "cpu", "--results-dir", str(tmp_path / "r"), f"{flag}={value}"]
    if flag == "--momentum":
        args += ["--optimizer", "momentum"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{flag}: must be a finite number" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_diverging_run_keeps_its_record_and_says_so(tmp_path, capsys):
    results = tmp_path / "r"
    assert main(["run", "--model", "trivial", "--device", "cpu", "--image-size", "32", "--batch-size", "8",
                 "--num-batches", "6", "--num-warmup-batches", "1", "--learning-rate", "1e10",
                 "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    assert "total images/sec" in out and "appended" in out
    assert "training diverged" in err
    (rec,), problems = read_records(results)
    assert problems == [] and rec["status"] == "ok"
    m = rec["metrics"]
    assert m["diverged"] is True and m["total_images_per_sec"] > 0
    assert m["loss_last"] is None
    assert any(w.startswith("training diverged: the loss is NaN or infinite from timed step") for w in m["warnings"])


def test_a_sweep_case_with_nan_figures_keeps_its_record(tmp_path):
    suite = parse_suite({"name": "n", "base": {"model": "trivial", "device": "cpu"}, "matrix": {"batch_size": [2]}})
    result = run_suite(suite, SweepOptions(results_dir=tmp_path / "r"), worker=nan_worker, probe=probe)
    assert [r.status for r in result.results] == ["ok"]
    (rec,), problems = read_records(tmp_path / "r")
    assert problems == [] and rec["status"] == "ok" and rec["error"] is None
    assert rec["metrics"]["loss_last"] is None and rec["metrics"]["step_times_s"] == [0.1, None]
    assert "stored as null" in rec["metrics"]["warnings"][0]


def test_import_csv_with_nan_and_inf_is_one_line_per_row(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("config.model,config.learning_rate,metrics.total_images_per_sec\n"
                     "resnet50,0.1,10\nvgg16,nan,10\nalexnet,0.1,inf\nresnet18,0.1,NaN\n")
    results = tmp_path / "r"
    assert main(["import", "csv", str(table), "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    assert "imported 1 record " in out
    lines = err.strip().splitlines()
    assert len(lines) == 3 and "Traceback" not in err
    assert f"{table}:3: column 'config.learning_rate': must be a finite number" in lines[0]
    assert f"{table}:4: metrics.total_images_per_sec is inf" in lines[1]
    assert f"{table}:5: metrics.total_images_per_sec is nan" in lines[2]
    (rec,), _ = read_records(results)
    assert rec["config"]["model"] == "resnet50"


@pytest.mark.parametrize("override", ["metrics.total_images_per_sec=.nan", "config.learning_rate=.inf",
                                      "metrics.loss_last=-.inf"])
def test_set_with_nan_or_inf_is_one_line(tmp_path, capsys, override):
    table = tmp_path / "t.csv"
    table.write_text("config.model,metrics.total_images_per_sec\nresnet50,10\n")
    assert main(["import", "csv", str(table), "--results-dir", str(tmp_path / "r"), "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cnnbench import: error: --set {override}:") and len(err.strip().splitlines()) == 1


def test_json_export_of_a_store_stays_json(tmp_path, capsys):
    append_record(tmp_path / "r", diverged_record())
    assert main(["results", "export", str(tmp_path / "r"), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)  # strict JSON: no NaN
    assert rows[0]["metrics.loss_last"] is None
