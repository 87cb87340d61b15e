"""``cnnbench sweep --executor slurm`` against a real Slurm cluster on this machine (issue 23).

The cluster (tests/slurm_cluster.py, the ``slurm_cluster`` fixture) is munged, MariaDB, slurmdbd,
slurmctld and two slurmd as nodes n1 and n2 of one host, partitions ``main`` (both) and ``second`` (n2).
These tests skip, with the reason, only where Slurm is not installed, and fail instead in CI.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from cnnbench import __version__
from cnnbench.cli import main
from tests.slurm_cluster import NODES, poll

FAST = {"model": "trivial", "device": "cpu", "num_batches": 2, "num_warmup_batches": 1, "image_size": 32}
LONG = {"model": "trivial", "device": "cpu", "num_batches": 10_000_000, "num_warmup_batches": 1, "image_size": 32}
"""A case that runs until something stops it."""
DEADLINE_S = 300.0


@pytest.fixture
def cluster(slurm_cluster):
    """The session's cluster, every job cancelled and every node back after the test, whatever it left."""
    yield slurm_cluster
    slurm_cluster.cancel_all()
    for node in NODES:
        slurm_cluster.resume(node)


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
def test_a_suite_submitted_to_slurm_records_every_case_where_its_executor_block_puts_it(cluster, tmp_path,
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


# -- without a cluster: what is refused before anything is submitted, and how Slurm's states are read -----------


def test_a_device_count_that_does_not_divide_over_its_nodes_is_refused_before_anything_is_submitted(tmp_path, capsys):
    suite = write_suite(tmp_path, "split", base={**FAST, "num_devices": 3}, matrix={"nodes": [1, 2]})
    code, out = sweep(capsys, suite, "--executor", "slurm", "--results-dir", tmp_path / "r")
    assert code == 2
    assert out.strip().endswith("case num_nodes=2: num_devices 3 does not divide over 2 nodes (each node runs "
                                "num_devices / nodes workers)")
    assert len(out.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_without_slurms_commands_a_submit_says_so_in_one_line_and_submits_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    suite = write_suite(tmp_path, "nowhere", base=FAST)
    code, out = sweep(capsys, suite, "--executor", "slurm", "--results-dir", tmp_path / "r")
    assert code == 2 and out.strip().endswith("--executor slurm: sbatch is not on PATH (run this on a login node of "
                                              "a Slurm cluster)")
    assert not (tmp_path / "r" / ".slurm").exists()


def test_a_local_sweep_refuses_a_case_over_several_nodes_in_one_line(tmp_path, capsys):
    suite = write_suite(tmp_path, "multi", base=FAST, matrix={"nodes": [1, 2]})
    code, out = sweep(capsys, suite, "--results-dir", tmp_path / "r")
    assert code == 2 and len(out.strip().splitlines()) == 1
    assert "case num_nodes=2: nodes=2 runs on a cluster (cnnbench sweep --executor slurm)" in out
    assert not list((tmp_path).glob("r/*.jsonl"))


@pytest.mark.parametrize("block, message", [
    ({"partition": "a", "partitions": "b"}, "executor: unknown key 'partitions'"),
    ({"time_min": 0}, "executor.time_min: must be a whole number > 0 and at most 527,040 (got 0)"),
    ({"time_min": 1e300}, "executor.time_min: must be a whole number > 0 and at most 527,040 (got 1e+300)"),
    ({"startup_s": 1e308}, "executor.startup_s: must be a number > 0 and at most 31,622,400 (got 1e+308)"),
    ({"partition": "gpu\rx"}, "executor.partition: must be one line of text, without control characters"),
    ({"qos": "a\x00b"}, "executor.qos: must be one line of text, without control characters"),
    ({"slurm_args": {"output": "/etc/passwd"}}, "executor.slurm_args: output is set by cnnbench"),
    ({"slurm_args": {"chdir": "/"}}, "executor.slurm_args: chdir is set by cnnbench"),
    ({"slurm_args": {"chd": "/"}}, "executor.slurm_args: chd is set by cnnbench"),
    ({"slurm_args": {"job_name": "x"}}, "executor.slurm_args: job_name is set by cnnbench"),
    ({"slurm_args": {"open_mode": "truncate"}}, "executor.slurm_args: open_mode is set by cnnbench"),
    ({"slurm_args": {"D": "/"}}, "executor.slurm_args: D is set by cnnbench"),
    ({"machines": {"epyc": {"qos": ""}}}, "executor.machines.epyc.qos: must be non-empty text"),
    ({"slurm_args": {"bad key": "x"}}, "executor.slurm_args: 'bad key' is not an sbatch option name"),
    ({"slurm_args": {"exclusive": False}}, "executor.slurm_args.exclusive: an option given without a value is true"),
    ({"slurm_args": {"wait": True}}, "executor.slurm_args: wait is not for a submit: sbatch would wait for the job"),
    ({"slurm_args": {"requeue": True}}, "executor.slurm_args: requeue is set by cnnbench"),
    ({"slurm_args": {"no_requeue": "x"}}, "executor.slurm_args: no_requeue is set by cnnbench"),
    ({"slurm_args": {"qos": True}}, "executor.slurm_args: expected KEY=VALUE for 'qos', an sbatch option that takes"),
])
def test_a_bad_executor_block_is_refused_when_the_suite_is_read(tmp_path, capsys, block, message):
    suite = write_suite(tmp_path, "bad", base=FAST, executor=block)
    code, out = sweep(capsys, suite, "--executor", "slurm", "--dry-run")
    assert code == 2 and message in out, out


def test_a_time_limit_beyond_any_slurm_takes_is_one_line(tmp_path, capsys):
    """A case's timeout_s and the startup time added up to infinity (an OverflowError traceback), or to
    a time limit of 300 digits sent to sbatch."""
    suite = write_suite(tmp_path, "long", base=FAST, timeout_s=1.0e+308, executor={"startup_s": 3e7})
    code, out = sweep(capsys, suite, "--executor", "slurm", "--dry-run")
    assert code == 2 and "make a time limit over a year; set executor.time_min" in out and "Traceback" not in out, out


def _planned(tmp_path, monkeypatch, *flags, **suite_data):
    """What a submit would ask of Slurm: the (resources, case descriptions) of each job array, nothing submitted."""
    from cnnbench.sweep.slurm import submit

    arrays = []

    def fake(request, resources, group):
        arrays.append((resources, [u.name for u in group]))
        return [submit.JobEntry(request.suite.name, u.case.key, u.label, f"{len(arrays)}_{i}")
                for i, u in enumerate(group)]

    monkeypatch.setattr(submit, "_submit_array", fake)
    suite = write_suite(tmp_path, "plan", **suite_data)
    assert main(["sweep", str(suite), "--executor", "slurm", "--results-dir", str(tmp_path / "r"), *flags]) == 0
    return arrays


def test_a_job_ledger_of_several_names_stops_a_submit_before_any_job_is_sent(tmp_path, monkeypatch, capsys):
    """A ledger the entries could not be appended to (a hard link of a file elsewhere) is found before
    sbatch is called: else the jobs would run with no entry, and the next submit would send them again."""
    import os

    outside = tmp_path / "mine.jsonl"
    outside.write_text("my own line\n")
    (tmp_path / "r" / ".slurm").mkdir(parents=True)
    os.link(outside, tmp_path / "r" / ".slurm" / "jobs.jsonl")
    from cnnbench.sweep.slurm import submit

    sent = []
    monkeypatch.setattr(submit, "_submit_array", lambda request, resources, group: sent.extend(group) or [
        submit.JobEntry(request.suite.name, u.case.key, u.label, f"1_{i}") for i, u in enumerate(group)])
    suite = write_suite(tmp_path, "plan", base=FAST)
    assert main(["sweep", str(suite), "--executor", "slurm", "--results-dir", str(tmp_path / "r")]) != 0
    assert sent == []
    err = capsys.readouterr().err
    assert "jobs.jsonl: has 2 names (hard links)" in err and len(err.strip().splitlines()) == 1, err
    assert outside.read_text() == "my own line\n"


def test_each_case_asks_slurm_for_its_own_resources_and_equal_requests_share_an_array(tmp_path, monkeypatch):
    arrays = _planned(
        tmp_path, monkeypatch, "--account", "bench", "--slurm-arg", "container-image=nvcr.io#pytorch:24.05",
        base={k: v for k, v in {**FAST, "num_devices": 4}.items() if k != "device"}, timeout_s=600,
        matrix={"nodes": [1, 2], "device": ["cpu", "cuda"]},
        include=[{"model": "trivial", "host_cpus": 6},
                 {"model": "resnet18", "synthetic_location": "loader", "num_workers": 2}],
        executor={"startup_s": 120, "partition": "cpu", "machines": {"gpu-box": {"partition": "gpu", "qos": "hi"}}})
    by = {tuple(names): r for r, names in arrays}
    for r, _ in arrays:
        assert r.time_min == 12 and r.account == "bench"  # (600 + 120) s in whole minutes; the flag
        assert dict(r.slurm_args) == {"container-image": "nvcr.io#pytorch:24.05"}
        assert r.partition == "gpu" and r.qos == "hi"  # every case runs as the one machine the block names
    requests = sorted((r.nodes, r.gpus_per_node, r.cpus_per_task) for r in by.values())
    # 4 workers on 1 node or 2 per node on 2; GPUs only on cuda; CPUs: host_cpus, else a worker and its loaders each
    assert requests == [(1, 0, 4), (1, 0, 6), (1, 0, 12), (1, 4, 4), (2, 0, 2), (2, 2, 2)]
    assert all(len(names) == 1 and names[0].endswith("on gpu-box") for names in by)
    params = next(r for r in by.values() if r.gpus_per_node == 2).submitit_parameters()
    assert params["nodes"] == 2 and params["gpus_per_node"] == 2 and params["ntasks_per_node"] == 1
    assert params["additional_parameters"] == {"no_requeue": True, "container_image": "nvcr.io#pytorch:24.05"}


@pytest.mark.parametrize("flags, executor", [
    (("--slurm-arg", "exclusive"), {}),
    ((), {"slurm_args": {"exclusive": True}}),
    (("--slurm-arg", "container-writable"), {}),  # a plugin's flag (Pyxis): any word not known to take a value
])
def test_an_sbatch_option_without_a_value_is_a_flag(tmp_path, monkeypatch, flags, executor):
    """``--exclusive`` alone (a whole node) could not be asked for: every option needed KEY=VALUE."""
    from submitit.slurm.slurm import _make_sbatch_string

    ((resources, _),) = _planned(tmp_path, monkeypatch, *flags, base=FAST, executor={"time_min": 5, **executor})
    params = resources.submitit_parameters()
    flag = (flags[1] if flags else "exclusive")
    assert params["additional_parameters"] == {"no_requeue": True, flag.replace("-", "_"): True}
    script = _make_sbatch_string(command="true", folder=str(tmp_path), **params)
    assert f"#SBATCH --{flag}\n" in script


def test_the_command_line_wins_over_the_executor_block_and_cases_run_once_per_machine(tmp_path, monkeypatch):
    arrays = _planned(tmp_path, monkeypatch, "--partition", "big", "--max-concurrent", "3",
                      base=FAST, matrix={"batch_size": [2, 4]},
                      executor={"time_min": 5, "machines": {"a": {"partition": "pa"}, "b": {"partition": "pb"}}})
    assert len(arrays) == 1
    resources, names = arrays[0]
    assert resources.partition == "big" and resources.time_min == 5
    assert sorted(names) == ["batch_size=2 #1 on a", "batch_size=2 #1 on b", "batch_size=4 #1 on a",
                             "batch_size=4 #1 on b"]


def test_a_store_whose_file_system_refuses_locks_is_refused_when_the_sweep_starts(tmp_path, monkeypatch, capsys):
    import errno

    from cnnbench.results import locking

    def refuse(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(locking.fcntl, "flock", refuse)
    suite = write_suite(tmp_path, "nolock", base=FAST)
    code, out = sweep(capsys, suite, "--executor", "slurm", "--results-dir", tmp_path / "r")
    assert code == 1 and len(out.strip().splitlines()) == 1
    assert "the file system refuses file locks (ENOLCK: No locks available)" in out
    assert "NFSv4, Lustre mounted with -o flock" in out and not (tmp_path / "r" / ".slurm").exists()

    def unsupported(fd, op):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(locking.fcntl, "flock", unsupported)
    code, out = sweep(capsys, suite, "--executor", "slurm", "--results-dir", tmp_path / "r")
    assert code == 1 and "(EOPNOTSUPP: Operation not supported)" in out


def test_a_node_whose_environment_differs_runs_nothing_and_records_why(tmp_path, monkeypatch):
    import dataclasses

    from cnnbench.sweep import runner
    from cnnbench.sweep.slurm.job import JobSpec, environment_here, run_job
    from cnnbench.sweep.suite import load_suite

    monkeypatch.setattr(runner, "preload_engine", lambda: pytest.fail("work started on a refused node"))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("CNNBENCH_SESSION_ID", "the-submitters")  # sbatch passes the submitter's on: the job's wins
    suite = load_suite(write_suite(tmp_path, "env", base=FAST))
    submitted = {**environment_here(), "cnnbench_version": "9.9", "python": "/opt/other/bin/python"}
    spec = JobSpec(dataclasses.replace(suite, cases=suite.cases[:1]), str(tmp_path / "r"), "box", submitted)
    outcome = run_job(spec)
    assert outcome["status"] == "error"
    (record,) = records(tmp_path / "r")
    assert record["status"] == "error" and record["slurm"]["job_id"] == "77"
    assert record["session_id"] == "slurm-77" and os.environ["CNNBENCH_SESSION_ID"] == "slurm-77"
    assert f"cnnbench_version {__version__} here, 9.9 where the sweep was submitted" in record["error"]
    assert f"python {sys.executable} here, /opt/other/bin/python where the sweep was submitted" in record["error"]
    assert record["environment"]["machine"] == "box"


def test_a_job_notes_its_case_configuration_as_its_record_carries_it(tmp_path, monkeypatch):
    import dataclasses

    from cnnbench.sweep.slurm.job import JobSpec, read_note, run_job
    from cnnbench.sweep.suite import load_suite

    monkeypatch.setenv("SLURM_JOB_ID", "78")
    suite = load_suite(write_suite(tmp_path, "note", base=FAST, timeout_s=120))
    spec = JobSpec(dataclasses.replace(suite, cases=suite.cases[:1]), str(tmp_path / "r"), "box")
    assert run_job(spec)["status"] == "ok"
    (record,) = records(tmp_path / "r")
    note = read_note(tmp_path / "r", "78")
    assert note is not None and "unresolved" not in note
    assert note["config"] == record["config"] != suite.cases[0].config.recorded()  # resolved: what Slurm's end keeps


def _follow_with(tmp_path, monkeypatch, states, attempts=None, folders=None):
    """``--status`` of a three-case suite whose jobs Slurm reports as ``states`` (job id -> JobState)."""
    from cnnbench.sweep.slurm import follow as follow_module
    from cnnbench.sweep.slurm.ledger import JobEntry, append_jobs
    from cnnbench.sweep.slurm.submit import sweep_status
    from cnnbench.sweep.suite import load_suite

    suite = load_suite(write_suite(tmp_path, "fates", base=FAST, matrix={"batch_size": [1, 2, 3]}))
    results = tmp_path / "r"
    append_jobs(results, [JobEntry(suite.name, c.key, None, f"5_{i}", (attempts or {}).get(i, 1),
                                   folder=(folders or {}).get(i, "/none")) for i, c in enumerate(suite.cases)])
    monkeypatch.setattr(follow_module, "job_states", lambda ids: {i: states[i] for i in ids if i in states})
    return suite, results, sweep_status


def test_jobs_slurm_ended_become_records_with_slurms_reason_and_never_started_ones_do_not(tmp_path, monkeypatch):
    from cnnbench.sweep.slurm.states import JobState

    states = {"5_0": JobState("5_0", "OUT_OF_MEMORY", nodes="n1", exit_code="0:125", elapsed="00:00:09",
                              time_limit="00:05:00"),
              "5_1": JobState("5_1", "CANCELLED", started=False),
              "5_2": JobState("5_2", "FAILED", nodes="n2", exit_code="1:0")}
    suite, results, status = _follow_with(tmp_path, monkeypatch, states)
    units = status(suite, results)
    assert [(u.state, u.status) for u in units] == [("done", "oom"), ("never started", None), ("done", "error")]
    got = {r["slurm"]["job_id"]: r for r in records(results)}
    assert sorted(got) == ["5_0", "5_2"]  # the job that never ran is shown, not recorded
    assert got["5_0"]["status"] == "oom" and got["5_0"]["slurm"]["state"] == "OUT_OF_MEMORY"
    assert got["5_0"]["session_id"] == "slurm-5_0"  # the job's, not the --status invocation's
    assert got["5_0"]["error"].startswith("Slurm job 5_0 ran out of the memory Slurm gave it and was killed "
                                          "(Slurm: OUT_OF_MEMORY, on n1, exit code 0:125, ran 00:00:09 of 00:05:00)")
    assert got["5_2"]["error"].startswith("Slurm job 5_2 failed before the case could be recorded")
    assert {r["case_key"] for r in got.values()} == {suite.cases[0].key, suite.cases[2].key}
    status(suite, results)  # asked again (another shell): recorded once
    assert len(records(results)) == 2
    assert "never started    batch_size=2 #1  job 5_1 (CANCELLED)" in [u.describe() for u in units]


def test_a_job_slurm_ended_records_the_configuration_its_node_resolved(tmp_path, monkeypatch):
    from cnnbench.results.naming import case_name
    from cnnbench.sweep.slurm.job import write_note
    from cnnbench.sweep.slurm.states import JobState

    states = {"5_0": JobState("5_0", "TIMEOUT", nodes="n1"), "5_1": JobState("5_1", "NODE_FAIL", nodes="n2")}
    suite, results, status = _follow_with(tmp_path, monkeypatch, states)
    given = suite.cases[0].config.recorded()
    resolved = {**given, "data_name": "imagefolder", "data_dir": "/data/x", "num_workers": 7}  # as the node said
    write_note(str(results), {"job_id": "5_0"}, {"machine": "box", "hostname": "n1"}, resolved)
    write_note(str(results), {"job_id": "5_1"}, {"machine": "box", "hostname": "n2"}, suite.cases[1].config.recorded(),
               "(its configuration is recorded as the suite gave it, unresolved: ConfigError: --data-dir: gone)")
    status(suite, results)
    got = {r["slurm"]["job_id"]: r for r in records(results)}
    assert got["5_0"]["config"] == resolved and got["5_0"]["case_name"] == case_name(resolved)
    assert got["5_0"]["case_key"] == suite.cases[0].key
    assert got["5_1"]["config"] == suite.cases[1].config.recorded()
    first, second = got["5_1"]["error"].splitlines()[:2]
    assert first.startswith("Slurm job 5_1 lost its node")
    assert second.endswith("unresolved: ConfigError: --data-dir: gone)")


def test_a_jobs_logs_and_note_are_read_inside_the_store_never_where_the_jobs_file_points(tmp_path, monkeypatch):
    """``jobs.jsonl`` and ``.slurm/started/`` may be anyone's who writes in the store: a job's folder
    there is a name inside ``.slurm/submitit/``, its id a name, and its log and note are read as the
    store's files are (never through a link, never waited on: a FIFO)."""
    import threading

    from cnnbench.sweep.slurm.job import read_note
    from cnnbench.sweep.slurm.states import JobState

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "5_1_0_log.out").write_text("SECRET-OUTSIDE-STORE\n")
    (outside / "note.json").write_text(json.dumps({"config": {"model": "LEAKED"}}))
    results = tmp_path / "r"
    submitit = results / ".slurm" / "submitit"
    folders = {0: str(submitit / "5_0"), 1: str(outside), 2: str(submitit / "5_2")}
    states = {f"5_{i}": JobState(f"5_{i}", "FAILED", nodes="n1", exit_code="1:0") for i in range(3)}
    suite, results, status = _follow_with(tmp_path, monkeypatch, states, folders=folders)
    (submitit / "5_0").mkdir(parents=True)
    (submitit / "5_0" / "5_0_0_log.out").write_text("line one\nTraceback: boom\n")
    (submitit / "5_2").mkdir()
    os.mkfifo(submitit / "5_2" / "5_2_0_log.out")
    started = results / ".slurm" / "started"
    started.mkdir()
    (started / "5_1.json").symlink_to(outside / "note.json")
    assert read_note(results, "5_1") is None and read_note(results, "../../../outside/note") is None
    from cnnbench.sweep.slurm.follow import log_tail
    from cnnbench.sweep.slurm.ledger import JobEntry

    assert all(log_tail(results, JobEntry("s", "k", None, "5_0", 1, folder=odd)) == "" for odd in (None, 3, "", ".."))
    done = threading.Thread(target=status, args=(suite, results), daemon=True)
    done.start()
    done.join(120)
    assert not done.is_alive(), "--status waited on a FIFO"
    got = {r["slurm"]["job_id"]: r for r in records(results)}
    assert "Traceback: boom" in got["5_0"]["error"]  # the job's own log, in the store
    assert "SECRET" not in got["5_1"]["error"] and got["5_1"]["config"] == suite.cases[1].config.recorded()
    assert "--- last lines" not in got["5_2"]["error"]


def test_a_case_preempted_once_is_submitted_again_and_a_second_preemption_is_recorded(tmp_path, monkeypatch):
    from cnnbench.sweep.slurm import submit
    from cnnbench.sweep.slurm.states import JobState

    states = {f"5_{i}": JobState(f"5_{i}", "PREEMPTED", nodes="n1") for i in range(3)}
    states["5_2"] = JobState("5_2", "RUNNING", nodes="n2")
    suite, results, status = _follow_with(tmp_path, monkeypatch, states, attempts={1: 2})
    assert [(u.state, u.status) for u in status(suite, results)] == [
        ("preempted", None), ("done", "error"), ("running", None)]
    (record,) = records(results)
    assert "was preempted by Slurm" in record["error"] and record["case_key"] == suite.cases[1].key
    sent = []
    monkeypatch.setattr(submit, "_submit_array", lambda request, resources, group: sent.extend(group) or [
        submit.JobEntry(suite.name, u.case.key, None, f"6_{i}", submit._attempt(u)) for i, u in enumerate(group)])
    submit.submit_sweep(submit.SlurmRequest(suite, results))
    # the preempted case again (its second attempt) and the recorded error; the running one is left alone
    assert [(u.case.key, submit._attempt(u)) for u in sent] == [(suite.cases[0].key, 2), (suite.cases[1].key, 1)]


# -- on the cluster: resume, cancel, Slurm's failures -------------------------------------------------------------


def _submit(capsys, suite: Path, results: Path, *flags: str) -> str:
    code, out = sweep(capsys, suite, "--executor", "slurm", "--results-dir", results, *flags)
    assert code == 0, out
    return out


@pytest.mark.slow
def test_a_new_submit_runs_only_what_is_not_yet_recorded_ok(cluster, tmp_path, capsys):
    results = tmp_path / "results"
    suite = write_suite(tmp_path, "grow", base=FAST, matrix={"batch_size": [2, 4]}, executor={"time_min": 5})
    assert "2 cases submitted" in _submit(capsys, suite, results)
    wait_for(capsys, suite, results, lambda ls: all(x.startswith("done (ok)") for x in ls), "both cases ok")
    suite = write_suite(tmp_path, "grow", base=FAST, matrix={"batch_size": [2, 4, 8]}, executor={"time_min": 5})
    assert "1 case submitted; left alone: 2 recorded ok" in _submit(capsys, suite, results)
    lines = wait_for(capsys, suite, results, lambda ls: all(x.startswith("done (ok)") for x in ls), "all three ok")
    assert len(lines) == 3
    assert sorted(r["config"]["batch_size"] for r in records(results)) == [2, 4, 8]  # none run twice


@pytest.mark.slow
def test_cancel_cancels_only_the_sweeps_jobs_and_a_new_submit_resumes_what_did_not_finish(cluster, tmp_path,
                                                                                        capsys):
    other = cluster.run("sbatch", "--parsable", "-p", "second", "-o", "/dev/null", "--wrap",
                              "sleep 600").stdout.strip()
    results = tmp_path / "results"
    suite = write_suite(tmp_path, "stop", base=FAST, timeout_s=600,  # the base case, then two that run on
                        include=[{**LONG, "batch_size": 4}, {**LONG, "batch_size": 8}], executor={"partition": "main"})
    _submit(capsys, suite, results, "--max-concurrent", "1")
    wait_for(capsys, suite, results, lambda ls: ls[0].startswith("done (ok)") and ls[1].startswith("running"),
             "the first case ok and the second running")
    code, out = sweep(capsys, suite, "--cancel", "--results-dir", results)
    assert code == 0 and out.startswith("cancelled 2 jobs:"), out
    lines = wait_for(capsys, suite, results, lambda ls: not any(x.startswith(("running", "pending", "ending"))
                                                                for x in ls), "the cancelled jobs to end")
    assert lines[0].startswith("done (ok)")
    assert lines[1].startswith("done (error)") and "CANCELLED" in lines[1]  # it had started: recorded
    assert lines[2].startswith("never started") and "CANCELLED" in lines[2]  # it had not: shown only
    assert any(line.startswith(other) for line in cluster.jobs())  # not the sweep's: untouched
    (cancelled,) = [r for r in records(results) if r["status"] != "ok"]
    assert cancelled["config"]["batch_size"] == 4 and "was cancelled" in cancelled["error"]

    out = _submit(capsys, suite, results)
    assert "2 cases submitted; left alone: 1 recorded ok" in out
    wait_for(capsys, suite, results, lambda ls: ls[1].startswith(("running", "pending")), "resubmitted")
    cluster.run("scancel", other)
    code, out = sweep(capsys, suite, "--cancel", "--results-dir", results)
    assert code == 0 and out.startswith("cancelled 2 jobs:")
    cluster.wait_idle()


@pytest.mark.slow
def test_a_job_past_its_slurm_time_limit_and_one_whose_node_goes_down_are_recorded(cluster, tmp_path, capsys):
    results = tmp_path / "results"
    late = write_suite(tmp_path, "late", base=LONG, timeout_s=600,
                       executor={"time_min": 1, "partition": "main", "slurm_args": {"nodelist": "n1"}})
    lost = write_suite(tmp_path, "lost", base=LONG, timeout_s=600, executor={"partition": "second"})
    _submit(capsys, late, results)
    _submit(capsys, lost, results)
    wait_for(capsys, lost, results, lambda ls: ls[0].startswith("running"), "the case on n2 to run")
    cluster.run("scontrol", "update", "nodename=n2", "state=down", "reason=cnnbench-test")
    try:
        (line,) = wait_for(capsys, lost, results, lambda ls: ls[0].startswith("done"), "n2's case to be recorded",
                           deadline_s=120)
        assert line.startswith("done (error)") and "NODE_FAIL" in line and "n2" in line
        (line,) = wait_for(capsys, late, results, lambda ls: ls[0].startswith("done"), "the late case to be recorded")
        assert line.startswith("done (timeout)") and "TIMEOUT" in line
    finally:
        cluster.resume("n2")
    got = {r["suite_name"]: r for r in records(results)}
    assert got["late"]["status"] == "timeout" and got["late"]["slurm"]["state"] == "TIMEOUT"
    assert got["late"]["error"].startswith("Slurm job ") and "ran past its Slurm time limit" in got["late"]["error"]
    assert got["late"]["environment"]["hostname"]  # the node's own note: where it ran
    assert got["lost"]["status"] == "error" and got["lost"]["slurm"]["state"] == "NODE_FAIL"
    assert "lost its node" in got["lost"]["error"] and "on n2" in got["lost"]["error"]
    cluster.wait_idle()


def test_results_merge_folds_node_local_stores_into_one_each_run_once(tmp_path, capsys):
    from cnnbench.results.record import Record
    from cnnbench.results.store import append_record

    def run(n: int) -> dict:
        return Record(config={"model": "trivial", "batch_size": n}, environment={"machine": "box"},
                      metrics={"total_images_per_sec": float(n)}, status="ok").to_dict()

    runs = [run(n) for n in range(1, 5)]
    for node, mine in (("n1", runs[:3]), ("n2", runs[2:])):  # run 3 is in both (a copy made twice)
        for r in mine:
            append_record(tmp_path / node, r)
    (tmp_path / "n2" / "box.jsonl").open("a").write('{"truncated\n')
    before = {p: p.read_bytes() for p in tmp_path.glob("n*/box.jsonl")}
    into = tmp_path / "all"
    append_record(into, runs[0])  # already there

    assert main(["results", "merge", str(tmp_path / "n1"), str(tmp_path / "n2"), "--into", str(into)]) == 0
    out = capsys.readouterr()
    assert "appended 3 runs to" in out.out and "2 already there or repeated; 1 unreadable line skipped" in out.out
    assert "n2/box.jsonl:3: malformed line" in out.err
    merged = records(into)
    assert sorted(r["run_id"] for r in merged) == sorted(r["run_id"] for r in runs)
    assert main(["results", "merge", str(tmp_path / "n1"), str(tmp_path / "n2"), "--into", str(into)]) == 0
    assert "appended 0 runs" in capsys.readouterr().out and len(records(into)) == 4
    assert before == {p: p.read_bytes() for p in tmp_path.glob("n*/box.jsonl")}  # sources untouched


def test_merge_keeps_different_records_without_a_run_id_apart_and_each_once(tmp_path, capsys):
    """Old or hand-written lines carry no run_id: two different ones are both kept, and merging again adds none."""
    source = tmp_path / "old"
    source.mkdir()
    lines = [{"schema_version": 2, "status": "ok", "config": {"model": m}, "environment": {"machine": "q"},
              "metrics": {"total_images_per_sec": v, "step_times_s": [0.1, 0.2]}} for m, v in (("x", 1.0), ("y", 2.0))]
    (source / "q.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    into = tmp_path / "into"
    for expected in ("appended 2 runs", "appended 0 runs"):
        assert main(["results", "merge", str(source), "--into", str(into)]) == 0
        assert expected in capsys.readouterr().out
    assert sorted(r["config"]["model"] for r in records(into)) == ["x", "y"]


@pytest.mark.slow
def test_a_two_node_case_runs_one_launcher_per_node_and_its_record_names_both(cluster, tmp_path, capsys):
    results = tmp_path / "results"
    suite = write_suite(tmp_path, "pair", base={**FAST, "batch_size": 4, "num_devices": 2, "nodes": 2},
                        timeout_s=240, executor={"startup_s": 60, "partition": "main"})
    out = _submit(capsys, suite, results)
    assert "1 case submitted" in out and "(2 node(s), 1 CPU(s)" in out
    (line,) = wait_for(capsys, suite, results, lambda ls: ls[0].startswith("done"), "the two-node case")
    assert line.startswith("done (ok)"), line
    (record,) = records(results)
    assert record["slurm"]["node_names"] == ["n1", "n2"] and record["config"]["num_nodes"] == 2
    assert record["config"]["num_devices"] == 2 and record["metrics"]["total_images_per_sec"] > 0
    job = record["slurm"]["job_id"]
    logs = sorted((results / ".slurm" / "submitit" / job).glob(f"{job}_*_log.out"))
    assert [p.name for p in logs] == [f"{job}_0_log.out", f"{job}_1_log.out"]  # one launcher per node
    assert [f"global_rank={rank}(2)" in p.read_text() for rank, p in enumerate(logs)] == [True, True]
    host, port = (results / ".slurm" / "nodes" / job / "rendezvous").read_text().split(":")
    assert host and int(port) > 0  # where the launchers met (c10d, hosted by the first node)


# -- a study is a suite: submitted the same way, reported once its cases are done ---------------------------------


def study(capsys, *args: str) -> tuple[int, str]:
    """``cnnbench study ...`` in this process; (exit code, what it printed)."""
    capsys.readouterr()
    code = main(["study", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.slow
def test_a_study_submitted_to_slurm_is_reported_with_its_layout_once_its_cases_are_done(cluster, tmp_path, capsys):
    results, report = tmp_path / "results", tmp_path / "report"
    where = ["--smoke", "--results-dir", results, "-o", report]
    code, out = study(capsys, "host-cpus", *where, "--executor", "slurm")
    assert code == 0 and "4 cases submitted" in out, out
    assert "follow with: cnnbench study host-cpus --smoke --status" in out

    seen: list[str] = []

    def done() -> bool:
        code, out = study(capsys, "host-cpus", *where, "--status")
        assert code == 0, out
        seen[:] = out.splitlines()[:-1]
        return len(seen) == 4 and all(x.startswith(("done", "failed")) for x in seen)

    poll(done, DEADLINE_S, "the study's 4 cases done in Slurm", lambda: "\n".join(seen))
    assert all(x.startswith("done (ok)") for x in seen), "\n".join(seen) + "\n" + str(
        [r.get("error") for r in records(results)])
    assert not (report / "summary.md").exists()  # nothing reported while it ran
    code, out = study(capsys, "host-cpus", *where, "--report-only", "--no-plots")
    assert code == 0, out
    assert len(records(results)) == 4  # the report ran nothing
    tables = [json.loads(p.read_text()) for p in sorted((report / "tables").glob("*.json"))]
    [table] = [t for t in tables if t["kind"] == "configuration"]
    assert table["columns"] == ["model", "batch", "1", "2"]  # rows of models, columns of --host-cpus
    assert sorted(r["model"] for r in table["rows"]) == ["resnet18", "trivial"]


def test_a_study_report_of_nothing_run_and_report_only_on_slurm_are_one_line_each(tmp_path, capsys):
    code, out = study(capsys, "host-cpus", "--smoke", "--report-only", "--results-dir", tmp_path / "none",
                      "-o", tmp_path / "report")
    assert code == 2 and "no results folder; run the study first" in out and len(out.strip().splitlines()) == 1
    code, out = study(capsys, "host-cpus", "--smoke", "--report-only", "--executor", "slurm")
    assert code == 2 and "--report-only runs nothing" in out


def test_a_special_file_in_the_slurm_folder_is_one_line_never_a_hang(tmp_path):
    """``<results>/.slurm/jobs.jsonl`` as a FIFO: --status and a submit name it and stop (a reader would block)."""
    import os
    import subprocess

    results = tmp_path / "results"
    (results / ".slurm").mkdir(parents=True)
    os.mkfifo(results / ".slurm" / "jobs.jsonl")
    suite = write_suite(tmp_path, "fifo", base=FAST)
    for flags in (["--status"], ["--executor", "slurm"]):
        proc = subprocess.run([sys.executable, "-m", "cnnbench", "sweep", str(suite), "--results-dir", str(results),
                               *flags], capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and "jobs.jsonl" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
