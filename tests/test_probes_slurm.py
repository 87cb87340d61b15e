"""Slurm installed but not configured, or with no controller or accounting to talk to (issue 41, item 15).

A submit, ``--status`` and ``--cancel`` each say in one line why Slurm cannot be used (not configured, no
controller reachable, no accounting, no authentication), with the line of Slurm's complaint that says so,
and a failed submit leaves nothing of submitit's behind (its pickles and job script, the folders made for
them). Two ways to get there: Slurm's real commands with a ``slurm.conf`` naming a controller on a port
where nothing listens (skipped, with the reason, where Slurm's commands are not installed; a failure in
CI, as in tests/test_slurm.py), and stand-in commands on PATH that print what the real ones print
(captured from Slurm 22.05), which run everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from cnnbench.cli import main
from tests.slurm_cluster import free_port, required

CLIENTS = ("sbatch", "sacct", "squeue", "scancel")
FAST = {"model": "trivial", "device": "cpu", "num_batches": 2, "num_warmup_batches": 1, "image_size": 32}

NOT_CONFIGURED = """{cmd}: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host
{cmd}: error: fetch_config: DNS SRV lookup failed
{cmd}: error: _establish_config_source: failed to fetch config
{cmd}: fatal: Could not establish a configuration source
"""
"""What each of Slurm's commands says with no slurm.conf and no controller in DNS (exit 1)."""
NO_CONTROLLER = {
    "sbatch": "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n",
    "squeue": "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
    "scancel": "scancel: error: Kill job error on job id {job}: Unable to contact slurm controller (connect failure)\n",
}
NO_ACCOUNTING = "Slurm accounting storage is disabled\n"
"""sacct where slurm.conf names no accounting storage (exit 1)."""
NO_MUNGE = """sbatch: error: If munged is up, restart with --num-threads=10
sbatch: error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": No such file or directory \
(Did you start munged?)
sbatch: error: slurm_send_node_msg: auth_g_create: REQUEST_SUBMIT_BATCH_JOB has authentication error
sbatch: error: Batch job submission failed: Protocol authentication error
"""

NOT_CONFIGURED_LINE = ("Slurm is installed but not configured here: no slurm.conf (SLURM_CONF, /etc/slurm/slurm.conf) "
                       "and no controller found through DNS ({cmd}: Could not establish a configuration source)")
NO_CONTROLLER_LINE = "no Slurm controller reachable: the slurmctld that slurm.conf names does not answer"


def fake_commands(folder: Path, monkeypatch, **commands: tuple[str, int]) -> None:
    """Stand-ins for Slurm's commands, first on PATH: each prints its text to stderr and exits with its code."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (text, code) in commands.items():
        (folder / f"{name}.txt").write_text(text)
        script = folder / name
        script.write_text(f"#!/bin/sh\ncat '{folder / name}.txt' >&2\nexit {code}\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


def not_configured(folder: Path, monkeypatch) -> None:
    fake_commands(folder, monkeypatch, **{c: (NOT_CONFIGURED.format(cmd=c), 1) for c in CLIENTS})


def real_commands_or_skip() -> None:
    """Slurm's own commands: skipped where they are not installed, a failure in CI (as tests/test_slurm.py)."""
    import shutil

    missing = [c for c in CLIENTS if shutil.which(c) is None]
    if not missing:
        return
    why = f"Slurm's commands are not installed (missing {', '.join(missing)}; apt-get install slurm-client)"
    if required():
        pytest.fail(f"{why}, and CI must run the Slurm tests (.ci/run installs Slurm)", pytrace=False)
    pytest.skip(why)


def unreachable_controller(folder: Path, monkeypatch) -> None:
    """A slurm.conf whose controller is a port with nothing listening, and no accounting storage."""
    real_commands_or_skip()
    conf = folder / "slurm.conf"
    folder.mkdir(parents=True, exist_ok=True)
    conf.write_text(f"ClusterName=nowhere\nSlurmctldHost=localhost\nSlurmctldPort={free_port()}\n"
                    "AuthType=auth/none\nCredType=cred/none\nMessageTimeout=5\n"
                    "NodeName=n1 CPUs=1 State=UNKNOWN\nPartitionName=main Nodes=n1 Default=YES\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))


def write_suite(folder: Path, name: str = "probe") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "base": FAST, "matrix": {"batch_size": [2, 4]}}))
    return path


