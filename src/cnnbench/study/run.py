"""Running a study end to end (:func:`execute_study`): its data set, its sweep, its report.

The sweep is :func:`cnnbench.sweep.session.run_sweep`, as ``cnnbench sweep`` runs it (cases
already recorded ``ok`` in the results folder are skipped, so an interrupted study continues
where it stopped; two runs of one study share the work). The report is
:func:`cnnbench.report.build_report` of the records in the results folder that this study
wrote, or that came from no suite (runs added with ``cnnbench run`` or ``cnnbench import``:
another implementation's figures), with the study's layout.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.report import ReportOptions, build_report, write_report
from cnnbench.report.document import Report
from cnnbench.report.output import Written, check_report_folder
from cnnbench.study.recipe import DataSetRecipe, Study, StudyError, StudyLayout, load_study
from cnnbench.sweep.outcomes import Reporter
from cnnbench.sweep.session import SweepRequest, SweepRun, run_sweep


@dataclass(frozen=True)
class StudyRequest:
    """Which study to run, at which size, and where its records and report go."""

    study: str
    """A shipped study's name (``cnnbench study --list``) or a study file."""
    smoke: bool = False
    """Its smoke size (minutes on 2 CPU cores) instead of its full size."""
    results_dir: str | os.PathLike[str] | None = None
    """Default: ``results/<study>`` (``results/<study>-smoke`` with ``smoke``)."""
    output: str | os.PathLike[str] | None = None
    """The report's folder; default: ``report/<study>`` (``report/<study>-smoke``)."""
    rerun: bool = False
    machine_label: str | None = None
    skip_invalid: bool = False
    max_plots: int = 8


@dataclass
class StudyRun:
    """What :func:`execute_study` did."""

    study: Study
    results_dir: Path
    outdir: Path
    sweep: SweepRun | None
    """None for a report of what is recorded (:func:`report_study`)."""
    report: Report | None = None
    """None when the sweep was interrupted (no report is written then)."""
    written: Written | None = None
    problems: list[str] = field(default_factory=list)
    """Lines of the results folder that could not be read (listed at the end of the report too)."""


def prepare(request: StudyRequest, *, writing: bool = True) -> tuple[Study, Path, Path]:
    """The study at its size, its results folder and its report folder (checked, nothing written;
    ``writing``: the results folder must take records, else only be there)."""
    from cnnbench.results.outputs import DATA, TRACES, check_results_dir

    study = load_study(request.study, smoke=request.smoke)
    results_dir = Path(request.results_dir) if request.results_dir is not None else Path("results") / study.name
    if writing:  # a symlink loop, a FIFO, a folder that cannot be written in: one line, before its data is looked at
        traces = any(case.config.profile_steps for case in study.suite.cases)  # before its data set is made
        check_results_dir(results_dir, uses=[*([DATA] if study.dataset is not None else ()),
                                             *([TRACES] if traces else ())])
    elif not results_dir.is_dir():
        raise StudyError(f"{results_dir}: no results folder; run the study first (its --results-dir)")
    if study.dataset is not None:  # its folder lies in the results folder: read the study again with it
        study = load_study(request.study, smoke=request.smoke, data_root=results_dir / "data")
    outdir = Path(request.output) if request.output is not None else Path("report") / study.name
    check_report_folder(outdir)
    return study, results_dir, outdir


def execute_study(request: StudyRequest, *, reporter: Reporter | None = None,
              on_invalid: Callable[[str], None] | None = None,
              on_dataset: Callable[[Path], None] | None = None, drawing_pool: Any = None) -> StudyRun:
    """Make the study's data set (once), run its sweep, then write its report.

    Raises what :func:`~cnnbench.sweep.session.run_sweep` raises, ``StudyError`` for a study that
    cannot run (a data set that cannot be made too), ``OutputError`` for a report folder that cannot
    take it, and ``ReportError`` for a layout the records cannot take.
    """
    study, results_dir, outdir = prepare(request)
    prepare_data(study, results_dir, on_dataset)
    sweep = run_sweep(SweepRequest(suite=study.suite, results_dir=results_dir, rerun=request.rerun,
                                   machine_label=request.machine_label, skip_invalid=request.skip_invalid),
                      reporter=reporter, on_invalid=on_invalid)
    run = StudyRun(study, results_dir, outdir, sweep)
    if sweep.result is not None and sweep.result.interrupted_by is not None:
        return run
    return _write_report(run, request.max_plots, drawing_pool)


