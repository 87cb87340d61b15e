"""The store read by DuckDB (:mod:`cnnbench.results.engine`) gives what the checked reader gives:
the same runs, the same values, every unusable line named ``file:line: why`` the same way, and
``--where`` keeps the same runs; files are opened as the checked reader opens them."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from cnnbench.analysis.fields import resolve_field
from cnnbench.cli import main
from cnnbench.results import cache, engine
from cnnbench.results.record import Record
from cnnbench.results.store import append_record


@pytest.fixture(autouse=True)
def _every_store_through_the_engine(monkeypatch):
    """Stores of any size: the engine (a small one is otherwise the checked reader's)."""
    monkeypatch.setattr(engine, "SMALL_STORE", 0)
    monkeypatch.setattr(engine, "SMALL_FILES", 0)


def through_engine(paths, fields, **k):
    return engine.newest_runs(paths, fields, resolve=resolve_field, **k)


def checked(paths, fields, where, limit):
    return engine._newest_checked(paths, fields, where, limit, resolve_field)


FIELDS = ["started_at", "environment.machine", "case_name", "config.model", "config.batch_size", "config.precision",
          "status", "metrics.total_images_per_sec", "kind", "environment.hostname", "source"]


def good(i: int = 0, machine: str = "box", **top) -> dict:
    return Record(config={"model": f"resnet{18 + i}", "batch_size": 8 + i, "precision": "fp32", "num_devices": 1},
                  environment={"machine": machine, "hostname": "h"},
                  metrics={"total_images_per_sec": 100.0 + i, "step_times_s": [0.1, 0.2]},
                  extra=top).to_dict()


def line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, allow_nan=True)


ODD = {
    # each: the line's text; the checked reader refuses it, or keeps it with a notice, or keeps it
    "no status": line({k: v for k, v in good().items() if k != "status"}),
    "status not allowed": line({**good(), "status": "great"}),
    "status a number": line({**good(), "status": 1}),
    "schema too new": line({**good(), "schema_version": 3}),
    "schema as text": line({**good(), "schema_version": "2"}),
    "schema 2.0": line({**good(), "schema_version": 2.0}),
    "older schema (1)": line({**good(), "schema_version": 1}),
    "no schema (0)": line({k: v for k, v in good().items() if k != "schema_version"}),
    "config is text": line({**good(), "config": "resnet50"}),
    "config is null": line({**good(), "config": None}),
    "config is a list": line({**good(), "config": [1, 2]}),
    "config is empty": line({**good(), "config": {}}),
    "environment is a number": line({**good(), "environment": 5}),
    "metrics is a list": line({**good(), "metrics": [1, 2]}),
    "metrics is text of a finished run": line({**good(), "metrics": "fast"}),
    "batch size as text": line({**good(), "config": {**good()["config"], "batch_size": "32"}}),
    "batch size a fraction": line({**good(), "config": {**good()["config"], "batch_size": 1.5}}),
    "batch size 2.0": line({**good(), "config": {**good()["config"], "batch_size": 2.0}}),
    "batch size true": line({**good(), "config": {**good()["config"], "batch_size": True}}),
    "batch size beyond 64 bits": line({**good(), "config": {**good()["config"], "batch_size": 2**70}}),
    "learning rate NaN": line({**good(), "config": {**good()["config"], "learning_rate": float("nan")}}),
    "figure as text": line({**good(), "metrics": {"total_images_per_sec": "fast"}}),
    "figure true": line({**good(), "metrics": {"total_images_per_sec": True}}),
    "figure NaN": line({**good(), "metrics": {"total_images_per_sec": float("nan")}}),
    "figure Infinity": line({**good(), "metrics": {"total_images_per_sec": float("inf")}}),
    "figure 1e400": line(good()).replace('"total_images_per_sec": 100.0', '"total_images_per_sec": 1e400'),
    "figure 1e19": line({**good(), "metrics": {"total_images_per_sec": 1e19}}),
    "figure beyond 64 bits": line({**good(), "metrics": {"total_images_per_sec": 2**70}}),
    "step times not a list": line({**good(), "metrics": {"total_images_per_sec": 1.0, "step_times_s": 5}}),
    "run_id a number": line({**good(), "run_id": 5}),
    "error a list": line({**good(), "error": ["x"]}),
    "machine a number": line({**good(), "environment": {"machine": 5, "hostname": "h"}}),
    "model a number (free)": line({**good(), "config": {**good()["config"], "model": 5}}),
    "case name NaN (read)": line({**good(), "case_name": float("nan")}),
    "a lone surrogate": line(good()).replace('"fp32"', '"fp\\ud80032"'),
    "a lone surrogate in the machine": line(good()).replace('"box"', '"b\\udc00ox"'),
    "an escaped pair": line(good()).replace('"fp32"', '"fp\\ud83d\\ude0032"'),
    "malformed": '{"status": "ok", "config": {',
    "not an object": "[1, 2]",
    "a number": "5",
    "text": '"ok"',
    "nested 200,000 deep": "[" * 200_000 + "]" * 200_000,
    "a stray carriage return": line(good()) + "\r",
    "metrics null of a failed run": line({**good(), "status": "error", "metrics": None}),
    "metrics text of a run out of memory": line({**good(), "status": "oom", "metrics": "none"}),
    "figure 1000000000000000001": line(good()).replace('"total_images_per_sec": 100.0',
                                                       '"total_images_per_sec": 1000000000000000001'),
    "figure nan (so spelled) in a field read": line(good()).replace('"total_images_per_sec": 100.0',
                                                                    '"total_images_per_sec": nan'),
    "case name [NaN]": line({**good(), "case_name": [float("nan")]}),
    "source {a: Infinity}": line({**good(), "source": {"a": float("inf")}}),
    "model an object": line({**good(), "config": {**good()["config"], "model": {"a": 1}}}),
    "model nested 20 deep": line({**good(), "config": {**good()["config"], "model": json.loads("[" * 20 + "]" * 20)}}),
    "a run twice in its file": line({**good(), "run_id": "twice"}) + "\n" + line({**good(7), "run_id": "twice"}),
    "spaces only": "   ",
    "blank": "",
}


