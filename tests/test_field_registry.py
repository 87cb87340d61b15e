"""The field registry (issue 45, item 1): each record field that a reader names is declared once,
in :mod:`cnnbench.results.fields`, and no other module spells its path."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from cnnbench.analysis import fields as F
from cnnbench.analysis import points
from cnnbench.config.run_config import config_fields, identity_fields
from cnnbench.results import fields as R

SRC = Path(__file__).resolve().parent.parent / "src" / "cnnbench"
REGISTRY = "results/fields.py"


def test_declarations_of_known_fields():
    ips = R.field(R.IPS)
    assert (ips.unit, ips.direction, ips.combine, ips.identity) == ("images/s", "higher", "sum", False)
    assert ips.show(1234.56) == "1,234.6"
    steps = R.field(R.STEP_TIMES)
    assert (steps.unit, steps.direction, steps.combine) == ("s", "lower", "max")
    assert (R.field(R.ENERGY).unit, R.field(R.ENERGY).direction) == ("J", "lower")
    assert R.field("metrics.peak_device_memory_bytes").unit == "bytes"
    assert R.field("metrics.per_device_images_per_sec").combine == "per_rank"
    model = R.field(R.MODEL)
    assert (model.identity, model.direction, model.unit, model.label, model.section, model.name) == (
        True, None, None, "model", "config", "model")
    assert R.field("config.seed").identity is False
    assert R.field(R.DATA_FORMAT).identity is True
    gpu = R.field(R.GPU)
    assert (gpu.label, gpu.hardware, gpu.identity, gpu.aliases) == ("gpu", True, False, ("gpu",))
    assert R.field(R.SOURCE).section == "" and R.field(R.SOURCE).bare


def test_config_identity_comes_from_the_run_options():
    """Every run option is a registered ``config`` field; its identity is the option's own
    (``identity_fields()``), but for the folder of the data (:data:`NOT_IDENTITY`)."""
    registered = {f.name for f in R.list_fields("config.*")}
    assert {f.name for f in config_fields()} <= registered
    assert {f.name for f in R.list_fields("config.*", identity=True)} == identity_fields() - R.NOT_IDENTITY
    assert registered - {f.name for f in config_fields()} == R.LEGACY_CONFIG


def test_lookups_and_wildcards():
    assert R.field("gpu") is R.field("environment.gpu_model") is R.by_alias("gpu")
    assert R.field("batch") is R.field("batch_size") is R.field(R.BATCH)
    with pytest.raises(R.UnknownField):
        R.field("metrics.bogus")
    with pytest.raises(R.UnknownField):
        R.by_alias("config.model")  # a path, not an alias
    images = [f.path for f in R.list_fields("metrics.*images*")]
    assert images[0] == R.IPS and R.IMAGES_PER_JOULE in images and R.STEP_TIMES not in images
    assert all(p.startswith("metrics.") for p in images)
    assert set(R.paths("environment.*", hardware=True)) == F.HARDWARE_FIELDS
    assert [f.path for f in R.list_fields("config.model")] == [R.MODEL]
    assert R.list_fields("nothing.*") == []


def test_every_constant_is_a_registered_path():
    constants = {n: v for n, v in vars(R).items() if n.isupper() and isinstance(v, str)}
    assert {n: v for n, v in constants.items() if v not in R.FIELDS} == {}
    assert len(constants) > 30


def test_analysis_fields_keeps_its_tables():
    """``analysis/fields.py``'s tables are the registry's, with the values they had before it."""
    assert F.ALIASES is R.ALIASES and F.HARDWARE_FIELDS is R.HARDWARE_FIELDS and F.SHORT_NAMES is R.SHORT_NAMES
    assert (F.MODEL, F.BATCH, F.DEVICES, F.IPS) == (
        "config.model", "config.batch_size", "config.num_devices", "metrics.total_images_per_sec")
    assert F.ALIASES == {
        "model": "config.model", "machine": "environment.machine", "gpu": "environment.gpu_model",
        "cpu": "environment.cpu_model", "num_devices": "config.num_devices", "devices": "config.num_devices",
        "batch_size": "config.batch_size", "batch": "config.batch_size", "data": "config.data_name",
        "variable_update": "config.variable_update", "precision": "config.precision", "device": "config.device",
        "compile": "config.compile", "source": "source", "status": "status",
    }
    assert F.SHORT_NAMES == {
        "config.model": "model", "environment.machine": "machine", "environment.gpu_model": "gpu",
        "environment.cpu_model": "cpu", "config.num_devices": "num_devices", "config.batch_size": "batch_size",
        "config.data_name": "data", "config.variable_update": "variable_update", "config.precision": "precision",
    }
    assert {
        "environment.machine", "environment.hostname", "environment.cpu_model", "environment.cpu_cores",
        "environment.gpu_model", "environment.gpu_count", "environment.platform",
    } == F.HARDWARE_FIELDS
    assert {
        "config.model", "environment.machine", "environment.gpu_model", "environment.cpu_model",
        "config.data_name", "config.variable_update", "config.precision", "source", "environment.hostname",
    } == F.BARE_VALUE_FIELDS
    assert F.short_name("environment.gpu_model") == "gpu" and F.short_name("metrics.energy_j") == "energy_j"
    assert F.label("config.batch_size", 64) == "batch_size=64" and F.label("config.model", "resnet50") == "resnet50"


def test_ignored_config_is_what_it_was():
    """``points.IGNORED_CONFIG`` is the registry's, and equal to the old hand-kept definition."""
    old = frozenset({
        "seed", "num_batches", "num_warmup_batches", "display_every", "data_dir", "results_dir",
        "machine_label", "repeat", "repeats", "num_repeats", "timeout", "timeout_s", "trace",
        "trace_dir", "profile", "profile_dir", "profile_steps", "output", "skip_bad_images", "log_every",
    }) | frozenset(f.name for f in config_fields()) - identity_fields()
    assert points.IGNORED_CONFIG is R.IGNORED_CONFIG
    assert old == R.IGNORED_CONFIG


