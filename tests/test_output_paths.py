"""Outputs are checked before the work: a results folder that is a file, that cannot be
written, under /proc, or a machine label too long for a file name fail at once with one
line and exit 2, in ``run`` and ``sweep`` alike (one check, before any benchmark or the
sweep's fork server starts); ``results export -o`` refuses a folder, a missing parent and
its own input."""

from __future__ import annotations

import os

import pytest

from cnnbench.cli import main
from cnnbench.results.record import Record
from cnnbench.results.store import append_record, read_records

ROOT = os.geteuid() == 0


@pytest.fixture
def no_work(monkeypatch):
    """Any benchmark run or sweep start-up fails the test: the checks must come first."""
    import cnnbench.engine
    import cnnbench.sweep.runner

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the output was checked")

    monkeypatch.setattr(cnnbench.engine, "run_and_append", forbidden)
    monkeypatch.setattr(cnnbench.sweep.runner, "preload_engine", forbidden)


def _bad_dirs(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    return {
        "a file": (str(a_file), "is a file, not a folder"),
        "under a file": (str(a_file / "results"), "is a file, not a folder"),
        "under /proc": ("/proc/cnnbench-results", "cannot write there"),
        "empty": ("", "empty"),
    }


def _sweep_file(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbase: {model: trivial, device: cpu}\nmatrix: {batch_size: [2]}\n")
    return str(suite)


@pytest.mark.parametrize("case", ["a file", "under a file", "under /proc", "empty"])
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_bad_results_dir_fails_before_work(tmp_path, capsys, no_work, case, command):
    folder, why = _bad_dirs(tmp_path)[case]
    args = (["run", "--model", "trivial", "--device", "cpu"] if command == "run"
            else ["sweep", _sweep_file(tmp_path), "--plain"])
    assert main([*args, "--results-dir", folder]) == 2
    err = capsys.readouterr().err
    assert "--results-dir" in err and why in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.skipif(ROOT, reason="root may write in any folder, whatever its permission bits")
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_read_only_results_dir_fails_before_work(tmp_path, capsys, no_work, command):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        args = (["run", "--model", "trivial", "--device", "cpu"] if command == "run"
                else ["sweep", _sweep_file(tmp_path), "--plain"])
        assert main([*args, "--results-dir", str(folder)]) == 2
        assert "cannot write there" in capsys.readouterr().err
    finally:
        folder.chmod(0o700)


@pytest.mark.parametrize("command", ["run", "sweep", "import"])
def test_a_machine_label_too_long_for_a_file_name_fails_before_work(tmp_path, capsys, no_work, command):
    label = "x" * 300
    table = tmp_path / "t.csv"
    table.write_text("config.model,metrics.total_images_per_sec\nresnet50,1\n")
    args = {"run": ["run", "--model", "trivial", "--device", "cpu"],
            "sweep": ["sweep", _sweep_file(tmp_path), "--plain"],
            "import": ["import", "csv", str(table)]}[command]
    assert main([*args, "--results-dir", str(tmp_path / "r"), "--machine-label", label]) == 2
    err = capsys.readouterr().err
    assert "--machine-label" in err and "300 characters" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_results_file_that_is_a_folder_fails_before_work(tmp_path, capsys, no_work):
    (tmp_path / "r" / "lab.jsonl").mkdir(parents=True)
    assert main(["run", "--model", "trivial", "--device", "cpu", "--results-dir", str(tmp_path / "r"),
                 "--machine-label", "lab"]) == 2
    assert "lab.jsonl in it is a folder" in capsys.readouterr().err


def test_the_check_leaves_nothing_behind(tmp_path):
    from cnnbench.results.outputs import check_results_dir

    check_results_dir(tmp_path / "new" / "results", ["lab"])
    assert list(tmp_path.iterdir()) == []  # nothing made: the folder is made by the first record


@pytest.fixture
def store(tmp_path):
    for i in range(3):
        append_record(tmp_path / "store", Record(config={"model": "resnet18", "batch_size": i + 1},
                                                 environment={"machine": "x"},
                                                 metrics={"total_images_per_sec": 1.0}).to_dict())
    return tmp_path / "store"


def test_export_refuses_its_own_input(store, capsys):
    before = (store / "x.jsonl").read_bytes()
    assert main(["results", "export", str(store), "--format", "csv", "-o", str(store / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "is one of the inputs" in err and len(err.strip().splitlines()) == 1
    assert (store / "x.jsonl").read_bytes() == before
    records, problems = read_records(store)
    assert len(records) == 3 and problems == []


@pytest.mark.parametrize("where,why", [(".", "is a folder"), ("missing/x.csv", "does not exist"),
                                       ("a-file/x.csv", "is a file, not a folder"), ("", "empty")])
def test_export_refuses_a_folder_a_missing_parent_or_an_empty_name(store, tmp_path, capsys, where, why):
    (tmp_path / "a-file").write_text("")
    target = str(tmp_path / where) if where else ""
    assert main(["results", "export", str(store), "--format", "csv", "-o", target]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
