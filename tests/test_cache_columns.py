"""A lazy read of a cached store leaves the raw step times in the cache file until a run's
values are asked for: the summaries come at once, the values when asked (equal to a plain
read's), from the file as it was at the read, whatever replaced or removed it since; a file
overwritten in place raises a clear error instead of giving other values."""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest

from cnnbench.results import cache, cache_columns
from cnnbench.results.cache_columns import ColumnChanged
from cnnbench.results.record import Record
from cnnbench.results.step_summary import StepTimes, step_summary
from cnnbench.results.store import append_record, read_records


def rec(i: int) -> dict:
    return Record(
        config={"model": f"resnet{i % 3}", "batch_size": 8, "precision": "fp32"},
        environment={"machine": "box", "hostname": "h"},
        metrics={"total_images_per_sec": 100.0 + i, "step_times_s": [0.01 * (k + 1) + i / 7 for k in range(12)]},
        extra={"case_name": f"c{i}"},
    ).to_dict()


def cached_store(path, runs: range) -> None:
    """A results file of ``rec(i)`` for each of ``runs`` at ``path``, and its cache (a cache for
    every size: the caller sets ``cache.MIN_BYTES`` to 0)."""
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(json.dumps(rec(i)) + "\n" for i in runs))
    read_records(path)
    assert cache.cache_path(path).exists()


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    cached_store(tmp_path / "results" / "box.jsonl", range(40))
    return tmp_path / "results" / "box.jsonl"


@pytest.fixture
def column_reads(monkeypatch):
    """The names of the columns read from cache files, in order."""
    names: list[str] = []
    read = cache_columns.read_column

    def spy(c, header, name):
        names.append(name)
        return read(c, header, name)

    monkeypatch.setattr(cache, "read_column", spy)
    monkeypatch.setattr(cache_columns, "read_column", spy)
    return names


def values(records: list[dict]) -> list[list[float]]:
    return [r["metrics"]["step_times_s"].tolist() for r in records]


def test_a_lazy_read_gives_summaries_now_and_the_values_from_the_file_when_asked(store, column_reads):
    lists, _ = read_records(store.parent, step_times=True)
    assert column_reads == ["steps", "summaries"]
    column_reads.clear()
    lazy, _ = read_records(store.parent, step_times="lazy")
    assert column_reads == ["summaries"]  # the 8 bytes a step stay in the file
    times = [r["metrics"]["step_times_s"] for r in lazy]
    assert all(type(t) is StepTimes for t in times)
    assert [step_summary(t) for t in times] == [step_summary(r["metrics"]["step_times_s"]) for r in lists]
    assert values(lazy) == [r["metrics"]["step_times_s"] for r in lists]  # read now, equal to the bit
    assert times[3][5] == lists[3]["metrics"]["step_times_s"][5] and list(times[-1]) == lists[-1]["metrics"][
        "step_times_s"]
    assert times[0] == lists[0]["metrics"]["step_times_s"]


def test_the_values_are_those_of_the_read_though_the_cache_was_replaced_or_removed(store):
    lazy, _ = read_records(store.parent, step_times="lazy")
    expected, _ = read_records(store.parent, step_times=True)
    where = cache.cache_path(store)
    append_record(store.parent, rec(99))  # then a read rewrites the cache (a new file renamed over it)
    inode = where.stat().st_ino
    read_records(store.parent, step_times=True)
    assert where.stat().st_ino != inode
    lazy_too, _ = read_records(store.parent, step_times="lazy")
    where.unlink()
    assert values(lazy) == [r["metrics"]["step_times_s"] for r in expected]
    assert values(lazy_too) == [r["metrics"]["step_times_s"] for r in expected] + [rec(99)["metrics"]["step_times_s"]]


def test_a_cache_overwritten_in_place_since_the_read_gives_an_error_not_other_values(store, tmp_path):
    where = cache.cache_path(store)
    lazy, _ = read_records(store.parent, step_times="lazy")
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(store, other / store.name)
    with (other / store.name).open("a") as f:
        f.write(json.dumps(rec(0)).replace("0.01", "0.02") + "\n")
    read_records(other)
    summaries = [step_summary(r["metrics"]["step_times_s"]) for r in lazy]
    shutil.copyfile(cache.cache_path(other / store.name), where)  # as cp does: the same file, truncated
    with pytest.raises(ColumnChanged, match=f"{where}: changed since its records were read"):
        lazy[0]["metrics"]["step_times_s"].tolist()
    with pytest.raises(ColumnChanged, match="changed since"):  # every view of the column, every time, as first
        list(lazy[1]["metrics"]["step_times_s"])
    assert [step_summary(r["metrics"]["step_times_s"]) for r in lazy] == summaries
    with where.open("r+b") as f:
        f.truncate(100)
    again, _ = read_records(store.parent, step_times="lazy")  # a damaged cache is rebuilt
    assert len(again) == 40 and values(again)[0] == rec(0)["metrics"]["step_times_s"]


