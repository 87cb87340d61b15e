"""The ``slurm`` executor: a suite's cases submitted to a Slurm cluster, followed, or cancelled.

``--executor slurm`` submits, ``--status`` follows, ``--cancel`` cancels.

Submits and returns once queued (the job ids and the command to follow them printed), shows where
each case stands, or cancels what the sweep submitted; see :mod:`cnnbench.sweep.slurm`. It owns the
suite's ``executor:`` block (:mod:`cnnbench.sweep.slurm.settings`) and its flags, and reads them here.
"""

from __future__ import annotations

import argparse
import shlex
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cnnbench.sweep.executors import ExecutorError, Work, register
from cnnbench.sweep.slurm.settings import BLOCK_KEYS, SettingsError, SlurmSettings, parse_executor, slurm_args
from cnnbench.words import one_line, plural


class SlurmExecutor:
    name = "slurm"
    summary = ("submit them as Slurm job arrays through submitit and return once queued (what is recorded ok, "
               "pending or running is left alone)")
    flags_title: str | None = "on a Slurm cluster (docs/slurm.md)"
    block_keys: tuple[str, ...] = BLOCK_KEYS

    def check_block(self, block: Mapping[str, Any]) -> None:
        parse_executor(block)  # a SettingsError (a ValueError) names the key

    def add_flags(self, g: argparse._ArgumentGroup) -> None:
        """The Slurm flags of ``sweep`` and ``study`` (docs/slurm.md)."""
        g.add_argument("--status", action="store_true",
                       help="Show each case of a Slurm sweep (pending, running, done with its status, failed in "
                       "Slurm) with its job id and Slurm state; jobs Slurm ended (TIMEOUT, NODE_FAIL, ...) are "
                       "recorded.")
        g.add_argument("--cancel", action="store_true", help="Cancel (scancel) the pending and running jobs this "
                       "sweep submitted, and nothing else.")
        g.add_argument("--max-concurrent", type=int, metavar="N", help="Run at most N tasks of each job array at "
                       "once (Slurm's %%N) [default: the suite's executor block, else all].")
        for flag, what in (("partition", "Partition"), ("account", "Account"), ("qos", "Quality of service"),
                           ("constraint", "Node features (sbatch --constraint)")):
            g.add_argument(f"--{flag}", metavar=flag.upper(), help=f"{what} of every job (over the suite's "
                           "executor block).")
        g.add_argument("--slurm-arg", action="append", default=[], metavar="KEY[=VALUE]",
                       help="Any other sbatch option, without its dashes (container-image=... for Pyxis; exclusive "
                       "for a flag); repeat for several.")

    def chosen_by(self, args: argparse.Namespace) -> bool:
        return bool(args.status or args.cancel)

    def execute(self, args: argparse.Namespace, work: Work) -> int:
        if args.status and args.cancel:
            raise ExecutorError("--status and --cancel: give one of them")
        following = args.status or args.cancel
        if not following:
            submit_settings(args)  # its flags checked before any work (a study's data set)
        suite, results_dir = work.elsewhere(writing=not following)  # following reads only
        return handle_slurm(args, suite, results_dir, work.command)


def handle_slurm(args: argparse.Namespace, suite: Any, results_dir: Path | str, command: str) -> int:
    """Submit ``suite`` (a suite or its file), show its cases (``--status``) or cancel them (``--cancel``);
    ``command``: the command line that names it, for the follow line."""
    try:
        return _handle(args, suite, results_dir, command)
    except ExecutorError:
        raise
    except Exception as exc:
        raise _one_line(exc, results_dir) from None


