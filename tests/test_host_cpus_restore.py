"""``--host-cpus N`` pins the run, not the caller: a library call (``cnnbench.run``, ``engine.run_and_append``,
a test in the pytest process) gets its process's cores and torch threads back afterwards."""

from __future__ import annotations

import os

import pytest
import torch

import cnnbench


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores to pin a run to fewer than the caller has")
def test_an_in_process_run_with_host_cpus_leaves_the_callers_cores_and_threads_as_they_were(tmp_path):
    every = set(range(os.cpu_count() or 1))
    before_threads = torch.get_num_threads()
    os.sched_setaffinity(0, every)  # whatever an earlier test left
    try:
        record = cnnbench.run(model="trivial", device="cpu", image_size=32, batch_size=2, num_batches=2,
                              num_warmup_batches=1, host_cpus=1, results_dir=str(tmp_path / "r"))
        assert record.status == "ok" and record.config["host_cpus"] == 1
        assert os.sched_getaffinity(0) == every  # not left on the run's one core
        assert torch.get_num_threads() == before_threads
    finally:
        os.sched_setaffinity(0, every)
        torch.set_num_threads(before_threads)


def test_the_run_itself_had_only_the_cores_it_asked_for(tmp_path):
    from cnnbench.machine.affinity import host_cpus_pinned

    every = os.sched_getaffinity(0)
    with host_cpus_pinned(1) as chosen:
        assert len(chosen) == 1 and os.sched_getaffinity(0) == set(chosen)
    assert os.sched_getaffinity(0) == every
    with host_cpus_pinned(None) as chosen:
        assert set(chosen) == every
