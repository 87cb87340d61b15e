"""``cnnbench sweep SUITE --executor slurm``: submit a suite's cases as Slurm job arrays, and return.

Every case is checked before anything is submitted (its resources: a device count that does not
divide over its nodes is refused; the results folder and its locks). What is neither recorded ok
nor pending or running is submitted (a re-run submits the rest; a case preempted on its first
attempt once more); cases with the same resources share one job array, at most ``max_concurrent``
tasks at once (Slurm's ``%N``). The job ids go to ``<results>/.slurm/jobs.jsonl``, submitit's own
files beside them. ``--status`` and ``--cancel`` (:mod:`~cnnbench.sweep.slurm.follow`) read them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.results.stamps import now_iso
from cnnbench.sweep.slurm.follow import Unit, active_jobs, follow, units_of
from cnnbench.sweep.slurm.job import JobSpec, environment_here, run_job
from cnnbench.sweep.slurm.ledger import JobEntry, append_jobs, check_ledger, check_submitit_folder, slurm_folder
from cnnbench.sweep.slurm.resources import Resources, case_resources
from cnnbench.sweep.slurm.settings import ExecutorBlock, SlurmSettings, parse_executor
from cnnbench.sweep.slurm.states import cancel, slurm_words, trouble
from cnnbench.sweep.suite import Suite, SuiteError

INSTALL_HINT = "pip install 'cnnbench[slurm]'"


class SubmitError(ValueError):
    """The sweep cannot be submitted; one line naming the cause (nothing was submitted)."""


@dataclass(frozen=True)
class SlurmRequest:
    """What to submit, and how (the command line's options win over the suite's ``executor:`` block)."""

    suite: Suite
    results_dir: str | os.PathLike[str] = "results"
    settings: SlurmSettings = field(default_factory=SlurmSettings)
    rerun: bool = False


@dataclass
class Submitted:
    """What :func:`submit_sweep` did."""

    units: list[Unit]
    jobs: list[JobEntry] = field(default_factory=list)
    arrays: list[tuple[str, int, Resources]] = field(default_factory=list)
    """(array job id, tasks, resources) of each job array submitted."""

    def count(self, state: str) -> int:
        return sum(1 for u in self.units if u.state == state)


def executor_block(suite: Suite) -> ExecutorBlock:
    return parse_executor(getattr(suite, "executor", None))


def plan(request: SlurmRequest) -> list[tuple[Unit, Resources]]:
    """Every unit and its resources; :class:`SubmitError` for the first that cannot be asked for."""
    from cnnbench.sweep.slurm.resources import ResourceError

    block = executor_block(request.suite)
    out = []
    for unit in units_of(request.suite, block.labels_for):
        settings = request.settings.over(block.for_label(unit.label))
        try:
            out.append((unit, case_resources(request.suite, unit.case, settings)))
        except ResourceError as exc:
            raise SubmitError(str(exc)) from None
    return out


def submit_sweep(request: SlurmRequest, *, submit: Callable[..., list[JobEntry]] | None = None) -> Submitted:
    """Submit what is left of the suite (see the module documentation)."""
    from cnnbench.results.locking import check_locking
    from cnnbench.results.outputs import TRACES, check_results_dir

    planned = plan(request)
    _need_submitit()
    labels = {u.label or u.case.config.machine_label for u, _ in planned}
    check_results_dir(request.results_dir, labels,
                      uses=[TRACES] if any(u.case.config.profile_steps for u, _ in planned) else ())
    check_locking(request.results_dir)
    check_submitit_folder(request.results_dir)  # before any work; and again just before submitit writes
    check_ledger(request.results_dir)
    units = [u for u, _ in planned]
    follow(request.suite, units, request.results_dir)
    result = Submitted(units)
    groups: dict[Resources, list[Unit]] = {}
    for unit, resources in planned:
        if not unit.settled() or (request.rerun and unit.state not in ("pending", "running")):
            groups.setdefault(resources, []).append(unit)
    for resources, group in groups.items():
        entries = (submit or _submit_array)(request, resources, group)
        append_jobs(request.results_dir, entries)
        result.jobs += entries
        result.arrays.append((entries[0].job_id.split("_")[0], len(entries), resources))
    return result


def _need_submitit() -> None:
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise SubmitError(f"--executor slurm needs submitit ({INSTALL_HINT})") from None
    if shutil.which("sbatch") is None:
        raise SubmitError("--executor slurm: sbatch is not on PATH (run this on a login node of a Slurm cluster)")


def _submit_array(request: SlurmRequest, resources: Resources, group: list[Unit]) -> list[JobEntry]:
    """One job array of ``group`` through submitit; its entries, in the group's order."""
    import submitit

    suite = request.suite
    results_dir = str(Path(request.results_dir).resolve())
    check_submitit_folder(results_dir)  # submitit writes by path: never through a link of the store
    executor = submitit.SlurmExecutor(folder=slurm_folder(results_dir) / "submitit" / "%j", max_num_timeout=0)
    concurrent = request.settings.max_concurrent or executor_block(suite).default.max_concurrent or len(group)
    executor.update_parameters(job_name=f"cnnbench-{suite.name}"[:64], array_parallelism=concurrent,
                               stderr_to_stdout=True, **resources.submitit_parameters())
    submitter = environment_here()
    specs = [JobSpec(dataclasses.replace(suite, cases=(unit.case,)), results_dir, unit.label, submitter,
                     resources.partition) for unit in group]
    try:  # (submitit prints sbatch's complaint to stderr: it is said once, in the one line below)
        with _nothing_left_behind(Path(executor.folder).parent), contextlib.redirect_stderr(io.StringIO()):
            jobs = executor.map_array(run_job, specs)
    except Exception as exc:  # Slurm cannot be used here, or sbatch refused (a partition that does not exist)
        cause = trouble("sbatch", str(exc))
        raise SubmitError(f"--executor slurm: {cause}" if cause else
                          f"sbatch refused the job array: {slurm_words(str(exc)) or type(exc).__name__}") from None
    stamp = now_iso()
    return [JobEntry(suite=suite.name, key=unit.case.key, label=unit.label, job_id=str(job.job_id),
                     attempt=_attempt(unit), submitted_at=stamp, folder=str(job.paths.folder))
            for unit, job in zip(group, jobs, strict=True)]