def spelled_paths(root: Path = SRC) -> Counter[str]:
    """Per module (relative to ``root``), the string constants equal to a registered dotted path,
    outside the registry. Docstrings (and any other bare string statement) are not code, so they
    are left out. Top-level fields (``source``, ``status``) have no dot: they are the record's
    own keys (``record["status"]``), read directly, and left out too."""
    dotted = {p for p in R.FIELDS if "." in p}
    found: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == REGISTRY:
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        found[rel] += sum(1 for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                          and n.value in dotted and id(n) not in docs)
    return +found


def test_no_module_spells_a_registered_path():
    """Readers name fields by the registry's constants; a module that spells a path as a string
    literal fails here."""
    found = spelled_paths()
    assert found == {}, f"spell these through cnnbench.results.fields (or analysis.fields): {dict(found)}"


def test_the_scan_sees_literals_and_skips_docstrings(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "fields.py").write_text('IPS = "metrics.total_images_per_sec"\n')
    (tmp_path / "a.py").write_text('"""Reads "config.model"."""\n\n'
                                   'def f(r):\n    """config.model"""\n    return r.get("config.model"), r["status"]\n')
    (tmp_path / "b.py").write_text('X = ("environment.gpu_model", f"config.{1}", "config.bytes")\n"config.model"\n')
    assert spelled_paths(tmp_path) == Counter({"a.py": 1, "b.py": 1})


def test_table_cells_read_the_registry_format():
    """Report cells of a registered field are in the format the registry declares for it."""
    from cnnbench.report.table import MISSING, field_number

    assert field_number(R.IPS, 1234.56)[:2] == ("1,234.6", 1234.56)
    assert field_number(R.IMAGES_PER_JOULE, 3.14159).text == "3.14"
    assert field_number(R.ENERGY, None).text == MISSING


def test_tables_compare_and_predict_take_images_per_sec_format_from_the_registry(monkeypatch):
    """The history table, ``compare`` and ``predict`` print images/sec as the registry declares."""
    import dataclasses

    from cnnbench.analysis.history import Outlier, Run
    from cnnbench.analysis.points import Measure
    from cnnbench.compare import render as compare_render
    from cnnbench.predict import render as predict_render
    from cnnbench.report.tables import history as history_table

    run = Run("r1", "2026-01-02T00:00:00", None, 1500.0, None)
    assert [c.text for c in history_table._outlier_row(Outlier("s", "m", run, 2000.0))[3:5]] == ["1,500.0", "2,000.0"]
    monkeypatch.setitem(R.FIELDS, R.IPS, dataclasses.replace(R.FIELDS[R.IPS], format=".3e"))
    assert [c.text for c in history_table._outlier_row(Outlier("s", "m", run, 2000.0))[3:5]] == [
        "1.500e+03", "2.000e+03"]
    assert history_table._ips(1500.0) == predict_render._ips(1500.0) == "1.500e+03"
    assert compare_render._ips(Measure([1500.0])) == "1.500e+03"


