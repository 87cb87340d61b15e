"""Probes of special files, symlinks and long paths (issue 17, items 3, 4 and 5).

Special files (a FIFO, ``/dev/zero``, ``/dev/urandom``, a symlink loop) where cnnbench reads
or writes a file are named in one line, never waited on or read without end; writes never
go through a symlink out of the folder the command owns and never touch a file of the
user's; a path no file system can hold gives one line naming the flag. Commands that
would hang if broken run as subprocesses with a deadline (and a memory limit), so a
regression fails here instead of hanging the suite.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from cnnbench.cli import main
from cnnbench.results import cache, files
from cnnbench.results.store import append_record, read_records
from tests.report_fixtures import record, write_store

DEADLINE_S = 60  # far beyond what any of these takes; only a hang reaches it
LONG_NAME = "n" * 300
LONG_PATH = "/".join(["p" * 200] * 25)  # 5,024 characters


def _limit_memory() -> None:  # a reader of /dev/zero must fail, not take the machine
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``cnnbench ARGS`` in a process of its own; a hang is a failure, not a stuck suite."""
    try:
        return subprocess.run([sys.executable, "-m", "cnnbench", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=DEADLINE_S, preexec_fn=_limit_memory, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cnnbench {' '.join(args)} hung (no answer in {DEADLINE_S} s)")


def one_line_error(result: subprocess.CompletedProcess[str] | tuple[int, str], *words: str) -> str:
    code, err = (result.returncode, result.stderr) if not isinstance(result, tuple) else result
    assert code != 0, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    for word in words:
        assert word in errors[0], err
    return errors[0]


@pytest.fixture
def store(tmp_path):
    folder = tmp_path / "store"
    write_store(folder, [record()])
    return folder


def _special(kind: str, where: Path) -> None:
    if kind == "fifo":
        os.mkfifo(where)
    else:
        where.symlink_to(f"/dev/{kind}")


# --- item 3: special files ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "zero", "urandom"])
@pytest.mark.parametrize("command", ["results list", "report", "compare", "results export"])
def test_a_special_results_file_is_named_and_skipped(tmp_path, store, kind, command):
    _special(kind, store / "special.jsonl")
    args = {"results list": ["results", "list", str(store)],
            "report": ["report", str(store), "-o", str(tmp_path / "out"), "--no-plots"],
            "compare": ["compare", str(store), str(store)],
            "results export": ["results", "export", "--format", "csv", str(store)]}[command]
    result = cli(*args, cwd=tmp_path)
    what = "FIFO" if kind == "fifo" else "character device"
    assert re.search(rf"special\.jsonl: is a {what}.*, not a regular file", result.stderr), result.stderr
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr  # the regular file's record is read all the same


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_run_refuses_a_store_holding_a_special_results_file_before_work(tmp_path, kind):
    folder = tmp_path / "store"
    folder.mkdir()
    _special(kind, folder / "box.jsonl")
    result = cli("run", "--model", "trivial", "--device", "cpu", "--num-batches", "1", "--machine-label", "box",
                 "--results-dir", str(folder), cwd=tmp_path)
    one_line_error(result, "--results-dir", "box.jsonl", "not a regular file")
    assert result.returncode == 2


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_run_without_a_label_refuses_a_store_holding_a_special_file_before_work(tmp_path, kind):
    """The file this run will append to is named only after it ran: any special one is refused."""
    folder = tmp_path / "store"
    folder.mkdir()
    _special(kind, folder / "some-machine.jsonl")
    result = cli("run", "--model", "trivial", "--device", "cpu", "--num-batches", "1", "--results-dir", str(folder),
                 cwd=tmp_path)
    one_line_error(result, "--results-dir", "some-machine.jsonl", "not a regular file")
    assert result.returncode == 2


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_appending_to_a_special_file_raises_at_once(tmp_path, kind):
    """The derived machine label is known only after the run: the append itself refuses."""
    _special(kind, tmp_path / "box.jsonl")
    with pytest.raises(files.FileProblem, match="not a regular file" if kind == "fifo" else "symlink to /dev/zero"):
        append_record(tmp_path, {"run_id": "r", "environment": {"machine": "box"}})


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_export_to_a_special_file_is_refused(tmp_path, store, kind):
    target = tmp_path / "out.csv"
    _special(kind, target)
    result = cli("results", "export", "--format", "csv", "-o", str(target), str(store), cwd=tmp_path)
    one_line_error(result, "-o", "not a regular file")


@pytest.mark.parametrize("suite", ["/dev/zero", "/dev/urandom", "fifo"])
def test_a_suite_file_that_is_no_regular_file_is_refused(tmp_path, suite):
    if suite == "fifo":
        os.mkfifo(tmp_path / "fifo")
    result = cli("sweep", suite, "--results-dir", str(tmp_path / "r"), cwd=tmp_path)
    one_line_error(result, suite, "not a regular file")
    assert result.returncode == 2


def test_a_file_read_whole_takes_the_memory_it_holds_not_its_limit(tmp_path):
    """An importer's limit is a gigabyte; a read that reserved it up front failed under ``ulimit -v``."""
    small = tmp_path / "small.csv"
    small.write_bytes(b"abc")
    assert files.read_regular(small, 1 << 40) == b"abc"
    assert files.read_regular("/proc/self/status", 1 << 40).startswith(b"Name:")  # a size that says nothing
    with pytest.raises(files.TooBig):
        files.read_regular(small, 2)
    assert files.read_regular(tmp_path / "small.csv", 3) == b"abc"


def test_import_of_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    result = cli("import", "csv", "fifo", "--results-dir", str(tmp_path / "r"), cwd=tmp_path)
    one_line_error(result, "fifo", "FIFO")


def test_special_files_among_logs_are_named_and_the_logs_imported(tmp_path):
    """In a folder of tf_cnn_benchmarks logs, a FIFO where a log or the metadata file is, and a
    link to ``/dev/zero`` named like a log, are each named in a line, never waited on nor read;
    the logs are imported."""
    logs = Path(__file__).resolve().parent / "fixtures" / "tf_cnn_benchmarks_logs" / "LambdaCloud-RTX_A6000.logs"
    root = tmp_path / "in" / "box.logs"
    config = root / "syn-replicated-fp32-1gpus"
    shutil.copytree(logs / "syn-replicated-fp32-1gpus" / "alexnet-2048", config / "alexnet-2048")
    os.mkfifo(config / "resnet50-64")
    os.mkfifo(root / "metadata")
    (config / "resnet50-64").rename(config / "resnet50-64.log")
    (root / "zero.txt").symlink_to("/dev/zero")
    fifo = config / "vgg16-64" / "throughput"
    fifo.mkdir(parents=True)
    os.mkfifo(fifo / "1")
    result = cli("import", "tf-cnn-benchmarks", "in", "--results-dir", "r", cwd=tmp_path)
    assert result.returncode == 0 and "imported 1 record (1 ok)" in result.stdout, result.stderr
    for name, why in [("resnet50-64.log", "is a FIFO"), ("metadata", "is a FIFO"),
                      ("vgg16-64/throughput/1", "is a FIFO"), ("zero.txt", "is a character device")]:
        assert sum(name in line and why in line for line in result.stderr.splitlines()) == 1, (name, result.stderr)
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("where", ["class folder", "split"])
def test_a_symlink_loop_in_an_image_folder_is_named(tmp_path, capsys, where):
    from PIL import Image

    classes = tmp_path / "data" / "train" / "cat"
    classes.mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(classes / "a.jpg")
    loop = classes / "loop.jpg" if where == "class folder" else classes.parent / "loop"
    loop.symlink_to(loop.name)
    code = main(["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1", "--batch-size", "1",
                 "--data-dir", str(tmp_path / "data"), "--results-dir", str(tmp_path / "r")])
    one_line_error((code, capsys.readouterr().err), "--data-dir", str(loop), "symbolic links")
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("*.jsonl"))


@pytest.fixture
def cached_store(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    folder = tmp_path / "store"
    write_store(folder, [record(), record(model="vgg16")])
    return folder


def test_the_cache_is_parquet_never_marshal_nor_pickle(cached_store, monkeypatch):
    import marshal
    import pickle

    def refuse(*args, **kwargs):
        if "importlib" in sys._getframe(1).f_code.co_filename:  # Python loading a module's bytecode
            return real_loads(*args, **kwargs)
        raise AssertionError("marshal or pickle used on a cache")

    real_loads = marshal.loads

    for module in (marshal, pickle):
        monkeypatch.setattr(module, "loads", refuse)
        monkeypatch.setattr(module, "dumps", refuse)
    first, _ = read_records(cached_store)
    data = cache.cache_path(next(cached_store.glob("*.jsonl"))).read_bytes()
    assert data[:4] == data[-4:] == b"PAR1"  # a Parquet file, as DuckDB writes it
    loaded = []
    real = cache._from_table
    monkeypatch.setattr(cache, "_from_table", lambda *args: loaded.append(1) or real(*args))
    again, _ = read_records(cached_store)
    assert loaded == [1] and again == first  # read back through the cache, same records


@pytest.mark.parametrize("old", ["marshal", "own format"])
def test_an_old_cache_is_never_loaded(cached_store, old):
    import marshal

    read_records(cached_store)
    where = cache.cache_path(next(cached_store.glob("*.jsonl")))
    header = marshal.dumps({"code": cache.code_key()}) if old == "marshal" else orjson.dumps({"code": cache.code_key()})
    body = marshal.dumps(compile("1", "x", "eval")) if old == "marshal" else b"[0, 1, [], [], [[], []], [], []]"
    where.write_bytes(b"CNNBENCH-RECORD-CACHE\n" + len(header).to_bytes(4, "little") + header + body)
    records, problems = read_records(cached_store)
    assert len(records) == 2 and not problems
    assert where.read_bytes()[:4] == b"PAR1"  # made again


@pytest.mark.parametrize("where", ["cache folder", "store"])
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_cache_that_is_a_special_file_is_ignored(tmp_path, kind, where):
    """In the cache folder, or beside the results file where an older cnnbench kept it."""
    folder = tmp_path / "store"
    write_store(folder, [record()])
    at = cache.cache_path(folder / "m-fast.jsonl") if where == "cache folder" else folder / ".m-fast.jsonl.cache"
    at.parent.mkdir(parents=True, exist_ok=True)
    _special(kind, at)
    script = ("import sys; from cnnbench.results import cache; cache.MIN_BYTES = 0; "
              "from cnnbench.results.store import read_records; r, p = read_records(sys.argv[1]); "
              "print(len(r), len(p))")
    try:
        done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True,
                              timeout=DEADLINE_S, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a store whose cache is a special file hung")
    assert done.returncode == 0 and done.stdout.split() == ["1", "0"], done.stderr


# --- item 4: writes stay in their folder ---------------------------------------------------


def test_run_refuses_a_results_file_that_links_out_of_the_store(tmp_path, capsys):
    outside = tmp_path / "mine.jsonl"
    outside.write_text("my own line\n")
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "box.jsonl").symlink_to(outside)
    code = main(["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1", "--machine-label", "box",
                 "--results-dir", str(folder)])
    one_line_error((code, capsys.readouterr().err), "--results-dir", "symlink", "outside")
    assert outside.read_text() == "my own line\n"


def test_an_append_never_goes_through_a_symlink_out_of_the_store(tmp_path):
    outside = tmp_path / "mine.jsonl"
    outside.write_text("my own line\n")
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "box.jsonl").symlink_to(outside)
    with pytest.raises(files.OutsideFolder, match="outside"):
        append_record(folder, {"run_id": "r", "environment": {"machine": "box"}})
    assert outside.read_text() == "my own line\n"


