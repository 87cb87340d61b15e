"""Each run's step-time summary (count, mean, variance, smallest, block sums; issue 22 item 2)
is computed once, when the parsed-record cache is written, and handed out with the step times of
a lazy read (``step_times="lazy"``, as the report reads): it equals, to the bit, the summary
computed from the step times themselves; a changed store gives the summary of its new step
times, never the cached one; a damaged summary column is not trusted. The significance test's
samples are the same whether the summaries come from the cache or from the step times. A lazy
read's step times are read-only views that behave as the lists a full read gives."""

from __future__ import annotations

import copy
import json
import math
import pickle
import random

from cnnbench.analysis.fields import hashable
from cnnbench.analysis.samples import run_sample
from cnnbench.results import cache
from cnnbench.results.query import value_matches
from cnnbench.results.record import Record
from cnnbench.results.step_summary import StepTimes, step_summary, summarize
from cnnbench.results.store import append_record, read_records

COUNTS = [100, 7, 1, 0, 2, 10_000, 23, 100]


def rec(i: int, steps: list) -> dict:
    return Record(config={"model": f"m{i % 4}", "batch_size": 8, "num_devices": 1 + i % 2},
                  environment={"machine": "box"},
                  metrics={"total_images_per_sec": 100.0 + i, "step_times_s": steps},
                  extra={"case_name": f"c{i}"}).to_dict()


def big_store(tmp_path, seed: int = 0) -> tuple:
    """A results file over the cache's size threshold, with runs of many step counts (and a
    list of whole numbers, which the cache keeps in its row)."""
    rng = random.Random(seed)
    records, i = [], 0
    while sum(len(json.dumps(r)) for r in records) < cache.MIN_BYTES + 10_000:
        n = COUNTS[i % len(COUNTS)]
        records.append(rec(i, [rng.lognormvariate(-2.5, 0.3) for _ in range(n)]))
        i += 1
    records.append(rec(i, [1, 2, 3, 5]))
    path = tmp_path / "box.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, records


def summaries(records: list) -> list:
    return [step_summary(r["metrics"]["step_times_s"]) for r in records]


def test_the_cached_summary_equals_the_one_from_the_step_times(tmp_path):
    path, written = big_store(tmp_path)
    expected = [summarize(r["metrics"]["step_times_s"]) for r in written]
    assert expected[3] is None and expected[2].variance is None and expected[5].count == 10_000
    for warm in (False, True):  # the first read writes the cache (and parses), the second reads it
        records, problems = read_records(tmp_path, step_times="lazy")
        assert problems == [] and cache.cache_path(path).exists()
        lists = [r["metrics"]["step_times_s"] for r in records]
        assert not warm or all(type(t) is StepTimes and t._column is not None for t in lists[:-1])  # the column's
        assert type(lists[-1]) is list  # whole numbers: kept in the row, summed up when asked
        got = summaries(records)
        assert got == expected  # every figure to the bit (floats compared with ==)
    plain = [run_sample(r) for r in written]
    for a, b in zip([run_sample(r) for r in records], plain, strict=True):
        assert (a.cv, a.blocks, a.has_blocks, a.rate) == (b.cv, b.blocks, b.has_blocks, b.rate)


def test_a_changed_store_gives_the_summary_of_its_new_step_times(tmp_path):
    path, written = big_store(tmp_path)
    read_records(tmp_path)  # writes the cache
    lines = path.read_text().splitlines(keepends=True)
    changed = rec(0, [0.5] * 99 + [0.25])  # same record, other step times (same count)
    lines[0] = json.dumps(changed) + "\n"
    path.write_text("".join(lines))
    added = rec(999, [0.125, 0.5, 0.25])
    append_record(tmp_path, added)
    for _ in range(2):  # the first read parses the changed file (and hands out views too), the second its new cache
        records, _ = read_records(tmp_path, step_times="lazy")
        assert type(records[0]["metrics"]["step_times_s"]) is StepTimes
        assert step_summary(records[0]["metrics"]["step_times_s"]) == summarize([0.5] * 99 + [0.25])
        assert step_summary(records[-1]["metrics"]["step_times_s"]) == summarize([0.125, 0.5, 0.25])
        assert summaries(records[1:-1]) == [summarize(r["metrics"]["step_times_s"]) for r in written[1:]]


