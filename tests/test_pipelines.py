"""Input pipelines apart from data sets (issue 45 item 4): the registry, its default (``cpu``),
a pipeline registered here used by a run on real data, ``--input-pipeline`` in the record, and
what is refused before any work."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import cnnbench.data
from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.choices import DEFAULT_INPUT_PIPELINE, INPUT_PIPELINE_HELP, INPUT_PIPELINES
from cnnbench.config.input_options import InputOptions
from cnnbench.config.input_rules import INPUT_RULES
from cnnbench.config.options import field_choices
from cnnbench.data import pipelines
from cnnbench.data.cpu import cpu_pipeline
from cnnbench.data.generate import make_data_set
from cnnbench.data.loader import DataSetSource
from cnnbench.data.pipelines import pipeline_of, register_pipeline, registered_pipelines
from cnnbench.engine import run_in_process
from cnnbench.engine.resolve import resolve
from cnnbench.results.store import StoreReader


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data") / "folder"
    make_data_set("imagefolder", root, num_classes=2, images_per_class=4, val_images_per_class=1,
                  image_size=(40, 30))
    return root


@pytest.fixture
def own_registry(monkeypatch) -> dict[str, Any]:
    """An empty registry for this test (the real one is back after it)."""
    registry: dict[str, Any] = {}
    monkeypatch.setattr(pipelines, "_PIPELINES", registry)
    return registry


def _run(folder: Path, **changes: Any) -> RunConfig:
    return RunConfig(**{"model": "trivial", "device": "cpu", "data_dir": str(folder), "batch_size": 2,
                        "num_batches": 2, "num_warmup_batches": 0, "num_workers": 0, **changes})


def test_the_registry_names_every_pipeline_and_cpu_is_the_default():
    assert sorted(registered_pipelines()) == sorted(INPUT_PIPELINES)
    assert DEFAULT_INPUT_PIPELINE == INPUT_PIPELINES[0] == "cpu"
    assert registered_pipelines()["cpu"].factory is cpu_pipeline
    field = next(f for f in dataclasses.fields(RunConfig) if f.name == "input_pipeline")
    assert field_choices(field) == INPUT_PIPELINES and field.metadata["identity"]
    with pytest.raises(ValueError, match="registered twice"):
        register_pipeline("cpu")(cpu_pipeline)
    with pytest.raises(ValueError, match="not an --input-pipeline choice"):
        register_pipeline("nope")(cpu_pipeline)  # type: ignore[arg-type]


def test_each_pipeline_is_the_module_named_after_it():
    for name, pipeline in registered_pipelines().items():
        assert pipeline.factory.__module__ == f"cnnbench.data.{name}"


def test_a_pipelines_module_is_imported_when_a_run_asks_for_it_and_no_other(own_registry, monkeypatch):
    for name in INPUT_PIPELINES:  # as if no pipeline had been imported (both back after the test)
        monkeypatch.delitem(sys.modules, f"cnnbench.data.{name}", raising=False)
        monkeypatch.delattr(cnnbench.data, name, raising=False)
    assert pipeline_of(InputOptions(input_pipeline="cpu")).factory.__module__ == "cnnbench.data.cpu"
    assert list(own_registry) == ["cpu"]
    assert [n for n in INPUT_PIPELINES if f"cnnbench.data.{n}" in sys.modules] == ["cpu"]


def test_a_module_that_registers_no_pipeline_of_its_name_is_named(own_registry):
    with pytest.raises(ValueError, match=r"^input pipeline 'cpu': its module, cnnbench.data.cpu, registers no "):
        pipeline_of(InputOptions(input_pipeline="cpu"))  # imported before this test, into the real registry
    with pytest.raises(ValueError, match=r"^no input pipeline 'nope' \(known: "):
        pipeline_of(InputOptions(input_pipeline="nope"))  # type: ignore[arg-type]


def test_the_help_of_input_pipeline_gives_each_pipelines_words_in_order():
    field = next(f for f in dataclasses.fields(RunConfig) if f.name == "input_pipeline")
    listed = ", ".join(f"{name} ({INPUT_PIPELINE_HELP[name]})" for name in INPUT_PIPELINES)
    assert f"become batches: {listed} [default there: {DEFAULT_INPUT_PIPELINE}]." in field.metadata["help"]
    assert list(INPUT_PIPELINE_HELP) == list(INPUT_PIPELINES)


class _Counted:
    """A fake pipeline's source: the cpu pipeline's batches, counted."""

    def __init__(self, inner: DataSetSource) -> None:
        self.inner = inner
        self.description = inner.description
        self.num_classes = inner.num_classes
        self.batches = 0

    def __next__(self):
        self.batches += 1
        return next(self.inner)

    def close(self) -> None:
        self.inner.close()

    def metrics(self) -> dict[str, Any]:
        return {**self.inner.metrics(), "fake_pipeline_batches": self.batches}


def test_a_pipeline_registered_here_makes_the_batches_of_a_run_on_real_data(folder, own_registry):
    made: list[Any] = []

    @register_pipeline("cpu")
    def fake(request, data_set):
        made.append((request.config.data_name, data_set.root))
        return _Counted(cpu_pipeline(request, data_set))

    record = run_in_process(_run(folder))
    assert record.status == "ok", record.error
    assert made == [("imagefolder", str(folder.resolve()))]
    assert record.metrics["fake_pipeline_batches"] == 2
    assert record.config["input_pipeline"] == "cpu"


def test_the_pipeline_is_recorded_and_synthetic_input_records_none(folder):
    real = resolve(_run(folder)).config
    assert real.input_pipeline == "cpu" and real.recorded()["input_pipeline"] == "cpu"
    assert resolve(_run(folder, input_pipeline="cpu")).config == real
    for given in (None, "cpu"):  # the default is accepted on synthetic input, which decodes nothing
        synthetic = resolve(RunConfig(model="trivial", device="cpu", input_pipeline=given)).config
        assert "input_pipeline" in synthetic.recorded() and synthetic.input_pipeline is None


def test_synthetic_input_refuses_another_pipeline_in_one_line():
    values = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    INPUT_RULES["synthetic"].validate(SimpleNamespace(**{**values, "input_pipeline": "cpu"}))
    with pytest.raises(ConfigError) as refused:
        INPUT_RULES["synthetic"].validate(SimpleNamespace(**{**values, "input_pipeline": "gpu"}))
    assert str(refused.value).startswith("--input-pipeline: gpu makes batches of a data set's images")
    assert "\n" not in str(refused.value)


def test_an_unknown_pipeline_is_refused_in_one_line_before_any_work(folder, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "--model", "trivial", "--device", "cpu", "--data-dir", str(folder),
              "--input-pipeline", "nope", "--results-dir", str(tmp_path / "r")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "argument --input-pipeline: invalid choice: 'nope'" in err and "\n" not in err
    assert not (tmp_path / "r").exists()
    choices = re.escape(", ".join(INPUT_PIPELINES))
    with pytest.raises(ConfigError, match=rf"^--input-pipeline: invalid choice 'nope' \(choose from {choices}\)$"):
        RunConfig(model="trivial", data_dir=str(folder), input_pipeline="nope")  # a suite file's value


def test_a_pipelines_own_check_refuses_before_any_work(folder, tmp_path, capsys, own_registry):
    built: list[Any] = []

    def cifar_only(config, data_set):
        if not data_set.name.startswith("cifar"):
            raise ConfigError("input_pipeline", f"cpu reads CIFAR only here, not {data_set.name}")

    register_pipeline("cpu", check=cifar_only)(lambda request, data_set: built.append(1))
    code = main(["run", "--model", "trivial", "--device", "cpu", "--data-dir", str(folder),
                 "--results-dir", str(tmp_path / "r")])
    assert code == 2 and not built
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "error: --input-pipeline: cpu reads CIFAR only here, not imagefolder" in line
    assert not (tmp_path / "r").exists()


def test_a_record_from_before_the_option_still_reads(tmp_path):
    record = {"schema_version": 2, "tool_version": "0.1.0", "run_id": "old1", "started_at": "2026-01-01T00:00:00+00:00",
              "status": "ok", "error": None, "environment": {"machine": "box"},
              "config": {"model": "trivial", "batch_size": 2, "device": "cpu", "data_name": "imagefolder",
                         "data_dir": "/data/x", "num_workers": 0, "resize_method": "bilinear"},
              "metrics": {"total_images_per_sec": 10.0}}
    (tmp_path / "box.jsonl").write_text(json.dumps(record) + "\n")
    (read,), problems = StoreReader(tmp_path).read()
    assert not problems and "input_pipeline" not in read["config"]
    assert RunConfig.from_mapping({k: v for k, v in read["config"].items()}).input_pipeline is None


def test_a_real_data_run_recorded_before_the_option_is_the_same_configuration_as_one_on_the_cpu_pipeline():
    from cnnbench.analysis.points import build_points

    def record(ips, **cfg):
        return {"status": "ok", "config": {"model": "resnet18", "batch_size": 8, "data_name": "imagefolder", **cfg},
                "environment": {"machine": "box"}, "metrics": {"total_images_per_sec": ips}}

    points = build_points([record(100.0), record(110.0, input_pipeline="cpu")])
    assert len(points.points) == 1 and sorted(points.points[0].measure.ips) == [100.0, 110.0]
    points = build_points([record(100.0), record(110.0, input_pipeline="other")])
    assert len(points.points) == 2


def test_an_imported_real_data_run_is_not_taken_for_one_on_our_cpu_pipeline():
    from cnnbench.analysis.points import build_points

    def record(ips, **extra):
        return {"status": "ok", "config": {"model": "resnet18", "batch_size": 8, "data_name": "imagenet"},
                "environment": {"machine": "box"}, "metrics": {"total_images_per_sec": ips}, **extra}

    ours = record(110.0)
    ours["config"]["input_pipeline"] = "cpu"
    points = build_points([record(100.0, source="tf_cnn_benchmarks"), ours])
    imported = next(p for p in points.points if 100.0 in p.measure.ips)
    fields = dict(zip(points.key_fields, imported.key, strict=False))
    assert "config.input_pipeline" in fields and fields["config.input_pipeline"] is None
