"""``cnnbench sweep SUITE.yaml``: run a suite's matrix of benchmarks, each case in its own process.

Cases already recorded ``ok`` on this machine are skipped (``--rerun`` runs them again),
so an interrupted sweep continues where it stopped. Exit codes: 0 when every case ran,
whatever its status (``--strict``: 1 if any case was not ok); 2 for a bad suite file
(nothing ran), or a case that ``cnnbench run`` would refuse on this machine (unless
``--skip-invalid``); 130 / 143 when stopped by Ctrl-C / SIGTERM (nothing half-written).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from cnnbench.cli.common import UserError, check_output
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
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cnnbench.cli.report_cmd import parse_noise
    from cnnbench.config.errors import ConfigError
    from cnnbench.results.files import path_too_long, shown
    from cnnbench.sweep.suite import SuiteError, load_suite

    noise = parse_noise(args.noise)
    why = path_too_long(args.suite)
    if why is not None:
        raise UserError(f"SUITE.yaml {shown(args.suite)}: {why}")
    try:
        suite = load_suite(args.suite)
    except SuiteError as exc:
        raise UserError(str(exc)) from None
    if args.machine_label is not None:
        try:
            cases = tuple(dataclasses.replace(c, config=c.config.replace(machine_label=args.machine_label))
                          for c in suite.cases)
        except ConfigError as exc:
            raise UserError.from_config(exc, "sweep") from None
        suite = dataclasses.replace(suite, cases=cases)
    if args.dry_run:
        for i, case in enumerate(suite.cases, 1):
            print(f"{i:>4}  {case.label}")
        configurations = len(suite.cases) // suite.repeats
        print(f"{plural(len(suite.cases), 'case')} ({plural(configurations, 'configuration')} x "
              f"{plural(suite.repeats, 'repeat')}), "
              f"time limit {suite.timeout_s:g} s each")
        return 0

    check_output(args.results_dir, {c.config.machine_label for c in suite.cases})

    from cnnbench.sweep.progress import PlainReporter, RichReporter, summary_lines
    from cnnbench.sweep.runner import SweepOptions, check_cases, preload_engine, run_suite

    try:
        preload_engine()  # the fork server imports torch and the engine once, for every case
        invalid = check_cases(suite)
    except SuiteError as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        from cnnbench.sweep.isolation import stop_server

        stop_server()  # still importing torch, maybe: it would hold the terminal until done
        raise
    if invalid and not args.skip_invalid:
        more = f" (and {len(invalid) - 1} more invalid cases)" if len(invalid) > 1 else ""
        raise UserError(f"{invalid[0].message(suite)}{more}; nothing ran (--skip-invalid runs the valid cases)")
    for bad in invalid:
        print(f"cnnbench sweep: warning: skipped invalid case: {bad.message(suite)}", file=sys.stderr)
    if invalid:
        suite = suite.without({bad.case.index for bad in invalid})
        if not suite.cases:
            raise UserError(f"{suite.where}: every case is invalid; nothing to run")
    reporter = PlainReporter() if args.plain or not sys.stderr.isatty() else RichReporter()
    options = SweepOptions(results_dir=Path(args.results_dir), rerun=args.rerun,
                           auto_batch=True if args.auto_batch else None, noise=noise)
    from cnnbench.results.files import FileProblem

    try:
        result = run_suite(suite, options, reporter=reporter)
    except FileProblem as exc:  # the store's file for a machine: a FIFO, a symlink out of the folder
        raise UserError(f"--results-dir: cannot append a record: {exc}", exit_code=1) from None
    print("\n".join(summary_lines(result, args.results_dir)))
    if result.interrupted_by is not None:
        return 128 + int(result.interrupted_by)
    if args.strict and not result.all_ok:
        return 1
    return 0