def write(path, lines: list[str], end: str = "\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + end, encoding="utf-8", errors="surrogatepass")


def both(paths, fields=FIELDS, where=(), limit=0):
    """The engine's answer and the checked reader's, as comparable plain values."""
    new = through_engine(paths, fields, where=where, limit=limit)
    old = checked(paths, ("started_at", "config.model", "config.batch_size", "run_id", *fields), where,
                                 limit)
    return ((new.rows, new.total, [str(p) for p in new.problems]),
            (old.rows, old.total, [str(p) for p in old.problems]))


@pytest.mark.parametrize("name", list(ODD))
def test_each_odd_line_reads_as_the_checked_reader_reads_it(tmp_path, name):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0)), ODD[name], line(good(1))])
    write(store / "other.jsonl", [line(good(2, machine="other"))])
    new, old = both([store])
    assert new == old
    models = [r.get("config.model") for r in new[0]]
    assert "resnet19" in models and "resnet20" in models  # the lines around it were read


def test_every_odd_line_at_once_and_a_torn_last_line(tmp_path):
    store = tmp_path / "results"
    odd = [text for text in ODD.values()]
    write(store / "box.jsonl", [line(good(0)), *odd, line(good(1)), line(good(3))[:40]], end="")
    write(store / "clean.jsonl", [line(good(i, machine="clean")) for i in range(5)])
    new, old = both([store])
    assert new == old
    problems = new[2]
    torn = chr(10).join(odd).count(chr(10)) + 4
    assert any(p.startswith(f"{store / 'box.jsonl'}:{torn}: truncated line") for p in problems)


def test_not_utf8_is_named_and_the_rest_read(tmp_path):
    store = tmp_path / "results"
    (store).mkdir()
    (store / "box.jsonl").write_bytes(line(good(0)).encode() + b"\n" + line(good(1, machine="caf\u00e9"))
                                      .encode("utf-8").replace("caf\u00e9".encode(), b"caf\xe9") + b"\n")
    new, old = both([store])
    assert new == old
    assert new[1] == 1 and new[2][0].startswith(f"{store / 'box.jsonl'}:2: not UTF-8")


def test_a_run_met_twice_is_counted_once(tmp_path):
    store = tmp_path / "results"
    first = good(0)
    write(store / "a.jsonl", [line(first), line(good(1))])
    write(store / "b.jsonl", [line({**first, "metrics": {"total_images_per_sec": 5.0}})])
    write(store / "c.jsonl", [line({**good(2), "run_id": ""}), line({**good(3), "run_id": ""})])
    with engine.scan([store], FIELDS) as scan:
        assert scan.repeated == 1
        rows = scan.rows()
    assert len(rows) == 4
    assert [r["metrics.total_images_per_sec"] for r in rows if r["run_id"] == first["run_id"]] == [100.0]
    new, old = both([store])
    assert new == old


