"""The executor protocol (issue 45, item 3): ``sweep`` and ``study`` call only the executor ``--executor`` names;
a new executor is one module that registers itself, its flags and its part of the suite's ``executor:`` block
its own, and nothing else changes.

:class:`QueueExecutor` is such a new executor, written here and nowhere else: it "submits" each case to a
queue of its own (a file in the results folder, as a Kubernetes executor would create one job per case).
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from cnnbench.cli import build_parser, main
from cnnbench.sweep import executors
from cnnbench.sweep.executors import ExecutorError, Work
from cnnbench.sweep.local import LocalExecutor
from cnnbench.sweep.session import load_labelled
from cnnbench.sweep.suite import SuiteError, load_suite

SRC = Path(__file__).resolve().parent.parent / "src" / "cnnbench"


class QueueExecutor:
    """Each case of the work becomes one line of ``<results>/queue.jsonl``, in the block's namespace."""

    name = "queue"
    summary = "a test's: write each case to a queue file"
    flags_title: str | None = "on a test's queue"
    block_keys: tuple[str, ...] = ("namespace",)

    def check_block(self, block: Mapping[str, Any]) -> None:
        if not isinstance(block["namespace"], str) or not block["namespace"]:
            raise ValueError(f"executor.namespace: must be non-empty text (got {block['namespace']!r})")

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--queue-priority", type=int, metavar="N", help="The queue's priority of every case.")

    def chosen_by(self, args: argparse.Namespace) -> bool:
        return args.queue_priority is not None

    def execute(self, args: argparse.Namespace, work: Work) -> int:
        if args.queue_priority is not None and args.queue_priority < 0:
            raise ExecutorError("--queue-priority: must be 0 or more")
        suite, results_dir = work.elsewhere(writing=True)
        suite = load_labelled(suite, args.machine_label)
        results_dir.mkdir(parents=True, exist_ok=True)
        with open(results_dir / "queue.jsonl", "a") as queue:
            for case in suite.cases:
                data = case.config.data_dir
                queue.write(json.dumps({"case": case.label, "batch_size": case.config.batch_size,
                                        "data_made": None if data is None else any(Path(data).rglob("*.*")),
                                        "namespace": suite.executor.get("namespace", "default"),
                                        "priority": args.queue_priority, "command": work.command}) + "\n")
        print(f"queued {len(suite.cases)} cases")
        return 0


@pytest.fixture
def queue(monkeypatch):
    """The test's executor registered (and gone after the test)."""
    executors.executors()  # the shipped ones registered first, in the registry kept after the test
    monkeypatch.setattr(executors, "_REGISTRY", dict(executors._REGISTRY))
    return executors.register(QueueExecutor())


@pytest.fixture
def not_here(monkeypatch):
    """Running here, or submitting to Slurm, fails the test: only the chosen executor may run the cases."""
    from cnnbench.cli import study_cmd, sweep_cmd
    from cnnbench.sweep.slurm import executor as slurm

    def refuse(*args, **kwargs):
        raise AssertionError("the command went round the protocol")

    for module, name in ((sweep_cmd, "run_here"), (study_cmd, "run_here"), (slurm, "handle_slurm")):
        monkeypatch.setattr(module, name, refuse)


def tiny_suite(folder: Path, **more: Any) -> Path:
    suite = folder / "tiny.yaml"
    suite.write_text(yaml.safe_dump({"name": "tiny", "base": {"model": "trivial", "device": "cpu", "num_batches": 1},
                                     "matrix": {"batch_size": [2, 4]}, "repeats": 2, **more}))
    return suite


def queued(results: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (results / "queue.jsonl").read_text().splitlines()]


def test_a_new_executor_registered_in_one_module_runs_a_sweeps_cases(queue, not_here, tmp_path, capsys):
    suite = tiny_suite(tmp_path, executor={"namespace": "bench", "partition": "cpu"})  # its key beside Slurm's
    code = main(["sweep", str(suite), "--executor", "queue", "--queue-priority", "3", "--results-dir",
                 str(tmp_path / "r")])
    assert code == 0 and capsys.readouterr().out == "queued 4 cases\n"
    jobs = queued(tmp_path / "r")
    assert sorted(j["case"] for j in jobs) == sorted(c.label for c in load_suite(suite).cases)
    assert sorted(j["batch_size"] for j in jobs) == [2, 2, 4, 4]
    assert {(j["namespace"], j["priority"], j["command"]) for j in jobs} == {("bench", 3, f"cnnbench sweep {suite}")}


