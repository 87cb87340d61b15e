"""``cnnbench run`` and ``cnnbench models --list`` from the command line: output, exit codes, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cnnbench.cli import main

TINY = ["run", "--model", "trivial", "--device", "cpu", "--batch-size", "2", "--num-batches", "2",
        "--num-warmup-batches", "1"]


def test_run_prints_tf_format_and_stores_a_record(tmp_path, capsys):
    assert main(TINY + ["--results-dir", str(tmp_path), "--machine-label", "box"]) == 0
    out = capsys.readouterr().out
    assert "total images/sec:" in out and "record " in out
    (rec,) = [json.loads(x) for x in (tmp_path / "box.jsonl").read_text().splitlines()]
    assert rec["config"]["model"] == "trivial"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--batch-size", "0"], "--batch-size: must be >= 1"),
        (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
        (["--model", "resnet5"], "--model: unknown model 'resnet5'; nearest:"),
        (["--precision", "fp16"], "--precision: fp16 on cpu"),
        (["--num-batches", "many"], "argument --num-batches: invalid int value"),
        (["stray"], "unrecognized arguments: stray"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, needle):
    with pytest.raises(SystemExit) if argv[0] in ("--device", "--num-batches", "stray") else _no_raise():
        code = main(TINY + ["--results-dir", str(tmp_path)] + argv)
        assert code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["--model", "x" * 100_000], ["--num-batches", "9" * 100_000 + "x"],
                                  ["--num_batches=" + "x" * 100_000]])
def test_an_error_quoting_a_long_value_keeps_its_ends(tmp_path, capsys, argv):
    """An error that quotes a value given whole (100 KB) printed all of it: the line keeps its
    beginning and its end (the nearest names, the help to see), what lay between counted."""
    with pytest.raises(SystemExit) if argv[0].startswith("--num") else _no_raise():
        assert main(TINY + ["--results-dir", str(tmp_path)] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and len(err) < 5200 and "characters left out) ..." in err, err
    assert err.startswith("cnnbench run: error: ") and err.endswith(
        "(see `cnnbench models --list`)" if argv[0] == "--model" else "(see cnnbench run --help)"), err
    if argv[0] == "--model":
        assert "nearest: " in err


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_python_dash_m_exit_code(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cnnbench", *TINY, "--device", "cuda" if False else "tpu"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "invalid choice" in proc.stderr


def test_models_list_with_wildcards(capsys):
    assert main(["models", "--list", "vgg1*"]) == 0
    names = capsys.readouterr().out.split()
    assert "vgg16" in names and "vgg16_bn" in names and "resnet50" not in names


def test_models_list_is_in_natural_order(capsys):
    assert main(["models", "--list", "resnet*"]) == 0
    names = capsys.readouterr().out.split()
    assert names.index("resnet18") < names.index("resnet50") < names.index("resnet101") < names.index("resnet152")


def test_models_list_nothing_matches(capsys):
    assert main(["models", "--list", "nonexistent*"]) == 2
    assert "no model matches" in capsys.readouterr().err


@pytest.mark.parametrize("status", ["ok", "error"])
def test_run_prints_each_warning_once_and_the_compile_time(capsys, status):
    from types import SimpleNamespace

    from cnnbench.cli import run_cmd

    record = SimpleNamespace(status=status, error="boom", run_id="r1", config={},
                             metrics={"total_images_per_sec": 10.0, "compile_time_s": 12.34,
                                      "warnings": ["busy machine", "unstable"]})
    assert run_cmd._report(record, "results/box.jsonl", quiet=False) == (0 if status == "ok" else 1)
    out, err = capsys.readouterr()
    assert err.count("cnnbench run: warning: busy machine") == 1 and err.count("warning: unstable") == 1
    if status == "ok":
        assert "compile time: 12.3 s" in out
    record.metrics["compile_time_s"] = None  # not compiled
    run_cmd._report(record, "results/box.jsonl", quiet=False)
    assert "compile time" not in capsys.readouterr().out


def test_run_quiet_prints_only_the_figure_and_the_record(capsys):
    from types import SimpleNamespace

    from cnnbench.cli import run_cmd

    record = SimpleNamespace(status="ok", error=None, run_id="r1", config={},
                             metrics={"total_images_per_sec": 10.0, "compile_time_s": 12.34})  # compiled
    assert run_cmd._report(record, "results/box.jsonl", quiet=True) == 0
    assert capsys.readouterr().out.splitlines() == ["record r1 appended to results/box.jsonl",
                                                    "total images/sec: 10.00"]


def test_each_warning_is_printed_once(tmp_path, capsys, monkeypatch):
    from cnnbench.engine import metrics

    monkeypatch.setattr(metrics, "spread_warnings", lambda times: ["unstable: scripted"])
    assert main(["run", "--model", "trivial", "--device", "cpu", "--batch-size", "2", "--num-batches", "2",
                 "--num-warmup-batches", "1", "--results-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("cnnbench run: warning: unstable: scripted") == 1, err


def test_worker_log_lines_say_which_rank(monkeypatch, capsys):
    """A worker's log lines (here rank 1's, from inside the engine) start with [rank N]."""
    import logging

    import torch

    from cnnbench.engine import benchmark
    from cnnbench.engine.multidevice import worker

    class Done:
        def to_dict(self):
            return {}

    def logs(config, **kwargs):
        logging.getLogger("cnnbench.engine.test").warning("something to say")
        return Done()

    monkeypatch.setattr(benchmark, "resolve_and_measure", logs)
    for key, value in {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)
    root = logging.getLogger()
    handlers, level, threads = root.handlers[:], root.level, torch.get_num_threads()
    try:
        worker.launched_worker({"model": "trivial", "device": "cpu"}, {}, False)
        err = capsys.readouterr().err
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        torch.set_num_threads(threads)
        import signal

        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert "[rank 1] WARNING cnnbench.engine.test: something to say" in err.splitlines()


def test_a_cpu_runs_header_says_its_threads(tmp_path, capsys):
    import os

    import torch

    assert main(["run", "--model", "trivial", "--device", "cpu", "--batch-size", "2", "--num-batches", "2",
                 "--num-warmup-batches", "1", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    from cnnbench.words import plural

    cores = plural(len(os.sched_getaffinity(0)), "core")  # "1 core" where an earlier test pinned this process
    assert f"Threads:     {torch.get_num_threads()} ({cores})" in out.splitlines()


def _reader_gone(argv: list[str], cwd, *, both: bool = False) -> tuple[int, str]:
    """``cnnbench ARGV | head -0`` (with ``both``: ``2>&1 | head -0``), the reader gone before the
    command starts, so that every write meets the closed pipe: its exit status and standard error."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "cnnbench", *argv], cwd=cwd, stdout=write,
                              stderr=write if both else subprocess.PIPE, text=True, timeout=600)
    finally:
        os.close(write)
    return proc.returncode, proc.stderr or ""