@pytest.mark.parametrize("where", [
    ["model=resnet1*"], ["model=RESNET19,resnet20"], ["model!=resnet18"], ["batch_size=9"], ["batch_size=9.0"],
    ["precision=fp32", "batch_size!=8"], ["machine=other"], ["machine=unknown"], ["source=cnnbench"],
    ["case_name=null"], ["case_name=c*"], ["config.num_devices=1"], ["num_devices=1"], ["hostname=h"],
    ["total_images_per_sec=101"], ["status=ok"], ["metrics.total_images_per_sec=null"],
    ["environment.cpu_cores=4"], ["cpu_cores!=4"],
])
def test_where_keeps_what_the_checked_reader_keeps(tmp_path, where):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)] + [line(good(4, case_name="case-a"))])
    other = good(5, machine="other")
    other["environment"].pop("machine")
    other["environment"]["hostname"] = "other"
    nameless = good(6)
    nameless["environment"] = {"cpu_cores": 4}
    write(store / "other.jsonl", [line(other), line(nameless)])
    new, old = both([store], where=where)
    assert new == old
    assert new[1] == len(new[0])


@pytest.mark.parametrize("where", ["batch_sise=8", "environment=x", "config.bogus=1", "Model=x", "_ok=1",
                                   "config.Model=resnet18", "config.=5", "x.y=3",
                                   "config.model.x=null"])  # below a field of single values: unknown too
def test_a_where_field_no_run_holds_is_named_as_the_checked_reader_names_it(tmp_path, capsys, where):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0))])
    assert main(["results", "list", str(store), "--where", where]) == 2
    new = capsys.readouterr().err
    with pytest.raises(ValueError) as old:
        checked([store], FIELDS, [where], 0)
    assert new.strip().endswith(f"--where: {old.value}") and "unknown field" in new
    assert "Traceback" not in new