def test_its_own_flag_chooses_it_and_its_errors_are_one_line(queue, not_here, tmp_path, capsys):
    suite = tiny_suite(tmp_path)
    assert main(["sweep", str(suite), "--queue-priority", "1", "--results-dir", str(tmp_path / "r")]) == 0
    assert {j["namespace"] for j in queued(tmp_path / "r")} == {"default"}
    capsys.readouterr()
    assert main(["sweep", str(suite), "--queue-priority", "-1", "--results-dir", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err == "cnnbench sweep: error: --queue-priority: must be 0 or more\n"


def test_a_new_executor_runs_a_studys_cases_from_the_folder_the_study_made_ready(queue, not_here, tmp_path):
    """The study's data set is made, in its results folder, before its cases go elsewhere."""
    results = tmp_path / "results"
    code = main(["study", "scaling", "--smoke", "--executor", "queue", "--results-dir", str(results),
                 "-o", str(tmp_path / "report")])
    assert code == 0
    from cnnbench.study import load_study

    study = load_study("scaling", smoke=True, data_root=results / "data")
    jobs = queued(results)
    assert sorted(j["case"] for j in jobs) == sorted(c.label for c in study.suite.cases) and jobs
    assert {j["command"] for j in jobs} == {"cnnbench study scaling --smoke"}
    assert {j["data_made"] for j in jobs} == {None, True}  # cases on synthetic data, and on the data set made
    assert main(["study", "scaling", "--smoke", "--executor", "queue", "--report-only",
                 "--results-dir", str(results)]) == 2  # it runs elsewhere: nothing to report from yet


def test_the_suites_executor_block_is_checked_by_the_executor_that_owns_each_key(queue, tmp_path):
    with pytest.raises(SuiteError, match=r"executor\.namespace: must be non-empty text \(got ''\)"):
        load_suite(tiny_suite(tmp_path, executor={"namespace": ""}))
    with pytest.raises(SuiteError, match=r"executor\.time_min: must be a whole number > 0"):  # Slurm's, still
        load_suite(tiny_suite(tmp_path, executor={"namespace": "bench", "time_min": 0}))
    with pytest.raises(SuiteError, match=r"executor: unknown key 'nodes' \(known: partition, .*machines, namespace\)"):
        load_suite(tiny_suite(tmp_path, executor={"nodes": 2}))


def test_a_key_no_registered_executor_owns_is_refused(tmp_path):
    with pytest.raises(SuiteError, match=r"executor: unknown key 'namespace' \(known: partition, .*, machines\)$"):
        load_suite(tiny_suite(tmp_path, executor={"namespace": "bench"}))


@pytest.mark.parametrize("command", ["sweep", "study"])
def test_the_executor_choices_and_flags_are_the_registrys(queue, command):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[command]
    flag = next(a for a in parser._actions if "--executor" in a.option_strings)
    assert list(flag.choices) == executors.names() == ["local", "slurm", "queue"]
    assert flag.default == "local" and "queue: a test's: write each case to a queue file" in flag.help
    [group] = [g for g in parser._action_groups if any(a is flag for a in g._group_actions)]
    assert group.title == "on a Slurm cluster (docs/slurm.md); on a test's queue"
    assert any("--queue-priority" in a.option_strings for a in group._group_actions)


def test_the_shipped_executors_come_in_their_order_whichever_was_imported_first(monkeypatch):
    slurm, local = (next(e for e in executors.executors() if e.name == n) for n in ("slurm", "local"))
    monkeypatch.setattr(executors, "_REGISTRY", {"slurm": slurm, "local": local})  # slurm registered first
    assert executors.names()[:2] == ["local", "slurm"]


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_no_module_names_an_executor_but_the_executor_itself_and_the_registry():
    """``sweep``, ``study`` and the suite reader reach executors through the registry only: no module outside
    an executor imports it (the registry names the shipped ones in BUILTIN)."""
    shipped = {"cnnbench.sweep.local": SRC / "sweep" / "local.py", "cnnbench.sweep.slurm": SRC / "sweep" / "slurm"}
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        for module, home in shipped.items():
            own = path == home or home in path.parents
            if not own and any(n == module or n.startswith(module + ".") for n in _imported(path)):
                bad.append(f"{path.relative_to(SRC)} imports {module}")
    assert bad == []


def test_slurm_reads_only_its_own_keys_of_a_block_another_executor_shares(queue, tmp_path, capsys):
    """The suite's block holds the queue's ``namespace`` beside Slurm's keys: a submit, ``--status`` and
    ``--cancel`` read Slurm's (per machine label too) and leave the queue's alone."""
    suite = tiny_suite(tmp_path, executor={"namespace": "bench", "partition": "cpu",
                                           "machines": {"a": {"partition": "pa"}, "b": {}}})
    results = str(tmp_path / "r")
    assert main(["sweep", str(suite), "--executor", "slurm", "--dry-run", "--results-dir", results]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8  # each case once on each machine
    placed = sorted((line.split("  [")[0].rsplit(" ", 1)[1], line.rsplit(" on ", 1)[1]) for line in lines)
    assert placed == 4 * [("a", "pa]")] + 4 * [("b", "cpu]")], lines  # machine a's partition, else the block's
    assert main(["sweep", str(suite), "--status", "--results-dir", results]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "8 cases: 8 not submitted"
    assert main(["sweep", str(suite), "--cancel", "--results-dir", results]) == 0
    assert capsys.readouterr().out == "nothing to cancel: no job of this sweep is pending or running\n"


class Clash(QueueExecutor):
    name = "clash"


def test_two_executors_claiming_one_key_of_the_block_are_refused_when_the_second_registers(queue):
    with pytest.raises(ValueError, match=r"^executor 'clash' claims the executor: block's key 'namespace', which "
                                         r"executor 'queue' owns \(one executor a key\)$"):
        executors.register(Clash())
    Clash.block_keys = ("qos", "namespace", "partition")
    with pytest.raises(ValueError, match=r"^executor 'clash' claims the executor: block's keys 'qos', "
                                         r"'partition', which executor 'slurm' owns"):
        executors.register(Clash())
    assert executors.names() == ["local", "slurm", "queue"]
    executors.register(QueueExecutor())  # a name taken again: the replacement keeps its keys
    assert executors.names() == ["local", "slurm", "queue"]


@pytest.mark.parametrize("flags, message", [
    (["--max-concurrent", "0"], "--max-concurrent: must be 1 or more"),
    (["--slurm-arg", "partition"], "--slurm-arg: expected KEY=VALUE for 'partition', an sbatch option that takes "
                                   "a value"),
])
def test_a_study_with_bad_slurm_flags_is_refused_before_its_data_set_is_made(tmp_path, capsys, flags, message):
    results = tmp_path / "results"
    code = main(["study", "scaling", "--smoke", "--executor", "slurm", *flags, "--results-dir", str(results),
                 "-o", str(tmp_path / "report")])
    assert code == 2 and capsys.readouterr().err == f"cnnbench study: error: {message}\n"
    assert not results.exists() and not (tmp_path / "report").exists()


class LocalStandIn(LocalExecutor):
    """Registered as ``local`` in a test: what ``sweep`` and ``study`` hand it, and its exit status passed on."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def execute(self, args: argparse.Namespace, work: Work) -> int:
        self.seen.append((args.executor, work.command))
        return 7


def test_sweep_and_study_run_here_only_through_the_local_executor(monkeypatch, not_here, tmp_path):
    """No command runs its cases here by itself: a ``local`` executor that replaces the shipped one is the one
    that runs them (the registry is restored after the test)."""
    executors.executors()
    monkeypatch.setattr(executors, "_REGISTRY", dict(executors._REGISTRY))
    local = executors.register(LocalStandIn())
    suite = tiny_suite(tmp_path)
    assert main(["sweep", str(suite), "--results-dir", str(tmp_path / "r")]) == 7
    assert main(["study", "scaling", "--smoke", "--results-dir", str(tmp_path / "s"), "-o", str(tmp_path / "o")]) == 7
    assert local.seen == [("local", f"cnnbench sweep {suite}"), ("local", "cnnbench study scaling --smoke")]
    assert not (tmp_path / "r").exists() and not (tmp_path / "s").exists()
