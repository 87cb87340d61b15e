"""``cnnbench sweep --executor slurm`` against a real Slurm cluster on this machine (issue 23).

The cluster (tests/slurm_cluster.py, the ``slurm_cluster`` fixture) is munged, MariaDB, slurmdbd,
slurmctld and two slurmd as nodes n1 and n2 of one host, partitions ``main`` (both) and ``second`` (n2).
These tests skip, with the reason, only where Slurm is not installed, and fail instead in CI.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_the_local_cluster_runs_jobs_on_both_nodes_and_accounts_for_them(slurm_cluster):
    assert slurm_cluster.node_states() == {"n1": "idle", "n2": "idle"}
    out = slurm_cluster.run("srun", "-N", "2", "-p", "main", "bash", "-c", "echo $SLURMD_NODENAME", timeout=120)
    assert sorted(out.stdout.split()) == ["n1", "n2"]
    job = slurm_cluster.run("sbatch", "--parsable", "-p", "second", "--wrap", "true").stdout.strip()
    slurm_cluster.wait_idle()

    def accounted() -> bool:
        out = slurm_cluster.run("sacct", "-n", "-X", "-P", "-j", job, "-o", "State,Partition,NodeList").stdout
        return out.strip() == "COMPLETED|second|n2"

    from tests.slurm_cluster import poll

    poll(accounted, 120, f"sacct to report job {job} COMPLETED on second/n2")


@pytest.mark.parametrize("env, outcome", [({}, "Skipped"), ({"CI": "true"}, "Failed"),
                                          ({"CNNBENCH_REQUIRE_SLURM": "1"}, "Failed")])
def test_without_slurm_the_tests_skip_with_the_reason_except_in_ci(monkeypatch, env, outcome):
    import tests.slurm_cluster as sc

    monkeypatch.setattr(sc, "BINARIES", (*sc.BINARIES, "no-such-slurm-daemon"))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CNNBENCH_REQUIRE_SLURM", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(BaseException) as caught:
        sc._cluster_or_skip()
    assert type(caught.value).__name__ == outcome
    assert "Slurm is not installed (missing no-such-slurm-daemon" in str(caught.value)
