"""A sweep from its suite file, as ``cnnbench sweep`` runs it (:func:`run_sweep`).

The suite file is read and checked, ``machine_label`` set on every case; a dry run stops
there and writes nothing. Otherwise the results folder is checked, the fork server
started, and every case put through the checks ``cnnbench run`` makes on this machine
(:func:`~cnnbench.sweep.preflight.check_cases`): a case that fails them refuses the whole
suite (:class:`InvalidCases`), or with ``skip_invalid`` is left out (``on_invalid`` hears
of each, one line, before anything runs). Then the suite runs (:func:`~cnnbench.sweep.runner.run_suite`).
The fork server, the checks and the run are looked up in :mod:`cnnbench.sweep.runner` when
called, where a script or a test may replace them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cnnbench.analysis.repeat_stats import REPEAT_NOISE
from cnnbench.sweep.outcomes import Reporter, SweepOptions, SweepResult
from cnnbench.sweep.preflight import InvalidCase
from cnnbench.sweep.suite import Suite, SuiteError, load_suite


@dataclass(frozen=True)
class SweepRequest:
    """What to sweep, and how."""

    suite: str | os.PathLike[str] | Suite
    """The suite file, or a suite already read (a study at its smoke size)."""
    results_dir: str | os.PathLike[str] = "results"
    rerun: bool = False
    """Run every case, even those already recorded ``ok``."""
    auto_batch: bool | None = None
    """Retry out-of-memory cases with half the batch; None = what the suite says."""
    noise: float = REPEAT_NOISE
    """Warn when a configuration's repeats have a relative stdev above this (see :class:`SweepOptions`)."""
    machine_label: str | None = None
    """The machine's name in every case's record (``--machine-label``)."""
    skip_invalid: bool = False
    """Leave out the cases ``cnnbench run`` would refuse here, instead of refusing the suite."""
    dry_run: bool = False
    """Read and check the suite only: nothing runs, nothing is written."""

    def options(self) -> SweepOptions:
        return SweepOptions(results_dir=Path(self.results_dir), rerun=self.rerun, auto_batch=self.auto_batch,
                            noise=self.noise)


@dataclass
class SweepRun:
    """What :func:`run_sweep` did."""

    suite: Suite
    """The suite as run: ``machine_label`` set, the invalid cases skipped."""
    invalid: list[InvalidCase] = field(default_factory=list)
    """The cases skipped as invalid (``skip_invalid``)."""
    result: SweepResult | None = None
    """The sweep's result; None for a dry run."""


class InvalidCases(ValueError):
    """Cases ``cnnbench run`` would refuse on this machine; nothing ran."""

    def __init__(self, suite: Suite, invalid: list[InvalidCase]) -> None:
        more = f" (and {len(invalid) - 1} more invalid cases)" if len(invalid) > 1 else ""
        super().__init__(f"{invalid[0].message(suite)}{more}; nothing ran")
        self.suite = suite
        self.invalid = invalid


def load_labelled(path: str | os.PathLike[str] | Suite, machine_label: str | None) -> Suite:
    """The suite file (or suite), checked, with ``machine_label`` set on every case (``SuiteError``,
    ``ConfigError`` for a label that cannot be one)."""
    suite = path if isinstance(path, Suite) else load_suite(os.fspath(path))
    if machine_label is None:
        return suite
    cases = tuple(dataclasses.replace(c, config=c.config.replace(machine_label=machine_label))
                  for c in suite.cases)
    return dataclasses.replace(suite, cases=cases)


def run_sweep(request: SweepRequest, *, reporter: Reporter | None = None,
              on_invalid: Callable[[str], None] | None = None) -> SweepRun:
    """Run the suite file of ``request`` (see the module documentation).

    Raises ``SuiteError`` for a suite that cannot run, ``ConfigError`` for a bad machine label,
    :class:`InvalidCases`, ``OutputError`` for a results folder that cannot take the records,
    and ``FileProblem`` for a store file that cannot be appended to.
    """
    from cnnbench.results.outputs import TRACES, check_results_dir

    suite = load_labelled(request.suite, request.machine_label)
    if request.dry_run:
        return SweepRun(suite)
    _refuse_several_nodes(suite)
    check_results_dir(request.results_dir, {c.config.machine_label for c in suite.cases},
                      uses=[TRACES] if any(c.config.profile_steps for c in suite.cases) else ())
    from cnnbench.results.sessions import invocation

    with invocation():  # before the fork server starts: every case's process inherits this sweep's id
        return _run_checked(suite, request, reporter, on_invalid)


def _run_checked(suite: Suite, request: SweepRequest, reporter: Reporter | None,
                 on_invalid: Callable[[str], None] | None) -> SweepRun:
    """The checked cases of ``suite`` run (those invalid refused, or left out and named)."""
    invalid = _checked_cases(suite)
    if invalid and not request.skip_invalid:
        raise InvalidCases(suite, invalid)
    for bad in invalid:
        if on_invalid is not None:
            on_invalid(bad.message(suite))
    if invalid:
        suite = suite.without({bad.case.index for bad in invalid})
        if not suite.cases:
            raise SuiteError(f"{suite.where}: every case is invalid; nothing to run")
    from cnnbench.sweep import runner

    return SweepRun(suite, invalid, runner.run_suite(suite, request.options(), reporter=reporter))


def _refuse_several_nodes(suite: Suite) -> None:
    """A case over several nodes runs on a cluster; here ``num_nodes`` comes from torchrun's environment."""
    for case in suite.distinct_cases():
        if (case.config.num_nodes or 1) > 1:
            raise SuiteError(f"{suite.where}: case {case.description}: nodes={case.config.num_nodes} runs on a "
                             "cluster (cnnbench sweep --executor slurm); a local sweep runs on this machine only")


def _checked_cases(suite: Suite) -> list[InvalidCase]:
    """Start the fork server (it imports torch and the engine once, for every case) and check the cases."""
    from cnnbench.sweep import runner

    try:
        runner.preload_engine()
        return runner.check_cases(suite)
    except KeyboardInterrupt:
        from cnnbench.sweep.isolation import stop_server

        stop_server()  # still importing torch, maybe: it would hold the terminal until done
        raise
