"""Issue 20, item 1: study recipes (``cnnbench study NAME|FILE``) and the learning-rate rule of
training to accuracy (``--lr-scaling``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.training_options import scaled_learning_rate
from cnnbench.report import build_report
from cnnbench.study import StudyError, execute_study, load_study, shipped_studies
from cnnbench.study.run import report_options
from cnnbench.sweep.suite import SuiteError, load_suite, parse_suite
from tests.report_fixtures import record, training_record

# --------------------------------------------------------------------------- the learning-rate rule


def test_linear_scaling_multiplies_the_rate_by_the_device_count():
    assert scaled_learning_rate(0.1, "linear", 1) == pytest.approx(0.1)
    assert scaled_learning_rate(0.1, "linear", 2) == pytest.approx(0.2)
    assert scaled_learning_rate(0.1, "linear", 16) == pytest.approx(1.6)
    assert scaled_learning_rate(0.1, "none", 16) == pytest.approx(0.1)
    assert scaled_learning_rate(0.1, None, 16) == pytest.approx(0.1)


def test_the_rule_is_a_checked_option():
    assert RunConfig(lr_scaling="linear").lr_scaling == "linear"
    with pytest.raises(ConfigError, match="lr.scaling"):
        RunConfig(lr_scaling="sqrt")
    with pytest.raises(ConfigError, match="lr.scaling"):
        RunConfig(lr_scaling="linear", forward_only=True)
    with pytest.raises(ConfigError, match="lr.scaling.*independent trains one model per device"):
        RunConfig(lr_scaling="linear", variable_update="independent")
    assert RunConfig(lr_scaling="none", variable_update="independent").lr_scaling == "none"


# --------------------------------------------------------------------------- the command

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ("host-cpus", "input-location", "scaling", "train-to-accuracy")


def _cnnbench(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The installed command, run from ``cwd`` (outside the checkout: the studies are package data)."""
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.run([sys.executable, "-m", "cnnbench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _tables(outdir: Path, kind: str) -> list[dict]:
    tables = [json.loads(p.read_text()) for p in sorted((outdir / "tables").glob("*.json"))]
    return [t for t in tables if t["kind"] == kind]


def _shape(table: dict, row_fields: int = 1) -> tuple[list[str], list[str]]:
    """A throughput table's row headers (one per row field) and column labels (the per-device
    ``batch`` column, beside the row labels, is neither)."""
    columns = table["columns"]
    return columns[:row_fields], [c for c in columns[row_fields:] if c != "batch"]


def _records(results: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(results.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_list_names_every_shipped_study_from_any_folder(tmp_path):
    done = _cnnbench("study", "--list", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(STUDIES)
    assert all(len(line.split(None, 1)[1]) > 20 for line in lines)  # each with its one-line description
    assert not list(tmp_path.iterdir())  # --list writes nothing


def test_the_studies_are_package_data_of_the_wheel():
    tomllib = pytest.importorskip("tomllib")
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["cnnbench"]
    package = ROOT / "src" / "cnnbench"
    packaged = {p for g in globs for p in package.glob(g)}
    assert {package / "study" / "recipes" / f"{name}.yaml" for name in STUDIES} <= packaged
    assert list(shipped_studies()) == list(STUDIES)


def test_an_unknown_study_is_one_line_naming_the_studies(capsys):
    assert main(["study", "no-such-study"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no-such-study" in err and all(name in err for name in STUDIES)


def test_every_study_parses_at_both_sizes_with_its_learning_rate_rule():
    for name in STUDIES:
        full, smoke = load_study(name), load_study(name, smoke=True)
        assert smoke.name == f"{name}-smoke" and len(smoke.suite.cases) < len(full.suite.cases)
        assert {c.config.device for c in full.suite.cases} == {"cuda"}
        assert {c.config.device for c in smoke.suite.cases} == {"cpu"}
        assert max(c.config.num_devices or 1 for c in full.suite.cases) >= 4
    train = load_study("train-to-accuracy")
    assert {c.config.lr_scaling for c in train.suite.cases} == {"linear"}
    assert sorted(c.config.num_devices for c in train.suite.cases) == [1, 2, 4, 8, 16]


OWN_STUDY = """\
name: my-batches
description: My own study.
base: {device: cuda, model: resnet50, num_batches: 100}
matrix: {batch_size: [32, 64]}
layout:
  title: My batches
  rows: model
  columns: batch_size
smoke:
  base: {device: cpu, model: trivial, image_size: 32, num_batches: 3, num_warmup_batches: 1}
  matrix: {batch_size: [4, 8]}
  timeout_s: 300
"""


def test_a_study_file_of_ones_own_runs_and_takes_its_layout(tmp_path):
    study = tmp_path / "mine.yaml"
    study.write_text(OWN_STUDY)
    done = _cnnbench("study", str(study), "--smoke", "--no-plots", "--plain", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [table] = _tables(tmp_path / "report" / "my-batches-smoke", "configuration")
    assert _shape(table) == (["model"], ["4", "8"])  # rows models, columns batch sizes
    assert [r["model"] for r in table["rows"]] == ["trivial"]
    assert len(_records(tmp_path / "results" / "my-batches-smoke")) == 2


def test_a_sweep_runs_a_study_file_as_the_suite_it_is(tmp_path, capsys):
    """Its full size; a plain suite still refuses a key it does not know."""
    study = _write(tmp_path / "mine.yaml", OWN_STUDY)
    assert main(["sweep", str(study), "--dry-run"]) == 0
    assert "batch_size=64" in capsys.readouterr().out
    assert len(load_suite(study).cases) == 2
    with pytest.raises(SuiteError, match="unknown key 'layot'"):
        parse_suite({"name": "x", "matrix": {"batch_size": [1]}, "layot": {}})


def test_a_study_file_without_its_sections_is_refused(tmp_path, capsys):
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: p\nmatrix: {batch_size: [1, 2]}\n")
    assert main(["study", str(plain)]) == 2
    assert "needs a layout: section" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(OWN_STUDY.replace("  columns: batch_size", "  colums: batch_size"))
    assert main(["study", str(bad)]) == 2
    assert "layout.colums: not a layout key" in capsys.readouterr().err
    typo = _write(tmp_path / "typo.yaml", OWN_STUDY.replace("columns: batch_size", "columns: batch_sise"))
    with pytest.raises(StudyError, match="layout.columns: 'batch_sise' is not a record field"):
        load_study(str(typo))
    for name in ("environment.../../x", "environment.", "metrics.a..b"):  # found only after every case had run
        empty = _write(tmp_path / "empty.yaml", OWN_STUDY.replace("columns: batch_size", f"columns: '{name}'"))
        with pytest.raises(StudyError, match="is not a record field"):
            load_study(str(empty))
    mark = _write(tmp_path / "mark.yaml",
                  OWN_STUDY.replace("model: resnet50,", "model: resnet50, data_dir: '{dataset}',"))
    with pytest.raises(StudyError, match="base.data_dir: {dataset} names the data set of make_dataset"):
        load_study(str(mark))
    with pytest.raises(StudyError, match="smoke.repeat: not a smoke key"):
        load_study(str(_write(tmp_path / "r.yaml", OWN_STUDY + "  repeat: 2\n")))


def test_a_data_set_kind_that_is_a_path_is_refused_before_anything_is_made(tmp_path, capsys):
    """A study file may be someone else's: ``make_dataset.kind`` names a data set, never a folder."""
    evil = _write(tmp_path / "evil.yaml", """name: evil
base: {device: cpu, model: trivial, num_batches: 2, num_warmup_batches: 1, batch_size: 4, image_size: 32}
matrix: {seed: [1]}
layout: {title: t}
smoke:
  make_dataset: {kind: "../../outside", num_classes: 2, images_per_class: 2, image_size: 32}
  base: {device: cpu, model: trivial, num_batches: 2, num_warmup_batches: 1, batch_size: 4, image_size: 32}
  matrix: {seed: [1]}
  include:
    - {data_dir: "{dataset}", batch_size: 2}
""")
    outside = tmp_path / "outside-image_size32-images_per_class2-num_classes2"
    outside.mkdir()
    assert main(["study", str(evil), "--smoke", "--results-dir", str(tmp_path / "res"), "-o",
                 str(tmp_path / "rep"), "--plain"]) == 2
    err = capsys.readouterr().err
    assert "smoke.make_dataset.kind: imagefolder, cifar10, cifar100 (got '../../outside')" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "res").exists() and not any(outside.iterdir())


@pytest.mark.parametrize("numbers, why", [("images_per_class: 200000", "--images-per-class"),
                                          ("images_per_class: " + "9" * 4000, "--images-per-class"),
                                          ("val_images_per_class: -1", "--val-images-per-class")])
def test_make_dataset_numbers_no_data_set_takes_are_refused_before_any_folder_is_made(tmp_path, capsys, numbers,
                                                                                      why):
    """Checked when the study file is read: the store and its data/ were made first, and a number of
    4,000 digits named a folder too long for a file system instead of the limit."""
    study = _write(tmp_path / "big.yaml", f"""name: big
base: {{device: cpu, model: trivial, num_batches: 2, num_warmup_batches: 1, batch_size: 4, image_size: 32}}
matrix: {{seed: [1]}}
layout: {{title: t}}
smoke:
  make_dataset: {{kind: imagefolder, num_classes: 2, image_size: 32, {numbers}}}
  base: {{device: cpu, model: trivial, num_batches: 2, num_warmup_batches: 1, batch_size: 4, image_size: 32}}
  matrix: {{seed: [1]}}
""")
    assert main(["study", str(study), "--smoke", "--results-dir", str(tmp_path / "res"), "-o",
                 str(tmp_path / "rep"), "--plain"]) == 2
    err = capsys.readouterr().err
    assert f"smoke.make_dataset: {why}" in err and len(err.strip().splitlines()) == 1 and len(err) < 600, err
    assert not (tmp_path / "res").exists()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- each study at its smoke size


def _smoke(name: str, smoke_study) -> tuple[Path, Path]:
    """``cnnbench study NAME --smoke`` from a folder outside the checkout (the session's run, shared
    with the browser test: tests/conftest.py); its (results, report) folders, every record ok."""
    results, report = smoke_study(name)
    assert all(r["status"] == "ok" for r in _records(results)), [r["error"] for r in _records(results)]
    return results, report


@pytest.mark.slow
def test_host_cpus_smoke_gives_models_by_cpus_and_the_cost_table(smoke_study):
    results, report = _smoke("host-cpus", smoke_study)
    [table] = _tables(report, "configuration")
    assert _shape(table) == (["model"], ["1", "2"])  # columns: --host-cpus 1 and 2 on this one machine
    assert sorted(r["model"] for r in table["rows"]) == ["resnet18", "trivial"]
    assert all(isinstance(r[c], float) for r in table["rows"] for c in ("1", "2"))
    [cost] = _tables(report, "cost")
    assert sorted(r["model"] for r in cost["rows"]) == ["resnet18", "trivial"]
    assert "host_cpus" in {c for t in _tables(report, "effect") for c in [t["id"]] for c in [c.split("-")[1]]}


LOCATION_COLUMNS = ["synthetic · device · input_pipeline=none", "synthetic · host · input_pipeline=none",
                    "synthetic · loader · input_pipeline=none", "imagefolder · synthetic_location=none · cpu",
                    "imagefolder · synthetic_location=none · dali"]
"""input-location's columns with one implementation: the three locations of synthetic input, then
the study's JPEGs through each input pipeline, each pipeline a column of its own."""


@pytest.mark.slow
def test_input_location_smoke_gives_device_counts_by_locations_and_pipelines(smoke_study):
    results, report = _smoke("input-location", smoke_study)
    tables = _tables(report, "configuration")
    assert sorted(t["title"].split("-")[0] for t in tables) == ["parameter_server", "replicated"]
    for table in tables:  # one implementation here: three locations, then real JPEGs through cpu and dali
        assert _shape(table) == (["num_devices"], LOCATION_COLUMNS)
        assert [r["num_devices"] for r in table["rows"]] == [1, 2]
        assert all(isinstance(r[c], float) for r in table["rows"] for c in LOCATION_COLUMNS)
    real = [r["config"] for r in _records(results) if r["config"]["data_name"] == "imagefolder"]
    assert sorted((c["input_pipeline"], c["num_devices"]) for c in real) == \
        sorted((p, n) for p in ("cpu", "dali") for n in (1, 2) for _ in range(2))  # x 2 variable updates
    assert {c["device"] for c in real} == {"cpu"}  # dali on its CPU backend
    assert {"effect-input_pipeline-dali-vs-cpu", "effect-synthetic_location-loader-vs-device"} <= \
        {t["id"] for t in _tables(report, "effect")}


def test_input_location_smoke_reads_jpegs_of_its_own_through_cpu_and_dali():
    study = load_study("input-location", smoke=True)
    assert study.dataset is not None and study.dataset.kind == "imagefolder"  # JPEGs, made by the study
    real = [c.config for c in study.suite.cases if c.config.data_dir is not None]
    assert sorted((c.input_pipeline, c.num_devices, c.variable_update) for c in real) == sorted(
        (p, n, v) for p in ("cpu", "dali") for n in (1, 2) for v in ("replicated", "parameter_server"))
    assert {c.data_dir for c in real} == {str(study.dataset.folder(Path("data")).resolve())}
    assert {(c.device, c.num_workers) for c in real} == {("cpu", 1)}
    synthetic = [c.config for c in study.suite.cases if c.config.data_dir is None]
    assert len(synthetic) == 12 and {c.input_pipeline for c in synthetic} == {None}
    full = load_study("input-location")
    real = [c.config for c in full.suite.distinct_cases() if c.config.data_dir is not None]
    assert sorted((c.input_pipeline, c.num_devices, c.variable_update) for c in real) == sorted(
        (p, n, v) for p in ("cpu", "dali") for n in (1, 2, 4, 8) for v in ("replicated", "parameter_server"))
    assert len(full.suite.cases) == 80
    assert {c.num_workers for c in real} == {8}  # the same loader budget per device at every count


def test_input_location_real_data_at_every_device_count_stays_in_one_table():
    """cpu and dali keep their two columns beside the locations whether the runs had the recipe's
    8 loader processes per device or the default (cores per device less one, which follows the
    device count: ``num_workers`` depends on ``num_devices``)."""
    def real(workers):
        return [record("resnet50", "dgx1", rate * n, num_devices=n, data_name="imagefolder", synthetic_location=None,
                       input_pipeline=pipeline, num_workers=workers(n))
                for n in (1, 2, 4, 8) for pipeline, rate in (("cpu", 180.0), ("dali", 225.0))]

    for workers in (lambda n: 8, lambda n: 80 // n - 1):
        [(_, labels, rows)] = _layout_shape("input-location", _location_records((None,)) + real(workers))
        assert rows == [1, 2, 4, 8] and labels == LOCATION_COLUMNS


@pytest.mark.slow
def test_input_location_without_dali_refuses_its_dali_cases_naming_it(tmp_path, monkeypatch):
    """Where DALI is not installed, the checks every case goes through before a sweep runs
    (preflight) refuse each dali case, naming DALI and how to install it; the rest pass."""
    from cnnbench.data import dali
    from cnnbench.engine.resolve import preflight
    from cnnbench.study.run import make_dataset

    study = load_study("input-location", smoke=True, data_root=tmp_path / "data")
    assert study.dataset is not None
    make_dataset(study.dataset, tmp_path / "data")
    monkeypatch.setattr(dali, "dali_installed", lambda: False)
    refused = {}
    for case in study.suite.distinct_cases():
        try:
            preflight(case.config)
        except ConfigError as exc:
            refused[case.description] = str(exc)
    assert sorted(refused) == sorted(c.description for c in study.suite.distinct_cases()
                                     if c.config.input_pipeline == "dali")
    assert len(refused) == 4
    assert all("dali needs NVIDIA DALI, which is not installed" in why and "cnnbench[dali]" in why
               for why in refused.values())


@pytest.mark.slow
def test_scaling_smoke_gives_models_by_device_counts_speedup_and_effects(smoke_study):
    results, report = _smoke("scaling", smoke_study)
    tables = _tables(report, "configuration")
    assert sorted(t["title"].split("-")[0] for t in tables) == ["real", "syn"]  # synthetic and real input
    for table in tables:
        assert _shape(table) == (["model"], ["1", "2"])  # rows: model (x batch size); columns: devices
        assert sorted(r["batch"] for r in table["rows"]) == [4, 8]
    scaling = _tables(report, "scaling")
    assert len(scaling) == 2 and all({"speedup", "efficiency"} <= set(t["columns"]) for t in scaling)
    effects = {t["id"]: t for t in _tables(report, "effect")}
    assert {"effect-batch_size-8-vs-4", "effect-data-synthetic-vs-imagefolder"} <= set(effects)
    assert all(t["columns"][-1] == "median" for t in effects.values())


@pytest.mark.slow
def test_train_to_accuracy_smoke_gives_the_training_table_and_records_the_rate(smoke_study):
    results, report = _smoke("train-to-accuracy", smoke_study)
    [table] = _tables(report, "training")
    assert table["columns"][1:] == ["CPU (1)", "CPU (2)"]
    labels = [r[table["columns"][0]] for r in table["rows"]]
    for wanted in ("Training time", "time per epoch", "Images/sec", "Training accuracy", "Test accuracy",
                   "total over"):
        assert any(wanted in label for label in labels), (wanted, labels)
    rate = next(r for r in table["rows"] if r[table["columns"][0]].startswith("Learning rate"))
    assert [rate["CPU (1)"], rate["CPU (2)"]] == pytest.approx([0.05, 0.1])
    # the rule and the rate it gave, in each record: 0.05 per device, linear
    rates = {r["config"]["num_devices"]: r for r in _records(results)}
    assert sorted(rates) == [1, 2]
    for n, rec in rates.items():
        assert rec["config"]["lr_scaling"] == "linear" and rec["config"]["learning_rate"] == pytest.approx(0.05)
        assert rec["metrics"]["learning_rate"] == pytest.approx(0.05 * n)
        assert rec["metrics"]["epochs"][-1]["learning_rate"] == pytest.approx(0.05 * n)  # after the warm-up


# --------------------------------------------------------------------------- the layouts on merged records


def _location_records(sources: tuple[str | None, ...]) -> list[dict]:
    rate = {"device": 228.0, "host": 226.0, "loader": 219.0}
    return [record("resnet50", "dgx1", rate[loc] * n * (1.02 if src else 1.0), num_devices=n, source=src,
                   synthetic_location=loc)
            for src in sources for n in (1, 2, 4, 8) for loc in ("device", "host", "loader")]


def _layout_shape(name: str, records: list[dict]) -> list[tuple[list[str], list[str], list]]:
    """(row headers, column labels, row labels) of each throughput table of study ``name``'s report."""
    rows = load_study(name).layout.rows
    report = build_report(records, report_options(load_study(name).layout, records))
    out = []
    for table in (t for t in report.tables if t.kind == "configuration"):
        headers, labels = _shape({"columns": table.columns}, len(rows))
        out.append((headers, labels, [r[0].value if r[0].value is not None else r[0].text for r in table.rows]))
    return out


def test_input_location_columns_are_locations_by_implementation_when_records_hold_two():
    [(headers, labels, rows)] = _layout_shape("input-location", _location_records((None, "tf_cnn_benchmarks")))
    assert headers == ["num_devices"] and rows == [1, 2, 4, 8]
    assert len(labels) == 6 and all(any(loc in label for label in labels) for loc in ("device", "host", "loader"))
    assert sum("tf_cnn_benchmarks" in label for label in labels) == 3
    [(headers, labels, rows)] = _layout_shape("input-location", _location_records((None,)))
    assert labels == ["device", "host", "loader"]  # one implementation: the three locations


def test_input_location_gives_each_input_pipeline_a_column_beside_the_locations():
    """Real-data runs (the data set's name, no location, their pipeline) join the synthetic ones in
    one table per variable update: cpu and dali each a column, after the three locations."""
    real = [record("resnet50", "dgx1", rate * n, num_devices=n, data_name="imagefolder", synthetic_location=None,
                   input_pipeline=pipeline)
            for n in (1, 2, 4, 8) for pipeline, rate in (("cpu", 180.0), ("dali", 225.0))]
    [(headers, labels, rows)] = _layout_shape("input-location", _location_records((None,)) + real)
    assert headers == ["num_devices"] and rows == [1, 2, 4, 8]
    assert labels == LOCATION_COLUMNS


def test_scaling_of_real_data_is_one_series_whatever_loader_processes_each_device_count_had():
    """Left unset, ``--num-workers`` is the cores per device less one: 79 at 1 device of an 80-core
    machine, 9 at 8. It follows the device count, so it must not split the scaling table into a
    table per count (which would show no scaling at all)."""
    records = [record(model, "dgx1", ips * n, num_devices=n, data_name="imagefolder", num_workers=80 // n - 1)
               for n in (1, 2, 4, 8) for model, ips in (("resnet50", 220.0), ("vgg16", 120.0))]
    [(headers, labels, rows)] = _layout_shape("scaling", records)
    assert headers == ["model"] and labels == ["1", "2", "4", "8"] and sorted(rows) == ["resnet50", "vgg16"]


def test_host_cpus_columns_are_cpus_when_results_of_several_machines_are_merged():
    records = [record(model, machine, ips, num_devices=4)
               for machine, scale in (("m-fast", 1.0), ("m-slow", 0.8))
               for model, ips in (("resnet50", 730.0 * scale), ("vgg16", 377.0 * scale))]
    [(headers, labels, rows)] = _layout_shape("host-cpus", records)
    assert headers == ["model"] and sorted(rows) == ["resnet50", "vgg16"]
    assert labels == ["CPU-X", "CPU-Y"]  # the machines' CPU models (host_cpus holds one value: left out)


def test_the_python_api_runs_a_study_by_name():
    import cnnbench

    assert cnnbench.study.execute_study is execute_study and not callable(cnnbench.study)  # the package
    with pytest.raises(StudyError, match="no study 'nope'"):
        cnnbench.run_study("nope")


def test_the_training_table_shows_the_rate_the_rule_gave_when_records_hold_it():
    with_rate = []
    for n in (1, 2, 4):
        rec = training_record(n)
        rec["config"].update(learning_rate=0.0125, lr_scaling="linear")
        rec["metrics"]["learning_rate"] = 0.0125 * n
        with_rate.append(rec)
    [table] = [t for t in build_report(with_rate).tables if t.kind == "training"]
    assert [c.value for c in table.row("Learning rate at the start (after --lr-scaling)")[1:]] == \
        pytest.approx([0.0125, 0.025, 0.05])
    [table] = [t for t in build_report([training_record(n) for n in (1, 2)]).tables if t.kind == "training"]
    assert not any("Learning rate" in r[0].text for r in table.rows)  # records without it: no row


def test_loader_processes_left_to_their_default_pair_across_device_counts_and_set_ones_stay_apart():
    """Across device counts, runs pair whatever loader processes the default gave each count (79
    at 1, 9 at 8); runs whose count the user set at one device count (4 and 16 at each) pair 4
    with 4 and 16 with 16, never pooled as repeats of one run."""
    from cnnbench.analysis.pairing import pair_key_fields, pair_points
    from cnnbench.analysis.points import build_points

    def pairs(workers):
        recs = [record("resnet50", "dgx1", 220.0 * n, num_devices=n, data_name="imagefolder", num_workers=w)
                for n in (1, 8) for w in workers(n)]
        points = build_points(recs)
        fields = pair_key_fields(points.key_fields, "config.num_devices", points=points)
        return [(len(p.a), len(p.b)) for p in pair_points(points, "config.num_devices", 1, 8, fields).pairs]

    assert pairs(lambda n: [80 // n - 1]) == [(1, 1)]
    assert pairs(lambda n: [4, 16]) == [(1, 1), (1, 1)]
