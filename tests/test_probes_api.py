"""Probes of the Python API and of a full disk (issue 41, items 5, 6 and 14).

* Item 5: every check that can be made before the work is made before it, in the API too: a
  results folder that cannot take the record (``/proc/self``, ``/dev/null``) and a machine file
  that is a symlink out of the store (its label derived, not given) are refused before any run.
* Item 6: a full disk is one line naming the folder and its free space, for ``run``, ``results
  merge`` and ``results export``, and the files written before are left as they were (no torn
  line). The disk is made full by faking ``ENOSPC`` (``os.write``, ``os.fsync``, the export's
  writer), so these always run.
* Item 14: wrong types given to the API are the function's one-line error naming the argument,
  not a ``TypeError`` from deep inside; ``cnnbench.run`` from several threads at once works (the
  model registry loads its sources once, under a lock).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cnnbench
from cnnbench.cli import main
from cnnbench.compare.build import CompareError
from cnnbench.config import ConfigError
from cnnbench.report.options import ReportError
from cnnbench.results import files
from cnnbench.results.outputs import OutputError
from cnnbench.results.store import machine_file_name
from cnnbench.sweep.suite import SuiteError
from tests.report_fixtures import record, write_store

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(model="trivial", device="cpu", batch_size=2, num_batches=2, num_warmup_batches=1)
TINY_FLAGS = ["--model", "trivial", "--device", "cpu", "--batch-size", "2", "--num-batches", "2",
              "--num-warmup-batches", "1"]


def one_line_error(code: int, err: str, *words: str) -> str:
    """The one line of stderr (besides a run's own warnings about its figures) that says why."""
    assert code != 0, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.strip() and ": warning: " not in line]
    assert len(errors) == 1 and "error:" in errors[0], err
    for word in words:
        assert word in errors[0], err
    return errors[0]


@pytest.fixture
def no_work(monkeypatch):
    """Any benchmark run fails the test: the checks must come first."""
    import cnnbench.engine
    import cnnbench.engine.input_bench

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the results folder was checked")

    monkeypatch.setattr(cnnbench.engine, "run_and_append", forbidden)
    monkeypatch.setattr(cnnbench.engine.input_bench, "run_data_benchmark", forbidden)


def _cpu_machine_file() -> str:
    """The store file of this machine's CPU runs, as the run will name it (no label given)."""
    from cnnbench.machine.environment import capture_environment

    return machine_file_name(capture_environment("cpu")["machine"])


# --- item 5: every check before the work, in the API too ---------------------------------------


@pytest.mark.parametrize("where", ["/proc/self", "/dev/null"])
def test_run_refuses_a_results_dir_it_cannot_write_before_running(where, no_work):
    with pytest.raises(OutputError) as caught:
        cnnbench.run(results_dir=where, **TINY)
    message = str(caught.value)
    assert message.startswith(f"--results-dir {where}") and "\n" not in message


def test_run_refuses_a_machine_file_linked_out_of_the_store_before_running(tmp_path, no_work):
    outside = tmp_path / "mine.jsonl"
    outside.write_text("my own line\n")
    store = tmp_path / "store"
    store.mkdir()
    (store / _cpu_machine_file()).symlink_to(outside)  # no machine_label: the run derives it
    with pytest.raises(OutputError, match="symlink.*outside") as caught:
        cnnbench.run(results_dir=store, **TINY)
    assert "\n" not in str(caught.value)
    assert outside.read_text() == "my own line\n"


def test_the_cli_refuses_a_machine_file_linked_out_of_the_store_before_running(tmp_path, capsys, no_work):
    outside = tmp_path / "mine.jsonl"
    outside.write_text("my own line\n")
    store = tmp_path / "store"
    store.mkdir()
    (store / _cpu_machine_file()).symlink_to(outside)
    code = main(["run", *TINY_FLAGS, "--results-dir", str(store)])
    one_line_error(code, capsys.readouterr().err, "--results-dir", "symlink", "outside")
    assert code == 2 and outside.read_text() == "my own line\n"


def test_the_data_command_checks_its_results_dir_before_the_work(tmp_path, capsys, no_work):
    code = main(["data", "--data-dir", str(tmp_path), "--device", "cpu", "--results-dir", "/dev/null"])
    one_line_error(code, capsys.readouterr().err, "--results-dir /dev/null", "not a folder")
    assert code == 2


# --- item 6: a full disk is one line, and what was there stays --------------------------------


def _in(folder: Path, fd: int) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder.resolve()) + os.sep)
    except OSError:
        return False