def test_no_command_appends_to_a_results_file_with_another_name(tmp_path, capsys):
    """A results file that is a hard link of a file elsewhere (planted, or a copy kept with
    ``cp -l``) is refused by every command that appends, before any work: an append would change
    that file too."""
    outside = tmp_path / "mine.jsonl"
    outside.write_text("my own line\n")
    folder = tmp_path / "store"
    folder.mkdir()
    os.link(outside, folder / "box.jsonl")
    with pytest.raises(files.HardLinked, match="has 2 names"):
        append_record(folder, {"run_id": "r", "environment": {"machine": "box"}})
    code = main(["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1", "--machine-label", "box",
                 "--results-dir", str(folder)])
    one_line_error((code, capsys.readouterr().err), "--results-dir", "box.jsonl", "hard links")
    source = tmp_path / "source"
    write_store(source, [record(machine="abox"), record(machine="box", model="vgg16")])
    code = main(["results", "merge", "--into", str(folder), str(source)])
    one_line_error((code, capsys.readouterr().err), "box.jsonl", "hard links")
    table = tmp_path / "runs.csv"
    assert main(["results", "export", "--format", "csv", "-o", str(table), str(source)]) == 0
    code = main(["import", "csv", str(table), "--results-dir", str(folder)])  # abox's record not written first
    one_line_error((code, capsys.readouterr().err), "box.jsonl", "hard links")
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbase: {model: trivial, device: cpu, num_batches: 1, image_size: 32}\n")
    code = main(["sweep", str(suite), "--results-dir", str(folder)])  # its machine's label known only as it runs
    one_line_error((code, capsys.readouterr().err), "box.jsonl", "hard links")
    assert outside.read_text() == "my own line\n" and os.listdir(folder) == ["box.jsonl"]


