"""The report's speed-ups keep behaviour: the cycle collector paused only while a report builds, and
left as found; per-measure caches (the runs' machines) follow the runs a measure gains."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest

from cnnbench.report import NoMatchingRecords, ReportOptions, build_report
from cnnbench.results.gc_pause import collector_paused
from tests.report_fixtures import scaling_records


def test_collector_paused_during_the_block_and_enabled_after_it() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_enabled_again_after_an_error() -> None:
    with pytest.raises(NoMatchingRecords):
        build_report([], ReportOptions())
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_collector_left_disabled_when_it_was() -> None:
    gc.disable()
    try:
        report = build_report(scaling_records(), ReportOptions(max_plots=0))
        assert report.tables
        assert not gc.isenabled()
    finally:
        gc.enable()


def _promoting() -> None:
    from cnnbench.results import gc_pause

    if not gc_pause.PROMOTES or gc.get_freeze_count():
        pytest.skip("a paused block's objects are not moved to the oldest generation on this Python "
                    f"({sys.version.split()[0]}; objects frozen: {gc.get_freeze_count()}): gc_pause.PROMOTES")


def test_what_the_block_made_is_not_traced_by_the_next_young_collection() -> None:
    """The block's objects join the oldest generation as it ends, so the first allocation after
    it does not trace them all (a read of 100,000 records: 0.14 s of about 1 s); a cycle made and
    dropped in the block is still collected, and objects the caller froze stay frozen."""
    _promoting()
    gc.collect()
    with collector_paused():
        kept = [[i] for i in range(20_000)]  # 20,001 containers, far over the young threshold
        cycle: list = []
        cycle.append(cycle)
        del cycle
    assert gc.get_count()[0] < gc.get_threshold()[0]  # no young collection owed
    assert gc.is_tracked(kept[0]) and any(x is kept[0] for x in gc.get_objects(generation=2))
    assert gc.collect() >= 1  # the dropped cycle: found and freed
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            more = [[i] for i in range(1_000)]
        assert gc.get_freeze_count() == frozen and more  # the caller's freeze left alone
    finally:
        gc.unfreeze()
    with collector_paused():  # frozen by code the block ran: left frozen too
        gc.freeze()
        frozen = gc.get_freeze_count()
    try:
        assert frozen and gc.get_freeze_count() > frozen // 2  # (a few frozen objects die meanwhile)
    finally:
        gc.unfreeze()


def test_the_callers_young_garbage_is_not_promoted_with_what_the_block_made() -> None:
    """Cyclic garbage the caller left in the young generations is freed by the next young
    collection after the block, as it would have been without it (not moved to the oldest
    generation, where only a full collection would find it)."""

    class Node:
        pass

    for _ in range(3):  # whatever the generations hold as the block starts
        gc.collect()
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        ref = weakref.ref(node)
        del node
        with collector_paused():
            kept = [[i] for i in range(5_000)]
        gc.collect(1)
        assert ref() is None and kept


def test_report_built_with_the_collector_enabled_after() -> None:
    report = build_report(scaling_records(), ReportOptions(max_plots=0))
    assert report.tables
    assert gc.isenabled()


def test_run_machines_follow_the_runs_a_measure_gains() -> None:
    from cnnbench.analysis.points import Measure, machines_of, run_machines

    def run(machine: str) -> dict:
        return {"environment": {"machine": machine}, "metrics": {"total_images_per_sec": 10.0}}

    m = Measure()
    m.record("ok", 10.0, run("a"))
    assert run_machines(m) == ["a"]
    m.record("ok", 11.0, run("b"))
    assert run_machines(m) == ["a", "b"]
    other = Measure()
    other.record("ok", 12.0, run("c"))
    m.add(other)
    assert run_machines(m) == ["a", "b", "c"]
    assert machines_of(m, other) == {"a", "b", "c"}


def test_results_list_sorts_with_the_collector_paused() -> None:
    """``results list`` keys every record it read: with the collector running, those keys set off
    traces of all the records (``newest``)."""
    from cnnbench.results.export import newest

    seen: list[bool] = []

    class Watched(dict):
        def get(self, key, default=None):  # type: ignore[no-untyped-def]
            seen.append(gc.isenabled())
            return super().get(key, default)

    records = [Watched(started_at=f"2026-01-0{day}T00:00:00", config={"model": "resnet50", "batch_size": 32})
               for day in (3, 1, 2)]
    shown, total = newest(records, 2)
    assert [r["started_at"][:10] for r in shown] == ["2026-01-02", "2026-01-03"] and total == 3
    assert seen and not any(seen)
    assert gc.isenabled()


def test_results_list_shows_the_runs_a_full_sort_would() -> None:
    """``newest`` with a limit sorts only the runs of the newest minutes: the runs shown and their
    order are those of sorting every run (ties within a minute, natural order of models, runs
    without a start time or with a number for it, limits below, at and over the number of runs)."""
    import random

    from cnnbench.results.export import list_order, newest

    rng = random.Random(7)
    records = [{"started_at": rng.choice([None, "", "2026-01-02T10:00:05", "2026-01-02T10:00:40",
                                          "2026-01-02T10:01:00", "2026-01-03T09:59:59", "2026-01-03T10:00",
                                          20260103, 1.5]),
                "config": {"model": rng.choice(["resnet50", "resnet101", "vgg16", None]),
                           "batch_size": rng.choice([32, 64, "128", None])}, "n": i}
               for i in range(300)]
    everything = sorted(records, key=list_order)
    for limit in (1, 2, 5, 17, 40, 80, 150, 299, 300, 301, 0):
        shown, total = newest(records, limit)
        assert total == 300
        assert [r["n"] for r in shown] == [r["n"] for r in (everything[-limit:] if limit else everything)], limit


def test_a_reading_command_runs_no_collection_and_leaves_the_collector_as_found(tmp_path, monkeypatch, capsys) -> None:
    """`cnnbench history` (a command that reads a store and ends) works on the records with the
    collector paused: the first full collection after a read traced every record again (1.2 s of
    6 s on 100,000 runs). Seen with thresholds that collect at almost every allocation."""
    import json

    import cnnbench.analysis.history as history
    from cnnbench.cli import main
    from tests.test_history import noisy, series

    store = tmp_path / "runs.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for s in range(3) for r in series(noisy(12, seed=s), model=f"m{s}")))
    collections: list[int] = []
    during: list[int] = []
    real = history.build_history

    def counted(*args, **kwargs):
        before = len(collections)
        try:
            return real(*args, **kwargs)
        finally:
            during.append(len(collections) - before)

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    monkeypatch.setattr(history, "build_history", counted)
    threshold = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(callback)
    try:
        assert main(["history", str(store)]) == 0
        assert gc.isenabled()
        after = len(collections)
        [[i] for i in range(100)]  # allocations: the collector runs again
        assert len(collections) > after
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*threshold)
    assert "3 series" in capsys.readouterr().out
    assert during == [0]
