"""The parsed-record cache beside a big results file: the same records and problems as a
plain read, in the same order; used only while the lines it covers are unchanged; a damaged
or foreign cache is ignored and rebuilt; the results file is never touched."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest

from cnnbench.results import cache, files, reader
from cnnbench.results import lines as store_lines
from cnnbench.results.record import Record
from cnnbench.results.step_summary import StepTimes
from cnnbench.results.store import append_record, read_records


def rec(i: int, **metrics) -> dict:
    return Record(
        config={"model": f"resnet{i % 3}", "batch_size": 8 * (1 + i % 2), "precision": "fp32"},
        environment={"machine": "box", "hostname": "h"},
        metrics={"total_images_per_sec": 100.0 + i, "step_times_s": [0.01 * (k + 1) + i for k in range(4)],
                 **metrics},
        extra={"case_name": f"c{i}"},
    ).to_dict()


def odd_lines() -> list[str]:
    """Lines of every kind a reader meets, in file order."""
    v0 = {"config": {"model": "vgg16"}, "environment": {"machine": "box"},
          "metrics": {"total_images_per_sec": 7.0}}  # no schema_version: migrated from v0
    v1 = {**rec(20), "schema_version": 1, "config": {"model": "x", "loader_workers": 3, "synthetic_location": "loader"}}
    nested = rec(21)
    nested["config"]["gpu_indices"] = [0, 1]  # a section with a list: kept in its row
    int_steps = rec(22, step_times_s=[1, 2, 3])  # whole numbers stay whole numbers
    no_steps = rec(23)
    no_steps["metrics"]["step_times_s"] = None
    bad_steps = rec(24)
    bad_steps["metrics"]["step_times_s"] = 5  # breaks the contract only when step times are read
    nan_rate, null_rate = rec(26), rec(26)  # orjson writes NaN as null: these two must not share a config
    nan_rate["config"]["learning_rate"] = float("nan")
    null_rate["config"]["learning_rate"] = None
    return [
        json.dumps(rec(0)), json.dumps(rec(1)),
        '{"status": "ok", "config": {', "",  # malformed, then an empty line
        json.dumps(v0), json.dumps(v1), json.dumps(nested), json.dumps(int_steps), json.dumps(no_steps),
        json.dumps(bad_steps), json.dumps({**rec(25), "status": "great"}), "[1, 2]",
        json.dumps(rec(2, step_times_s=[])), "{\"a\": NaN}", json.dumps(nan_rate), json.dumps(null_rate),
    ]


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    folder = tmp_path / "results"
    folder.mkdir()
    path = folder / "box.jsonl"
    path.write_text("\n".join(odd_lines()) + "\n")
    return path


def plain_read(path, monkeypatch, **kw):
    with monkeypatch.context() as m:
        m.setattr(cache, "MIN_BYTES", 1 << 62)
        return read_records(path.parent, **kw)


def step_types(records: list[dict]) -> list[type]:
    return [type(x) for r in records for x in r["metrics"].get("step_times_s") or []]


def same(a: tuple[list[dict], list], b: tuple[list[dict], list]) -> bool:
    """Equal records (with their keys in the same order, whole numbers still whole) and equal problems."""
    def text(records: list[dict]) -> str:  # a lazy read's step times as the lists they show
        return json.dumps(records, default=lambda value: value.tolist())

    return text(a[0]) == text(b[0]) and step_types(a[0]) == step_types(b[0]) and a[1] == b[1]


@pytest.mark.parametrize("step_times", [True, False, "lazy"])
def test_cached_reads_give_what_a_plain_read_gives(store, monkeypatch, step_times):
    expected = plain_read(store, monkeypatch, step_times=step_times)
    # the odd step times count only with step times; the two NaNs are notices (their records are kept)
    assert len(expected[1]) == (6 if step_times else 5)
    before = store.read_bytes()
    cold = read_records(store.parent, step_times=step_times)
    assert cache.cache_path(store).is_file()
    warm = read_records(store.parent, step_times=step_times)
    other_mode = read_records(store.parent, step_times=not step_times)
    assert same(cold, expected) and same(warm, expected)
    for read in (cold, warm):  # a first read hands out what later ones do
        assert any(type(r["metrics"].get("step_times_s")) is StepTimes for r in read[0]) == (step_times == "lazy")
    assert same(other_mode, plain_read(store, monkeypatch, step_times=not step_times))
    assert store.read_bytes() == before
    assert sorted(p.name for p in store.parent.iterdir()) == ["box.jsonl"]  # nothing written in the store
    assert cache.cache_path(store).parent == cache.cache_home()


def test_the_warm_read_comes_from_the_cache(store, monkeypatch):
    read_records(store.parent)
    loads = []
    real = cache._from_table
    monkeypatch.setattr(cache, "_from_table", lambda *args: loads.append(1) or real(*args))
    parsed = []
    real_parse = store_lines.parse_line
    monkeypatch.setattr(store_lines, "parse_line",
                        lambda raw, parse, truncated: parsed.append(raw) or real_parse(raw, parse, truncated=truncated))
    records, _ = read_records(store.parent)
    assert loads == [1]
    assert len(parsed) == 6  # only the lines that gave problems (or notices) are read again
    assert len(records) == 12 - 1


@pytest.mark.parametrize("first", [True, False], ids=["cold", "warm"])
def test_records_from_the_cache_are_independent_objects(store, first):
    if not first:
        read_records(store.parent)
    records, _ = read_records(store.parent)  # the first read's records come from the cache too
    assert cache.cache_path(store).is_file()
    records[0]["config"]["model"] = "changed"
    records[0]["environment"]["machine"] = "changed"
    records[0]["metrics"]["step_times_s"].append(9.0)
    assert records[1]["config"]["model"] == "resnet1" and records[1]["environment"]["machine"] == "box"
    again, _ = read_records(store.parent)
    assert again[0]["config"]["model"] == "resnet0" and len(again[0]["metrics"]["step_times_s"]) == 4


@pytest.mark.parametrize("first", [True, False], ids=["cold", "warm"])
def test_a_lazy_or_shared_read_shares_equal_sections_among_its_records_only(store, first):
    """A lazy read is for reading: records with equal ``config`` share one dict (no copy per
    record); a section seen once, one with nested values, and the next read's are their own."""
    with store.open("a") as f:
        f.write(json.dumps(rec(6)) + "\n")  # the config and environment of rec(0)
    if not first:
        read_records(store.parent)
    records, _ = read_records(store.parent, step_times="lazy")
    r0, r6 = records[0], records[-1]
    assert r0["config"] == r6["config"] and r0["config"] is r6["config"]
    assert r0["environment"] is r6["environment"] and r0["metrics"] is not r6["metrics"]
    assert r0["config"] is not records[1]["config"]  # another config
    nested = next(r for r in records if r["config"].get("gpu_indices"))
    assert all(nested["config"] is not r["config"] for r in records if r is not nested)
    again, _ = read_records(store.parent, step_times="lazy")
    assert again[0]["config"] == r0["config"] and again[0]["config"] is not r0["config"]
    for mode in (True, False):
        plain, _ = read_records(store.parent, step_times=mode)
        assert plain[0]["config"] == plain[-1]["config"] and plain[0]["config"] is not plain[-1]["config"]
        assert plain[0]["environment"] is not plain[-1]["environment"]
        shared, _ = read_records(store.parent, step_times=mode, shared=True)  # asked for: an export's read
        assert shared[0]["config"] is shared[-1]["config"] and shared[0]["environment"] is shared[-1]["environment"]
        assert same((shared, []), (plain, []))


