"""Probes of bad values (issue 17, items 6-8): figures no reader can compute with, imported
rows and ``--set`` values ``run`` would refuse, and bounds on sizes. Each case gives one
line naming the cause (or, for a stored figure, names the record and shows the figure as not
available), never a traceback, and damages no record already written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.results import cache
from cnnbench.results.store import StoreNotice, read_records
from tests.report_fixtures import record

# --- item 6: non-finite and huge figures in stored records -------------------------------------------------------

UNUSABLE = [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e300", "1e+300"),
            ("1" + "0" * 400, "an integer of 401 digits")]


def _line(rec: dict, ips_text: str) -> str:
    """``rec`` as a store line whose ``metrics.total_images_per_sec`` is ``ips_text`` verbatim."""
    text = json.dumps(rec)
    marker = '"total_images_per_sec": 100.0'
    assert marker in text
    return text.replace(marker, f'"total_images_per_sec": {ips_text}')


def _stores(tmp_path: Path, ips_text: str) -> tuple[Path, Path, Path]:
    base, cand = tmp_path / "base", tmp_path / "cand"
    base.mkdir()
    cand.mkdir()
    (base / "m-fast.jsonl").write_text(json.dumps(record(ips=110.0)) + "\n")
    bad = cand / "m-fast.jsonl"
    bad.write_text(json.dumps(record(ips=120.0)) + "\n" + _line(record(ips=100.0), ips_text) + "\n")
    return base, cand, bad


@pytest.mark.parametrize("command", ["report", "compare", "compare-reversed", "results"])
@pytest.mark.parametrize(("ips_text", "shown"), UNUSABLE, ids=[u[1][:12] for u in UNUSABLE])
def test_an_unusable_figure_is_not_available_and_names_its_record(tmp_path, capsys, command, ips_text, shown):
    base, cand, bad = _stores(tmp_path, ips_text)
    before = bad.read_bytes()
    argv = {"report": ["report", str(cand), "-o", str(tmp_path / "out")],
            "compare": ["compare", str(base), str(cand)],
            "compare-reversed": ["compare", str(cand), str(base)],
            "results": ["results", "list", str(cand)]}[command]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert f"{bad}:2: metrics.total_images_per_sec is {shown}: shown as not available" in err
    assert "Traceback" not in err and "skipped" not in err
    assert bad.read_bytes() == before  # nothing written to the store
    if command == "report":
        summary = (tmp_path / "out" / "summary.md").read_text()
        assert f"{bad}:2: metrics.total_images_per_sec is {shown}" in summary
        assert "from 2 results" in out


def test_the_record_is_kept_with_the_figure_null_and_a_notice(tmp_path):
    _, cand, bad = _stores(tmp_path, "1e300")
    bad.write_text(bad.read_text() + _line(record(ips=100.0, metrics={"step_times_s": [0.1, 1e300]}), "5.0") + "\n")
    records, problems = read_records(cand)
    assert len(records) == 3
    assert records[1]["metrics"]["total_images_per_sec"] is None
    assert records[1]["metrics"]["images_per_sec_mean"] == 100.0  # the usable figures stay
    assert records[2]["metrics"]["step_times_s"] == [0.1, None]
    assert [type(p) for p in problems] == [StoreNotice, StoreNotice]
    assert problems[1] == f"{bad}:3: metrics.step_times_s is 1e+300: shown as not available"


def test_a_learning_rate_of_1e38_stays_a_config_value(tmp_path):
    rec = record(learning_rate=1e38, metrics={"loss_last": 1e17})
    (tmp_path / "m-fast.jsonl").write_text(json.dumps(rec) + "\n")
    (got,), problems = read_records(tmp_path)
    assert problems == [] and got["config"]["learning_rate"] == 1e38 and got["metrics"]["loss_last"] == 1e17


def _runs(line: str, n: int, tag: str) -> str:
    """``n`` lines of ``line``'s record, each a run of its own (a run read twice counts once)."""
    return "".join(line.replace('"run_id": "', f'"run_id": "{tag}{k}-', 1) for k in range(n))