def test_a_lazy_reads_step_times_behave_as_the_lists_of_a_full_read_and_cannot_be_changed(tmp_path):
    import numpy as np
    import pytest

    _, written = big_store(tmp_path)
    read_records(tmp_path)  # writes the cache
    lazy, _ = read_records(tmp_path, step_times="lazy")
    full, _ = read_records(tmp_path)
    assert lazy == full == written  # a view equals the list it shows (both ways round)
    times, listed = lazy[0]["metrics"]["step_times_s"], full[0]["metrics"]["step_times_s"]
    assert type(times) is StepTimes and type(listed) is list and len(times) == len(listed) == 100
    assert (times[0], times[-1], times[7:9], list(times), times.tolist()) == (
        listed[0], listed[-1], listed[7:9], listed, listed)
    assert np.asarray(times).tolist() == listed and np.asarray(times, dtype=np.float32).dtype == np.float32
    shared = np.asarray(times, copy=False)  # the column itself, read-only: no view can change the store
    assert not shared.flags.writeable and shared.tolist() == listed
    with pytest.raises(ValueError):
        np.asarray(times, dtype=np.float32, copy=False)
    assert np.array(times, copy=True).flags.writeable
    assert pickle.loads(pickle.dumps(times)) == listed and len(pickle.dumps(times)) < 2_000  # not the column
    assert copy.deepcopy(times) is times and copy.copy(times) is times
    assert times != lazy[1]["metrics"]["step_times_s"] and times == lazy[0]["metrics"]["step_times_s"]
    assert repr(times) == f"StepTimes({listed!r})" and str(times) == str(listed)
    with pytest.raises(IndexError):
        times[100]
    with pytest.raises(TypeError):
        times[5] = 9.0  # type: ignore[index]
    assert not hasattr(times, "append")
    listed[5] = 9.0  # a full read's list is the reader's own: its summary is computed from it
    assert step_summary(listed) == summarize(list(listed)) != step_summary(times)
    empty = lazy[3]["metrics"]["step_times_s"]
    assert len(empty) == 0 and list(empty) == [] and step_summary(empty) is None
    # a report's --where and its grouping by a field take a view as the list it shows
    shown = lazy[2]["metrics"]["step_times_s"]
    assert value_matches(shown, json.dumps(shown.tolist(), separators=(",", ":")))
    assert hashable(shown) == hashable(full[2]["metrics"]["step_times_s"])


def test_a_damaged_summary_column_is_not_trusted(tmp_path):
    path, written = big_store(tmp_path)
    read_records(tmp_path)
    where = cache.cache_path(path)
    data = bytearray(where.read_bytes())
    data[-8:] = b"\x00" * 8  # the last block sum of the last run with step times
    where.write_bytes(bytes(data))
    records, problems = read_records(tmp_path, step_times="lazy")
    assert problems == []
    assert summaries(records) == [summarize(r["metrics"]["step_times_s"]) for r in written]


def test_the_summary_is_what_the_analysis_computed_before(tmp_path):
    times = [0.1 * (1 + (k % 7) / 50) for k in range(100)]
    summary = summarize(times)
    mean = math.fsum(times) / 100
    assert summary.mean == mean and summary.minimum == min(times)
    assert summary.relative_stdev == math.sqrt(sum((x - mean) * (x - mean) for x in times) / 99) / mean
    assert summary.block_sums == tuple(sum(times[i:i + 5]) for i in range(0, 100, 5))
    assert summarize([]) is None and summarize(["a", "b"]) is None and summarize([[1.0]]) is None


def test_the_column_of_many_runs_of_each_length_equals_their_summaries():
    from array import array

    from cnnbench.results.step_summary import column_width, from_column, summary_column

    rng = random.Random(3)
    counts = [100] * 150 + [7] * 70 + [1] * 65 + [0] * 3 + [2] * 80 + [10_000] * 2 + [23] * 64
    runs = [[rng.lognormvariate(-2.5, 0.5) for _ in range(n)] for n in counts]
    steps = array("d", [x for run in runs for x in run])
    column = summary_column(steps, 0, counts, [math.fsum(r) / len(r) if r else math.nan for r in runs])
    at = 0
    for run, n in zip(runs, counts, strict=True):
        assert from_column(column, at, n) == summarize(run)
        at += column_width(n)
    assert at == len(column)