def test_a_read_mode_other_than_true_false_or_lazy_is_refused(store):
    with pytest.raises(ValueError, match="step_times"):
        read_records(store.parent, step_times="Lazy")  # type: ignore[arg-type]


def test_appended_records_are_read_and_the_cache_grows(store, monkeypatch):
    read_records(store.parent)
    new = rec(30)
    append_record(store.parent, new)
    records, _ = read_records(store.parent)
    assert records[-1] == new
    assert same((records, _), plain_read(store, monkeypatch))
    with open(store, "rb") as f:
        loaded, _ = cache.load(store, f, os.fstat(f.fileno()), step_times=True)
        assert loaded is not None and loaded.end == store.stat().st_size
    os.utime(store)  # touched, not changed: the rewritten cache's hash of its lines still holds
    built = []
    real_add = cache.CachedRecords.add
    monkeypatch.setattr(cache.CachedRecords, "add", lambda self, r: built.append(1) or real_add(self, r))
    assert read_records(store.parent)[0][-1] == new and built == []


def test_a_partial_last_line_is_reported_and_left_out_of_the_cache(store, monkeypatch):
    read_records(store.parent)
    with open(store, "a") as f:
        f.write('{"status": "ok", "conf')
    got = read_records(store.parent)
    assert got[1][-1] == f"{store}:17: truncated line (no newline at the end of the file)"
    assert same(got, plain_read(store, monkeypatch))
    with open(store, "a") as f:
        f.write('ig": {}, "environment": {}, "metrics": {}}\n')  # the writer finishes its line
    got = read_records(store.parent)
    assert got[0][-1]["config"] == {} and same(got, plain_read(store, monkeypatch))