def test_the_notice_holds_when_the_file_is_read_through_its_cache(tmp_path):
    good = json.dumps(record(ips=120.0, metrics={"step_times_s": [0.0123456789] * 400})) + "\n"
    copies = cache.MIN_BYTES // len(good) + 2
    path = tmp_path / "m-fast.jsonl"
    path.write_text(_runs(good, 3, "a") + _line(record(ips=100.0), "NaN") + "\n" + _runs(good, copies, "b"))
    for _ in range(2):  # the first read writes the cache, the second reads it
        records, problems = read_records(tmp_path)
        assert len(records) == copies + 4
        assert records[3]["metrics"]["total_images_per_sec"] is None
        assert problems == [f"{path}:4: metrics.total_images_per_sec is NaN: shown as not available"]
    assert cache.cache_path(path).exists()


def test_adam_overflowing_its_update_keeps_a_record_marked_diverged(tmp_path, capsys):
    results = tmp_path / "r"
    assert main(["run", "--model", "trivial", "--device", "cpu", "--image-size", "32", "--batch-size", "8",
                 "--num-batches", "4", "--num-warmup-batches", "1", "--optimizer", "adam",
                 "--learning-rate", "1e38", "--precision", "bf16", "--results-dir", str(results)]) == 0
    err = capsys.readouterr().err
    assert "training diverged" in err and "overflow" not in err
    (rec,), problems = read_records(results)
    assert problems == [] and rec["status"] == "ok" and rec["error"] is None
    assert rec["metrics"]["diverged"] is True and rec["metrics"]["total_images_per_sec"] > 0


# --- item 7: import csv and --set check what `run` and the record contract check ----------------------------------

_COLUMNS = "config.model,config.batch_size,environment.machine,metrics.total_images_per_sec"


def _import(tmp_path: Path, rows: list[str], *extra: str, header: str = _COLUMNS) -> tuple[int, Path]:
    table = tmp_path / "t.csv"
    table.write_text(header + "\n" + "".join(row + "\n" for row in rows))
    return main(["import", "csv", str(table), "--results-dir", str(tmp_path / "r"), *extra]), table


@pytest.fixture
def store_before(tmp_path):
    """A store holding one record already, which no refused import may change."""
    assert _import(tmp_path, ["resnet50,32,m,100"])[0] == 0
    path = tmp_path / "r" / "m.jsonl"
    return path, path.read_bytes()


@pytest.mark.parametrize(("column", "cell", "why"), [
    ("config.precision", "fp64", "column 'config.precision': invalid choice 'fp64'"),
    ("config.device", "tpu", "column 'config.device': invalid choice 'tpu'"),
    ("config.data_format", "NCWH", "column 'config.data_format': invalid choice 'NCWH'"),
    ("config.variable_update", "bogus", "column 'config.variable_update': invalid choice 'bogus'"),
    ("config.optimizer", "bogus", "column 'config.optimizer': invalid choice 'bogus'"),
    ("schema_version", "-1", "schema_version -1 is not a version"),
    ("schema_version", "3", "schema_version 3 is newer than this cnnbench writes"),
    ("started_at", "garbage", "started_at 'garbage' is not an ISO 8601 time"),
    ("config.image_size", "8", "column 'config.image_size': must be >= 16"),
])
def test_a_row_run_would_refuse_is_skipped_naming_the_line(tmp_path, capsys, store_before, column, cell, why):
    path, before = store_before
    code, table = _import(tmp_path, [f"resnet50,32,m2,100,{cell}"], header=f"{_COLUMNS},{column}")
    err = capsys.readouterr().err
    assert code == 1 and f"{table}:2: {why}" in err and "Traceback" not in err
    assert not (tmp_path / "r" / "m2.jsonl").exists() and path.read_bytes() == before


@pytest.mark.parametrize("model", ["", " "])
def test_a_row_without_a_model_is_skipped(tmp_path, capsys, model):
    code, table = _import(tmp_path, [f'"{model}",32,m,100'])
    assert code == 1 and f"{table}:2: config.model is missing" in capsys.readouterr().err


def test_a_table_with_a_column_named_twice_is_refused_whole(tmp_path, capsys, store_before):
    path, before = store_before
    code, table = _import(tmp_path, ["resnet50,32,m,100,vgg16"], header=f"{_COLUMNS},config.model")
    err = capsys.readouterr().err
    assert code == 2 and f"{table}: column 'config.model' appears 2 times" in err
    assert path.read_bytes() == before


