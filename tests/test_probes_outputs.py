"""Probes of output folders that cannot take what a command writes (issue 41, items 11 and 12):
a symlink loop, a FIFO, a link out of the folder, an immutable folder, ``/proc/self``. Readers
already name such paths in one line; every writer does too, with a non-zero exit, before any
work, and writes nothing anywhere.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cnnbench.cli import main
from tests.report_fixtures import record, write_store

OWN = "the user's own\n"


def one_error_line(code: int, err: str, *words: str) -> str:
    assert code != 0, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], err
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return write_store(tmp_path / "store", [record()])


def _commands(tmp_path: Path, store: Path, out: str) -> dict[str, tuple[list[str], str]]:
    """The nine commands that write into a folder (or a file in one) named on the command line."""
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbase: {model: trivial, device: cpu}\nmatrix: {batch_size: [2]}\n")
    table = tmp_path / "t.csv"
    table.write_text("config.model\nresnet50\n")
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    return {
        "run": (["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1", "--results-dir", out],
                "--results-dir"),
        "sweep": (["sweep", str(suite), "--results-dir", out], "--results-dir"),
        "study --results-dir": (["study", "scaling", "--smoke", "--results-dir", out, "-o", str(tmp_path / "rep")],
                                "--results-dir"),
        "study -o": (["study", "scaling", "--smoke", "--results-dir", str(tmp_path / "res"), "-o", out], "-o"),
        "import": (["import", "csv", str(table), "--results-dir", out], "--results-dir"),
        "comm": (["comm", "--device", "cpu", "--results-dir", out], "--results-dir"),
        "data": (["data", "--data-dir", str(data), "--results-dir", out], "--results-dir"),
        "report -o": (["report", str(store), "-o", out, "--no-plots"], "-o"),
        "results merge --into": (["results", "merge", str(store), "--into", out], "--into"),
        "results export -o": (["results", "export", "--format", "csv", str(store), "-o", out], "-o"),
    }


COMMANDS = ["run", "sweep", "study --results-dir", "study -o", "import", "comm", "data", "report -o",
            "results merge --into", "results export -o"]


@pytest.mark.parametrize("where", ["loop", "loop/below"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_symlink_loop_as_an_output_is_one_line(tmp_path, store, capsys, command, where):
    loop = tmp_path / "loop"
    loop.symlink_to(loop.name)
    args, flag = _commands(tmp_path, store, str(tmp_path / where))[command]
    code = main(args)
    one_error_line(code, capsys.readouterr().err, flag, "symlink loop")
    assert loop.is_symlink()
    assert not (tmp_path / "res").exists() and not (tmp_path / "rep").exists()  # no work done


def _immutable(folder: Path) -> bool:
    folder.mkdir()
    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
    return done.returncode == 0


@pytest.mark.parametrize("kind", ["fifo", "link out", "proc", "immutable", "loop"])
def test_merge_into_a_target_that_cannot_take_the_runs_is_one_line(tmp_path, store, capsys, kind):
    import os

    victim = tmp_path / "victim.jsonl"
    victim.write_text(OWN)
    target = tmp_path / "into"
    words = ["--into"]
    if kind == "fifo":
        os.mkfifo(target)
        words.append("FIFO")
    elif kind == "link out":  # the target's file for the runs' machine leads out of it
        target.mkdir()
        (target / "m-fast.jsonl").symlink_to(victim)
        words += ["symlink", "outside"]
    elif kind == "proc":
        target = Path("/proc/self")
        words.append("cannot write")
    elif kind == "loop":
        target.symlink_to(target.name)
        words.append("symlink loop")
    elif not _immutable(target):
        pytest.skip("chattr +i is not available here")
    else:
        words.append("cannot write")
    try:
        code = main(["results", "merge", str(store), "--into", str(target)])
    finally:
        if kind == "immutable":
            subprocess.run(["chattr", "-i", str(target)], check=True)
    one_error_line(code, capsys.readouterr().err, *words)
    assert victim.read_text() == OWN
    if kind == "immutable":
        assert list(target.iterdir()) == []


def test_merge_into_a_store_whose_file_was_swapped_for_a_fifo_meanwhile_is_one_line(tmp_path, store, capsys,
                                                                                    monkeypatch):
    """Checked before the work, and an ``OSError`` at the write (a file swapped meanwhile) is one line too."""
    import os

    from cnnbench.results import merge

    target = tmp_path / "into"
    target.mkdir()
    checked = merge.check_results_dir

    def swap_after_check(*args, **kwargs):
        folder = checked(*args, **kwargs)
        if args[1:] or kwargs.get("machine_labels"):  # the second check, with the labels: then swap
            os.mkfifo(target / "m-fast.jsonl")
        return folder

    monkeypatch.setattr(merge, "check_results_dir", swap_after_check)
    code = main(["results", "merge", str(store), "--into", str(target)])
    one_error_line(code, capsys.readouterr().err, "--into", "FIFO")


@pytest.mark.parametrize("flag", ["--status", "--cancel"])
def test_a_study_on_slurm_is_followed_and_cancelled_without_asking_to_write_in_its_store(tmp_path, monkeypatch,
                                                                                        capsys, flag):
    """Following or cancelling a colleague's study reads its store: it need not be writable (a read-only
    store was refused once the results folder was checked for writing before every Slurm call)."""
    from cnnbench.results import outputs
    from cnnbench.sweep.slurm import executor as slurm_executor

    results = tmp_path / "results"
    results.mkdir()
    probed: list[object] = []
    monkeypatch.setattr(outputs, "check_results_dir", lambda *a, **k: probed.append(a))
    followed: list[object] = []
    monkeypatch.setattr(slurm_executor, "handle_slurm",
                        lambda args, suite, results_dir, command: followed.append(results_dir) or 0)
    code = main(["study", "host-cpus", "--smoke", "--executor", "slurm", flag, "--results-dir", str(results),
                 "-o", str(tmp_path / "report")])
    assert code == 0, capsys.readouterr().err
    assert followed == [results] and probed == []


def test_merge_names_the_records_field_when_their_machine_label_can_name_no_file(tmp_path, capsys):
    """merge has no --machine-label flag: a label from the records that can name no file is named as the
    records' field, not as a flag the user never gave."""
    import json

    source = tmp_path / "src"
    source.mkdir()
    (source / "m.jsonl").write_text(json.dumps(record(machine="x" * 300)) + "\n")
    code = main(["results", "merge", str(source), "--into", str(tmp_path / "into")])
    line = one_error_line(code, capsys.readouterr().err, "environment.machine", "255")
    assert "--machine-label" not in line
    assert not (tmp_path / "into").exists() or not any((tmp_path / "into").iterdir())


def test_a_file_where_a_store_folder_belongs_is_named_a_regular_file(tmp_path, capsys):
    """A file at ``.claims`` is 'a regular file, not a folder' (it read 'not a regular file, not a folder')."""
    into = tmp_path / "into"
    into.mkdir()
    (into / ".claims").write_text(OWN)
    code = main(["results", "merge", str(write_store(tmp_path / "src", [record()])), "--into", str(into)])
    line = one_error_line(code, capsys.readouterr().err, ".claims", "is a regular file, not a folder")
    assert "not a regular file" not in line
    assert (into / ".claims").read_text() == OWN