@pytest.mark.parametrize("keep_times", [True, False])
def test_a_changed_line_is_never_read_from_a_stale_cache(store, monkeypatch, keep_times):
    filler = [json.dumps(rec(100 + i)) for i in range(200)]  # the changed line lies beyond the first 64 KiB
    store.write_text("\n".join(filler + odd_lines()) + "\n")
    read_records(store.parent)
    st = store.stat()
    text = store.read_text()
    assert text.index('"resnet1"', 70_000) > 65_536
    store.write_text(text[:70_000] + text[70_000:].replace('"resnet1"', '"resnetX"', 1))  # same size
    if keep_times:  # even with the old modification time
        os.utime(store, ns=(st.st_atime_ns, st.st_mtime_ns))
    records, _ = read_records(store.parent)
    assert "resnetX" in [r["config"].get("model") for r in records]
    store.write_text(text.replace('"resnet1"', '"resnet1000"', 1))  # longer
    records, _ = read_records(store.parent)
    assert "resnet1000" in [r["config"].get("model") for r in records]
    store.write_text(json.dumps(rec(5)) + "\n")  # shorter
    records, problems = read_records(store.parent)
    assert [r["case_name"] for r in records] == ["c5"] and problems == []


def test_a_change_at_the_start_is_seen_even_when_the_file_looks_untouched(store, monkeypatch):
    monkeypatch.setattr(cache, "_stat_key", lambda st: [st.st_size])  # as if times and inode were kept
    read_records(store.parent)
    text = store.read_text()
    store.write_text(text.replace('"resnet1"', '"resnetX"', 1))
    records, _ = read_records(store.parent)
    assert records[1]["config"]["model"] == "resnetX"


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 128, 200, 1000])
def test_a_files_hash_by_blocks_at_once_is_its_running_hash(tmp_path, monkeypatch, size):
    """The hash a cache records of its lines is the same whether its blocks are hashed at once (a
    job each, on every core) or it is extended piece by piece as lines are parsed or appended; any
    byte changed changes it; a file that holds fewer bytes now has none."""
    import random

    monkeypatch.setattr(cache, "HASH_BLOCK", 64)
    jobs = []
    real = cache.on_every_core
    monkeypatch.setattr(cache, "on_every_core", lambda fn, todo, most=None: jobs.append(len(todo)) or real(fn, todo))
    data = random.Random(size).randbytes(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    with open(path, "rb") as f:
        blocked = cache.content_hash(f.fileno(), size)
        half = cache.content_hash(f.fileno(), size // 2)
        assert cache.content_hash(f.fileno(), size + 1) is None
    assert blocked is not None and half is not None and jobs[0] == -(-size // 64)
    for step in (1, 7, 64, 100):
        running = cache.ContentHash()
        for at in range(0, size, step):
            running.update(memoryview(data)[at:at + step])
        assert running.hexdigest() == blocked.hexdigest()
    twin = half.copy()
    twin.update(data[size // 2:])
    assert twin.hexdigest() == blocked.hexdigest()
    prefix = cache.ContentHash()
    prefix.update(data[:size // 2])
    assert half.hexdigest() == prefix.hexdigest()  # the copy's update left it as it was
    for at in range(0, size, 13):
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
        with open(path, "rb") as f:
            assert cache.content_hash(f.fileno(), size).hexdigest() != blocked.hexdigest(), at


def test_a_touched_file_keeps_its_cache(store, monkeypatch):
    """Times changed, lines not (``touch``, a restore from a backup): the cache is verified by the
    hash of its lines, not rebuilt, and written again so later reads need not hash them."""
    read_records(store.parent)
    os.utime(store, (1, 1))
    built = []
    real_add = cache.CachedRecords.add
    monkeypatch.setattr(cache.CachedRecords, "add", lambda self, r: built.append(1) or real_add(self, r))
    assert same(read_records(store.parent), plain_read(store, monkeypatch))
    assert built == []  # verified by the hash of its lines, not rebuilt
    hashed = []
    real_hash = cache.content_hash
    monkeypatch.setattr(cache, "content_hash", lambda fd, size: hashed.append(size) or real_hash(fd, size))
    read_records(store.parent)
    assert hashed == []  # the cache was written again: its lines are not hashed every time


def test_a_copied_store_gets_a_cache_of_its_own(store, tmp_path, monkeypatch):
    read_records(store.parent)
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in store.parent.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    built = []
    real_add = cache.CachedRecords.add
    monkeypatch.setattr(cache.CachedRecords, "add", lambda self, r: built.append(1) or real_add(self, r))
    assert same(read_records(copy), plain_read(copy / "box.jsonl", monkeypatch))
    assert built and cache.cache_path(copy / "box.jsonl") != cache.cache_path(store)
    built.clear()
    assert same(read_records(copy), plain_read(copy / "box.jsonl", monkeypatch)) and built == []


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped byte", "empty", "foreign", "directory"])
def test_a_damaged_cache_is_ignored_and_rebuilt(store, monkeypatch, damage):
    read_records(store.parent)
    where = cache.cache_path(store)
    data = where.read_bytes()
    if damage == "garbage":
        where.write_bytes(b"\x00\xff" * 1000)
    elif damage == "truncated":
        where.write_bytes(data[: len(data) // 2])
    elif damage == "flipped byte":
        where.write_bytes(data[:-20] + bytes([data[-20] ^ 1]) + data[-19:])
    elif damage == "empty":
        where.write_bytes(b"")
    elif damage == "foreign":
        monkeypatch.setattr(cache, "_CODE_KEY", ["another cnnbench"])
    else:
        where.unlink()
        where.mkdir()
    expected = plain_read(store, monkeypatch)
    assert same(read_records(store.parent), expected)
    if damage != "directory":
        with open(store, "rb") as f:
            assert cache.load(store, f, os.fstat(f.fileno()), step_times=True)[0] is not None  # rebuilt
        assert same(read_records(store.parent), expected)


def test_a_cache_that_cannot_be_written_is_skipped(store, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cache.os, "replace", refuse)
    assert same(read_records(store.parent), plain_read(store, monkeypatch))
    assert sorted(p.name for p in store.parent.iterdir()) == ["box.jsonl"]


def test_small_files_get_no_cache(tmp_path):
    append_record(tmp_path, rec(0))
    read_records(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box.jsonl"]


def test_a_dead_writers_temporary_file_is_removed(store):
    where = cache.cache_path(store)
    where.parent.mkdir(parents=True, exist_ok=True)
    old, fresh = where.with_name(f".{where.name}.k2j4x9.tmp"), where.with_name(f".{where.name}.a8b7c6.tmp")
    for tmp in (old, fresh):
        tmp.write_bytes(b"half a cache")
    os.utime(old, (0, 0))  # untouched for decades: its writer died
    read_records(store.parent)
    assert not old.exists() and fresh.exists()  # a fresh one may be another reader writing now


def test_no_cache_is_built_where_none_can_be_written(store, monkeypatch):
    monkeypatch.setattr(cache.os, "access", lambda path, mode: False)  # a read-only folder
    built = []
    real_add = cache.CachedRecords.add
    monkeypatch.setattr(cache.CachedRecords, "add", lambda self, r: built.append(1) or real_add(self, r))
    assert same(read_records(store.parent), plain_read(store, monkeypatch))
    assert built == [] and not cache.cache_path(store).exists()


@pytest.mark.parametrize("name", ["record", "cleaning", "migrate", "step_summary"])
def test_a_cache_follows_the_code_its_records_were_read_with(tmp_path, monkeypatch, name):
    """The record contract, the cleaning of unusable figures, the migrations and the step-time
    summaries each decide what a cached record holds: a change to the source of any of them
    makes another cache key (a cache written before is not used)."""
    module = importlib.import_module(f"cnnbench.results.{name}")
    key = cache.code_key()
    changed = tmp_path / f"{name}.py"
    changed.write_bytes(Path(module.__file__).read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(module, "__file__", str(changed))
    monkeypatch.setattr(cache, "_CODE_KEY", [])
    assert cache.code_key() != key


def _store_state(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir())


def test_a_reader_writes_nothing_in_the_store_and_its_cache_still_serves(store, monkeypatch):
    """The cache lives in this user's cache folder: reading a store (cold, warm, after an append)
    changes nothing in its folder, so a store a reader may only read gets a cache too."""
    before = _store_state(store.parent)
    cold = read_records(store.parent)
    assert cache.cache_path(store).is_file() and _store_state(store.parent) == before
    loads = []
    real = cache._from_table
    monkeypatch.setattr(cache, "_from_table", lambda *args: loads.append(1) or real(*args))
    assert same(read_records(store.parent), cold) and loads == [1]  # warm: from the cache
    assert _store_state(store.parent) == before


def test_a_cache_left_in_the_store_by_an_older_cnnbench_is_never_read_nor_touched(store, monkeypatch):
    read_records(store.parent)  # a valid cache, in the cache folder
    left = store.with_name(f".{store.name}.cache")  # where older cnnbench kept it
    left.write_bytes(cache.cache_path(store).read_bytes())
    cache.cache_path(store).unlink()
    before = _store_state(store.parent)
    opened: list[str] = []
    real_open, real_own = files.open_regular, cache.open_own
    monkeypatch.setattr(files, "open_regular", lambda path: opened.append(Path(path).name) or real_open(path))
    monkeypatch.setattr(cache, "open_own", lambda path: opened.append(Path(path).name) or real_own(path))
    assert same(read_records(store.parent), plain_read(store, monkeypatch))
    assert left.name not in opened and _store_state(store.parent) == before
    assert cache.cache_path(store).is_file()  # built again where caches live now


def test_the_same_file_by_another_name_has_one_cache(store, tmp_path):
    link = tmp_path / "elsewhere.jsonl"
    link.symlink_to(store)
    assert cache.cache_path(link) == cache.cache_path(store) != cache.cache_path(tmp_path / "box.jsonl")
    assert cache.cache_path(Path(os.path.relpath(store))) == cache.cache_path(store)


def test_the_cache_folder_is_the_users(monkeypatch, tmp_path):
    monkeypatch.delenv("CNNBENCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_home() == tmp_path / "xdg" / "cnnbench" / "records"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_home() == tmp_path / "home" / ".cache" / "cnnbench" / "records"
    monkeypatch.setenv("CNNBENCH_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_home() == tmp_path / "mine"


def test_a_relative_cache_folder_is_never_used(store, monkeypatch, tmp_path):
    """A relative ``CNNBENCH_CACHE_DIR`` or ``XDG_CACHE_HOME`` (or a home that is none) would put
    caches wherever the reader runs, in the store when it runs there: ignored, the next taken."""
    monkeypatch.chdir(store.parent)
    monkeypatch.setenv("CNNBENCH_CACHE_DIR", ".caches")
    monkeypatch.setenv("XDG_CACHE_HOME", "xdg")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_home() == tmp_path / "home" / ".cache" / "cnnbench" / "records"
    monkeypatch.setenv("HOME", "relative")
    assert cache.cache_home() is None
    before = _store_state(store.parent)
    assert same(read_records("."), plain_read(Path(store.name), monkeypatch))
    assert _store_state(store.parent) == before  # no cache, and nothing made in the store


def test_no_cache_in_a_folder_others_may_write_in(store, monkeypatch, tmp_path):
    """A cache is records handed to the reader: not kept where someone else could write one."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("CNNBENCH_CACHE_DIR", str(shared))
    read_records(store.parent)
    assert list(shared.iterdir()) == []
    shared.chmod(0o700)
    read_records(store.parent)
    assert cache.cache_path(store).stat().st_mode & 0o777 == 0o600  # the user's alone to read


@pytest.mark.parametrize("planted", ["writable", "readable", "link", "another user's"])
def test_a_cache_others_could_have_written_is_never_used(store, monkeypatch, tmp_path, planted, caplog):
    """A cache is records handed to the reader, and its hashes hold no secret: one that someone
    else could have written (others may write or read it, a link, another user's) is not loaded,
    however well it checks, and the debug log says why; it is written again, this user's alone,
    in place of the link."""
    expected = read_records(store.parent)
    where = cache.cache_path(store)
    if planted == "writable":
        where.chmod(0o666)
    elif planted == "readable":
        where.chmod(0o644)
    elif planted == "link":
        elsewhere = tmp_path / "elsewhere.parquet"
        where.rename(elsewhere)
        where.symlink_to(elsewhere)
    else:
        if os.getuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(where, 65534, 65534)
    loads = []
    real = cache._from_table
    monkeypatch.setattr(cache, "_from_table", lambda *args: loads.append(1) or real(*args))
    with caplog.at_level("DEBUG", logger=cache.__name__):
        assert same(read_records(store.parent), expected)
    assert loads == []  # not loaded: read afresh
    assert "not a file of this user's alone" in caplog.text
    assert not where.is_symlink() and where.stat().st_mode & 0o777 == 0o600 and where.stat().st_uid == os.getuid()
    assert same(read_records(store.parent), expected) and loads == [1]  # the one written again is used
    if planted == "link":
        assert (tmp_path / "elsewhere.parquet").stat().st_mode & 0o777 == 0o600  # left as it was


def test_a_cache_is_the_users_alone_to_read_from_its_first_byte(store, monkeypatch, tmp_path):
    """Written into the file mkstemp made (0600), not one DuckDB makes anew by the umask and a chmod
    puts right afterwards: in a cache folder others may enter (0755 is allowed: no one else may
    write in it), no one else could read the records in between. Seen without the chmod."""
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv("CNNBENCH_CACHE_DIR", str(folder))
    monkeypatch.setattr(os, "chmod", lambda *a, **k: None)  # as the moment before any chmod
    old = os.umask(0o022)
    try:
        read_records(store.parent)
    finally:
        os.umask(old)
    (made,) = folder.iterdir()
    assert made == cache.cache_path(store) and made.stat().st_mode & 0o777 == 0o600


def _rewritten(where: Path, column: str, expr: str) -> None:
    """The cache at ``where`` written again with ``column`` as ``expr``, its metadata as it was (as
    if its bytes were damaged so that its Parquet still reads)."""
    import duckdb

    con = duckdb.connect()
    meta = con.execute("SELECT key::VARCHAR, value::VARCHAR FROM parquet_kv_metadata(?)", [str(where)]).fetchall()
    kv = ", ".join(f"'{k}': '{v}'" for k, v in meta)
    columns = ", ".join(f"{expr} AS {name}" if name == column else name for name in cache._COLUMNS)
    tmp = where.with_name("changed.parquet")
    con.execute(f"COPY (SELECT {columns} FROM read_parquet('{where}')) TO '{tmp}' "
                f"(FORMAT parquet, KV_METADATA {{{kv}}})")
    tmp.chmod(0o600)
    tmp.replace(where)


@pytest.mark.parametrize("column, expr", [
    ("body", "CASE WHEN kind = 1 THEN replace(body::VARCHAR, 'box', 'xox')::BLOB ELSE body END"),
    ("v", "CASE WHEN kind = 3 THEN v * 2 ELSE v END"),  # the step times and their summaries
    ("v", "CASE WHEN kind = 3 AND v > 20 THEN v + 1 ELSE v END"),  # the summaries' block sums only
    ("a", "CASE WHEN kind = 0 AND a >= 0 THEN 0 ELSE a END"),
])
def test_a_cache_whose_values_changed_is_not_trusted(store, monkeypatch, column, expr):
    """Values changed in the file but for its metadata: each part's CRC-32 is seen not to match."""
    from cnnbench.results.step_summary import step_summary

    read_records(store.parent)
    _rewritten(cache.cache_path(store), column, expr)
    got = read_records(store.parent, step_times="lazy")
    assert same(got, plain_read(store, monkeypatch, step_times="lazy"))
    summaries = [step_summary(r["metrics"].get("step_times_s")) for r in got[0]]
    assert summaries == [step_summary(r["metrics"].get("step_times_s"))
                         for r in plain_read(store, monkeypatch, step_times=True)[0]]


@pytest.mark.parametrize("piece", [100, 1000])  # lines of a few hundred bytes: several a piece; longer than one
def test_lines_read_a_piece_at_a_time_give_what_one_read_gives(store, monkeypatch, piece):
    lines = [json.dumps(rec(i)) for i in range(30)] + odd_lines() * 3
    store.write_text("\n".join(lines) + "\n" + '{"status": "ok", "con')  # and a torn last line
    expected = plain_read(store, monkeypatch, step_times=True)
    monkeypatch.setattr(reader, "_PIECE", piece)
    assert same(read_records(store.parent, step_times=True), expected)
    monkeypatch.undo()
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    assert same(read_records(store.parent, step_times=True), expected)  # the cache written a piece at a time


@pytest.mark.parametrize("when", ["as its lines are read", "before its cache is written"])
def test_a_file_written_over_as_it_is_read_is_read_as_it_is_next_time(store, monkeypatch, when):
    """The cache records the hash of the bytes its records came from, never of the file as it is
    when written: a line written over meanwhile (the same size) is seen by the next read."""
    lines = [json.dumps(rec(i)) for i in range(30)]
    store.write_text("\n".join(lines) + "\n")
    text = store.read_text()

    def written_over() -> None:
        store.write_text(text.replace('"resnet1"', '"resnetX"'))

    if when == "as its lines are read":
        monkeypatch.setattr(reader, "_PIECE", 1000)
        real_parse = reader._parse_lines
        monkeypatch.setattr(reader, "_parse_lines", lambda *args: (
            written_over() if args[0].next_line == 1 else None) or real_parse(*args))
    else:
        real_write = cache.write
        monkeypatch.setattr(cache, "write", lambda *args: written_over() or real_write(*args))
    read_records(store.parent)
    monkeypatch.undo()
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    records, _ = read_records(store.parent)
    assert [r["config"]["model"] for r in records].count("resnetX") == 10


def test_lines_appended_after_the_open_are_hashed_as_they_were_parsed(store, monkeypatch):
    """A cached file that grows after it was opened (its stat still the cache's): the covered lines
    are checked against the cache's hash, and the new ones hashed as parsed, so that a figure
    written over before the cache is written is seen by the next read."""
    head = store.read_bytes()
    cut = head.index(b"\n", len(head) // 2) + 1
    store.write_bytes(head[:cut])
    read_records(store.parent)  # cached: the first half
    real_add, real_write = reader._add_new_lines, cache.write

    def append_then(cached, f):
        if cached.end:  # the cache loaded, its stat matching: the rest appended now
            with store.open("ab") as out:
                out.write(head[cut:])
        return real_add(cached, f)

    def write_over_then_write(*args):
        data = store.read_bytes()  # the machine of the last line, parsed by now
        at = data.rindex(b'"box"')
        store.write_bytes(data[:at] + b'"xox"' + data[at + 5:])
        return real_write(*args)

    monkeypatch.setattr(reader, "_add_new_lines", append_then)
    monkeypatch.setattr(cache, "write", write_over_then_write)
    read_records(store.parent, step_times=True)
    monkeypatch.setattr(reader, "_add_new_lines", real_add)
    monkeypatch.setattr(cache, "write", real_write)
    again = read_records(store.parent, step_times=True)
    assert again[0][-1]["environment"]["machine"] == "xox"
    assert same(again, plain_read(store, monkeypatch, step_times=True))


def test_a_lazy_reads_step_times_outlive_its_cache(store):
    records, _ = read_records(store.parent, step_times="lazy")
    full, _ = read_records(store.parent, step_times=True)
    cache.cache_path(store).unlink()  # removed, or replaced by another reader
    read_records(store.parent, step_times=True)
    assert [list(r["metrics"].get("step_times_s") or []) for r in records] == [
        r["metrics"].get("step_times_s") or [] for r in full]


def _threads() -> int:
    """The threads of this process as the system counts them (DuckDB's are no Python threads)."""
    return len(os.listdir("/proc/self/task"))


def test_a_read_leaves_no_thread_behind(store):
    before = _threads()
    read_records(store.parent)  # cold: the cache written
    read_records(store.parent, step_times="lazy")  # warm: read
    assert cache.cache_path(store).is_file() and _threads() == before


def test_a_torn_last_line_alone_costs_a_warm_read_no_hash_of_the_file(store, monkeypatch):
    """A writer that died mid-line leaves a tail that is no line: nothing to add to the cache, so
    the lines it covers are not hashed again at every read (the file is as it was)."""
    with open(store, "a") as f:
        f.write('{"status": "ok", "conf')
    first = read_records(store.parent)
    hashed = []
    real_hash = cache.content_hash
    monkeypatch.setattr(cache, "content_hash", lambda fd, size: hashed.append(size) or real_hash(fd, size))
    for mode in (True, False, "lazy"):
        got = read_records(store.parent, step_times=mode)
        assert got[0] == read_records(store.parent, step_times=mode)[0]
        assert got[1][-1] == first[1][-1] and got[1][-1].endswith("truncated line (no newline at the end of the file)")
    assert hashed == []
    with open(store, "a") as f:
        f.write('ig": {}, "environment": {}, "metrics": {}}\n')  # the line finished: hashed, then added
    assert read_records(store.parent)[0][-1]["config"] == {} and hashed