@pytest.mark.parametrize(("setting", "why"), [
    ("schema_version=-1", "schema_version -1 is not a version"),
    ("schema_version=99", "schema_version 99 is newer than this cnnbench writes"),
    ("started_at=garbage", "started_at 'garbage' is not an ISO 8601 time"),
    ("config.precision=fp64", "config.precision: invalid choice 'fp64'"),
    ("config.device=tpu", "config.device: invalid choice 'tpu'"),
    ("config.data_format=NCWH", "config.data_format: invalid choice 'NCWH'"),
    ("config.variable_update=bogus", "config.variable_update: invalid choice 'bogus'"),
    ("config.optimizer=bogus", "config.optimizer: invalid choice 'bogus'"),
    ("config.model=", "config.model is missing"),
    ("metrics.total_images_per_sec=.nan", "metrics.total_images_per_sec is nan"),
])
def test_a_set_run_would_refuse_is_one_line_and_exit_2(tmp_path, capsys, store_before, setting, why):
    path, before = store_before
    code, _ = _import(tmp_path, ["resnet50,32,m,100"], "--set", setting)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"cnnbench import: error: --set {setting}: ") and why in err
    assert len(err.strip().splitlines()) == 1 and path.read_bytes() == before


def test_set_run_id_over_many_runs_is_refused(tmp_path, capsys, store_before):
    path, before = store_before
    code, _ = _import(tmp_path, [f"resnet50,{n},m,100" for n in range(1, 49)], "--set", "run_id=x")
    err = capsys.readouterr().err
    assert code == 2 and "--set run_id=x: would give 48 records one run_id" in err
    assert path.read_bytes() == before
    assert _import(tmp_path, ["resnet50,7,m,100"], "--set", "run_id=x")[0] == 0  # one run: its id
    (rec,) = [r for r in read_records(tmp_path / "r")[0] if r["run_id"] == "x"]
    assert rec["config"]["batch_size"] == 7


def test_a_set_is_checked_with_the_row_it_lands_on(tmp_path, capsys):
    """The record is checked whole, --set applied: a --set may mend a row (a time is text, not
    YAML's timestamp)."""
    code, table = _import(tmp_path, ["resnet50,32,m,100,garbage"], "--set", "started_at=2024-01-01T00:00:00",
                          header=f"{_COLUMNS},started_at")
    assert code == 0  # --set replaced the row's bad time
    code, table = _import(tmp_path, ["resnet50,32,m,100,2024-01-01T00:00:00"], "--set", "schema_version=0",
                          header=f"{_COLUMNS},started_at")
    assert code == 0


# --- item 8: bounds ---------------------------------------------------------------------------------------------------

_SUITE = "name: big\nbase: {model: trivial, device: cpu}\n"


def _values(numbers: range) -> str:
    return ", ".join(map(str, numbers))