def _no_space() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def fill_the_disk(monkeypatch, folder: Path, on: str) -> None:
    """Writes into ``folder`` find no space: with ``on="write"`` the first ``os.write`` there
    writes half its bytes (as the system does when space runs out mid-way) and the next fails
    with ``ENOSPC``; with ``on="fsync"`` the writes pass and the ``fsync`` fails (NFS)."""
    real_write, real_fsync = os.write, os.fsync
    wrote: list[int] = []

    def write(fd, data):
        if on != "write" or not _in(folder, fd):
            return real_write(fd, data)
        if wrote:
            raise _no_space()
        view = memoryview(data)
        wrote.append(real_write(fd, view[:max(1, len(view) // 2)]))
        return wrote[-1]

    def fsync(fd):
        if on == "fsync" and _in(folder, fd):
            raise _no_space()
        return real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("on", ["write", "fsync"])
def test_run_on_a_full_disk_is_one_line_and_leaves_no_torn_line(tmp_path, monkeypatch, capsys, on):
    store = tmp_path / "store"
    write_store(store, [record(machine="box"), record(machine="box", model="vgg16")])
    before = _files(store)
    fill_the_disk(monkeypatch, store, on)
    code = main(["run", *TINY_FLAGS, "--machine-label", "box", "--results-dir", str(store)])
    line = one_line_error(code, capsys.readouterr().err, "--results-dir", str(store), "no space left", "free")
    assert code == 1, line
    assert _files(store) == before  # the earlier records, byte for byte: no torn line


def test_the_api_run_on_a_full_disk_raises_one_line(tmp_path, monkeypatch):
    from cnnbench.results.space import NoSpace

    store = tmp_path / "store"
    write_store(store, [record(machine="box")])
    before = _files(store)
    fill_the_disk(monkeypatch, store, "write")
    with pytest.raises(NoSpace) as caught:
        cnnbench.run(results_dir=store, machine_label="box", **TINY)
    assert caught.value.errno == errno.ENOSPC
    assert "\n" not in str(caught.value) and str(store) in str(caught.value) and " free now of " in str(caught.value)
    assert _files(store) == before


@pytest.mark.parametrize("on", ["write", "fsync"])
def test_merge_on_a_full_disk_is_one_line_and_leaves_the_target_as_it_was(tmp_path, monkeypatch, capsys, on):
    source = write_store(tmp_path / "a", [record(machine="box", model="vgg16"), record(machine="box", model="alexnet")])
    into = write_store(tmp_path / "into", [record(machine="box")])
    before = _files(into)
    fill_the_disk(monkeypatch, into, on)
    code = main(["results", "merge", str(source), "--into", str(into)])
    line = one_line_error(code, capsys.readouterr().err, "--into", str(into), "no space left", "free")
    assert code == 1, line
    assert _files(into) == before


def test_import_on_a_full_disk_is_one_line_and_leaves_the_store_as_it_was(tmp_path, monkeypatch, capsys):
    logs = ROOT / "tests" / "fixtures" / "tf_cnn_benchmarks_logs" / "LambdaCloud-RTX_A6000.logs"
    store = tmp_path / "store"
    write_store(store, [record(machine="box")])
    before = _files(store)
    fill_the_disk(monkeypatch, store, "write")
    code = main(["import", "tf-cnn-benchmarks", str(logs), "--results-dir", str(store), "--machine-label", "box"])
    line = one_line_error(code, capsys.readouterr().err, "--results-dir", str(store), "no space left", "free")
    assert code == 1, line
    assert _files(store) == before


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_export_on_a_full_disk_is_one_line_and_leaves_the_earlier_file(tmp_path, monkeypatch, capsys, fmt):
    store = write_store(tmp_path / "store", [record(machine="box", model=f"m{i}") for i in range(50)])
    out = tmp_path / "out" / f"table.{fmt}"
    out.parent.mkdir()
    out.write_text("the earlier export\n")
    real = files.PieceWriter.write

    def write(self, data):  # half the bytes go, then the disk is full
        real(self, memoryview(data)[:len(memoryview(data)) // 2])
        raise _no_space()

    monkeypatch.setattr(files.PieceWriter, "write", write)
    code = main(["results", "export", str(store), "--format", fmt, "-o", str(out)])
    line = one_line_error(code, capsys.readouterr().err, "-o", str(out.parent), "no space left", "free")
    assert code == 1, line
    assert out.read_text() == "the earlier export\n"
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary file left



def test_a_report_on_a_full_disk_is_one_line_and_leaves_the_earlier_report(tmp_path, monkeypatch, capsys):
    """``report`` (and a study's report, through the same writer) on a full disk: one line naming the
    folder and its free space, exit 1; the earlier report's files as they were, no temporary file left."""
    store = write_store(tmp_path / "store", [record(machine="box", model=f"m{i}") for i in range(4)])
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    write_store(store, [record(machine="other", model="m9")])  # new inputs: the report is written again
    capsys.readouterr()

    def write(self, data):
        raise _no_space()

    monkeypatch.setattr(files.PieceWriter, "write", write)
    code = main(["report", str(store), "-o", str(out), "--no-plots"])
    line = one_line_error(code, capsys.readouterr().err, "-o", str(out), "no space left", "free")
    assert code == 1, line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

# --- item 14: wrong types, and threads ---------------------------------------------------------


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda: cnnbench.read_results(5), ValueError, ["paths", "5 (an int)"]),
    (lambda: cnnbench.read_results(["results", 5]), ValueError, ["paths", "5 (an int)"]),
    (lambda: cnnbench.read_results("results", where=5), ValueError, ["where"]),
    (lambda: cnnbench.make_report(None), ReportError, ["results", "None"]),
    (lambda: cnnbench.make_report([record(), 3]), ReportError, ["results[1]", "3 (an int)"]),
    (lambda: cnnbench.make_report([record()], rows=5), ReportError, ["rows"]),
    (lambda: cnnbench.make_report([record()], max_plots="8"), ReportError, ["max_plots"]),
    (lambda: cnnbench.compare_results(5, None), CompareError, ["a:", "5 (an int)"]),
    (lambda: cnnbench.compare_results([record()], 5), CompareError, ["b:", "5 (an int)"]),
    (lambda: cnnbench.compare_results(record(), [record()]), CompareError, ["a:", "one record"]),
    (lambda: cnnbench.compare_results([record()], [record()], noise="3"), CompareError, ["noise"]),
    (lambda: cnnbench.run(results_dir=5, **TINY), ConfigError, ["--results-dir", "5 (an int)"]),
    (lambda: cnnbench.run(progress=5, **TINY), ValueError, ["progress"]),
    (lambda: cnnbench.run_study(5), SuiteError, ["name", "5 (an int)"]),
])
def test_a_wrong_type_is_the_functions_one_line_error(call, error, words, tmp_path, monkeypatch, no_work):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and not isinstance(caught.value, TypeError), message
    for word in words:
        assert word in message


THREADS = textwrap.dedent("""
    import threading, cnnbench
    errors, start = [], threading.Barrier(4)

    def one():
        start.wait()
        try:
            record = cnnbench.run(model="trivial", device="cpu", batch_size=2, num_batches=2, num_warmup_batches=1)
            assert record.status == "ok", record.error
        except BaseException as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(errors)
""")


def test_run_from_several_threads_at_once(tmp_path):
    """Each try in a fresh process, so that the model registry starts unloaded."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", THREADS], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]", done.stdout



def test_the_record_contract_is_never_seen_half_built_by_another_thread(monkeypatch):
    """The lazily built list of the number options a record's ``config`` is checked against:
    a thread that asks while another builds it gets it whole, and it is built once."""
    import threading

    from cnnbench.config import options
    from cnnbench.results import record as contract

    monkeypatch.setattr(contract, "_CONFIG_GROUPS", [])
    building, go_on = threading.Event(), threading.Event()
    real = options.field_types

    class Slow(dict):
        asked = 0

        def items(self):
            if threading.current_thread() is builder:
                Slow.asked += 1
                if Slow.asked == 2:  # the first group made, the second not yet
                    building.set()
                    assert go_on.wait(60)
            return super().items()

    monkeypatch.setattr(options, "field_types", lambda cls: Slow(real(cls)))
    builder = threading.Thread(target=contract._config_groups)
    builder.start()
    try:
        assert building.wait(60)
        seen = [base for base, _ in contract._config_groups()]
    finally:
        go_on.set()
        builder.join(60)
    assert seen == [int, float]
    assert [base for base, _ in contract._config_groups()] == [int, float]


def test_a_full_disk_met_in_another_process_comes_back_as_it_was_said():
    """A NoSpace (any FileProblem) raised where a plot is drawn crosses to the command as the same one line."""
    import errno
    import pickle

    from cnnbench.results.space import NoSpace

    for problem in (NoSpace("/tmp", errno.EDQUOT, "x.svg left as it was"), files.LinkedFile("/r/.claims/k.lock"),
                    files.NotRegularFile("/r/box.jsonl", 0o010000)):
        again = pickle.loads(pickle.dumps(problem))
        assert type(again) is type(problem) and str(again) == str(problem) and again.errno == problem.errno