def test_an_append_through_a_symlink_inside_the_store_is_fine(tmp_path):
    folder = tmp_path / "store"
    write_store(folder, [record(machine="box")])
    real = next(folder.glob("*.jsonl"))
    (folder / "other.jsonl").symlink_to(real.name)
    files.os.close(files.open_for_append(folder / "other.jsonl"))  # no error


def _report(store: Path, out: Path, capsys) -> tuple[int, str]:
    code = main(["report", str(store), "-o", str(out), "--no-plots"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("sub", ["tables", "plots"])
def test_a_report_never_writes_through_a_symlinked_subfolder(tmp_path, store, capsys, sub):
    out = tmp_path / "out"
    assert _report(store, out, capsys)[0] == 0
    user = tmp_path / "user"
    user.mkdir()
    names = [p.name for p in (out / "tables").iterdir()]
    for name in names:
        (user / name).write_text("the user's own\n")
    if (out / sub).exists():
        for p in (out / sub).iterdir():
            p.unlink()
        (out / sub).rmdir()
    (out / sub).symlink_to(user)
    code, err = _report(store, out, capsys)
    one_line_error((code, err), "-o", sub, "symlink", "outside")
    assert all((user / name).read_text() == "the user's own\n" for name in names)


def test_a_report_replaces_a_symlinked_file_instead_of_writing_through_it(tmp_path, store, capsys):
    out = tmp_path / "out"
    assert _report(store, out, capsys)[0] == 0
    victim = tmp_path / "victim.md"
    victim.write_text("the user's own\n")
    (out / "summary.md").unlink()
    (out / "summary.md").symlink_to(victim)
    assert _report(store, out, capsys)[0] == 0
    assert victim.read_text() == "the user's own\n"
    assert not (out / "summary.md").is_symlink()


def test_a_users_tmp_file_in_the_report_folder_is_left_alone(tmp_path, store, capsys):
    out = tmp_path / "out"
    assert _report(store, out, capsys)[0] == 0
    for name in ("summary.md.tmp", "report.html.tmp", ".cnnbench-report.json.tmp"):
        (out / name).write_text("the user's own\n")
    assert _report(store, out, capsys)[0] == 0
    for name in ("summary.md.tmp", "report.html.tmp", ".cnnbench-report.json.tmp"):
        assert (out / name).read_text() == "the user's own\n"


def test_cache_temporary_names_are_unique_not_by_pid(cached_store, monkeypatch):
    monkeypatch.setattr(os, "getpid", lambda: 4242)  # two machines sharing a store: same pid
    made = []
    real_replace = os.replace
    monkeypatch.setattr(files.os, "replace", lambda a, b, **kw: made.append(Path(a).name) or real_replace(a, b, **kw))
    read_records(cached_store)
    append_record(cached_store, record(model="resnet50", machine="m-fast"))
    read_records(cached_store)
    assert len(made) == 2 and made[0] != made[1]
    assert all("4242" not in name and name.endswith(".tmp") and name.startswith(".") for name in made)


# --- item 5: long paths ----------------------------------------------------------------


def _long_cases(tmp_path: Path, store: Path, long: str) -> dict[str, tuple[list[str], str]]:
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbase: {model: trivial, device: cpu}\nmatrix: {batch_size: [2]}\n")
    table = tmp_path / "t.csv"
    table.write_text("config.model\nresnet50\n")
    run = ["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1"]
    return {
        "run --results-dir": ([*run, "--results-dir", long], "--results-dir"),
        "run --data-dir": ([*run, "--data-dir", long, "--results-dir", str(tmp_path / "r")], "--data-dir"),
        "results list": (["results", "list", long], "no results at"),
        "results export -o": (["results", "export", "--format", "csv", "-o", long, str(store)], "-o"),
        "report -o": (["report", str(store), "-o", long], "-o"),
        "report RESULTS": (["report", long, "-o", str(tmp_path / "out")], "no results at"),
        "compare": (["compare", long, str(store)], "no results at"),
        "sweep SUITE": (["sweep", long], "SUITE.yaml"),
        "sweep --results-dir": (["sweep", str(suite), "--results-dir", long], "--results-dir"),
        "import PATH": (["import", "csv", long], "PATH"),
        "import --results-dir": (["import", "csv", str(table), "--results-dir", long], "--results-dir"),
    }


@pytest.mark.parametrize("length", ["name over 255", "path of 5000"])
@pytest.mark.parametrize("case", ["run --results-dir", "run --data-dir", "results list", "results export -o",
                                  "report -o", "report RESULTS", "compare", "sweep SUITE", "sweep --results-dir",
                                  "import PATH", "import --results-dir"])
def test_a_path_too_long_is_one_line_naming_the_flag(tmp_path, store, capsys, monkeypatch, length, case):
    import cnnbench.sweep.runner

    monkeypatch.setattr(cnnbench.sweep.runner, "preload_engine",
                        lambda: pytest.fail("the sweep started before its paths were checked"))
    long = LONG_NAME if length == "name over 255" else LONG_PATH
    args, flag = _long_cases(tmp_path, store, long)[case]
    code = main(args)
    line = one_line_error((code, capsys.readouterr().err), flag)
    assert ("255" in line) if length == "name over 255" else ("4095" in line)
    assert len(line) < 400  # the path is shortened, not printed whole