def _attempt(unit: Unit) -> int:
    """A preempted case's next job is its second attempt; anything else starts again at 1."""
    return unit.job.attempt + 1 if unit.job is not None and unit.state == "preempted" else 1


_SUBMITIT_TEMPORARY = re.compile(r"[0-9a-f]{32}\.pkl|\.submission_file_[0-9a-f]{32}\.sh")
"""What submitit writes before sbatch gives a job id: a pickle per case and the job script."""


@contextlib.contextmanager
def _nothing_left_behind(folder: Path) -> Iterator[None]:
    """On an error, remove what submitit made in ``folder`` before sbatch answered (its pickles and job
    script: only new names of its making) and the folders it made for them (``.slurm/submitit``,
    ``.slurm``) when they are empty, so that a failed submit leaves the store as it was."""
    made = [f for f in (folder, folder.parent) if not os.path.lexists(f)]
    before = set(_names(folder))
    try:
        yield
    except Exception:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                for name in set(_names(fd)) - before:
                    if _SUBMITIT_TEMPORARY.fullmatch(name):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(name, dir_fd=fd)
            finally:
                os.close(fd)
        for made_here in made:  # the deepest first; one that is not empty stays
            with contextlib.suppress(OSError):
                os.rmdir(made_here)
        raise


def _names(folder: Path | int) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def sweep_status(suite: Suite, results_dir: str | os.PathLike[str]) -> list[Unit]:
    """Where every case stands (recording Slurm's failures), for ``--status``."""
    block = executor_block(suite)
    return follow(suite, units_of(suite, block.labels_for), results_dir)


def cancel_sweep(suite: Suite, results_dir: str | os.PathLike[str]) -> tuple[list[Unit], dict[str, str]]:
    """``scancel`` the sweep's pending and running jobs, and nothing else; (those units, scancel's refusals)."""
    units = sweep_status(suite, results_dir)
    active = [u for u in units if u.state in ("pending", "running")]
    return active, dict(cancel(active_jobs(active)))


def parse_slurm_args(words: list[str]) -> dict[str, Any]:
    from cnnbench.sweep.slurm.settings import slurm_args

    return slurm_args(words, "--slurm-arg")


__all__ = ["SlurmRequest", "SubmitError", "Submitted", "SuiteError", "cancel_sweep", "submit_sweep", "sweep_status"]