def test_a_command_whose_output_reader_goes_still_does_its_work(tmp_path):
    """``run | head -3`` ended the benchmark at the next progress line and appended an error record
    (BrokenPipeError), in a worker process too (--num-devices 2); ``2>&1 | head`` stopped a sweep
    after its first case; ``predict | head`` and ``results list | head`` printed a traceback."""
    from cnnbench.results.store import read_records

    tiny = ["--model", "trivial", "--device", "cpu", "--batch-size", "2", "--num-batches", "20", "--display-every", "1"]
    for argv, both in [(["run", *tiny, "--results-dir", "r"], False),
                       (["run", *tiny, "--num-devices", "2", "--oversubscribe", "--results-dir", "multi"], True),
                       (["comm", "--device", "cpu", "--num-devices", "2", "--oversubscribe", "--min-bytes", "1K",
                         "--max-bytes", "1K", "--warmup", "1", "--iters", "2", "--results-dir", "comm"], True)]:
        code, err = _reader_gone(argv, tmp_path, both=both)
        assert code == 0 and "Traceback" not in err and "Broken pipe" not in err, (argv, err)
        (rec,), _ = read_records(tmp_path / argv[-1])
        assert rec["status"] == "ok", (argv, rec.get("error"))
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbase: {model: trivial, device: cpu, num_batches: 5}\nmatrix: {batch_size: [1, 2]}\n")
    code, _ = _reader_gone(["sweep", str(suite), "--results-dir", "sw", "--plain"], tmp_path, both=True)
    assert code == 0 and [r["status"] for r in read_records(tmp_path / "sw")[0]] == ["ok", "ok"]
    for argv in (["sweep", str(suite), "--dry-run"], ["predict", "r"], ["results", "list", "r"],
                 ["results", "query", "SELECT * FROM steps", "r"], ["results", "export", "--format", "csv", "r"]):
        code, err = _reader_gone(argv, tmp_path)
        assert code == 0 and "Traceback" not in err and "Broken pipe" not in err, (argv, err)