def test_list_shows_the_newest_runs(tmp_path, capsys):
    store = tmp_path / "results"
    records = [good(i, started_at=f"2026-01-0{1 + i}T00:00:00+00:00") for i in range(5)]
    write(store / "box.jsonl", [line(r) for r in reversed(records)])
    assert main(["results", "list", str(store), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "resnet21" in out and "resnet22" in out and "resnet20" not in out
    assert out.index("resnet21") < out.index("resnet22")  # oldest first
    assert "2 of 5 runs" in out


def test_a_fifo_is_named_and_never_waited_on(tmp_path):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0))])
    os.mkfifo(store / "pipe.jsonl")
    (store / "x.jsonl").mkdir()
    found: list = []
    reader = threading.Thread(target=lambda: found.append(through_engine([store], FIELDS)), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while reader.is_alive() and time.monotonic() < deadline:
        reader.join(0.1)
    assert found, "the read waited on a FIFO"
    problems = [str(p) for p in found[0].problems]
    assert any("pipe.jsonl" in p for p in problems) and any("x.jsonl: is a directory" in p for p in problems)
    assert [r["config.model"] for r in found[0].rows] == ["resnet18"]


def test_a_results_file_reached_through_a_link_is_read(tmp_path):
    real = tmp_path / "elsewhere" / "box.jsonl"
    write(real, [line(good(0))])
    store = tmp_path / "results"
    store.mkdir()
    (store / "box.jsonl").symlink_to(real)
    (store / "loop.jsonl").symlink_to(store / "loop.jsonl")
    new, old = both([store])
    assert new == old
    assert len(new[0]) == 1 and any("loop.jsonl" in p for p in new[2])


def test_a_store_written_by_append_record_reads_through_the_engine_alone(tmp_path, monkeypatch):
    """The engine vouches for what cnnbench writes: no line of a plain store is read twice."""
    store = tmp_path / "results"
    for i in range(20):
        append_record(store, good(i, machine=f"m{i % 3}"))
    called: list = []
    monkeypatch.setattr(engine, "_read_checked", lambda *a, **k: called.append(a))
    found = through_engine([store], FIELDS)
    assert found.total == 20 and not called


@pytest.mark.parametrize("where", [["foo=5"], ["foo!=5"], ["x.y=3"], ["config.foo=null"]])
def test_where_names_resolve_as_the_checked_reader_resolves_them(tmp_path, where):
    """A bare name is the first section's that holds the key (a null too); a dotted name outside the
    sections is what the checked reader makes of it."""
    store = tmp_path / "results"
    first = good(0)
    first["config"]["foo"] = None
    first["metrics"]["foo"] = 5
    write(store / "box.jsonl", [line(first), line({**good(1), "x": {"y": 3}}), line(good(2))])
    try:
        new = both([store], where=where)
    except ValueError as exc:  # both refuse it alike
        with pytest.raises(ValueError, match=str(exc)[:30]):
            checked([store], FIELDS, where, 0)
        return
    assert new[0] == new[1]


def test_runs_alike_but_for_their_run_id_are_listed_as_the_checked_reader_lists_them(tmp_path):
    store = tmp_path / "results"
    alike = [line({**good(0), "run_id": f"c{i:03d}", "started_at": "2026-01-01T00:00:00+00:00"}) for i in range(300)]
    write(store / "box.jsonl", alike[::-1])
    new, old = both([store], limit=3)
    assert new == old and [r["run_id"] for r in new[0]] == ["c297", "c298", "c299"]


def test_many_files_are_read_with_few_descriptors(tmp_path):
    """More files than a process may hold open at once: each batch is closed before the next."""
    import resource
    import subprocess
    import sys

    store = tmp_path / "results"
    for i in range(300):
        write(store / f"m{i:03d}.jsonl", [line(good(i % 7, machine=f"m{i:03d}"))])
    limit = 100  # fewer than a batch of 128 files needs (each is open twice: here, and by DuckDB)

    def few() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    through_the_engine = ("import sys; from cnnbench.results import engine; "
                          "engine.SMALL_STORE = engine.SMALL_FILES = 0; "
                          "from cnnbench.cli import main; sys.exit(main(sys.argv[1:]))")
    out = subprocess.run([sys.executable, "-c", through_the_engine, "results", "list", "--limit", "0", str(store)],
                         capture_output=True, text=True, preexec_fn=few, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "300 runs" in out.stdout and "warning" not in out.stderr


def test_a_file_holding_a_run_twice_is_read_by_the_checked_reader(tmp_path, monkeypatch):
    """The engine keeps no order of lines: the first of two copies in one file is the checked reader's."""
    store = tmp_path / "results"
    twice = [line({**good(i), "run_id": "twice"}) for i in (0, 2)]
    write(store / "a.jsonl", [twice[0], line(good(1)), twice[1]])
    write(store / "b.jsonl", [line(good(3, machine="b"))])
    read: list = []
    real = engine._read_checked
    monkeypatch.setattr(engine, "_read_checked", lambda con, index, path, *a, **k: (read.append(path.name),
                                                                                    real(con, index, path, *a, **k)))
    found = through_engine([store], FIELDS)
    assert read == ["a.jsonl"]
    assert [r["config.model"] for r in found.rows if r["run_id"] == "twice"] == ["resnet18"]


def test_a_small_store_is_read_by_the_checked_reader_and_a_big_one_by_the_engine(tmp_path, monkeypatch):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    scans: list = []
    real = engine.scan
    monkeypatch.setattr(engine, "scan", lambda *a, **k: scans.append(1) or real(*a, **k))
    size = (store / "box.jsonl").stat().st_size
    monkeypatch.setattr(engine, "SMALL_STORE", size + 1)
    small = through_engine([store], FIELDS)
    assert not scans
    monkeypatch.setattr(engine, "SMALL_STORE", size)
    big = through_engine([store], FIELDS)
    assert scans and big == small


def test_a_read_of_every_field_takes_the_engine_from_a_bigger_store(tmp_path, monkeypatch, capsys):
    """An export, the runs of a query and read_results cost the engine more than a read of a few
    fields: each has its own threshold (measured), the store's size in bytes."""
    import cnnbench
    from cnnbench.cli import main
    from cnnbench.results import sql

    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    size = (store / "box.jsonl").stat().st_size
    scans: list = []
    real = engine.scan
    monkeypatch.setattr(engine, "scan", lambda *a, **k: scans.append(k.get("leave_out", "narrow")) or real(*a, **k))
    frames: list = []
    real_frame = sql.runs_frame
    monkeypatch.setattr(sql, "runs_frame", lambda *a, **k: frames.append(real_frame(*a, **k)) or frames[-1])
    monkeypatch.setattr(engine, "SMALL_STORE", size)
    for wide, frame in ((size + 1, size + 1), (size, size + 1), (size, size)):
        monkeypatch.setattr(engine, "WIDE_STORE", wide)
        monkeypatch.setattr(engine, "FRAME_STORE", frame)
        scans.clear()
        frames.clear()
        assert main(["results", "export", "--format", "csv", str(store)]) == 0
        assert main(["results", "query", "SELECT count(*) FROM runs", str(store)]) == 0
        assert main(["results", "query", "SELECT count(*) FROM steps", str(store)]) == 0
        assert main(["results", "list", str(store)]) == 0
        assert len(cnnbench.read_results(store)) == 3
        assert scans.count("narrow") == 2  # the steps of a query, and results list: always the engine's
        assert len([s for s in scans if s != "narrow"]) == (2 if wide == size else 0) + (1 if frame == size else 0)
        assert (frames[0] is not None) == (frame == size)
    capsys.readouterr()


@pytest.fixture
def sidecars(monkeypatch, tmp_path):
    return use_sidecars(monkeypatch, tmp_path)


def use_sidecars(monkeypatch, tmp_path):
    """Every results file gets a sidecar (however small), in a cache folder of the test's own; the
    folder and the list of the files each read served from a sidecar."""
    from cnnbench.results import cache

    home = tmp_path / "cache"
    monkeypatch.setenv("CNNBENCH_CACHE_DIR", str(home))
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    served: list = []
    real = engine._load_all
    monkeypatch.setattr(engine, "_load_all", lambda con, files, *a: (lambda got: (
        served.extend(sorted(p.name for i, p, _, _ in files if i in got)), got)[1])(real(con, files, *a)))
    return home, served


def test_a_sidecar_is_the_users_alone_to_read_from_its_first_byte(tmp_path, sidecars, monkeypatch):
    """Written into the file mkstemp made (0600), not one DuckDB makes anew by the umask: no one else
    can read it before a chmod would put it right (seen without any chmod)."""
    home, _ = sidecars
    home.mkdir(parents=True)
    home.chmod(0o755)
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(4)])
    monkeypatch.setattr(os, "chmod", lambda *a, **k: None)
    old = os.umask(0o022)
    try:
        through_engine([store], FIELDS)
    finally:
        os.umask(old)
    (made,) = home.glob("*.parquet")
    assert made.stat().st_mode & 0o777 == 0o600 and not list(home.glob("*tmp*"))


