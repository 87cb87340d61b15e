"""``cnnbench sweep SUITE.yaml``: run a suite's matrix of benchmarks, each case in its own process.

Cases already recorded ``ok`` on this machine are skipped (``--rerun`` runs them again),
so an interrupted sweep continues where it stopped. Exit codes: 0 when every case ran,
whatever its status (``--strict``: 1 if any case was not ok); 2 for a bad suite file
(nothing ran), or a case that ``cnnbench run`` would refuse on this machine (unless
``--skip-invalid``); 130 / 143 when stopped by Ctrl-C / SIGTERM (nothing half-written).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from cnnbench.cli.common import UserError
from cnnbench.words import plural


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="Run a suite file's matrix of benchmarks, each case in its own process.",
        description="Run a suite file's matrix of benchmarks, each case in its own process with the suite's "
        "time limit; failures are recorded (oom, error, timeout) and the sweep goes on. Cases already "
        "recorded ok on this machine are skipped (--rerun runs them again), so an interrupted sweep "
        "continues where it stopped. Exit status: 0 when every case ran, whatever its status (--strict: "
        "1 if any was not ok); 2 for a bad suite file or a case `cnnbench run` would refuse here (checked before "
        "anything runs; --skip-invalid skips such cases instead); 130/143 when stopped by Ctrl-C/SIGTERM. Sweeps "
        "of one suite into one results folder may run at once: no case runs in two of them.",
    )
    p.add_argument("suite", metavar="SUITE.yaml", help="Suite file (see suites/ for examples).")
    p.add_argument("--results-dir", default="results", metavar="DIR", help="Results folder (default: results).")
    p.add_argument("--rerun", action="store_true", help="Run every case, even those already recorded ok.")
    p.add_argument("--auto-batch", action="store_true",
                   help="On out-of-memory, retry the case with half the batch until one fits.")
    p.add_argument("--strict", action="store_true", help="Exit 1 if any case was not ok.")
    p.add_argument("--machine-label", metavar="LABEL", help="Name of this machine in the results.")
    p.add_argument("--dry-run", action="store_true", help="List the cases and exit without running anything.")
    p.add_argument("--plain", action="store_true", help="One line per case instead of a progress bar.")
    p.add_argument("--skip-invalid", action="store_true",
                   help="Run the valid cases and skip, with a warning each, those `cnnbench run` would refuse "
                   "on this machine (default: refuse the whole suite, before anything runs).")
    p.add_argument("--noise", default="2", metavar="PCT",
                   help="Warn when the relative stdev of a configuration's repeats in images/sec (sample "
                   "standard deviation over the mean) exceeds PCT percent (default 2; cnnbench report shows "
                   "it as the cell's ±x%% above the same 2%%).")
    from cnnbench.sweep.executors import add_flags

    add_flags(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """The suite's cases, run by the executor ``--executor`` names (:mod:`cnnbench.sweep.executors`)."""
    from cnnbench.sweep.executors import ExecutorError, chosen

    try:
        return chosen(args).execute(args, SweepWork(args))
    except ExecutorError as exc:
        raise UserError(str(exc), exit_code=exc.exit_code) from None


class SweepWork:
    """A sweep, as its executor runs it (:class:`cnnbench.sweep.executors.Work`): the suite file of ``args``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.command = f"cnnbench sweep {shlex.quote(args.suite)}"

    def run_here(self) -> int:
        return run_here(self.args)

    def elsewhere(self, *, writing: bool) -> tuple[str, Path]:
        return self.args.suite, Path(self.args.results_dir)


def run_here(args: argparse.Namespace) -> int:
    """The sweep run here (the ``local`` executor, :mod:`cnnbench.sweep.local`)."""
    from cnnbench.cli.report_cmd import parse_noise
    from cnnbench.results.files import path_too_long, shown
    from cnnbench.sweep.session import SweepRequest

    noise = parse_noise(args.noise)
    why = path_too_long(args.suite)
    if why is not None:
        raise UserError(f"SUITE.yaml {shown(args.suite)}: {why}")
    request = SweepRequest(suite=args.suite, results_dir=args.results_dir, rerun=args.rerun,
                           auto_batch=True if args.auto_batch else None, noise=noise,
                           machine_label=args.machine_label, skip_invalid=args.skip_invalid, dry_run=args.dry_run)
    run = _run(request, plain=args.plain)
    if run.result is None:
        _print_cases(run.suite)
        return 0
    from cnnbench.sweep.progress import summary_lines

    print("\n".join(summary_lines(run.result, args.results_dir)))
    if run.result.interrupted_by is not None:
        return 128 + int(run.result.interrupted_by)
    if args.strict and not run.result.all_ok:
        return 1
    return 0


def _run(request: Any, *, plain: bool) -> Any:
    """:func:`~cnnbench.sweep.session.run_sweep`, its errors as one line each."""
    from cnnbench.config.errors import ConfigError
    from cnnbench.results.files import FileProblem
    from cnnbench.results.outputs import OutputError
    from cnnbench.sweep.session import InvalidCases, run_sweep
    from cnnbench.sweep.suite import SuiteError

    reporter = None
    if not request.dry_run:
        from cnnbench.sweep.progress import PlainReporter, RichReporter

        reporter = PlainReporter() if plain or not sys.stderr.isatty() else RichReporter()
    try:
        return run_sweep(request, reporter=reporter, on_invalid=_warn_invalid)
    except InvalidCases as exc:
        raise UserError(f"{exc} (--skip-invalid runs the valid cases)") from None
    except (SuiteError, OutputError) as exc:
        raise UserError(str(exc)) from None
    except ConfigError as exc:  # --machine-label
        raise UserError.from_config(exc, "sweep") from None
    except FileProblem as exc:  # the store's file for a machine, a claim: a FIFO, a symlink out of the folder
        raise UserError(f"--results-dir: cannot write in the store: {exc}", exit_code=1) from None


def _warn_invalid(message: str) -> None:
    print(f"cnnbench sweep: warning: skipped invalid case: {message}", file=sys.stderr)


def _print_cases(suite: Any) -> None:
    """The dry run: every case, then how many and their time limit."""
    for i, case in enumerate(suite.cases, 1):
        print(f"{i:>4}  {case.label}")
    configurations = len(suite.cases) // suite.repeats
    print(f"{plural(len(suite.cases), 'case')} ({plural(configurations, 'configuration')} x "
          f"{plural(suite.repeats, 'repeat')}), "
          f"time limit {suite.timeout_s:g} s each")
