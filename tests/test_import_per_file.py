"""Importers fail per file, not per batch: a log or table that says something impossible
is reported as ``path: problem`` and skipped, and the other inputs of the same command are
imported. ``import csv`` refuses a table that is not made of record fields, checks values
as ``cnnbench run`` checks its options, and names the file in every problem."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.results.store import read_records
from tests.report_fixtures import record, write_store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf_cnn_benchmarks_logs"
CONFIG = "LambdaCloud-RTX_A6000.logs/syn-replicated-fp32-1gpus"


@pytest.fixture
def logs(tmp_path):
    """Six good logs in the Lambda layout, three of them then damaged."""
    root = tmp_path / "in"
    shutil.copytree(FIXTURES / CONFIG, root / CONFIG)
    meta = "LambdaCloud-RTX_A6000.logs/metadata"
    shutil.copyfile(FIXTURES / meta, root / meta)
    files = sorted((root / CONFIG).glob("*/throughput/1"))
    assert len(files) == 6

    def damage(path: Path, edit) -> Path:
        path.write_text(edit(path.read_text()))
        return path

    not_a_number = damage(files[0], lambda t: re.sub(r"total images/sec: [\d.]+", "total images/sec: 1.2.3", t))

    def bad_date(text: str) -> str:
        text = re.sub(r"(\t[\d.]+) \d{10}$", r"\1", text, flags=re.M)  # no step clock: the log's date is used
        return re.sub(r"^\d{4}-\d{2}-\d{2}", "2021-13-45", text, count=1, flags=re.M)

    no_date = damage(files[1], bad_date)
    absurd = damage(files[2], lambda t: re.sub(r"(\t[\d.]+) \d{10}$", r"\1 99999999999999999999", t, flags=re.M))
    return root, {not_a_number: "'1.2.3' is not a number", no_date: "'2021-13-45",
                  absurd: "99999999999999999999 is not a Unix time"}


def test_a_bad_log_is_skipped_and_the_others_are_imported(logs, tmp_path, capsys):
    root, bad = logs
    results = tmp_path / "r"
    assert main(["import", "tf-cnn-benchmarks", str(root), "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    assert "imported 3 records (3 ok)" in out
    lines = err.strip().splitlines()
    assert len(lines) == 3 and "Traceback" not in err
    for path, why in bad.items():
        (line,) = [ln for ln in lines if f" {path}: " in ln]
        assert why in line, line
    records, problems = read_records(results)
    assert problems == [] and len(records) == 3


def test_an_absurd_step_clock_is_a_problem_of_that_log(tmp_path, capsys):
    log = tmp_path / "run.log"
    text = (FIXTURES / CONFIG / "resnet50-256" / "throughput" / "1").read_text()
    log.write_text(re.sub(r"(\t[\d.]+) \d{10}$", r"\1 4102444800", text, flags=re.M))  # the year 2100
    assert main(["import", "tf-cnn-benchmarks", str(log), "--results-dir", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert f"{log}: the step time 4102444800 is 2100-01-01, not a time a log was written" in err


def test_lambdas_own_table_is_refused_not_turned_into_error_records(tmp_path, capsys):
    table = FIXTURES / "lambda-tf-train-throughput-fp32.csv"
    results = tmp_path / "r"
    assert main(["import", "csv", str(table), "--results-dir", str(results)]) == 2  # a usage error
    err = capsys.readouterr().err
    assert f"{table}: no column is a record field name (it has name_gpu, num_gpu, alexnet" in err
    assert "nothing to import" in err
    assert not results.exists()


def test_csv_refusals_are_usage_errors_and_bad_rows_are_not(tmp_path, capsys):
    folder = tmp_path / "tables"
    folder.mkdir()
    wrong_option = tmp_path / "w.csv"
    wrong_option.write_text("config.modle,metrics.total_images_per_sec\nresnet50,1\n")
    assert main(["import", "csv", str(folder), str(wrong_option), "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "did you mean config.model?" in err
    bad_rows = tmp_path / "b.csv"
    bad_rows.write_text("config.model,config.batch_size\nresnet50,0\n")
    assert main(["import", "csv", str(bad_rows), "--results-dir", str(tmp_path / "r")]) == 1  # the data is wrong
    assert f"{bad_rows}:2: column 'config.batch_size'" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_table_that_is_no_regular_file_is_refused_as_what_it_is(tmp_path, kind):
    """What the command line checked may be swapped before the importer reads it (and the Python
    API checks nothing first): a FIFO or a link to a device is named as such, never read nor
    called missing."""
    import os

    from cnnbench.results.importers import ImportOptions, get_importer

    table = tmp_path / "runs.csv"
    if kind == "fifo":
        os.mkfifo(table)
    else:
        table.symlink_to("/dev/zero")
    result = get_importer("csv").run([table], ImportOptions())
    why = f"is {'a FIFO (named pipe)' if kind == 'fifo' else 'a character device'}, not a regular file"
    assert result.refused == [f"{table}: {why}"] and result.records == []


def test_csv_values_are_checked_as_run_checks_them(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text(
        "config.model,config.batch_size,config.precision,config.device,environment.machine,"
        "metrics.total_images_per_sec\n"
        "resnet50,64,fp32,cuda,dgx,1234.5\n"
        "resnet50,0,fp32,cuda,dgx,1.0\n"
        "resnet50,64,fp99,cuda,dgx,1.0\n"
        "resnet50,64,fp32,tpu,dgx,1.0\n"
        "resnet50,64,fp32,cuda,dgx,-5\n"
        "resnet50,64,fp32,cuda,dgx,0\n"
    )
    assert main(["import", "csv", str(table), "--results-dir", str(tmp_path / "r")]) == 0
    out, err = capsys.readouterr()
    assert "imported 2 records (1 error, 1 ok)" in out  # the 0 figure is an error record, never 0
    assert f"{table}:3: column 'config.batch_size': must be >= 1 (got 0)" in err
    assert f"{table}:4: column 'config.precision': invalid choice 'fp99'" in err
    assert f"{table}:5: column 'config.device': invalid choice 'tpu'" in err
    assert f"{table}:6: metrics.total_images_per_sec is -5" in err
    assert len(err.strip().splitlines()) == 4


def test_a_typo_in_a_config_column_names_the_option(tmp_path):
    from cnnbench.results.importers import ImportOptions, get_importer

    table = tmp_path / "t.csv"
    table.write_text("config.model,config.batchsize\nresnet50,8\n")
    result = get_importer("csv").run([table], ImportOptions())
    assert result.records == []
    assert "column 'config.batchsize' is not a `cnnbench run` option (did you mean config.batch_size?)" in \
        result.problems[0]


def test_csv_problems_name_the_file_and_the_others_import(tmp_path, capsys):
    good = tmp_path / "good.csv"
    good.write_text("config.model,metrics.total_images_per_sec\nresnet50,10\n")
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(b"\xef\xbb\xbf" + "config.model,environment.machine\nresnet50,caf\u00e9\n".encode("latin-1"))
    folder = tmp_path / "a-folder"
    folder.mkdir()
    huge = tmp_path / "huge.csv"
    huge.write_text("config.model,metrics.total_images_per_sec\n\"" + "x" * 200_000 + "\",1\n")
    results = tmp_path / "r"
    assert main(["import", "csv", str(latin1), str(folder), str(huge), str(good), "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    assert "imported 1 record " in out and "Traceback" not in err
    assert f"{latin1}: not UTF-8 text (byte b'\\xe9' at offset 48)" in err  # counted from the file's start (a BOM)
    assert f"{folder}: is a directory" in err
    assert f"{huge}:2: not a readable CSV table" in err  # the line of the row (issue 41 item 16)
    (rec,), _ = read_records(results)
    assert rec["config"]["model"] == "resnet50"


def test_reimporting_under_another_label_says_what_it_did(tmp_path, capsys):
    src = FIXTURES / CONFIG
    results = tmp_path / "r"
    assert main(["import", "tf-cnn-benchmarks", str(src), "--results-dir", str(results)]) == 0
    capsys.readouterr()
    assert main(["import", "tf-cnn-benchmarks", str(src), "--results-dir", str(results),
                 "--machine-label", "my-a6000"]) == 0
    out = capsys.readouterr().out
    assert "imported 0 records" in out and "6 already there" in out
    assert "stored under machine LambdaCloud-RTX_A6000" in out and "--machine-label" in out
    assert not (results / "my-a6000.jsonl").exists()


@pytest.mark.parametrize("name", ["1²", "¹"])
def test_a_log_named_by_other_digits_is_imported_as_one_without_an_iteration(tmp_path, capsys, name):
    """A log named 1² (a digit to str.isdigit, none to int) ended the whole import in a ValueError
    naming no file: it is a log of its configuration, without an iteration number."""
    root = tmp_path / "in"
    shutil.copytree(FIXTURES / CONFIG, root / CONFIG)
    log = next((root / CONFIG).glob("*/throughput/1"))
    log.rename(log.with_name(name))
    assert main(["import", "tf-cnn-benchmarks", str(root), "--results-dir", str(tmp_path / "r")]) == 0, \
        capsys.readouterr().err
    records, _ = read_records(tmp_path / "r")
    assert len(records) == 6


def test_a_link_planted_at_one_records_file_stops_the_import_before_any_record_is_written(tmp_path, capsys):
    """Without --machine-label each record's file is its machine's: a link at the second one was found
    when its records were appended, after the first machine's were written (exit 1)."""
    write_store(tmp_path / "src", [record(machine="box-a"), record(machine="box-b")])
    table = tmp_path / "runs.csv"
    assert main(["results", "export", "--format", "csv", "-o", str(table), str(tmp_path / "src")]) == 0
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    results = tmp_path / "r"
    results.mkdir()
    (results / "box-b.jsonl").symlink_to(outside)
    capsys.readouterr()
    assert main(["import", "csv", str(table), "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert "box-b.jsonl: is a symlink" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in results.iterdir()) == ["box-b.jsonl"] and outside.read_text() == "mine\n"