def test_a_second_read_comes_from_the_sidecar_and_gives_the_same(tmp_path, sidecars):
    home, served = sidecars
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(4)])
    write(store / "odd.jsonl", [line(good(5, machine="odd")), ODD["figure NaN"]])
    before = sorted(p.name for p in store.iterdir())
    first = through_engine([store], FIELDS)
    assert not served
    made = list(home.glob("*.parquet"))
    assert len(made) == 1 and (made[0].stat().st_mode & 0o777) == 0o600  # none for a file with an odd line
    second = through_engine([store], FIELDS)
    assert served == ["box.jsonl"] and second == first
    assert sorted(p.name for p in store.iterdir()) == before  # nothing written in the store
    new, old = both([store])
    assert new == old


def test_lines_appended_are_read_after_the_sidecar(tmp_path, sidecars):
    home, served = sidecars
    store = tmp_path / "results"
    path = store / "box.jsonl"
    write(path, [line(good(i)) for i in range(3)])
    through_engine([store], FIELDS)
    first = good(0)
    with open(path, "a") as f:
        f.write(line(good(7)) + "\n" + line({**good(8), "status": "great"}) + "\n")
    new, old = both([store])
    assert served == ["box.jsonl"] and new == old
    assert new[2] == [f"{path}:5: status 'great' is not one of ok, oom, error, timeout"]
    assert len(new[0]) == 4
    with open(path, "a") as f:  # a good line, and a run already read: read after the sidecar, once
        f.write(line(good(9)) + "\n" + path.read_text().splitlines()[0] + "\n")
    new, old = both([store])
    assert new == old and len(new[0]) == 5 and first


def test_an_appended_line_is_read_as_the_checked_reader_reads_it(tmp_path, sidecars):
    """Lines appended after a sidecar's are read without their step times where the read leaves them
    out, as the checked reader reads them (a line whose step times are no list is kept)."""
    home, served = sidecars
    store = tmp_path / "results"
    path = store / "box.jsonl"
    write(path, [line(good(i)) for i in range(3)])
    through_engine([store], FIELDS)
    with open(path, "a") as f:
        f.write(ODD["step times not a list"] + "\n")
    new, old = both([store])
    assert served == ["box.jsonl"] and new == old and len(new[0]) == 4 and not new[2]


def test_a_line_appended_while_the_tail_is_read_is_not_lost(tmp_path, sidecars, monkeypatch):
    home, served = sidecars
    store = tmp_path / "results"
    path = store / "box.jsonl"
    write(path, [line(good(i)) for i in range(3)])
    through_engine([store], FIELDS)
    with open(path, "a") as f:
        f.write(line(good(3)) + "\n")
    real = engine._add
    appended: list = []

    def add_then_append(*a):
        real(*a)
        if not appended:  # another writer appends while the tail is read
            appended.append(1)
            with open(path, "a") as f:
                f.write(line(good(4)) + "\n" + "{malformed\n")

    monkeypatch.setattr(engine, "_add", add_then_append)
    through_engine([store], FIELDS)
    monkeypatch.setattr(engine, "_add", real)
    new, old = both([store])
    assert new == old and len(new[0]) == 5 and new[2] == [f"{path}:6: malformed line (Expecting property name "
                                                          "enclosed in double quotes: line 1 column 2 (char 1))"]