def test_compare_of_bus_bandwidth_heads_its_columns_with_the_registry_unit():
    from cnnbench.compare.bandwidth import HEADER

    unit = R.field(R.BUSBW).unit
    assert unit == "GB/s"
    assert HEADER[4:6] == (f"baseline busbw {unit}", f"candidate busbw {unit}")


def test_every_declared_record_field_has_a_constant_to_name_it_by():
    """A reader (a new table kind, an observation) names a field by its constant, never by its path:
    every section field the registry declares itself (not the config fields, which come from the
    options; not the top-level keys, read by their names) has one, so a new reader of a declared
    field edits nothing here."""
    from cnnbench.results import fields as registry

    constants = {value for name, value in vars(registry).items() if name.isupper() and isinstance(value, str)}
    declared = [path for path in registry.FIELDS if "." in path and not path.startswith("config.")]
    assert declared and [path for path in declared if path not in constants] == []


# Labels of registered fields that no header may spell: the text a table, compare, predict or the CLI
# heads a column (or a table) of that field with. Short words (``batch``, ``devices``) are also record
# keys and values, so the scan leaves them to the test below it, which relabels the fields.
SPELLED_LABELS = (R.IPS, R.IPS_PER_CORE, R.BUSBW, R.IMAGES_PER_JOULE, R.FORWARD_ONLY)


def spelled_labels(root: Path = SRC) -> Counter[str]:
    """Per module of ``report``, ``compare``, ``predict`` and ``cli``, the string constants (not
    docstrings) equal to one of :data:`SPELLED_LABELS`' labels; prose that holds one is no header."""
    labels = {R.field(name).label for name in SPELLED_LABELS}
    found: Counter[str] = Counter()
    for package in ("report", "compare", "predict", "cli"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
            found[path.relative_to(root).as_posix()] += sum(
                1 for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and n.value in labels and id(n) not in docs)
    return +found


def test_no_header_spells_a_registered_label():
    assert R.field(R.IPS).label == "images/sec" and R.field(R.BUSBW).label == "busbw"
    found = spelled_labels()
    assert found == {}, f"head these columns with the registry's label (F.field(F.X).label): {dict(found)}"


def test_report_headers_are_the_registry_labels(monkeypatch):
    """The throughput, scaling and input-pipeline tables (and the figures' axes) head a registered field's
    column with its registry label: relabelled, the headers follow."""
    import dataclasses

    from cnnbench.report import build_report
    from tests.report_fixtures import record, scaling_records

    default = build_report(scaling_records())
    new = {name: f"<{R.field(name).label}>" for name in (R.MODEL, R.MACHINE, R.BATCH, R.DEVICES, R.IPS,
                                                          R.IPS_PER_CORE)}
    for name, label in new.items():
        monkeypatch.setitem(R.FIELDS, name, dataclasses.replace(R.FIELDS[name], label=label))
    data = record("pipeline", ips=800.0)
    data["config"]["mode"] = "data"
    data["metrics"]["images_per_sec_per_core"] = 200.0
    report = build_report(scaling_records() + [data])
    by_kind = {t.kind: t for t in report.tables}
    throughput, scaling, summary = by_kind["configuration"], by_kind["scaling"], by_kind["scaling-summary"]
    assert throughput.columns[:2] == ["model", new[R.BATCH]]  # row field (its short name), then the batch
    assert scaling.columns[:5] == [new[R.MODEL], new[R.MACHINE], new[R.BATCH], new[R.DEVICES], new[R.IPS]]
    assert summary.columns[2].startswith(f"{new[R.IPS]}, ")
    assert [t.title for t in report.tables if t.kind == "pipeline"] == [
        f"Input pipeline alone: {new[R.IPS]}", f"Input pipeline alone: {new[R.IPS_PER_CORE]}"]
    # with the registry's own labels, the headers as they were printed before it held them
    before = {t.kind: t.columns for t in default.tables}
    assert before["configuration"][:2] == ["model", "batch"]
    assert before["scaling"][:7] == ["model", "machine", "batch", "devices", "images/sec", "speedup", "efficiency"]
