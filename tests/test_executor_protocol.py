"""The executor protocol (issue 45, item 3): ``sweep`` and ``study`` look the executor up by name and call
only it; ``--executor``'s choices are the registry's names."""

from __future__ import annotations

import argparse

import pytest
import yaml

from cnnbench.cli import build_parser, executors, main
from cnnbench.sweep.suite import load_suite


class FakeExecutor:
    """Takes the cases of the suite it is given and runs nothing."""

    name = "fake"
    summary = "a test's"
    flags_title: str | None = None

    def __init__(self) -> None:
        self.cases: list[str] = []

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        pass

    def chosen_by(self, args: argparse.Namespace) -> bool:
        return False

    def sweep(self, args: argparse.Namespace) -> int:
        self.cases += [case.label for case in load_suite(args.suite).cases]
        return 0

    def study(self, args: argparse.Namespace, request: object) -> int:
        return 0


@pytest.fixture
def fake(monkeypatch):
    executors.executors()  # the shipped ones first, as --executor lists them
    executor = FakeExecutor()
    monkeypatch.setitem(executors._REGISTRY, executor.name, executor)
    return executor


def test_a_sweep_runs_through_the_executor_it_names_and_only_through_it(fake, tmp_path, monkeypatch):
    from cnnbench.cli import sweep_cmd, sweep_slurm

    def refuse(*args, **kwargs):
        raise AssertionError("the sweep went round the protocol")

    monkeypatch.setattr(sweep_cmd, "run_here", refuse)
    monkeypatch.setattr(sweep_slurm, "handle_slurm", refuse)
    suite = tmp_path / "tiny.yaml"
    suite.write_text(yaml.safe_dump({"name": "tiny", "base": {"model": "trivial", "device": "cpu", "num_batches": 1},
                                     "matrix": {"batch_size": [2, 4]}, "repeats": 2}))
    assert main(["sweep", str(suite), "--executor", "fake", "--results-dir", str(tmp_path / "r")]) == 0
    assert sorted(fake.cases) == sorted(case.label for case in load_suite(suite).cases) and len(fake.cases) == 4
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", ["sweep", "study"])
def test_the_executor_choices_are_the_registrys_names(fake, command):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flag = next(a for a in sub.choices[command]._actions if "--executor" in a.option_strings)
    assert list(flag.choices) == executors.names() == ["local", "slurm", "fake"]
    assert flag.default == "local" and "fake: a test's" in flag.help


def test_the_shipped_executors_come_in_their_order_whichever_was_imported_first(monkeypatch):
    from cnnbench.cli import executors

    slurm, local = (next(e for e in executors.executors() if e.name == n) for n in ("slurm", "local"))
    monkeypatch.setattr(executors, "_REGISTRY", {"slurm": slurm, "local": local})  # slurm registered first
    assert executors.names()[:2] == ["local", "slurm"]