def test_a_file_written_over_is_read_afresh(tmp_path, sidecars):
    home, served = sidecars
    store = tmp_path / "results"
    path = store / "box.jsonl"
    write(path, [line(good(1)), line(good(2))])
    through_engine([store], FIELDS)
    path.write_text(path.read_text().replace('"resnet19"', '"resnetXX"'))  # the same size, other lines
    found = through_engine([store], FIELDS)
    assert sorted(r["config.model"] for r in found.rows) == ["resnet20", "resnetXX"]
    with open(path, "r+") as f:  # cut, then grown past the size the sidecar covers
        f.truncate(10)
    with open(path, "a") as f:
        f.write("\n" + line(good(3)) + "\n" + line(good(4)) + "\n" + line(good(5)) + "\n")
    new, old = both([store])
    assert new == old and len(new[0]) == 3


def test_a_file_touched_is_hashed_once_and_its_sidecar_kept(tmp_path, sidecars, monkeypatch):
    home, served = sidecars
    store = tmp_path / "results"
    path = store / "box.jsonl"
    write(path, [line(good(i)) for i in range(3)])
    first = through_engine([store], FIELDS)
    hashed: list = []
    real = engine.content_hashes
    counting = lambda files: hashed.extend(size for _, size in files) or real(files)  # noqa: E731
    monkeypatch.setattr(engine, "content_hashes", counting)  # what the prefix's check calls
    monkeypatch.setattr(cache, "content_hashes", counting)  # and content_hash, wherever it is called
    os.utime(path, ns=(1, 1))
    assert through_engine([store], FIELDS) == first and served == ["box.jsonl"] and len(hashed) == 1
    assert through_engine([store], FIELDS) == first and served == ["box.jsonl"] * 2 and len(hashed) == 1
    with open(path, "rb") as f:
        assert cache.content_hash(f.fileno(), path.stat().st_size + 1) is None  # a file cut: no hash, no crash


