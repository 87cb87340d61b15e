"""``cnnbench study NAME|FILE``: run a study end to end (its sweep, then its report); ``--list`` names them.

Thin: parses, calls :func:`cnnbench.study.execute_study`, prints. The sweep behaves as ``cnnbench
sweep``'s (resumes, shares work with another run of the same study); never imports torch here.
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
        "study",
        help="Run a study (a suite with a report layout) end to end and write its report.",
        description="Run a study end to end: its sweep (as `cnnbench sweep` runs a suite: cases already recorded "
        "ok in the results folder are skipped, so an interrupted study continues where it stopped), then its "
        "report, laid out as the study's readers know it (OUTDIR/summary.md, report.html, tables/). A study is "
        "a shipped one (--list) or a study file: a suite file with a layout: section (rows, columns, effects, "
        "observations) and a smoke: section (a size that runs in minutes on 2 CPU cores, --smoke). --executor slurm "
        "submits its cases to Slurm instead, as `cnnbench sweep` does; --report-only then writes the report from "
        "what they recorded. Exit "
        "status: 0 when every case ran, whatever its status; 2 for a bad study or a case `cnnbench run` would "
        "refuse here; 130/143 when stopped by Ctrl-C/SIGTERM (no report then).",
    )
    p.add_argument("study", nargs="?", metavar="NAME|FILE", help="A shipped study (--list) or a study file.")
    p.add_argument("--list", action="store_true", help="Name the shipped studies, one line each, and exit.")
    p.add_argument("--smoke", action="store_true",
                   help="Run the study's smoke size (small models and images, a few steps; minutes on 2 CPU "
                   "cores) instead of its full size (real hardware).")
    p.add_argument("--results-dir", metavar="DIR",
                   help="Results folder (default: results/NAME, results/NAME-smoke with --smoke).")
    p.add_argument("-o", "--output", metavar="OUTDIR",
                   help="Report folder (default: report/NAME, report/NAME-smoke with --smoke): new, empty, or an "
                   "earlier report's.")
    p.add_argument("--rerun", action="store_true", help="Run every case, even those already recorded ok.")
    p.add_argument("--machine-label", metavar="LABEL", help="Name of this machine in the results.")
    p.add_argument("--skip-invalid", action="store_true",
                   help="Run the valid cases and skip, with a warning each, those `cnnbench run` would refuse "
                   "on this machine (more devices than it has, a data folder it lacks).")
    p.add_argument("--plain", action="store_true", help="One line per case instead of a progress bar.")
    p.add_argument("--no-plots", action="store_true", help="Draw no plots.")
    p.add_argument("--report-only", action="store_true",
                   help="Run nothing: write the report from what the results folder holds (after --executor slurm, "
                   "once --status shows the cases done).")
    from cnnbench.sweep.executors import add_flags

    add_flags(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cnnbench.study import shipped_studies

    if args.list:
        studies = shipped_studies()
        width = max(map(len, studies))
        for name, description in studies.items():
            print(f"{name:<{width}}  {description}")
        return 0
    if not args.study:
        raise UserError(f"name a study ({', '.join(shipped_studies())}) or a study file, or --list")
    from cnnbench.study import StudyRequest

    request = StudyRequest(study=args.study, smoke=args.smoke, results_dir=args.results_dir, output=args.output,
                           rerun=args.rerun, machine_label=args.machine_label, skip_invalid=args.skip_invalid,
                           max_plots=0 if args.no_plots else 8)
    from cnnbench.sweep.executors import ExecutorError, chosen

    executor = chosen(args)
    try:
        return executor.execute(args, StudyWork(args, request, executor.name))
    except ExecutorError as exc:
        raise UserError(str(exc), exit_code=exc.exit_code) from None


class StudyWork:
    """A study, as its executor runs it (:class:`cnnbench.sweep.executors.Work`): here, its sweep then its report;
    elsewhere, its suite (its data set made here first, in the results folder the cases share)."""

    def __init__(self, args: argparse.Namespace, request: Any, executor: str) -> None:
        self.args, self.request, self.executor = args, request, executor
        self.command = f"cnnbench study {shlex.quote(args.study)}" + (" --smoke" if args.smoke else "")

    def run_here(self) -> int:
        return run_here(self.args, self.request)

    def elsewhere(self, *, writing: bool) -> tuple[Any, Path]:
        from cnnbench.results.outputs import OutputError
        from cnnbench.study import StudyError, prepare, prepare_data

        if self.args.report_only:
            raise UserError(f"--report-only runs nothing: give it without --executor {self.executor} or its flags")
        try:
            study, results_dir, _ = prepare(self.request, writing=writing)  # a read-only store is followed too
            if writing:
                prepare_data(study, results_dir, _made)
        except (StudyError, OutputError) as exc:
            raise UserError(str(exc)) from None
        return study.suite, results_dir


def run_here(args: argparse.Namespace, request: Any) -> int:
    """The study run here (the ``local`` executor, :mod:`cnnbench.sweep.local`): its sweep, then its report."""
    run = _run(request, plain=args.plain, report_only=args.report_only)
    from cnnbench.sweep.progress import summary_lines

    result = run.sweep.result if run.sweep is not None else None
    if result is not None:
        print("\n".join(summary_lines(result, str(run.results_dir))))
        if result.interrupted_by is not None:
            return 128 + int(result.interrupted_by)
    if run.written is not None and run.report is not None:
        print(f"wrote {run.written.summary} and {run.written.html.name}: "
              f"{plural(len(run.written.tables) // 2, 'table')}, {plural(len(run.written.plots), 'plot')}, "
              f"from {plural(run.report.n_records, 'result')}")
    return 0


def _run(request: Any, *, plain: bool, report_only: bool = False) -> Any:
    """:func:`~cnnbench.study.execute_study`, its errors as one line each."""
    from cnnbench.config.errors import ConfigError
    from cnnbench.report import ReportError
    from cnnbench.results.files import FileProblem
    from cnnbench.results.outputs import OutputError
    from cnnbench.results.space import NoSpace
    from cnnbench.study import execute_study, report_study
    from cnnbench.sweep.progress import PlainReporter, RichReporter
    from cnnbench.sweep.session import InvalidCases
    from cnnbench.sweep.suite import SuiteError

    reporter = PlainReporter() if plain or not sys.stderr.isatty() else RichReporter()
    try:
        if report_only:
            return report_study(request)
        return execute_study(request, reporter=reporter, on_invalid=_warn_invalid, on_dataset=_made)
    except InvalidCases as exc:
        raise UserError(f"{exc} (--skip-invalid runs the valid cases)") from None
    except (SuiteError, OutputError, ReportError) as exc:
        raise UserError(str(exc)) from None
    except ConfigError as exc:  # --machine-label
        raise UserError.from_config(exc, "study") from None
    except NoSpace as exc:  # a full disk, in the store or the report folder: the folder and its free space
        raise UserError(f"cannot write: {exc}", exit_code=1) from None
    except FileProblem as exc:  # the store's file for a machine, a claim: a FIFO, a symlink out of the folder
        raise UserError(f"--results-dir: cannot write in the store: {exc}", exit_code=1) from None


def _warn_invalid(message: str) -> None:
    print(f"cnnbench study: warning: skipped invalid case: {message}", file=sys.stderr)


def _made(folder: Any) -> None:
    print(f"data set: {folder}", file=sys.stderr)