def _one_line(exc: Exception, results_dir: Any) -> Exception:
    from cnnbench.config.errors import ConfigError
    from cnnbench.results.files import FileProblem
    from cnnbench.results.locking import LockingUnsupported
    from cnnbench.results.outputs import OutputError
    from cnnbench.sweep.slurm.states import SlurmUnavailable
    from cnnbench.sweep.slurm.submit import SubmitError
    from cnnbench.sweep.suite import SuiteError

    if isinstance(exc, ConfigError):
        return ExecutorError(f"{exc} (see cnnbench sweep --help)")
    if isinstance(exc, (SuiteError, OutputError, SubmitError, SettingsError)):
        return ExecutorError(str(exc))
    if isinstance(exc, FileProblem):  # a special file or a symlink out of the folder in <results>/.slurm
        return ExecutorError(f"--results-dir: {exc}", exit_code=1)
    if isinstance(exc, (LockingUnsupported, SlurmUnavailable)):
        return ExecutorError(str(exc), exit_code=1)
    if isinstance(exc, OSError):  # --status records the jobs Slurm ended: a read-only store, a full disk
        from cnnbench.results.space import os_error_text

        return ExecutorError(f"--results-dir {results_dir}: {os_error_text(exc, results_dir)}", exit_code=1)
    return exc


def submit_settings(args: argparse.Namespace) -> SlurmSettings:
    """The options of every job that the flags give (over the suite's block); :class:`ExecutorError` for a
    flag Slurm cannot be given."""
    try:
        words = slurm_args(args.slurm_arg, "--slurm-arg")
    except SettingsError as exc:
        raise ExecutorError(str(exc)) from None
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise ExecutorError("--max-concurrent: must be 1 or more")
    return SlurmSettings(partition=args.partition, account=args.account, qos=args.qos, constraint=args.constraint,
                         max_concurrent=args.max_concurrent, slurm_args=words)


def _handle(args: argparse.Namespace, suite: Any, results_dir: Path | str, command: str) -> int:
    from cnnbench.sweep.session import load_labelled

    suite = load_labelled(suite, args.machine_label)
    if args.status:
        return _status(suite, results_dir)
    if args.cancel:
        return _cancel(suite, results_dir)
    return _submit(suite, submit_settings(args), args, results_dir, command)


def _submit(suite: Any, settings: Any, args: argparse.Namespace, results_dir: Path | str, command: str) -> int:
    from cnnbench.sweep.slurm.submit import SlurmRequest, plan, submit_sweep

    request = SlurmRequest(suite, results_dir, settings, rerun=args.rerun)
    if getattr(args, "dry_run", False):
        for i, (unit, resources) in enumerate(plan(request), 1):
            print(f"{i:>4}  {one_line(unit.name)}  [{one_line(resources.describe())}]")
        return 0
    done = submit_sweep(request)
    for array, tasks, resources in done.arrays:
        print(f"submitted job array {array}: {plural(tasks, 'case')} ({resources.describe()})")
    settled = Counter(u.state if u.state != "done" else "recorded ok" for u in done.units if u.settled())
    left = ", ".join(f"{n} {state}" for state, n in sorted(settled.items()))
    print(f"{plural(len(done.jobs), 'case')} submitted" + (f"; left alone: {left}" if left else ""))
    follow = f"{command} --status --results-dir {shlex.quote(str(results_dir))}"
    print(f"follow with: {follow}   (or: squeue --me)")
    return 0


def _status(suite: Any, results_dir: Path | str) -> int:
    from cnnbench.sweep.slurm.submit import sweep_status

    units = sweep_status(suite, results_dir)
    for unit in units:
        print(unit.describe())
    counts = Counter(f"done ({u.status})" if u.state == "done" else u.state for u in units)
    print(f"{plural(len(units), 'case')}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 0


def _cancel(suite: Any, results_dir: Path | str) -> int:
    from cnnbench.sweep.slurm.submit import cancel_sweep

    units, refused = cancel_sweep(suite, results_dir)
    jobs = [u.job.job_id for u in units if u.job is not None]
    if not jobs:
        print("nothing to cancel: no job of this sweep is pending or running")
        return 0
    print(f"cancelled {plural(len(jobs) - len(refused), 'job')}: {' '.join(j for j in jobs if j not in refused)}")
    for job, why in refused.items():
        print(f"scancel refused {job}: {why}")
    return 1 if refused else 0


register(SlurmExecutor())