def test_a_cut_short_cache_is_named_as_such(store):
    where = cache.cache_path(store)
    lazy, _ = read_records(store.parent, step_times="lazy")
    with where.open("r+b") as f:
        f.truncate(200)
    with pytest.raises(ColumnChanged, match="cut short since its records were read"):
        lazy[0]["metrics"]["step_times_s"].tolist()


def test_the_descriptor_is_closed_once_read_or_once_the_records_are_freed(store):
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to count open descriptors")
    before = open_fds()
    lazy, _ = read_records(store.parent, step_times="lazy")
    assert open_fds() == before + 1
    assert lazy[0]["metrics"]["step_times_s"].tolist() == rec(0)["metrics"]["step_times_s"]  # one view: all read
    assert open_fds() == before
    lazy, _ = read_records(store.parent, step_times="lazy")
    assert open_fds() == before + 1
    del lazy
    assert open_fds() == before


def test_without_a_descriptor_to_spare_the_column_is_read_at_once(store, column_reads, monkeypatch):
    class NoDescriptor(cache_columns.DeferredColumn):
        def __init__(self, *args, **kwargs) -> None:
            raise OSError(24, "Too many open files")  # as os.dup at the limit

    monkeypatch.setattr(cache_columns, "DeferredColumn", NoDescriptor)
    lazy, _ = read_records(store.parent, step_times="lazy")
    assert column_reads == ["steps", "summaries"]
    assert values(lazy)[7] == rec(7)["metrics"]["step_times_s"]


def step_column_bytes(path) -> int:
    """Where the cache of ``path`` holds the first run's first step time."""
    return cache.cache_path(path).read_bytes().index(struct.pack("<d", rec(0)["metrics"]["step_times_s"][0]))


def damage_column(path) -> None:
    where = cache.cache_path(path)
    data = bytearray(where.read_bytes())
    data[step_column_bytes(path) + 3] ^= 1
    where.write_bytes(bytes(data))


def test_a_column_damaged_in_the_file_already_is_said_so_and_the_cache_made_again(store):
    where = cache.cache_path(store)
    damage_column(store)
    lazy, _ = read_records(store.parent, step_times="lazy")
    with pytest.raises(ColumnChanged, match=f"{where}: damaged .* removed, so that the next read makes it again"):
        lazy[0]["metrics"]["step_times_s"].tolist()
    assert not where.exists()
    again, _ = read_records(store.parent, step_times="lazy")
    assert values(again) == [rec(i)["metrics"]["step_times_s"] for i in range(40)]


def test_each_access_after_a_failure_raises_a_new_error_not_one_that_grows(store):
    where = cache.cache_path(store)
    lazy, _ = read_records(store.parent, step_times="lazy")
    with where.open("r+b") as f:
        f.truncate(200)
    errors = []
    for r in lazy:
        with pytest.raises(ColumnChanged) as caught:
            r["metrics"]["step_times_s"].tolist()
        errors.append(caught.value)
    assert len({id(e) for e in errors}) == len(errors)
    assert {str(e) for e in errors} == {f"{where}: cut short since its records were read, so their step times "
                                        f"are gone; read the store again"}
    depth = 0
    tb = errors[-1].__traceback__
    while tb is not None:
        depth, tb = depth + 1, tb.tb_next
    assert depth < 10