@pytest.mark.parametrize("argv, command, nearest", [
    (["run", "--model", "resnet50", "--batchsize", "8"], "cnnbench run", "--batch-size"),
    (["results", "list", "--limt", "3", "x"], "cnnbench results list", "--limit"),
    (["sweep", "s.yaml", "--dryrun"], "cnnbench sweep", "--dry-run"),
    (["report", "x", "--nosuch-flag"], "cnnbench report", None),
    (["--quiet", "run", "--model", "trivial"], "cnnbench", None),  # before the command: the top's to say
])
def test_an_unknown_flag_is_named_by_its_command_with_the_nearest_flag(capsys, argv, command, nearest):
    """An unknown flag was said by "cnnbench: error: unrecognized arguments ... (see cnnbench --help)",
    for any command, with no hint of the flag meant."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"{command}: error: unrecognized arguments: ") and f"(see {command} --help)" in err, err
    assert (f"(did you mean {nearest}?)" in err) if nearest else "did you mean" not in err, err


def test_an_unknown_model_points_once_to_the_list_and_names_no_flag_models_lacks(capsys):
    """run ended with two hints in a row ("(see `cnnbench models --list`) (see cnnbench run --help)"),
    and models named a --model flag it does not have."""
    assert main(["run", "--model", "resnt50", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("(see ") == 1 and err.rstrip().endswith("(see `cnnbench models --list`)"), err
    assert main(["models", "resnt50"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cnnbench models: error: unknown model 'resnt50'; nearest: resnet50") and "--model" not in err


def test_a_commands_flag_given_before_the_command_says_where_it_belongs(capsys):
    """``cnnbench --quiet run``: "(did you mean --quiet?)", from the run command, before."""
    with pytest.raises(SystemExit):
        main(["--quiet", "run", "--model", "trivial"])
    err = capsys.readouterr().err
    assert err.startswith("cnnbench: error: unrecognized arguments: --quiet (--quiet is an option of cnnbench run: "
                          "give it after run) (see cnnbench --help)"), err


@pytest.mark.parametrize("argv, said", [
    (["-v", "run", "-v", "--model", "trivial"], "cnnbench run: error: unrecognized arguments: -v "),
    (["-vv", "run", "-vv", "--model", "trivial"], "cnnbench run: error: unrecognized arguments: -vv "),
    (["--verb", "run", "--verb", "--model", "trivial"], "cnnbench run: error: unrecognized arguments: --verb "),
    (["--limit=3", "results", "list", "x"],
     "cnnbench: error: unrecognized arguments: --limit=3 (--limit is an option of cnnbench results list: give it "
     "after results list)"),
    (["--quie", "run", "--model", "trivial"],
     "cnnbench: error: unrecognized arguments: --quie (did you mean --quiet, an option of cnnbench run? give it "
     "after run)"),
])
def test_a_flag_before_the_command_is_blamed_where_it_was_refused(capsys, argv, said):
    """The top level's own flag refused after the command was blamed on the top level; a
    sub-command's path and a near flag were lost (review)."""
    with pytest.raises(SystemExit):
        main(argv)
    assert capsys.readouterr().err.startswith(said)


def test_the_callers_streams_are_theirs_again_and_may_say_nothing_of_what_they_wrote(capsys):
    """A stream whose write returns None (a logger's) ended main() in a TypeError; a command that
    put its own standard output in place left standard error wrapped after main() (review)."""
    import contextlib
    import io

    from cnnbench.terminal import output_dropped_once_its_reader_goes

    class Quiet(io.StringIO):
        def write(self, text):
            super().write(text)

    quiet = Quiet()
    with contextlib.redirect_stderr(quiet), pytest.raises(SystemExit):
        main(["--bogus", "run"])
    assert "unrecognized arguments: --bogus" in quiet.getvalue()
    out, err = sys.stdout, sys.stderr
    mine = io.StringIO()
    with output_dropped_once_its_reader_goes():
        sys.stdout = mine
    assert sys.stdout is mine and sys.stderr is err
    sys.stdout = out