def report_study(request: StudyRequest, *, drawing_pool: Any = None) -> StudyRun:
    """Write the study's report from what its results folder holds, running nothing: for a study whose
    cases ran elsewhere (``cnnbench study NAME --executor slurm``, then ``--report-only``)."""
    study, results_dir, outdir = prepare(request, writing=False)
    return _write_report(StudyRun(study, results_dir, outdir, None), request.max_plots, drawing_pool)


def prepare_data(study: Study, results_dir: Path, on_dataset: Callable[[Path], None] | None = None) -> None:
    """Make the study's data set in its results folder, where it has one (once)."""
    if study.dataset is not None:
        folder = make_dataset(study.dataset, results_dir / "data")
        if on_dataset is not None:
            on_dataset(folder)


def _write_report(run: StudyRun, max_plots: int, drawing_pool: Any) -> StudyRun:
    from cnnbench.results.store import read_records

    records, problems = read_records([run.results_dir], step_times="lazy")
    run.problems = [str(p) for p in problems]
    mine = study_records(records, run.study.name)
    ahead = None if drawing_pool is None else lambda figures: drawing_pool.draw_ahead(figures, run.outdir)
    run.report = build_report(mine, report_options(run.study.layout, mine, max_plots=max_plots,
                                                   problems=run.problems), on_figures=ahead)
    run.written = write_report(run.report, run.outdir, plots=max_plots > 0, drawing_pool=drawing_pool)
    return run


def make_dataset(recipe: DataSetRecipe, root: Path) -> Path:
    """The study's generated data set under ``root`` (its ``data/`` folder in its results folder,
    ``root``'s parent), made unless it is there already. ``root`` and the data set's folder in it
    are cnnbench's own folders in the store: each must be a real folder, never a symlink (someone
    else's, sending the data set elsewhere): ``StudyError``, in one line."""
    from cnnbench.data.generate import GenerateError, make_data_set
    from cnnbench.results import files, space

    folder = recipe.folder(root)
    try:
        files.real_folder_inside(root.parent, root.name)
        files.check_folders(root.parent, root.name, folder.name)
        if folder.is_dir() and any(folder.iterdir()):
            return folder.resolve()
        options = dict(recipe.options)
        size = options.pop("image_size", None)
        make_data_set(recipe.kind, folder, image_size=(size, size) if size else None, inside=root.parent, **options)
    except (GenerateError, files.FileProblem) as exc:
        raise StudyError(f"make_dataset: {exc}") from None
    except OSError as exc:  # a full disk or quota, a read-only store, a rename refused
        raise StudyError(f"make_dataset: {space.os_error_text(exc, folder.parent)}") from None
    return folder.resolve()


def study_records(records: Sequence[Mapping[str, Any]], suite_name: str) -> list[Mapping[str, Any]]:
    """The records of the study's sweep, and those of no sweep (imported, or added with ``cnnbench run``)."""
    return [r for r in records if r.get("suite_name") in (None, suite_name)]


def report_options(layout: StudyLayout, records: Sequence[Mapping[str, Any]], **more: Any) -> ReportOptions:
    """The report options of ``layout``. A row, column or effect field that holds one value in every
    record (one machine, one implementation; none at all, in records imported from elsewhere) is left
    out, as long as one row and one column field remain."""
    rows, columns = _varying(layout.rows, records), _varying(layout.columns, records)
    effects = None if layout.effects is None else _varying(layout.effects, records)
    return ReportOptions(rows=rows or layout.rows[:1], columns=columns or layout.columns[:1], effects=effects,
                         baselines={k: v for k, v in layout.baselines.items() if _varying((k,), records)},
                         ignore=_varying(layout.ignore, records), observations=layout.observations,
                         title=layout.title, **more)


def _varying(names: Sequence[str], records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The fields of ``names`` that hold more than one value over ``records``."""
    kept = []
    for name in names:
        try:
            dotted = F.resolve_field(name, records)
        except F.FieldError:
            continue  # in no record: one value (none); the study file's names were checked when it was read
        if len({F.hashable(F.get_value(r, dotted)) for r in records}) > 1:
            kept.append(name)
    return tuple(kept)