@pytest.mark.parametrize(("body", "why"), [
    ("matrix: {batch_size: [2, 4]}\nrepeats: 1000000000\n", "repeats: 1,000,000,000 is more than 1,000"),
    (f"matrix: {{batch_size: [2, 4], seed: [{_values(range(60))}]}}\nrepeats: 1000\n",
     "the suite has 120,000 cases (120 configurations × 1,000 repeats), more than 100,000"),
    (f"matrix: {{batch_size: [{_values(range(1, 101))}], seed: [{_values(range(100))}], "
     f"image_size: [{_values(range(16, 116))}]}}\n",
     "matrix: makes 1,000,000 combinations (100 × 100 × 100), more than the 100,000 cases"),
])
def test_a_suite_too_big_is_refused_at_once_naming_the_count(tmp_path, body, why):
    """In a process of its own with a deadline: a suite that is expanded instead of counted
    hangs, and the test fails quickly instead of hanging the suite."""
    import subprocess
    import sys

    suite = tmp_path / "big.yaml"
    suite.write_text(_SUITE + body)
    try:
        proc = subprocess.run([sys.executable, "-m", "cnnbench", "sweep", str(suite), "--results-dir",
                               str(tmp_path / "r"), "--plain"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the suite was expanded, not counted: no answer within 60 s")
    assert proc.returncode == 2 and proc.stderr.startswith(f"cnnbench sweep: error: {suite}: {why}")
    assert proc.stderr.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_a_cluster_sweep_of_thousands_of_cases_fits():
    from cnnbench.sweep.suite import parse_suite

    suite = parse_suite({"name": "x", "base": {"model": "trivial", "device": "cpu"},
                         "matrix": {"batch_size": list(range(1, 51)), "seed": list(range(40))}, "repeats": 5})
    assert len(suite.cases) == 10_000


@pytest.mark.parametrize("limit", ["-1", "-50"])
def test_results_list_refuses_a_negative_limit(tmp_path, capsys, limit):
    (tmp_path / "m.jsonl").write_text(json.dumps(record()) + "\n")
    assert main(["results", "list", str(tmp_path), "--limit", limit]) == 2
    assert capsys.readouterr().err == f"cnnbench results: error: --limit: must be >= 0 (0 shows all), got {limit}\n"


def _few_cores(monkeypatch, cores: int) -> None:
    import cnnbench.engine.resolve as resolve_module

    monkeypatch.setattr(resolve_module, "cpu_count_available", lambda: cores)


@pytest.mark.parametrize("devices", [3, 64])
def test_more_cpu_workers_than_cores_are_refused_before_any_work(tmp_path, capsys, monkeypatch, devices):
    import cnnbench.engine.multidevice.workers as workers

    _few_cores(monkeypatch, 2)
    monkeypatch.setattr(workers, "launch_workers", lambda *a, **k: pytest.fail("workers started"))
    assert main(["run", "--model", "trivial", "--device", "cpu", "--num-devices", str(devices),
                 "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cnnbench run: error: --num-devices: {devices} CPU workers, but this run may use 2 cores")
    assert "--oversubscribe" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_host_cpus_bounds_the_workers_too(tmp_path, capsys, monkeypatch):
    _few_cores(monkeypatch, 8)
    monkeypatch.setattr("cnnbench.engine.resolve.check_host_cpus", lambda n: None)
    assert main(["run", "--model", "trivial", "--device", "cpu", "--num-devices", "2", "--host-cpus", "1",
                 "--results-dir", str(tmp_path / "r")]) == 2
    assert "2 CPU workers, but this run may use 1 core:" in capsys.readouterr().err


def test_oversubscribe_runs_them_with_a_warning_in_the_record(tmp_path, monkeypatch):
    from cnnbench.config import RunConfig
    from cnnbench.distributed.world import World
    from cnnbench.engine.resolve import oversubscribed_note, resolve

    _few_cores(monkeypatch, 1)
    config = RunConfig(model="trivial", device="cpu", num_devices=2, oversubscribe=True)
    run = resolve(config, World(world_size=2, local_world_size=2, process_group=True))
    assert oversubscribed_note(run) == ("oversubscribed: 2 CPU workers shared 1 core (--oversubscribe); the figures "
                                        "measure their contention, not the scaling")
    _few_cores(monkeypatch, 2)
    assert oversubscribed_note(run) is None  # as many workers as cores: nothing to say


def test_an_oversubscribed_run_keeps_the_warning_in_its_record(tmp_path, monkeypatch):
    """One process stands for a worker among more than the cores (the engine's own record path)."""
    import cnnbench.engine.benchmark as benchmark
    from cnnbench.config import RunConfig
    from cnnbench.engine import run_and_append

    _few_cores(monkeypatch, 1)
    monkeypatch.setattr(benchmark, "oversubscribed_note",
                        lambda run: "oversubscribed: 2 CPU workers shared 1 core (--oversubscribe); x")
    record, _ = run_and_append(RunConfig(model="trivial", device="cpu", image_size=16, batch_size=2, num_batches=2,
                                         num_warmup_batches=1, oversubscribe=True, results_dir=str(tmp_path)))
    assert record.status == "ok" and record.config["oversubscribe"] is True
    assert any(w.startswith("oversubscribed: 2 CPU workers") for w in record.metrics["warnings"])


@pytest.mark.parametrize(("need", "free", "shown"), [
    (30 * 2**20, 12 * 2**20, "needs about 30.0 MiB, and only 12.0 MiB are free"),
    (5 * 2**20, 300 * 2**10, "needs about 5.00 MiB, and only 300 KiB are free"),
    (3 * 2**30, 500, "needs about 3.00 GiB, and only 500 bytes are free"),
    (2**30 + 4096, 2**30, "needs about 1,073,745,920 bytes, and only 1,073,741,824 bytes are free"),
])
def test_make_dataset_on_a_full_disk_shows_numbers_that_differ(tmp_path, capsys, monkeypatch, need, free, shown):
    import shutil

    import cnnbench.data.generate as generate

    monkeypatch.setattr(generate.GenerateOptions, "disk_bytes", lambda self: need)
    monkeypatch.setattr(generate.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10 * need, 0, free))
    assert main(["make-dataset", "imagefolder", str(tmp_path / "set")]) != 0
    err = capsys.readouterr().err
    assert shown in err and "nothing was written" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "set").exists()


# --- text that is not Unicode: a lone surrogate (JSON's "\ud800"), which no UTF-8 file or terminal takes ---------


def _not_unicode_line() -> str:
    rec = record("res\ud800net", ips=100.0, metrics={"warnings": ["busy \udfff CPU"]})
    rec["config"]["note\udc01"] = "kept"
    return json.dumps(rec)  # ASCII: each lone surrogate written as its escape


@pytest.mark.parametrize("command", ["report", "compare", "results", "export"])
def test_a_lone_surrogate_is_shown_as_the_replacement_character_and_names_its_record(tmp_path, capsys, command):
    base, cand = tmp_path / "base", tmp_path / "cand"
    base.mkdir()
    cand.mkdir()
    (base / "m-fast.jsonl").write_text(json.dumps(record(ips=110.0)) + "\n")
    bad = cand / "m-fast.jsonl"
    rejected = record("vgg16", ips=90.0)
    rejected["status"] = "o\ud800k"
    emoji = record("ale\U0001f600x", ips=80.0)
    bad.write_text(json.dumps(record(ips=120.0)) + "\n" + _not_unicode_line() + "\n" + json.dumps(rejected) + "\n"
                   + json.dumps(emoji) + "\n")  # the emoji as an escaped pair: one character, kept as it is
    before = bad.read_bytes()
    argv = {"report": ["report", str(cand), "-o", str(tmp_path / "out")],
            "compare": ["compare", str(base), str(cand)],
            "results": ["results", "list", str(cand)],
            "export": ["results", "export", str(cand), "--format", "csv", "-o", str(tmp_path / "e.csv")]}[command]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert (f"{bad}:2: config.note\ufffd; config.model; metrics.warnings not Unicode (a lone surrogate): "
            "shown as \ufffd") in err
    assert f"skipped {bad}:3: status 'o\ufffdk' is not one of" in err  # the reason quotes it replaced too
    assert "Traceback" not in err and bad.read_bytes() == before
    if command == "results":
        assert "res\ufffdnet" in out and "ale\U0001f600x" in out
    if command == "report":
        assert "res\ufffdnet" in (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")


def test_text_that_is_not_unicode_is_replaced_through_the_cache_too(tmp_path):
    good = json.dumps(record(ips=120.0, metrics={"step_times_s": [0.0123456789] * 400})) + "\n"
    copies = cache.MIN_BYTES // len(good) + 2
    path = tmp_path / "m-fast.jsonl"
    path.write_text(_runs(good, 3, "a") + _not_unicode_line() + "\n" + _runs(good, copies, "b"))
    for _ in range(2):  # the first read writes the cache, the second reads it
        records, problems = read_records(tmp_path)
        assert len(records) == copies + 4
        assert records[3]["config"]["model"] == "res\ufffdnet" and "note\ufffd" in records[3]["config"]
        assert records[3]["metrics"]["warnings"] == ["busy \ufffd CPU"]
        assert [type(p) for p in problems] == [StoreNotice]
        assert problems[0].endswith(":4: config.note\ufffd; config.model; metrics.warnings not Unicode (a lone "
                                    "surrogate): shown as \ufffd")
    assert cache.cache_path(path).exists()


def test_a_line_nested_deeper_than_python_recurses_is_refused_by_its_depth_not_a_crash(monkeypatch):
    """From Python 3.12 the standard library's parser reads lines nested deeper than Python can
    recurse (orjson refuses them past 1024 levels); the lone-surrogate walk must not recurse."""
    from cnnbench.results import lines

    def deep_loads(raw: bytes) -> dict:  # what json.loads gives on 3.12 and later
        nested: list = [1]
        for _ in range(5000):
            nested = [nested]
        return {**record(), "deep": nested, "text": "\ud800"}

    monkeypatch.setattr(lines.json, "loads", deep_loads)
    raw = b'{"deep":' + b"[" * 1100 + b"1" + b"]" * 1100 + b"}"
    rec, why = lines.parse_line(raw, lines.loads, truncated=False)
    assert rec is None and why is not None and "nested more than" in why


@pytest.mark.parametrize("command", [["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1"],
                                     ["comm", "--device", "cpu"]])
def test_a_machine_label_that_is_not_utf8_is_refused_in_one_line(tmp_path, capsys, command):
    # a byte of another encoding on the command line: Python keeps it as a lone surrogate
    assert main([*command, "--results-dir", str(tmp_path / "r"), "--machine-label", "m\udcff"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "machine_label" in err.replace("-", "_") and "not UTF-8 text" in err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_where_finds_a_record_whose_label_was_stored_with_a_byte_of_another_encoding(tmp_path, capsys):
    rec = record(ips=100.0)
    rec["environment"]["machine"] = "m\udcff"  # written so by an older cnnbench
    (tmp_path / "m.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(record("vgg16", ips=50.0)) + "\n")
    assert main(["results", "list", "--where", "environment.machine=m\udcff", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 run" in out and "m\ufffd" in out and "vgg16" not in out


def test_a_report_names_a_store_file_whose_name_is_not_utf8_by_its_escape(tmp_path, capsys):
    import os

    name = os.path.join(os.fsencode(tmp_path), b"m\xff.jsonl")  # a byte of another encoding in the name
    try:
        with open(name, "w") as f:
            f.write(json.dumps(record(ips=100.0)) + "\n{bad\n")
    except OSError:  # a file system that takes UTF-8 names only (macOS)
        pytest.skip("this file system refuses a file name that is not UTF-8")
    out = tmp_path / "out\udcfe"  # and a report folder named so: said on standard output
    assert main(["report", str(tmp_path), "-o", str(out), "--no-plots"]) == 0
    said = capsys.readouterr()
    assert "Traceback" not in said.err and "m\\udcff.jsonl:2: malformed line" in said.err
    assert "out\\udcfe" in said.out
    assert "m\\udcff.jsonl:2: malformed line" in (out / "summary.md").read_text(encoding="utf-8")


def test_the_notice_names_the_fields_in_the_record_s_order_at_any_depth():
    from cnnbench.results import lines

    rec = record("res\ud800net", source="imported\ud800.csv")
    rec["environment"]["gpu"] = {"name": "G\ud800", "links": [{"to\udc00": "x"}]}
    raw = json.dumps(rec).encode()
    got, notice = lines.parse_line(raw, lines.loads, truncated=False)
    assert got is not None and got["environment"]["gpu"]["links"] == [{"to\ufffd": "x"}]
    assert notice == ("config.model; environment.gpu.name; environment.gpu.links.to\ufffd; source not Unicode "
                      "(a lone surrogate): shown as \ufffd")


def test_streams_that_are_not_strict_utf8_are_left_as_they_are_and_the_others_restored(monkeypatch):
    import io

    from cnnbench.cli import escaping_what_utf8_cannot_hold

    streams = [io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape"),
               io.TextIOWrapper(io.BytesIO(), encoding="latin-1"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")]
    for out, err in ((streams[0], streams[1]), (streams[2], streams[2])):
        monkeypatch.setattr("sys.stdout", out)
        monkeypatch.setattr("sys.stderr", err)
        with escaping_what_utf8_cannot_hold():
            assert [s.errors for s in streams] == ["surrogateescape", "strict",
                                                   "backslashreplace" if out is streams[2] else "strict"]
            print("a name: m\udcff")  # no error
        assert [s.errors for s in streams] == ["surrogateescape", "strict", "strict"]  # the caller's again
    assert streams[2].buffer.getvalue() == b"a name: m\\udcff\n"


def test_text_from_a_record_never_breaks_an_error_or_a_row_in_two_nor_writes_to_the_terminal(tmp_path, capsys):
    """A machine label holding a line break or an escape sequence (someone else's record) is shown
    with those characters escaped: the error stays one line, each run one row, and no ESC reaches
    the terminal."""
    store = tmp_path / "x.jsonl"
    store.write_text("".join(json.dumps(record(machine=m, ips=10.0)) + "\n" for m in ("m\x1b[31mred", "n\nfake line")))
    assert main(["compare", str(store), "--by", "machine", "--baseline", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "m\\x1b[31mred, n\\nfake line" in err
    assert main(["results", "list", str(store)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and len(out.splitlines()) == 4 and "n\\nfake line" in out


def test_a_records_text_is_never_read_as_rich_markup(tmp_path, capsys):
    """A model name holding what rich reads as markup (someone else's record) is shown as it is:
    ``evil[/b]`` ended ``results list`` and ``predict`` in rich's MarkupError, and
    ``[bold red]shout`` lost its brackets."""
    from tests.test_predict import _record

    store = tmp_path / "x.jsonl"
    names = ("evil[/b]", "[bold red]shout", "C:\\dir\\", ":thumbs_up:")  # nor a backslash doubled, nor an emoji made
    store.write_text("".join(json.dumps(record(model=m, ips=10.0)) + "\n" for m in names)
                     + "".join(json.dumps(_record(1, 500.0, model=m, machine="p")) + "\n" for m in names))
    assert main(["results", "list", str(store)]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in names) and "C:\\dir\\\\" not in out
    assert main(["predict", str(store), "--where", "machine=p", "--devices", "1,8"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in names) and "C:\\dir\\\\" not in out
    assert main(["results", "query", 'SELECT "config.model" AS "[/b]:x:", \'a\tb\' AS t FROM runs', str(store)]) == 0
    out = capsys.readouterr().out
    assert "[/b]:x:" in out and "C:\\dir\\ " in out and "a\\tb" in out


def test_compare_and_a_reports_markdown_never_write_a_labels_control_characters(tmp_path, capsys):
    """A machine label holding an escape sequence or a mark that turns text around (someone else's
    record) is written as escapes in compare's table and markdown and in a report's summary.md (a
    probe's finding: a terminal's title was set by ``cat`` of them)."""
    bad, flipped = "m\x1b]0;title\x07\x1b[31mred", "n\u202egpj.exe"
    store = tmp_path / "x.jsonl"
    store.write_text("".join(json.dumps(record(machine=m, ips=10.0 + i)) + "\n"
                             for i, m in enumerate([bad, bad, flipped, flipped])))
    for fmt in ("table", "md"):
        assert main(["compare", str(store), "--by", "machine", "--baseline", bad, "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out, fmt
        assert "x1b" in out and "u202e" in out, fmt
    assert main(["report", str(store), "-o", str(tmp_path / "rep"), "--no-plots"]) == 0
    summary = (tmp_path / "rep" / "summary.md").read_text()
    assert "\x1b" not in summary and "\u202e" not in summary and "u202egpj" in summary
    from tests.test_comm import comm

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"  # the bandwidth table of comm records too
    a.write_text(json.dumps(comm(machine=bad, busbw=1.0)) + "\n")
    b.write_text(json.dumps(comm(machine=bad, busbw=2.0)) + "\n")
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "x1b" in out
    named = tmp_path / "named.jsonl"  # a trailing backslash shown once; a right-to-left mark kept as it is
    named.write_text("".join(json.dumps(record(model="net\\", machine=m, ips=10.0 + i)) + "\n"
                             for i, m in enumerate(["box", "box", "\u05d0\u200f", "\u05d0\u200f"])))
    assert main(["compare", str(named), "--by", "machine", "--baseline", "box"]) == 0
    out = capsys.readouterr().out
    assert "net\\ " in out and "net\\\\" not in out and "\u05d0\u200f" in out


def test_sysinfo_shows_an_environment_variables_value_as_it_is(capsys, monkeypatch):
    """A value that reads as rich's markup (``[/b]``) ended sysinfo in MarkupError (a review's finding)."""
    monkeypatch.setenv("NCCL_DEBUG", "[/b]:smile:")
    monkeypatch.setenv("NCCL_X[/i]", "1")  # a name, too
    assert main(["sysinfo"]) == 0
    out = capsys.readouterr().out
    assert "[/b]:smile:" in out and "NCCL_X[/i]" in out