@pytest.mark.parametrize("damage", ["bits", "truncated", "shared", "link", "fields"])
def test_a_damaged_or_foreign_sidecar_is_not_used(tmp_path, sidecars, damage):
    home, served = sidecars
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(40)])
    first = through_engine([store], FIELDS)
    (car,) = home.glob("*.parquet")
    data = car.read_bytes()
    if damage == "bits":  # a bit flipped at one of many places (rows, types, metadata): never served wrong
        for mask in (0x01, 0x10, 0x80):
            for at in range(4 + mask % 7, len(data) - 4, max(1, len(data) // 40)):
                car.write_bytes(data[:at] + bytes([data[at] ^ mask]) + data[at + 1:])
                car.chmod(0o600)
                assert through_engine([store], FIELDS) == first, (mask, at)
        for key in (b"size", b"rows", b"stat", b"content", b"hashes"):  # and in each value of its metadata
            start = data.rfind(key) + len(key)
            for at in range(start, start + 6):
                car.write_bytes(data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1:])
                car.chmod(0o600)
                assert through_engine([store], FIELDS) == first, (key, at)
        return
    if damage == "truncated":
        car.write_bytes(data[: len(data) // 2])
    elif damage == "shared":
        car.chmod(0o644)  # others may read it: another user's, or written by hand
    elif damage == "link":
        car.rename(tmp_path / "elsewhere.parquet")
        car.symlink_to(tmp_path / "elsewhere.parquet")
    if damage == "fields":
        assert through_engine([store], FIELDS, where=["config.num_devices=1"]).rows == first.rows
    else:
        assert through_engine([store], FIELDS) == first
    assert not served and not car.is_symlink() and (car.stat().st_mode & 0o777) == 0o600  # written again


def test_sidecars_are_loaded_together_and_checked_each(tmp_path, sidecars, monkeypatch):
    """The rows of every sidecar go in by one statement, each sidecar read once, and are counted
    there: one whose rows do not add up is taken out and its file read afresh, the others served;
    when the one statement fails, each goes in alone, and one that cannot is read afresh; when they
    cannot be counted, none is served."""
    import duckdb

    home, served = sidecars
    store = tmp_path / "results"
    for name in ("a", "b", "c"):
        write(store / f"{name}.jsonl", [line(good(i, machine=name)) for i in range(30)])
    first = through_engine([store], FIELDS)
    assert len(first.rows) == 90 and len(list(home.glob("*.parquet"))) == 3
    statements: list[str] = []
    refuse = [lambda sql: False]
    left: list[set] = []  # the files whose rows are in the table as each load ends

    class Counting:
        def __init__(self, con):
            self.con = con

        def execute(self, sql, *a):
            statements.append(sql)
            if refuse[0](sql):
                raise duckdb.InvalidInputException("refused")
            return self.con.execute(sql, *a)

    def loaded(con, sound, wanted):
        got = real_loaded(Counting(con), sound, wanted)
        left.append({row[0] for row in con.execute("SELECT DISTINCT _file FROM scanned").fetchall()})
        return got

    real_loaded = engine._loaded
    monkeypatch.setattr(engine, "_loaded", loaded)
    assert through_engine([store], FIELDS) == first and served == ["a.jsonl", "b.jsonl", "c.jsonl"]
    assert sum("read_parquet" in s for s in statements) == 1 and statements[0].count("read_parquet") == 3
    refuse[0] = lambda sql: sql.count("read_parquet") > 1  # the one statement fails: each goes in alone
    served.clear()
    statements.clear()
    assert through_engine([store], FIELDS) == first and served == ["a.jsonl", "b.jsonl", "c.jsonl"]
    assert [s.count("read_parquet") for s in statements if "read_parquet" in s] == [3, 1, 1, 1]
    refuse[0] = lambda sql: "read_parquet" in sql and "SELECT 1, true" in sql  # b's cannot go in: read afresh
    served.clear()
    assert through_engine([store], FIELDS) == first and served == ["a.jsonl", "c.jsonl"]
    refuse[0] = lambda sql: "GROUP BY _file" in sql  # not counted: none served, none left in the table
    served.clear()
    left.clear()
    assert through_engine([store], FIELDS) == first and served == [] and left == [set()]
    refuse[0] = lambda sql: False
    car = next(iter(sorted(home.glob("*.parquet"), key=lambda p: p.stat().st_mtime)))
    data = car.read_bytes()
    at = data.find(b"resnet")  # a value of a row changed: that sidecar's rows do not add up
    assert at >= 0
    car.write_bytes(data[:at] + b"R" + data[at + 1:])
    car.chmod(0o600)
    served.clear()
    left.clear()
    assert through_engine([store], FIELDS) == first and len(served) == 2
    assert len(left) == 1 and len(left[0]) == 2  # its rows taken out as the load ended, before any other read


def test_an_every_field_read_is_served_only_by_a_sidecar_in_line_order(tmp_path, sidecars):
    """A read of chosen fields keeps no order (DuckDB reads a sidecar's row groups, or a file's parts,
    on every core): a sidecar it writes again (lines were appended) is not used by a read of every
    field, which keeps the store's order, even where it holds every field; that read writes it again
    in line order."""
    home, served = sidecars
    store = tmp_path / "results"
    path = store / "box.jsonl"
    write(path, [line(good(i)) for i in range(30)])

    def every_in_order():
        with engine.scan([store], None) as scan:
            return scan.rows("ORDER BY _file, rowid")

    every_in_order()
    with engine.scan([store], None) as scan:
        fields = list(scan.fields)
    assert served == ["box.jsonl"]
    with open(path, "a") as f:
        f.write(line(good(30)) + "\n")
    served.clear()
    with engine.scan([store], fields):  # served, its new line read, and written again: by a read of chosen fields
        pass
    assert served == ["box.jsonl"]
    served.clear()
    first = every_in_order()
    assert served == [] and [row["config.model"] for row in first] == [f"resnet{18 + i}" for i in range(31)]
    assert every_in_order() == first and served == ["box.jsonl"]  # written again in line order: it serves


def test_a_cache_folder_named_like_a_pattern_is_read_as_named(tmp_path, sidecars, monkeypatch):
    home, served = sidecars
    store = tmp_path / "results"
    path = store / "box.jsonl"
    write(path, [line(good(i)) for i in range(3)])
    monkeypatch.setenv("CNNBENCH_CACHE_DIR", str(tmp_path / "cx"))
    through_engine([store], FIELDS)  # a sidecar of these lines in cx
    write(path, [line(good(i)) for i in range(5, 9)])
    monkeypatch.setenv("CNNBENCH_CACHE_DIR", str(tmp_path / "c[x]"))
    through_engine([store], FIELDS)
    served.clear()
    new, old = both([store])
    assert new == old and served == ["box.jsonl"] and len(new[0]) == 4


def test_fields_are_found_a_file_per_core_and_a_few_files_at_most(tmp_path, monkeypatch):
    """An every-field read finds its files' fields several at a time, but however many cores the
    machine has, no more than ``DISCOVER_AT_ONCE`` files at once (each holds a whole file's read),
    and each file's fields are its own."""
    for i in range(12):
        write(tmp_path / f"m{i:02d}.jsonl", [line({**good(i, machine=f"m{i:02d}"), f"only_{i}": i})])
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    found = engine._fields_of
    threads: set[int] = set()  # the pool's threads that found fields: as many as files at once, at most

    def counted(con, path):
        threads.add(threading.get_ident())
        return found(con, path)

    monkeypatch.setattr(engine, "_fields_of", counted)
    every = engine._discover(sorted(tmp_path.glob("*.jsonl")))
    assert 2 <= len(threads) <= engine.DISCOVER_AT_ONCE
    assert [sorted(n for n in every.leaves[i] if n.startswith("only_")) for i in range(12)] == [
        [f"only_{i}"] for i in range(12)]


def test_a_line_longer_than_a_first_read_takes_is_read_again_with_the_longest(tmp_path, monkeypatch):
    """A store's files are read first with lines of up to FAST_OBJECT (parts a core each); a longer
    line fails that read whole, and the files are read again with MAX_OBJECT: every run, the long
    one too, as the checked reader gives them."""
    monkeypatch.setattr(engine, "FAST_OBJECT", 16 << 20)  # DuckDB's least
    long_run = good(7)
    long_run["metrics"]["step_times_s"] = [0.0012345678901234] * 3_000_000  # a line of about 60 MB
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)] + [line(long_run)] + [line(good(i)) for i in (4, 5)])
    write(store / "other.jsonl", [line(good(9, machine="other"))])
    tried = []
    real = engine._longest
    monkeypatch.setattr(engine, "_longest", lambda read: real(lambda most: (tried.append(most), read(most))[1]))
    new, old = both([store])
    assert new == old and new[1] == 7 and long_run["run_id"] in {r["run_id"] for r in new[0]}
    assert tried == [16 << 20, engine.MAX_OBJECT]  # read again, after the first read failed


