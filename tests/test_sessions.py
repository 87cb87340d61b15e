"""Session ids (issue 46): every record names the invocation that wrote it (``session_id``)."""

from __future__ import annotations

import json
import os

from cnnbench.results.record import Record
from cnnbench.results.sessions import ENV, session_id
from cnnbench.sweep.runner import SweepOptions, run_suite
from cnnbench.sweep.suite import parse_suite
from tests.sweep_fakes import probe


def forgetful_worker(config, emit, extra):
    """A case's process that lost the inherited id: the sweep's must still reach its record."""
    os.environ.pop(ENV, None)
    return Record(config=config.recorded(), environment={"machine": "testbox", "hostname": "h"},
                  metrics={"total_images_per_sec": float(config.batch_size)}, extra=extra)


def test_a_record_carries_its_invocations_id_and_an_old_one_none(monkeypatch):
    monkeypatch.setenv(ENV, "inv-1")
    rec = Record(config={"model": "m"}, environment={}, metrics={}).to_dict()
    assert rec["session_id"] == "inv-1" and list(rec)[:5] == [
        "schema_version", "tool_version", "run_id", "started_at", "session_id"]
    given = Record(config={}, environment={}, metrics={}, extra={"session_id": "job-9"})
    assert given.to_dict()["session_id"] == "job-9"
    old = {k: v for k, v in rec.items() if k != "session_id"}
    assert "session_id" not in Record.from_dict(old).to_dict()
    assert Record.from_dict(rec).to_dict()["session_id"] == "inv-1"


def test_the_id_is_the_inherited_one_else_the_slurm_jobs_else_a_new_one(monkeypatch):
    from cnnbench.results import sessions

    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    with sessions.invocation() as job:
        assert job == "slurm-42" and os.environ[ENV] == "slurm-42"
    monkeypatch.setenv(ENV, "parent")
    assert session_id() == "parent"
    monkeypatch.delenv(ENV)
    monkeypatch.delenv("SLURM_JOB_ID")
    with sessions.invocation() as new:
        assert new.isalnum() and len(new) == 16 and os.environ[ENV] == new and session_id() == new


def test_every_record_of_a_sweep_shares_the_sweeps_id_and_another_sweep_has_its_own(tmp_path, monkeypatch):
    suite = parse_suite({"name": "t", "base": {"model": "trivial", "device": "cpu"}, "matrix": {"batch_size": [1, 2]}})
    ids = []
    for name in ("a", "b"):
        monkeypatch.setenv(ENV, f"sweep-{name}")
        run_suite(suite, SweepOptions(results_dir=tmp_path / name, grace_s=1.0), worker=forgetful_worker, probe=probe)
        recs = [json.loads(line) for p in (tmp_path / name).glob("*.jsonl") for line in p.read_text().splitlines()]
        assert len(recs) == 2
        ids.append({r["session_id"] for r in recs})
    assert ids == [{"sweep-a"}, {"sweep-b"}]


def test_an_invocation_keeps_an_outer_ones_id_and_leaves_none_behind(monkeypatch):
    """A notebook's runs are an invocation each; a process started after one (``!cnnbench sweep``
    in the next cell) is not taken for it; an invocation inside another (a sweep's case, the
    points of ``run --scaling``) keeps the outer one's id."""
    from cnnbench.results import sessions

    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with sessions.invocation() as first:
        assert os.environ[ENV] == first and sessions.session_id() == first
        with sessions.invocation() as inner:
            assert inner == first
        assert os.environ[ENV] == first
    assert ENV not in os.environ  # nothing left for a process started later
    with sessions.invocation() as second:
        assert second != first
    outside = sessions.session_id()  # a record made outside any invocation: this process's own id
    assert outside not in (first, second) and ENV not in os.environ and sessions.session_id() == outside
    monkeypatch.setenv(ENV, "a-sweeps-id")  # inherited: this process is one of a sweep's cases
    with sessions.invocation() as inherited:
        assert inherited == "a-sweeps-id"
    assert os.environ[ENV] == "a-sweeps-id"


def test_a_session_id_that_is_not_text_breaks_the_contract():
    import pytest

    from cnnbench.results.record import RecordError, check_record

    rec = Record(config={}, environment={}, metrics={}).to_dict()
    check_record(rec)
    rec["session_id"] = 123456789012345
    with pytest.raises(RecordError, match="session_id is the number"):
        check_record(rec)
