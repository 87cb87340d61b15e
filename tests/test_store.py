"""The results store: appends, tolerant reads, the step-times fast path, migrations,
flattening, queries, and ``cnnbench results``."""

from __future__ import annotations

import csv
import io
import json

import pytest

from cnnbench.cli import main
from cnnbench.results.flatten import flatten_record, ordered_columns, records_frame, unflatten_record
from cnnbench.results.migrate import SchemaTooNewError, migrate
from cnnbench.results.query import Condition, parse_where, select, value_matches
from cnnbench.results.record import SCHEMA_VERSION, Record
from cnnbench.results.store import append_record, append_records, existing_run_ids, read_records


def make_record(i: int = 0, machine: str = "box-a", status: str = "ok", **extra) -> dict:
    metrics = ({"total_images_per_sec": 100.0 + i, "step_times_s": [0.01 * (k + 1) for k in range(5)]}
               if status == "ok" else {})
    return Record(
        config={"model": "resnet18", "batch_size": 8 * (i + 1), "precision": "fp32", "forward_only": False},
        environment={"machine": machine, "hostname": "h"},
        metrics=metrics,
        status=status,
        error=None if status == "ok" else "boom",
        extra={"case_name": "syn-replicated-1cpus", **extra},
    ).to_dict()


# --------------------------------------------------------------------------- append / read