def test_a_line_longer_than_the_engine_reads_leaves_the_store_to_the_checked_reader(tmp_path, monkeypatch):
    """Past the longest line the engine reads, the store is the checked reader's (its runs, not a
    DuckDB error)."""
    monkeypatch.setattr(engine, "FAST_OBJECT", 16 << 20)
    monkeypatch.setattr(engine, "MAX_OBJECT", 16 << 20)
    long_run = good(7)
    long_run["metrics"]["step_times_s"] = [0.0012345678901234] * 3_000_000  # a line of about 60 MB
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0)), line(long_run), line(good(1))])
    new, old = both([store])
    assert new == old and new[1] == 3


def test_an_export_of_a_store_with_a_line_longer_than_the_engine_reads_is_the_checked_readers(
        tmp_path, monkeypatch, capsys):
    """An every-field read (export, query) finds each file's fields first: a line too long for that
    too leaves the store to the checked reader, every run exported."""
    import csv
    import io

    monkeypatch.setattr(engine, "WIDE_STORE", 0)
    monkeypatch.setattr(engine, "FAST_OBJECT", 16 << 20)
    monkeypatch.setattr(engine, "MAX_OBJECT", 16 << 20)
    long_run = good(7)
    long_run["metrics"]["step_times_s"] = [0.0012345678901234] * 3_000_000  # a line of about 60 MB
    store = tmp_path / "results"
    runs = [good(0), long_run, good(1)]
    write(store / "box.jsonl", [line(r) for r in runs])
    assert main(["results", "export", "--format", "csv", "--no-step-times", str(store)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sorted(r["run_id"] for r in rows) == sorted(r["run_id"] for r in runs)


def test_runs_alike_in_every_key_are_listed_in_the_stores_order(tmp_path):
    """Runs without a run_id, alike in every key ``results list`` sorts by, keep the store's order
    (its files' order), as the checked reader lists them (a probe's finding: the engine's rows came
    in no order)."""
    store = tmp_path / "results"
    for name in ("a", "b", "c", "d"):
        run = {**good(0), "run_id": None, "tag": name}
        write(store / f"{name}.jsonl", [line(run)])
    for limit in (0, 2):
        new, old = both([store], fields=(*FIELDS, "tag"), limit=limit)
        assert new == old
    assert [r["tag"] for r in new[0]] == ["c", "d"]
