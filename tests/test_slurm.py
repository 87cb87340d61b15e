"""``cnnbench sweep --executor slurm`` against a real Slurm cluster on this machine (issue 23).

The cluster (tests/slurm_cluster.py, the ``slurm_cluster`` fixture) is munged, MariaDB, slurmdbd,
slurmctld and two slurmd as nodes n1 and n2 of one host, partitions ``main`` (both) and ``second`` (n2).
These tests skip, with the reason, only where Slurm is not installed, and fail instead in CI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from cnnbench import __version__
from cnnbench.cli import main
from tests.slurm_cluster import poll

FAST = {"model": "trivial", "device": "cpu", "num_batches": 2, "num_warmup_batches": 1, "image_size": 32}
LONG = {"model": "trivial", "device": "cpu", "num_batches": 10_000_000, "num_warmup_batches": 1, "image_size": 32}
"""A case that runs until something stops it."""
DEADLINE_S = 300.0


def write_suite(folder: Path, name: str, **data) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **data}))
    return path


def sweep(capsys, *args: str) -> tuple[int, str]:
    """``cnnbench sweep ...`` in this process; (exit code, what it printed)."""
    capsys.readouterr()
    code = main(["sweep", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out + out.err


def records(results: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(results.glob("*.jsonl")) for line in path.read_text().splitlines()]


def status_lines(capsys, suite: Path, results: Path) -> list[str]:
    code, out = sweep(capsys, suite, "--status", "--results-dir", results)
    assert code == 0, out
    return out.splitlines()[:-1]


def wait_for(capsys, suite: Path, results: Path, check, what: str, deadline_s: float = DEADLINE_S) -> list[str]:
    """Poll ``--status`` until ``check(lines)``; the last lines seen."""
    seen: list[list[str]] = [[]]

    def ready() -> bool:
        seen[0] = status_lines(capsys, suite, results)
        return bool(check(seen[0]))

    poll(ready, deadline_s, what, lambda: "\n".join(seen[0]))
    return seen[0]


@pytest.mark.slow
def test_the_local_cluster_runs_jobs_on_both_nodes_and_accounts_for_them(slurm_cluster):
    assert slurm_cluster.node_states() == {"n1": "idle", "n2": "idle"}
    out = slurm_cluster.run("srun", "-N", "2", "-p", "main", "bash", "-c", "echo $SLURMD_NODENAME", timeout=120)
    assert sorted(out.stdout.split()) == ["n1", "n2"]
    job = slurm_cluster.run("sbatch", "--parsable", "-p", "second", "-o", "/dev/null", "--wrap", "true").stdout.strip()
    slurm_cluster.wait_idle()

    def accounted() -> bool:
        out = slurm_cluster.run("sacct", "-n", "-X", "-P", "-j", job, "-o", "State,Partition,NodeList").stdout
        return out.strip() == "COMPLETED|second|n2"

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


@pytest.mark.slow
def test_a_suite_submitted_to_slurm_records_every_case_where_its_executor_block_puts_it(slurm_cluster, tmp_path,
                                                                                         capsys):
    suite = write_suite(tmp_path, "placed", base=FAST, timeout_s=120,
                        matrix={"batch_size": [2, 4]},
                        include=[{"model": "resnet18", "batch_size": 2}],
                        executor={"startup_s": 60, "machines": {"box-a": {"partition": "main"},
                                                                "box-b": {"partition": "second"}}})
    results = tmp_path / "results"
    code, out = sweep(capsys, suite, "--executor", "slurm", "--results-dir", results, "--max-concurrent", "2")
    assert code == 0, out
    assert "submitted job array" in out and "on main" in out and "on second" in out
    assert "6 cases submitted" in out and f"follow with: cnnbench sweep {suite} --status" in out
    script = next((results / ".slurm" / "submitit").glob("*/*_submission.sh")).read_text()
    assert "#SBATCH --array=0-2%2" in script  # one array per partition, at most 2 tasks at once

    lines = wait_for(capsys, suite, results, lambda ls: len(ls) == 6 and all(x.startswith("done") for x in ls),
                     "every case done")
    assert all(line.startswith("done (ok)") for line in lines), lines
    got = records(results)
    assert len(got) == 6 and {r["status"] for r in got} == {"ok"}
    for r in got:
        label = r["environment"]["machine"]
        assert label in ("box-a", "box-b")
        assert r["slurm"]["partition"] == {"box-a": "main", "box-b": "second"}[label]
        if label == "box-b":
            assert r["slurm"]["node"] == "n2"
        assert r["slurm"]["python"] == sys.executable and r["slurm"]["cnnbench_version"] == __version__
        assert r["suite_name"] == "placed" and r["metrics"]["total_images_per_sec"] > 0
    assert sorted((r["environment"]["machine"], r["config"]["model"], r["config"]["batch_size"]) for r in got) == [
        ("box-a", "resnet18", 2), ("box-a", "trivial", 2), ("box-a", "trivial", 4),
        ("box-b", "resnet18", 2), ("box-b", "trivial", 2), ("box-b", "trivial", 4)]
    code, out = sweep(capsys, suite, "--executor", "slurm", "--results-dir", results)
    assert code == 0 and "0 cases submitted; left alone: 6 recorded ok" in out, out