def test_append_and_read_back(tmp_path):
    recs = [make_record(i) for i in range(3)] + [make_record(9, machine="box b/2")]
    for r in recs:
        append_record(tmp_path, r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box-a.jsonl", "box_b_2.jsonl"]
    got, problems = read_records(tmp_path)
    assert problems == []
    assert sorted(got, key=lambda r: r["run_id"]) == sorted(recs, key=lambda r: r["run_id"])


def test_without_step_times_gives_the_same_records_less_the_array(tmp_path):
    recs = [make_record(i) for i in range(4)] + [make_record(5, status="error")]
    for r in recs:
        append_record(tmp_path, r)
    full, _ = read_records(tmp_path)
    light, problems = read_records(tmp_path, step_times=False)
    assert problems == []
    for f, l in zip(full, light, strict=True):  # noqa: E741
        f["metrics"].pop("step_times_s", None)
        assert f == l


def test_fast_path_is_not_fooled_by_the_key_inside_text(tmp_path):
    rec = make_record(0)
    rec["error"] = 'weird text "step_times_s":[1,2] inside'
    rec["note"] = {"step_times_s": [7, 8]}  # the key in another object, before metrics? after: both must survive
    append_record(tmp_path, rec)
    # A hand-written line with spaced separators takes the full parse.
    spaced = make_record(1)
    with open(tmp_path / "box-a.jsonl", "a") as f:
        f.write(json.dumps(spaced) + "\n")
    light, problems = read_records(tmp_path, step_times=False)
    assert problems == []
    assert light[0]["error"] == rec["error"]
    assert light[0]["note"] == {"step_times_s": [7, 8]}
    assert "step_times_s" not in light[0]["metrics"] and "step_times_s" not in light[1]["metrics"]
    assert light[1]["metrics"]["total_images_per_sec"] == 101.0


def test_truncated_last_line_is_reported_and_never_rewritten(tmp_path):
    for i in range(3):
        append_record(tmp_path, make_record(i))
    path = tmp_path / "box-a.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-40])  # a crash in the middle of the last write
    before = path.read_bytes()
    records, problems = read_records(tmp_path)
    assert len(records) == 2
    assert len(problems) == 1 and problems[0].startswith(f"{path}:3: truncated line")
    assert path.read_bytes() == before
    # The next append starts on a new line; the damaged one stays, reported as malformed.
    append_record(tmp_path, make_record(7))
    records, problems = read_records(tmp_path)
    assert [r["config"]["batch_size"] for r in records] == [8, 16, 64]
    assert len(problems) == 1 and problems[0].startswith(f"{path}:3: malformed line")
    assert path.read_bytes().startswith(before)


def test_malformed_and_non_object_lines_are_skipped_with_their_line(tmp_path):
    path = tmp_path / "m.jsonl"
    good, other = json.dumps(make_record(0)), json.dumps(make_record(1))
    path.write_text(f"{good}\nnot json at all\n[1, 2]\n\n{other}\n")
    records, problems = read_records(path)
    assert len(records) == 2
    assert [p.split(": ")[0] for p in problems] == [f"{path}:2", f"{path}:3"]
    assert "not a JSON object" in problems[1]


@pytest.mark.parametrize("step_times", [True, False])
def test_lines_the_fast_parser_refuses_read_as_they_always_did(tmp_path, step_times):
    """orjson parses the lines; what it refuses goes to the standard parser, which reads
    NaN and huge integers and words its errors as before (a NaN figure is then shown as not
    available, and named; a lone surrogate, text that no UTF-8 output takes, as U+FFFD)."""
    path = tmp_path / "m.jsonl"
    nan = json.dumps(make_record(0)).replace('"total_images_per_sec": 100.0', '"total_images_per_sec": NaN')
    huge = json.dumps(make_record(1, huge=2**70, text="\ud800"))
    path.write_text(f"{nan}\n{huge}\n{{\"status\": \"ok\", \"config\": {{\n")
    records, problems = read_records(path, step_times=step_times)
    assert records[0]["metrics"]["total_images_per_sec"] is None  # NaN: not available
    assert records[1]["huge"] == 2**70 and records[1]["text"] == "\ufffd"
    assert problems == [f"{path}:1: metrics.total_images_per_sec is NaN: shown as not available",
                        f"{path}:2: text not Unicode (a lone surrogate): shown as \ufffd",
                        f"{path}:3: malformed line (Expecting property name enclosed in double quotes: "
                        "line 1 column 29 (char 28))"]


def test_missing_path_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_records(tmp_path / "nope")


def test_append_records_writes_one_file_per_machine(tmp_path):
    recs = [make_record(i, machine=m) for i, m in enumerate(["a", "b", "a"])]
    paths = append_records(tmp_path / "r", recs)
    assert sorted(p.name for p in paths) == ["a.jsonl", "b.jsonl"]
    got, _ = read_records(tmp_path / "r")
    assert len(got) == 3
    assert existing_run_ids(tmp_path / "r") == {r["run_id"] for r in recs}
    assert existing_run_ids(tmp_path / "absent") == set()


# --------------------------------------------------------------------------- migration


def test_a_record_without_schema_version_is_migrated_from_v0(tmp_path):
    path = tmp_path / "old.jsonl"
    v0_ok = {"config": {"model": "alexnet"}, "metrics": {"total_images_per_sec": 12.5}, "environment": {"machine": "m"}}
    v0_bad = {"config": {"model": "vgg16"}}
    path.write_text(json.dumps(v0_ok) + "\n" + json.dumps(v0_bad) + "\n")
    records, problems = read_records(path)
    assert problems == []
    assert [r["schema_version"] for r in records] == [SCHEMA_VERSION, SCHEMA_VERSION]
    assert records[0]["status"] == "ok" and records[0]["error"] is None
    assert records[1]["status"] == "error" and "schema 0" in records[1]["error"]
    assert records[1]["metrics"] == {} and records[1]["environment"] == {}
    assert Record.from_dict(records[1]).status == "error"


def test_v1_records_record_null_for_unused_options_and_num_workers():
    base = {"schema_version": 1, "status": "ok", "error": None, "environment": {}, "metrics": {}}
    inference = migrate({**base, "config": {"forward_only": True, "optimizer": "sgd", "learning_rate": 0.005,
                                            "momentum": 0.9, "weight_decay": 4e-5,
                                            "synthetic_location": "device", "loader_workers": 2}})
    assert inference["schema_version"] == SCHEMA_VERSION
    cfg = inference["config"]
    assert (cfg["optimizer"], cfg["learning_rate"], cfg["momentum"], cfg["weight_decay"]) == (None,) * 4
    assert "loader_workers" not in cfg and cfg["num_workers"] is None
    training = migrate({**base, "config": {"forward_only": False, "optimizer": "sgd", "momentum": 0.9,
                                           "synthetic_location": "loader", "loader_workers": 3}})["config"]
    assert training["momentum"] is None and training["optimizer"] == "sgd" and training["num_workers"] == 3
    kept = migrate({**base, "config": {"optimizer": "momentum", "momentum": 0.8}})["config"]
    assert kept["momentum"] == 0.8


def test_current_records_pass_through_and_newer_ones_are_problems(tmp_path):
    rec = make_record(0)
    assert migrate(dict(rec)) == rec
    with pytest.raises(SchemaTooNewError):
        migrate({**rec, "schema_version": SCHEMA_VERSION + 1})
    path = tmp_path / "new.jsonl"
    path.write_text(json.dumps({**rec, "schema_version": SCHEMA_VERSION + 1}) + "\n" + json.dumps(rec) + "\n")
    records, problems = read_records(path)
    assert len(records) == 1
    assert len(problems) == 1 and f"{path}:1: schema_version {SCHEMA_VERSION + 1} is newer" in problems[0]


# --------------------------------------------------------------------------- flattening and queries


def test_flatten_and_unflatten_round_trip():
    rec = make_record(0, suite_name="s")
    flat = flatten_record(rec)
    assert flat["config.model"] == "resnet18"
    assert flat["metrics.step_times_s"] == rec["metrics"]["step_times_s"]
    assert flat["environment.machine"] == "box-a"
    assert flat["suite_name"] == "s"
    assert unflatten_record(flat) == rec
    assert "metrics" not in flatten_record({"metrics": {}, "status": "error"})
    with pytest.raises(ValueError):
        unflatten_record({"config": 1, "config.model": "x"})
    cols = ordered_columns([flat])
    assert cols[:4] == ["started_at", "environment.machine", "suite_name", "case_name"]
    frame = records_frame([rec, make_record(1)])
    assert list(frame["config.batch_size"]) == [8, 16]


def test_conditions():
    assert parse_where(["config.model = resnet*"]) == [Condition("config.model", ("resnet*",), False,
                                                                 "config.model = resnet*")]
    with pytest.raises(ValueError):
        parse_where(["model"])
    (neg,) = parse_where(["model!=resnet18,vgg16"], resolve=lambda name: f"config.{name}")
    assert neg.field == "config.model" and neg.values == ("resnet18", "vgg16") and neg.negate
    assert value_matches(8, "8.0") and not value_matches(8, "eight")
    assert value_matches(True, "true") and value_matches(False, "no") and not value_matches(True, "false")
    assert value_matches(None, "null") and value_matches("resnet50", "resnet*")
    assert value_matches("ResNet50", "resnet50")
    recs = [{"config": {"model": "resnet18"}}, {"config": {"model": "resnet50"}}, {"config": {"model": "vgg16"}}]
    assert select(recs, [neg]) == [recs[1]]
    assert select(recs, parse_where(["config.model=resnet*"])) == recs[:2]


# --------------------------------------------------------------------------- cnnbench results


@pytest.fixture
def store(tmp_path):
    d = tmp_path / "results"
    for i in range(3):
        append_record(d, make_record(i))
    append_record(d, make_record(5, status="oom"))
    with open(d / "box-a.jsonl", "ab") as f:
        f.write(b'{"schema_version": 1, "status": "ok", "conf')  # truncated
    return d


def test_results_list_shows_runs_and_reports_a_truncated_line(store, capsys):
    assert main(["results", "list", str(store), "--limit", "0"]) == 0
    out, err = capsys.readouterr()
    assert "resnet18" in out and "oom" in out and "4 runs" in out
    assert f"{store / 'box-a.jsonl'}:5: truncated line" in err


def test_results_list_shows_runs_of_one_minute_in_natural_model_order(tmp_path, capsys):
    for i, model in enumerate(["resnet101", "resnet18", "resnet50"]):
        rec = make_record(i)
        rec["config"]["model"] = model
        rec["started_at"] = f"2026-01-01T10:00:0{i}+00:00"
        append_record(tmp_path, rec)
    assert main(["results", "list", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.index("resnet18") < out.index("resnet50") < out.index("resnet101")


def test_results_list_where_filters_and_names_unknown_fields(store, capsys):
    assert main(["results", "list", str(store), "--where", "batch_size=16"]) == 0
    out, _ = capsys.readouterr()
    assert out.rstrip().endswith("\n1 run")
    assert main(["results", "list", str(store), "--where", "colour=red"]) == 2
    assert "colour" in capsys.readouterr().err


@pytest.mark.parametrize("where", [["model=resnet*"], ["model!=vgg*"], ["batch_size=8,24"],
                                   ["model=VGG16", "machine=box-*"], ["batch_size!=16", "status=ok"]])
def test_results_list_and_report_select_the_same_runs(store, tmp_path, capsys, where):
    """One --where parser: `results list` and `report` keep the same runs for every form."""
    from cnnbench.report.build import ReportOptions, build_report
    from cnnbench.results.store import read_records

    records, _ = read_records(store)
    store2 = tmp_path / "more"
    append_record(store2, {**make_record(7), "config": {**make_record(7)["config"], "model": "vgg16"}})
    records += read_records(store2)[0]
    args = [arg for w in where for arg in ("--where", w)]
    assert main(["results", "export", str(store), str(store2), "--format", "json", *args]) == 0
    listed = json.loads(capsys.readouterr().out)
    report = build_report(records, ReportOptions(where=where, max_plots=0))
    assert 0 < len(listed) < len(records) and report.n_records == len(listed)


def test_results_export_csv_json_parquet(store, tmp_path, capsys):
    out_csv = tmp_path / "x.csv"
    assert main(["results", "export", str(store), "--format", "csv", "-o", str(out_csv)]) == 0
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 4
    assert rows[0]["config.model"] == "resnet18" and "metrics.total_images_per_sec" in rows[0]
    assert json.loads(rows[0]["metrics.step_times_s"])[0] == pytest.approx(0.01)
    assert rows[0]["config.forward_only"] == "false"

    assert main(["results", "export", str(store), "--format", "json", "--where", "status=oom"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data) == 1 and data[0]["status"] == "oom" and data[0]["error"] == "boom"

    pytest.importorskip("pyarrow")
    import pandas as pd

    out_pq = tmp_path / "x.parquet"
    assert main(["results", "export", str(store), "--format", "parquet", "-o", str(out_pq), "--no-step-times"]) == 0
    frame = pd.read_parquet(out_pq)
    assert len(frame) == 4 and "metrics.step_times_s" not in frame.columns
    assert sorted(frame["config.batch_size"]) == [8, 16, 24, 48]
    assert main(["results", "export", str(store), "--format", "parquet"]) == 2


def test_results_export_to_stdout_is_plain_csv(store, capsys):
    assert main(["results", "export", str(store), "--format", "csv", "--no-step-times"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["status"] for r in rows} == {"ok", "oom"}
    assert "metrics.step_times_s" not in rows[0]


def test_results_on_a_missing_folder_is_a_one_line_error(tmp_path, capsys):
    assert main(["results", "list", str(tmp_path / "nope")]) == 2
    assert "no results at" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["results", "list", "{store}", "--where", "cpu_cors=2"],
                                  ["compare", "{store}", "--by", "cpu_cors"],
                                  ["report", "{store}", "-o", "{out}", "--where", "cpu_cors=2"]])
def test_unknown_bare_fields_name_the_nearest_known_ones(tmp_path, capsys, argv):
    for i in range(2):
        rec = make_record(i)
        rec["environment"]["cpu_cores"] = 8
        append_record(tmp_path / "s", rec)
    argv = [a.format(store=tmp_path / "s", out=tmp_path / "out") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("unknown field 'cpu_cors' (did you mean environment.cpu_cores?)") and "\n" not in err


def test_nearest_fields_prefers_an_alias_to_its_dotted_name():
    from cnnbench.results.query import nearest_fields

    known = ["batch_size", "config.batch_size", "config.num_batches", "environment.cpu_cores", "batch"]
    assert nearest_fields("batch_sise", known) == ["batch_size", "batch"]
    assert nearest_fields("config.batchsize", known)[0] == "config.batch_size"
    assert nearest_fields("cpu_cors", known) == ["environment.cpu_cores"]


# --------------------------------------------------------------------------- a folder of stores


def _write(path, *records):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def test_a_folder_is_read_with_every_store_below_it(tmp_path):
    """Issue 42 item 2: ``results/`` holds ``results/quick`` (make run) and ``results/scaling`` (a study)."""
    top = tmp_path / "results"
    _write(top / "box.jsonl", make_record(0))
    _write(top / "quick" / "box.jsonl", make_record(1))
    _write(top / "studies" / "scaling" / "box.jsonl", make_record(2))
    records, problems = read_records(top)
    assert sorted(r["metrics"]["total_images_per_sec"] for r in records) == [100.0, 101.0, 102.0]
    assert problems == []


def test_a_stores_own_folders_hidden_folders_and_links_below_are_not_searched(tmp_path):
    top = tmp_path / "results"
    _write(top / "box.jsonl", make_record(0))
    for name in (".slurm", ".claims", "traces", "data"):
        _write(top / "quick" / name / "x.jsonl", make_record(5))
    elsewhere = tmp_path / "elsewhere"
    _write(elsewhere / "box.jsonl", make_record(6))
    (top / "linked").symlink_to(elsewhere)
    records, problems = read_records(top)
    assert [r["metrics"]["total_images_per_sec"] for r in records] == [100.0]
    assert problems == []
    # named itself, a link is followed as before
    assert len(read_records(top / "linked")[0]) == 1


def test_a_run_kept_in_two_stores_counts_once(tmp_path):
    """The records carry unique ids: a merged copy beside its source is not counted twice, and is
    no problem to report (it is no unreadable line)."""
    top = tmp_path / "results"
    a, b, c = make_record(0), make_record(1), make_record(2)
    _write(top / "quick" / "box.jsonl", a, b)
    _write(top / "all" / "box.jsonl", b, c)
    records, problems = read_records(top)
    assert sorted(r["metrics"]["total_images_per_sec"] for r in records) == [100.0, 101.0, 102.0]
    assert problems == []
    # a folder named along with one below it: each file read once
    assert len(read_records([top, top / "quick"])[0]) == 3
    assert len(read_records([top / "quick", top / "quick" / "box.jsonl"])[0]) == 2


def test_of_two_copies_of_a_run_the_one_with_step_times_is_kept(tmp_path):
    """An imported log of a run carries its run_id but no step times: it must not stand in for the
    record, whichever folder's name comes first."""
    top = tmp_path / "results"
    full = make_record(0)
    thin = json.loads(json.dumps(full))
    del thin["metrics"]["step_times_s"]
    _write(top / "imported" / "box.jsonl", thin)
    _write(top / "quick" / "box.jsonl", full)
    (record,), _ = read_records(top)
    assert record["metrics"]["step_times_s"] == full["metrics"]["step_times_s"]


def test_a_command_that_writes_in_a_folder_checks_the_runs_of_that_folder_only(tmp_path, capsys):
    """Merging stores kept below a folder into the folder itself appends them (docs/slurm.md's
    copy-back-then-merge); a sweep's store is the folder it writes in, not an archive below it."""
    from cnnbench.results.reader import StoreReader
    from cnnbench.results.store import stored_run_ids

    top = tmp_path / "results"
    runs = [make_record(i) for i in range(4)]
    _write(top / "node1" / "box.jsonl", *runs[:2])
    _write(top / "node2" / "box.jsonl", *runs[2:])
    assert stored_run_ids(top)[0] == {}
    assert StoreReader(top, step_times=False, below=False).read() == ([], [])
    assert main(["results", "merge", str(top / "node1"), str(top / "node2"), "--into", str(top)]) == 0
    assert "appended 4 runs" in capsys.readouterr().out
    assert len(read_records(top, below=False)[0]) == 4
    assert len(read_records(top)[0]) == 4  # and the whole folder still counts each run once


def test_merge_counts_a_run_found_in_two_sources_as_repeated(tmp_path, capsys):
    a, b = make_record(0), make_record(1)
    _write(tmp_path / "n1" / "box.jsonl", a, b)
    _write(tmp_path / "n2" / "box.jsonl", a, b)
    assert main(["results", "merge", str(tmp_path / "n1"), str(tmp_path / "n2"), "--into", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "appended 2 runs" in out and "2 already there or repeated" in out and "unreadable" not in out


def test_merge_counts_a_line_read_with_a_value_replaced_apart_from_the_lines_it_skipped(tmp_path, capsys):
    """A line whose record is read with a value replaced (a lone surrogate, a NaN) is merged, not
    skipped: the summary says so, and counts as unreadable only the lines it left out."""
    source = tmp_path / "src" / "box.jsonl"
    _write(source, make_record(0), make_record(1))
    text = source.read_text().splitlines()
    odd = text[0].replace('"run_id": "', '"run_id": "x').replace('"box', '"box\\ud800', 1)
    source.write_text("\n".join([odd, text[1], "{torn"]) + "\n")
    assert main(["results", "merge", str(tmp_path / "src"), "--into", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "appended 2 runs" in out and "; 1 unreadable line skipped; 1 line read with values replaced" in out
    assert "not Unicode (a lone surrogate)" in err and "skipped " in err


def test_a_sweep_resumes_from_its_own_folder_not_from_a_store_below_it(tmp_path):
    from cnnbench.sweep.resume import DoneCases

    top = tmp_path / "results"
    done = make_record(0, suite_name="quick", case_key="k1")
    _write(top / "archive" / "box.jsonl", done)
    cases = DoneCases("quick", top, rerun=False)
    cases.read(initial=True)
    assert not cases.is_done("k1", "box-a") and cases.figures == {}
    _write(top / "box-a.jsonl", done)
    cases.read(initial=False)
    assert cases.is_done("k1", "box-a")