def test_an_interrupted_first_read_of_the_column_can_be_tried_again(store, monkeypatch):
    lazy, _ = read_records(store.parent, step_times="lazy")
    pread = os.pread
    calls = []

    def interrupted(fd, n, offset):
        calls.append(offset)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return pread(fd, n, offset)

    monkeypatch.setattr(cache_columns.os, "pread", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lazy[0]["metrics"]["step_times_s"].tolist()
    assert values(lazy) == [rec(i)["metrics"]["step_times_s"] for i in range(40)]


def test_beyond_the_most_descriptors_held_open_a_lazy_read_reads_its_column_at_once(tmp_path, monkeypatch,
                                                                                     column_reads):
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setattr(cache_columns, "MAX_OPEN", 2)
    folder = tmp_path / "results"
    for machine in "abc":
        cached_store(folder / f"{machine}.jsonl", range(10))
    column_reads.clear()
    lazy, _ = read_records(folder, step_times="lazy")
    assert column_reads == ["summaries", "summaries", "steps", "summaries"]  # the third file's at once
    assert len(cache_columns._OPEN) == 2
    assert values(lazy) == [rec(i)["metrics"]["step_times_s"] for i in range(10)] * 3
    assert not cache_columns._OPEN


def reading_with(monkeypatch, after_load, folder, **kwargs):
    """``read_records(folder, **kwargs)``, with ``after_load(path)`` run between a file's cache's
    load and the read of the lines after it."""
    load = cache.load

    def load_then(path, f, st, *, step_times):
        loaded = load(path, f, st, step_times=step_times)
        after_load(path)
        return loaded

    with monkeypatch.context() as m:
        m.setattr(cache, "load", load_then)
        return read_records(folder, **kwargs)


def append_one(path) -> None:
    with path.open("a") as out:
        out.write(json.dumps(rec(40)) + "\n")


def test_lines_added_after_a_lazy_load_are_read_with_the_column(store, monkeypatch):
    """The file grew between the cache's load and the read of the new lines: the cache is
    written again, whole, with the step times it left in the file."""
    lazy, _ = reading_with(monkeypatch, append_one, store.parent, step_times="lazy")
    expected = [rec(i)["metrics"]["step_times_s"] for i in range(41)]
    assert values(lazy) == expected
    again, _ = read_records(store.parent, step_times=True)
    assert [r["metrics"]["step_times_s"] for r in again] == expected


def test_a_cache_overwritten_in_place_as_new_lines_are_read_is_read_afresh(store, monkeypatch):
    def damaged_then_appended(path) -> None:
        damage_column(path)  # in place: one bit of its column
        append_one(path)

    lazy, problems = reading_with(monkeypatch, damaged_then_appended, store.parent, step_times="lazy")
    assert problems == []
    assert values(lazy) == [rec(i)["metrics"]["step_times_s"] for i in range(41)]


def test_a_damaged_cache_reached_by_a_link_is_unlinked_and_made_again(store):
    where = cache.cache_path(store)
    target = where.parent / "elsewhere.cache"
    where.rename(target)
    where.symlink_to(target.name)
    damage_column(store)
    lazy, _ = read_records(store.parent, step_times="lazy")
    with pytest.raises(ColumnChanged, match="damaged .* removed, so that the next read makes it again"):
        lazy[0]["metrics"]["step_times_s"].tolist()
    assert not where.is_symlink() and not where.exists()
    again, _ = read_records(store.parent, step_times="lazy")
    assert values(again) == [rec(i)["metrics"]["step_times_s"] for i in range(40)]


def test_a_damaged_cache_that_cannot_be_removed_is_not_used_again(store, monkeypatch, column_reads):
    damage_column(store)
    lazy, _ = read_records(store.parent, step_times="lazy")

    def refused(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    with monkeypatch.context() as m:
        m.setattr(cache_columns.os, "unlink", refused)
        with pytest.raises(ColumnChanged, match="damaged .* not removable, so this process reads the store without"):
            lazy[0]["metrics"]["step_times_s"].tolist()
    assert cache.cache_path(store).exists()
    column_reads.clear()
    again, problems = read_records(store.parent, step_times="lazy")
    assert column_reads == ["steps"] and problems == []  # read at once, found damaged, the file read instead
    assert values(again) == [rec(i)["metrics"]["step_times_s"] for i in range(40)]


def test_a_cache_copied_over_while_it_is_loaded_is_changed_not_damaged(tmp_path, monkeypatch):
    """A small cache (read whole into the reader's buffer at its opening, the summaries too)
    overwritten in place after its opening, before its column is deferred."""
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    store, other = tmp_path / "results" / "box.jsonl", tmp_path / "other" / "box.jsonl"
    cached_store(store, range(2))
    cached_store(other, range(1, 3))
    where = cache.cache_path(store)
    assert where.stat().st_size < 8192
    copy = cache.cache_path(other).read_bytes()
    from_payload = cache.CachedRecords._from_payload

    def then_copied_over(body):
        loaded = from_payload(body)
        with where.open("r+b") as f:  # as cp does, between the cache's opening and its column
            f.truncate(0)
            f.write(copy)
        return loaded

    with monkeypatch.context() as m:
        m.setattr(cache.CachedRecords, "_from_payload", staticmethod(then_copied_over))
        lazy, _ = read_records(store.parent, step_times="lazy")
    assert type(lazy[0]["metrics"]["step_times_s"]._steps) is cache_columns.DeferredColumn
    with pytest.raises(ColumnChanged, match="changed since its records were read"):
        lazy[0]["metrics"]["step_times_s"].tolist()
    assert where.read_bytes() == copy  # not taken for damaged, not removed


def test_a_cache_that_cannot_be_checked_says_so(store, monkeypatch):
    lazy, _ = read_records(store.parent, step_times="lazy")
    damage_column(store)

    def stale(fd):
        raise OSError(116, "Stale file handle")

    with monkeypatch.context() as m:
        m.setattr(cache_columns.os, "fstat", stale)
        with pytest.raises(ColumnChanged, match="cannot check the step times of its records"):
            lazy[0]["metrics"]["step_times_s"].tolist()
    assert not lazy[0]["metrics"]["step_times_s"]._steps._closer.alive  # found gone for good: its descriptor closed