def sweep(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["sweep", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out + out.err


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def submitted_before(suite_path: Path, results: Path, job: str = "4242") -> None:
    """A ledger as an earlier submit left it: every case of the suite as a task of array ``job``."""
    from cnnbench.sweep.slurm.ledger import JobEntry, append_jobs
    from cnnbench.sweep.suite import load_suite

    suite = load_suite(suite_path)
    append_jobs(results, [JobEntry(suite.name, case.key, None, f"{job}_{i}", submitted_at="2026-01-01T00:00:00+00:00")
                          for i, case in enumerate(suite.cases)])


def error_line(out: str) -> str:
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    assert lines[0].startswith("cnnbench sweep: error: ") and "Traceback" not in out, out
    return lines[0].removeprefix("cnnbench sweep: error: ")


# -- submit ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["stand-in", "real"])
def test_a_submit_where_slurm_is_not_configured_is_one_line_naming_it_and_leaves_nothing(tmp_path, monkeypatch,
                                                                                           capsys, how):
    pytest.importorskip("submitit")
    if how == "real":
        real_commands_or_skip()
        if Path("/etc/slurm/slurm.conf").exists() or Path("/etc/slurm-llnl/slurm.conf").exists():
            pytest.skip("this machine has a slurm.conf: Slurm is configured here")
        monkeypatch.delenv("SLURM_CONF", raising=False)
    else:
        not_configured(tmp_path / "bin", monkeypatch)
    results = tmp_path / "results"
    code, out = sweep(capsys, write_suite(tmp_path), "--executor", "slurm", "--results-dir", results)
    assert code == 2
    assert error_line(out) == "--executor slurm: " + NOT_CONFIGURED_LINE.format(cmd="sbatch")
    assert not (results / ".slurm").exists(), tree(results)  # no pickle, no job script, no folder for them


@pytest.mark.parametrize("how", ["stand-in", "real"])
def test_a_submit_with_no_controller_reachable_is_one_line_naming_it_and_leaves_nothing(tmp_path, monkeypatch,
                                                                                          capsys, how):
    pytest.importorskip("submitit")
    if how == "real":
        unreachable_controller(tmp_path / "conf", monkeypatch)
    else:
        fake_commands(tmp_path / "bin", monkeypatch, sbatch=(NO_CONTROLLER["sbatch"], 1))
    results = tmp_path / "results"
    code, out = sweep(capsys, write_suite(tmp_path), "--executor", "slurm", "--results-dir", results)
    assert code == 2
    assert error_line(out) == (f"--executor slurm: {NO_CONTROLLER_LINE} (sbatch: Batch job submission failed: "
                               "Unable to contact slurm controller (connect failure))")
    assert not (results / ".slurm").exists(), tree(results)


def test_a_failed_submit_into_a_store_with_earlier_jobs_removes_only_what_it_made(tmp_path, monkeypatch, capsys):
    """An earlier submit's ledger and submitit's files stay as they were, byte for byte; the new pickles and
    the job script go."""
    pytest.importorskip("submitit")
    suite = write_suite(tmp_path)
    results = tmp_path / "results"
    (tmp_path / "other").mkdir()
    submitted_before(write_suite(tmp_path / "other", "other"), results)
    earlier = results / ".slurm" / "submitit"
    (earlier / "4242").mkdir(parents=True)
    (earlier / "4242" / "4242_submitted.pkl").write_bytes(b"earlier")
    (earlier / ("a" * 32 + ".pkl")).write_bytes(b"another submit's, in flight")
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    fake_commands(tmp_path / "bin", monkeypatch, sbatch=(NO_MUNGE, 1))
    code, out = sweep(capsys, suite, "--executor", "slurm", "--results-dir", results)
    assert code == 2
    assert error_line(out) == ("--executor slurm: Slurm cannot authenticate this host (is munged running, with the "
                               "cluster's key?) (sbatch: Munge encode failed: Failed to access "
                               "\"/run/munge/munge.socket.2\": No such file or directory (Did you start munged?))")
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == before


def test_sbatchs_other_refusals_are_quoted_whole_on_one_line(tmp_path, monkeypatch, capsys):
    pytest.importorskip("submitit")
    fake_commands(tmp_path / "bin", monkeypatch, sbatch=(
        "sbatch: error: invalid partition specified: nosuch\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n", 1))
    results = tmp_path / "results"
    code, out = sweep(capsys, write_suite(tmp_path), "--executor", "slurm", "--results-dir", results)
    assert code == 2
    assert error_line(out) == ("sbatch refused the job array: invalid partition specified: nosuch; "
                               "Batch job submission failed: Invalid partition name specified")
    assert not (results / ".slurm").exists(), tree(results)


# -- --status and --cancel -------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["stand-in", "real"])
@pytest.mark.parametrize("flag", ["--status", "--cancel"])
def test_status_and_cancel_where_slurm_is_not_configured_are_one_line_naming_it(tmp_path, monkeypatch, capsys,
                                                                                 how, flag):
    if how == "real":
        real_commands_or_skip()
        if Path("/etc/slurm/slurm.conf").exists() or Path("/etc/slurm-llnl/slurm.conf").exists():
            pytest.skip("this machine has a slurm.conf: Slurm is configured here")
        monkeypatch.delenv("SLURM_CONF", raising=False)
    else:
        not_configured(tmp_path / "bin", monkeypatch)
    suite, results = write_suite(tmp_path), tmp_path / "results"
    submitted_before(suite, results)
    code, out = sweep(capsys, suite, flag, "--results-dir", results)
    assert code == 1
    assert error_line(out) == NOT_CONFIGURED_LINE.format(cmd="squeue")


@pytest.mark.parametrize("how", ["stand-in", "real"])
@pytest.mark.parametrize("flag", ["--status", "--cancel"])
def test_status_and_cancel_with_no_controller_reachable_are_one_line_naming_it(tmp_path, monkeypatch, capsys,
                                                                                how, flag):
    if how == "real":
        unreachable_controller(tmp_path / "conf", monkeypatch)
    else:
        fake_commands(tmp_path / "bin", monkeypatch, squeue=(NO_CONTROLLER["squeue"], 1), sacct=(NO_ACCOUNTING, 1))
    suite, results = write_suite(tmp_path), tmp_path / "results"
    submitted_before(suite, results)
    code, out = sweep(capsys, suite, flag, "--results-dir", results)
    assert code == 1
    assert error_line(out) == (f"{NO_CONTROLLER_LINE} (squeue: slurm_load_jobs error: Unable to contact slurm "
                               "controller (connect failure))")


@pytest.mark.parametrize("flag", ["--status", "--cancel"])
def test_status_and_cancel_without_accounting_are_one_line_naming_it(tmp_path, monkeypatch, capsys, flag):
    """A controller that answers (squeue: the jobs have left its queue) and no accounting storage."""
    fake_commands(tmp_path / "bin", monkeypatch, squeue=("", 0), sacct=(NO_ACCOUNTING, 1))
    suite, results = write_suite(tmp_path), tmp_path / "results"
    submitted_before(suite, results)
    code, out = sweep(capsys, suite, flag, "--results-dir", results)
    assert code == 1
    assert error_line(out) == ("Slurm has no accounting here (AccountingStorageType): following a sweep's jobs needs "
                               "slurmdbd (sacct: Slurm accounting storage is disabled)")


def test_cancel_when_the_controller_stops_answering_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    """squeue saw the jobs running; scancel cannot reach the controller a moment later."""
    suite, results = write_suite(tmp_path), tmp_path / "results"
    submitted_before(suite, results)
    bin_ = tmp_path / "bin"
    fake_commands(bin_, monkeypatch, sacct=("", 0), scancel=(NO_CONTROLLER["scancel"].format(job="4242_0"), 1))
    (bin_ / "squeue").write_text("#!/bin/sh\nprintf '4242_0|RUNNING|None|n1\\n4242_1|RUNNING|None|n1\\n'\n")
    (bin_ / "squeue").chmod(0o755)
    code, out = sweep(capsys, suite, "--cancel", "--results-dir", results)
    assert code == 1
    assert error_line(out) == (f"{NO_CONTROLLER_LINE} (scancel: Kill job error on job id 4242_0: Unable to contact "
                               "slurm controller (connect failure))")


def test_sacct_s_other_failures_are_one_line(tmp_path, monkeypatch, capsys):
    fake_commands(tmp_path / "bin", monkeypatch, squeue=("", 0),
                  sacct=("sacct: error: first complaint\nsacct: error: second complaint\n", 1))
    suite, results = write_suite(tmp_path), tmp_path / "results"
    submitted_before(suite, results)
    code, out = sweep(capsys, suite, "--status", "--results-dir", results)
    assert code == 1
    assert error_line(out) == ("sacct failed: first complaint; second complaint (the sweep's states after its jobs "
                               "end need Slurm's accounting, slurmdbd)")


def test_status_on_a_store_it_cannot_write_in_is_one_line(tmp_path, monkeypatch, capsys):
    """``--status`` records the jobs Slurm ended as failures; on a store it may not write in (a colleague's,
    read-only) that is one line naming the file, exit 1, never a traceback."""
    import errno

    from cnnbench.results import files
    from cnnbench.sweep.session import load_labelled
    from cnnbench.sweep.slurm import follow as follow_module
    from cnnbench.sweep.slurm.ledger import JobEntry, append_jobs
    from cnnbench.sweep.slurm.states import JobState

    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(yaml.safe_dump({"name": "s", "base": FAST, "matrix": {"batch_size": [1]}}))
    suite = load_labelled(suite_file, "box")
    results = tmp_path / "results"
    append_jobs(results, [JobEntry(suite.name, suite.cases[0].key, "box", "7_0", 1, folder="/none")])
    monkeypatch.setattr(follow_module, "job_states",
                        lambda ids: {i: JobState(i, "FAILED", nodes="n1", exit_code="1:0") for i in ids})
    real = files.open_in

    def read_only(dir_fd, name, flags, path, **kwargs):
        if flags & os.O_APPEND:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
        return real(dir_fd, name, flags, path, **kwargs)

    monkeypatch.setattr(files, "open_in", read_only)
    capsys.readouterr()
    code = main(["sweep", str(suite_file), "--status", "--results-dir", str(results), "--machine-label", "box"])
    out = capsys.readouterr()
    err = out.err
    assert code == 1 and "Traceback" not in err, out.out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "box.jsonl" in lines[0] and "Read-only file system" in lines[0], err
