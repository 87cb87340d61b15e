"""The Python API, for notebooks and scripts: run, read, compare and report from Python.

    import cnnbench
    record = cnnbench.run(model="resnet18", device="cpu", batch_size=8, num_batches=20)
    frame = cnnbench.read_results("results/")                 # a pandas DataFrame, dotted columns
    best = cnnbench.query('SELECT "config.model", max("metrics.total_images_per_sec") FROM runs GROUP BY 1')
    table = cnnbench.compare_results("results/before", "results/after")  # a DataFrame: a row per pair
    rep = cnnbench.make_report("results/", output="report/")              # the Report; files only with output

Each function returns a value and prints nothing unless asked (``run(progress=True)``,
``read_results(verbose=True)``); lines a store could not read are returned
(``frame.attrs["problems"]``), not printed. Invalid input raises a :class:`ValueError` (a
``ConfigError``, ``CompareError`` or ``ReportError``) whose message is the CLI's one line.
Results are the same as the CLI's: these functions call the libraries behind ``cnnbench run``,
``results export``, ``compare`` and ``report``. Importing this module does not import torch:
:func:`run` does, on its first call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

if TYPE_CHECKING:
    import pandas as pd

    from cnnbench.config import RunConfig
    from cnnbench.config.data_bench import DataBenchConfig
    from cnnbench.report.document import Report
    from cnnbench.report.options import ReportOptions
    from cnnbench.report.render.drawing import DrawingPool
    from cnnbench.results.cache import StepTimesMode
    from cnnbench.results.record import Record
    from cnnbench.study import StudyRun

__all__ = ["compare_results", "find_changes", "make_report", "query", "read_records", "read_results", "run",
           "run_config", "run_study"]

PathLike: TypeAlias = "str | os.PathLike[str]"
Results: TypeAlias = "PathLike | Sequence[PathLike] | Iterable[Mapping[str, Any]] | Iterable[Record]"
"""What :func:`compare` and :func:`report` read: a results folder or ``.jsonl`` file, a list of
them, or records (dicts as in the store, or :class:`~cnnbench.results.record.Record` objects)."""


# --- run ------------------------------------------------------------------------------------
def run_config(**options: Any) -> RunConfig:
    """The :class:`~cnnbench.config.RunConfig` of ``options`` (its field names, the CLI's flags
    with underscores), checked as ``cnnbench run`` checks its flags; raises ``ConfigError``
    naming the field at fault. No torch.

    >>> cnnbench.api.run_config(model="trivial", batch_size=4).batch_size
    4
    """
    from cnnbench.config import RunConfig

    return RunConfig.from_mapping(options)


def run(*, results_dir: PathLike | None = None, progress: bool | Callable[[str], None] = False,
        **options: Any) -> Record:
    """Run one benchmark and return its :class:`~cnnbench.results.record.Record`.

    ``options`` are :class:`~cnnbench.config.RunConfig` fields, the flags of ``cnnbench run``
    with underscores (``model``, ``batch_size``, ``num_batches``, ``device``, ``num_devices``,
    ``forward_only``, ...); an unknown or invalid one raises ``ConfigError`` before anything runs.
    ``results_dir``: when given, the record is appended to that store as ``cnnbench run
    --results-dir`` appends it, and, as the command does, the folder and its file for this machine
    are checked before anything runs (``OutputError``, a ``ValueError``); when left out, nothing
    is written. ``progress``: ``True`` prints
    the run's progress lines (tf_cnn_benchmarks' log), a callable receives each line; by default
    nothing is printed.

    A failed run (out of memory, an error, a worker that died) returns its record too: check
    ``record.status`` (``ok``, ``oom``, ``error``, ``timeout``) and ``record.error``.
    ``num_devices=2`` starts worker processes, which works from a notebook or ``python -``:
    the workers never import the caller's ``__main__``. With ``host_cpus`` this process is
    pinned to those cores for good, as ``cnnbench run --host-cpus`` is.

    >>> record = cnnbench.run(model="trivial", device="cpu", batch_size=2, num_batches=5)
    >>> record.status, record.metrics["total_images_per_sec"] > 0
    ('ok', True)
    """
    from cnnbench.config import ConfigError

    if results_dir is not None:
        if not _is_path(results_dir):
            raise ConfigError("results_dir", f"is {_given(results_dir)}; name a folder (a str or a path)")
        options["results_dir"] = os.fspath(results_dir)
    if not isinstance(progress, bool) and not callable(progress):
        raise ValueError(f"progress: is {_given(progress)}; give True, False or a function of one line")
    config = run_config(**options)
    if results_dir is None and config.profile_steps:
        raise ConfigError("profile_steps", "writes a profiler trace into the results store: give results_dir")
    emit: Callable[[str], None] | None
    if progress is True:
        emit = _print_line
    else:
        emit = progress or None
    record, _ = check_store_and_run(config, emit=emit, append=results_dir is not None)
    return record


def _print_line(line: str) -> None:
    print(line, flush=True)


def check_store_and_run(config: RunConfig, *, emit: Callable[[str], None] | None = None, append: bool = True,
                        own_process: bool = False) -> tuple[Record, Path | None]:
    """Check the results store (with ``append``), then run ``config`` (in worker processes when
    it asks for several devices, or with ``own_process``) and return its record with the store
    file it was appended to (``append=False``: nothing is checked or written, and the path is
    ``None``). The library call behind :func:`run` and ``cnnbench run``.

    >>> record, path = check_store_and_run(run_config(model="trivial", device="cpu", results_dir="results"))

    With ``append``, the store is checked before any work (``OutputError``, a ``ValueError``): a
    folder that cannot take the record, or a file of this machine's label in it that cannot
    (a symlink out of the folder, a FIFO), the label derived as the run will derive it.
    """
    if append:
        indices = config.gpu_index_list()
        from cnnbench.results.outputs import check_run_store

        check_run_store(config.results_dir, config.device, config.machine_label, indices[0] if indices else 0,
                        traces=bool(config.profile_steps))
    from cnnbench.engine import run_and_append
    from cnnbench.results.sessions import invocation

    with invocation():  # before any worker process starts, so that its record carries this invocation's id
        return run_and_append(config, emit=emit, own_process=own_process, append=append)


def measure_data(config: DataBenchConfig, *, emit: Callable[[str], None] | None = None,
                 append: bool = True) -> tuple[Record, Path | None]:
    """Measure the input pipeline of ``config`` alone (no model) on the cores it may use, and
    return its record with the store file it was appended to (``append=False``: nothing is
    written, and the path is ``None``). The library call behind ``cnnbench data``."""
    from cnnbench.engine.input_bench import run_data_benchmark
    from cnnbench.machine.affinity import host_cpus_pinned
    from cnnbench.results.store import append_record

    if append:
        from cnnbench.results.outputs import check_run_store

        check_run_store(config.results_dir, config.device, config.machine_label)
    with host_cpus_pinned(config.host_cpus):
        from cnnbench.results.sessions import invocation

        with invocation():
            record = run_data_benchmark(config, emit=emit)
    if not append:
        return record, None
    return record, append_record(config.results_dir, record.to_dict())


# --- read -----------------------------------------------------------------------------------
def read_records(paths: PathLike | Sequence[PathLike], *, where: str | Sequence[str] = (),
                 step_times: StepTimesMode = True, on_problem: Callable[[str], None] | None = None,
                 shared: bool = False) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The records of results folders or ``.jsonl`` files that meet every ``where`` condition
    (``"model=resnet*"``, ``"precision!=fp32"``: ``cnnbench results --where``), and the lines
    that could not be used (``file:line: why``; a
    :class:`~cnnbench.results.store.StoreNotice` for a record kept with a figure shown as not
    available), as ``cnnbench results`` reads them; ``on_problem`` is called with each of those
    lines as soon as the files are read (before ``where`` is checked). Raises
    ``FileNotFoundError`` for a path that is not there, ``ValueError`` for a bad condition.

    ``step_times``: ``metrics.step_times_s`` as lists (``True``), left out (``False``), or, on
    big stores, as read-only :class:`~cnnbench.results.step_summary.StepTimes` views that carry
    their summaries and make no float per step until asked (``"lazy"``: what the report reads;
    ``list(view)`` gives the list). A lazy read's records are for reading: those with equal
    ``config`` (or ``environment``) share one dict; with ``True`` or ``False`` each record has
    its own objects, to change, unless ``shared=True`` (faster and smaller on a big store, for
    a reader that changes no record).

    >>> records, problems = read_records("results/", where="model=resnet50")
    """
    from cnnbench.analysis.fields import resolve_field
    from cnnbench.results.query import parse_where, select
    from cnnbench.results.store import read_records as read_store

    given = _paths(paths)
    wheres = _texts(where, "where", ValueError)
    if step_times not in (True, False, "lazy"):
        raise ValueError(f"step_times: is {_given(step_times)}; give True, False or 'lazy'")
    records, problems = read_store(given, step_times=step_times, shared=shared)
    if on_problem is not None:
        for problem in problems:
            on_problem(problem)
    conditions = parse_where(wheres, lambda name: resolve_field(name, records))
    return select(records, conditions), list(problems)


def read_results(paths: PathLike | Sequence[PathLike] = "results", *, where: str | Sequence[str] = (),
                 step_times: bool = True, verbose: bool = False) -> pd.DataFrame:
    """A pandas DataFrame of the runs in results folders or ``.jsonl`` files: one row per run,
    the columns dotted record names (``config.model``, ``metrics.total_images_per_sec``, ...)
    in the order of ``cnnbench results export`` (its rows and columns, with values kept as
    Python values: lists for step times, ``True``/``False``).

    ``where``: conditions every run must meet, as ``--where``. ``step_times=False`` leaves out
    ``metrics.step_times_s`` (faster on a large store). A store of 256 MiB or more is read by DuckDB,
    as ``results query`` reads it (:func:`cnnbench.results.sql.runs_frame`: the same frame). A missing
    cell (a field a run does not have, or holds as null) is NaN in a column of numbers, None in any
    other. Lines that could not be read are skipped and listed in ``frame.attrs["problems"]``;
    ``verbose=True`` also prints them to stderr.

    >>> frame = cnnbench.read_results("results/quick")
    >>> frame.groupby("config.model")["metrics.total_images_per_sec"].median()
    """
    from cnnbench.results.flatten import records_frame
    from cnnbench.results.sql import runs_frame
    from cnnbench.results.store import problem_text

    def warn(problem: str) -> None:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)

    given = _paths(paths)
    wheres = _texts(where, "where", ValueError)
    read = runs_frame(given, where=wheres, step_times=step_times) if step_times in (True, False) else None
    if read is not None:
        frame, problems = read
        for problem in problems if verbose else ():
            warn(problem)
    else:
        records, problems = read_records(given, where=wheres, step_times=step_times,
                                         on_problem=warn if verbose else None)
        frame = records_frame(records)
    frame.attrs["problems"] = problems
    return frame


def query(sql: str, results: PathLike | Sequence[PathLike] = "results") -> pd.DataFrame:
    """The rows of one SQL query (DuckDB) over the runs of results folders or ``.jsonl`` files, as
    a pandas DataFrame: ``cnnbench results query``. Two views: ``runs``, one row per run with the
    dotted column names of :func:`read_results` (quote them in SQL: ``"config.model"``), and
    ``steps`` (``run_id``, ``step`` from 1, ``seconds``). Read-only and sandboxed: no file is read
    or written, no extension loaded, no setting changed. Lines that could not be read are in
    ``frame.attrs["problems"]``. Raises ``ValueError`` (a
    :class:`~cnnbench.results.sql.QueryError`, one line) for a query that cannot run, and
    ``FileNotFoundError`` for a path that is not there. Examples: ``docs/queries.md``.

    >>> cnnbench.query('SELECT "config.model", max("metrics.total_images_per_sec") AS best '
    ...                'FROM runs GROUP BY 1 ORDER BY best DESC', "results/")
    """
    from cnnbench.results.sql import Store, check_sql, views_of

    if not isinstance(sql, str):
        raise ValueError(f"sql: is {_given(sql)}; give one SQL query as text")
    check_sql(sql)
    with Store(_paths(results, "results"), views=views_of(sql)) as store:
        return store.frame(sql)


def find_changes(results: Results = "results", *, where: str | Sequence[str] = (),
                 order_by: str | None = None) -> pd.DataFrame:
    """The lasting changes of every series of runs (one machine, one configuration, in time order)
    as ``cnnbench history`` finds them, as a pandas DataFrame: one row per change, with
    ``series``, ``machine``, ``run_before`` and ``started_before`` (the last run before it),
    ``run_after`` and ``started_after`` (the first after), ``level_before`` and ``level_after``
    (images/sec), ``ratio`` (after / before: < 1 is a slowdown), ``ci_low`` and ``ci_high`` (its
    95% interval), ``p_value``, ``suspects`` (the fields that differ between the two sides, as
    text) and ``text`` (the change in one sentence). ``frame.attrs`` holds the ``outliers`` (one
    dict each), the series ``too_short`` and the runs ``left_out`` (as ``--format json``), and
    ``problems`` (unreadable lines).

    ``results``: results folders or ``.jsonl`` files (a path or a list of them), or a list of
    records; ``where`` and ``order_by`` are the command's ``--where`` and ``--order-by``.

    >>> changes = cnnbench.find_changes("results/", where="model=resnet50")
    >>> changes[changes.ratio < 0.95][["series", "started_after", "ratio", "suspects"]]
    """
    import pandas as pd

    from cnnbench.analysis.fields import FieldError, resolve_field
    from cnnbench.analysis.history import build_history
    from cnnbench.results.query import parse_where, select

    records, problems, _ = _records(results, "results", ValueError)
    wheres = _texts(where, "where", ValueError)
    if wheres:
        everything = records
        records = select(records, parse_where(wheres, lambda name: resolve_field(name, everything)))
    if order_by is not None:
        if not isinstance(order_by, str):
            raise ValueError(f"order_by: is {_given(order_by)}; give a field's name as text")
        if records:
            try:
                order_by = resolve_field(order_by, records)
            except FieldError as exc:
                raise ValueError(f"order_by: {exc}") from None
    history = build_history(records, order_by=order_by)
    columns = ["series", "machine", "run_before", "started_before", "run_after", "started_after", "level_before",
               "level_after", "ratio", "ci_low", "ci_high", "p_value", "suspects", "text"]
    rows = [(c.series, c.machine, c.before.run_id, c.before.started_at, c.after.run_id, c.after.started_at,
             c.level_before, c.level_after, c.ratio, c.low, c.high, c.p, "; ".join(x.text() for x in c.suspects),
             c.text()) for c in history.changes]
    frame = pd.DataFrame(rows, columns=columns)
    data = history.as_dict()
    frame.attrs.update(outliers=[o for s in data["series"] for o in s["outliers"]], too_short=data["too_short"],
                       left_out=data["left_out"], problems=list(problems))
    return frame


# --- arguments: a wrong type is one line naming the argument, as the commands' errors are ----------
def _given(value: Any) -> str:
    """What a wrong argument was, for its message: ``5 (an int)``, cut short."""
    if value is None or isinstance(value, bool):
        return repr(value)
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    kind = type(value).__name__
    return f"{text} ({'an' if kind[:1] in 'aeiou' else 'a'} {kind})"


def _is_path(value: Any) -> bool:
    if not isinstance(value, (str, os.PathLike)):
        return False
    try:
        return isinstance(os.fspath(value), str)
    except TypeError:  # a __fspath__ that gives no text
        return False


def _paths(paths: Any, name: str = "paths", error: Callable[[str], Exception] = ValueError) -> list[PathLike]:
    """``paths`` as a list: a path (str or ``os.PathLike``) or several; ``error`` otherwise."""
    if _is_path(paths):
        return [paths]
    if not isinstance(paths, (bytes, Mapping)) and isinstance(paths, Iterable):
        items = list(paths)
        if all(_is_path(p) for p in items):
            return items
        bad = next(p for p in items if not _is_path(p))
        raise error(f"{name}: holds {_given(bad)}; give results folders or .jsonl files (str or paths)")
    raise error(f"{name}: is {_given(paths)}; give a results folder or .jsonl file, or a list of them")


def _texts(value: Any, name: str, error: Callable[[str], Exception]) -> list[str]:
    """A text or several (``where``, ``ignore``...) as a list; ``error`` otherwise."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (bytes, Mapping)) and isinstance(value, Iterable):
        items = list(value)
        if all(isinstance(v, str) for v in items):
            return items
        value = next(v for v in items if not isinstance(v, str))
    raise error(f"{name}: is {_given(value)}; give a text or a list of texts")


def _number(value: Any, name: str, error: Callable[[str], Exception]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"{name}: is {_given(value)}; give a number")
    return float(value)


def _is_paths(results: Any) -> bool:
    if _is_path(results):
        return True
    return isinstance(results, (list, tuple)) and bool(results) and all(_is_path(r) for r in results)


def _records(results: Results, name: str, error: Callable[[str], Exception]) -> tuple[
        list[Mapping[str, Any]], list[str], str | None]:
    """Records from paths or records, the store's problem lines, and the paths' label; a
    wrong type raises ``error`` naming the argument (``name``)."""
    if _is_paths(results):
        paths = _paths(results, name, error)
        records, problems = read_records(paths, step_times="lazy")
        return records, problems, ", ".join(os.fspath(p) for p in paths)
    from cnnbench.results.record import Record

    what = "results folders or .jsonl files (a path or a list of them), or a list of records"
    if isinstance(results, (Mapping, Record)):
        raise error(f"{name}: is one record; give {what}")
    if isinstance(results, bytes) or not isinstance(results, Iterable):
        raise error(f"{name}: is {_given(results)}; give {what}")
    items = list(cast("Iterable[Any]", results))
    if any(_is_path(item) for item in items):  # paths, one of them not a path: name that one
        _paths(items, name, error)
    given: list[Mapping[str, Any]] = []
    for i, item in enumerate(items):
        if isinstance(item, Record):
            given.append(item.to_dict())
        elif isinstance(item, Mapping):
            given.append(item)
        else:
            raise error(f"{name}[{i}]: is {_given(item)}, not a record (a dict as in the store, or a Record); "
                        f"give {what}")
    return given, [], None


# --- compare --------------------------------------------------------------------------------
def compare_results(a: Results, b: Results | None = None, *, by: str | None = None, baseline: str | None = None,
                    candidate: str | None = None, ignore: Sequence[str] = (), across_machines: bool = False,
                    where: str | Sequence[str] = (), noise: float = 0.03) -> pd.DataFrame:
    """Compare two sets of results as ``cnnbench compare A B`` does, and return a pandas
    DataFrame: one row per configuration found on both sides.

    Columns, as the command's ``--format csv``: ``model``, ``batch_size``, ``configuration``,
    ``machine``, ``baseline_images_per_sec``, ``candidate_images_per_sec``, the runs and failures
    of each side, ``ratio`` (candidate over baseline; > 1: the candidate is faster), ``ci_low``
    and ``ci_high`` (its 95% interval), ``p_value``, ``test`` (``repeats``, ``steps`` or ``none``),
    ``significant``, ``verdict`` (``faster``, ``slower``, ``not significant``, ``no samples``),
    the marks and warnings, then ``fields.<name>`` for the configuration values both sides share.
    ``frame.attrs`` holds what the command prints below its table: ``geomean_ratio``,
    ``matched_on``, ``ignored``, ``unmatched`` (counts, and the fields unmatched results differ
    in), ``baseline``/``candidate`` (labels and result counts) and ``problems`` (unreadable lines).

    ``a`` is the baseline and ``b`` the candidate: results folders or ``.jsonl`` files (a path
    or a list of them), or lists of records. With ``by`` (a field: ``precision``, ``machine``,
    ...), ``a`` alone is split by that field's two values (``baseline``/``candidate`` name
    them when it has more). ``ignore``, ``across_machines``, ``where`` and ``noise`` (a fraction:
    0.03 is the CLI's ``--noise 3``) are the command's flags. Raises ``CompareError`` (a
    ``ValueError``) when nothing can be compared, with the command's message.

    >>> table = cnnbench.compare_results("results/torch-2.4", "results/torch-2.5")
    >>> table[table.verdict == "slower"][["model", "ratio", "ci_low", "ci_high", "p_value"]]
    >>> cnnbench.compare_results("results/", by="precision").attrs["geomean_ratio"]
    """
    from cnnbench.compare.build import CompareError, CompareOptions
    from cnnbench.compare.sets import compare_sets

    flags = ("ignore", "across_machines")
    for name, value in (("by", by), ("baseline", baseline), ("candidate", candidate)):
        if value is not None and not isinstance(value, str):
            raise CompareError(f"{name}: is {_given(value)}; give a field's name or value as text")
    options = CompareOptions(ignore=_texts(ignore, "ignore", CompareError), across_machines=bool(across_machines),
                             where=_texts(where, "where", CompareError), noise=_number(noise, "noise", CompareError))
    records_a, problems, label_a = _records(a, "a", CompareError)
    if by is not None:
        if b is not None:
            raise CompareError(f"by={by!r} splits one set of results; leave out b")
        result = compare_sets(records_a, options=options, by=by, baseline_value=baseline, candidate_value=candidate,
                              flags=flags)
    else:
        if b is None:
            raise CompareError("compare_results(a, b): give the candidate results b, or by=FIELD to split a")
        if baseline is not None or candidate is not None:
            raise CompareError("baseline and candidate name values of by=FIELD; without by, a is the baseline")
        records_b, problems_b, label_b = _records(b, "b", CompareError)
        problems += problems_b
        result = compare_sets(records_a, records_b, options, labels=(label_a or "baseline", label_b or "candidate"),
                              flags=flags)
    return _compare_frame(result, problems)


def _compare_frame(result: Any, problems: list[str]) -> pd.DataFrame:
    import pandas as pd

    from cnnbench.compare.build import verdict_counts
    from cnnbench.compare.render import _pair_record
    from cnnbench.results.flatten import flatten_record

    rows = [flatten_record(_pair_record(p)) for p in result.pairs]
    frame = pd.DataFrame.from_records(rows, columns=list(dict.fromkeys(c for row in rows for c in row)))
    frame.attrs.update({
        "baseline": {"label": result.baseline.label, "results": len(result.baseline.records)},
        "candidate": {"label": result.candidate.label, "results": len(result.candidate.records)},
        "split_by": result.split,
        "matched_on": list(result.matched_on),
        "ignored": list(result.ignored),
        "across_machines": result.across_machines,
        "alpha": result.alpha,
        "min_effect": result.noise,
        "geomean_ratio": result.geomean,
        "verdicts": verdict_counts(result),
        "unmatched": {"baseline": result.unmatched_base, "candidate": result.unmatched_cand,
                      "differing_fields": dict(result.why_unmatched)},
        "problems": problems,
    })
    return frame


# --- report ---------------------------------------------------------------------------------
def make_report(results: Results, output: PathLike | None = None, *, rows: str | Sequence[str] = "model",
                columns: str | Sequence[str] | None = None, observations: str | Sequence[str] | None = None,
                effects: Sequence[str] | None = None, baselines: Mapping[str, str] | None = None,
                ignore: Sequence[str] = (), include_warned: bool = False, where: str | Sequence[str] = (),
                title: str = "cnnbench report", noise: float = 0.03, max_plots: int = 8) -> Report:
    """Build the report of ``cnnbench report`` and return it (a
    :class:`~cnnbench.report.document.Report`: ``.tables``, ``.observations``, ``.warnings``,
    ``.table("throughput")``...). Files are written only when ``output`` names a folder: there
    ``summary.md``, ``report.html``, ``tables/`` and ``plots/`` (at most ``max_plots``; 0 draws
    none), as ``cnnbench report -o OUTPUT`` writes them, and with the same checks on the folder
    (made before any record is read).

    ``results``: results folders or ``.jsonl`` files, or records. The other arguments are the
    command's flags (``rows``/``columns``: field names, ``"machine,num_devices"`` or a list;
    ``observations``: kinds such as ``["fastest", "scaling"]``, ``None`` for all;
    ``effects``: ``--effect``; ``baselines``: ``{"precision": "fp32"}`` for
    ``--baseline precision=fp32``; ``noise`` a fraction). Raises ``ReportError`` (a
    ``ValueError``) for a report that cannot be made, ``OutputError`` for a folder that cannot
    take one.

    >>> rep = cnnbench.make_report("results/quick", output="report/quick")
    >>> [t.id for t in rep.tables]
    """
    from cnnbench.report import ReportOptions, build_report
    from cnnbench.report.options import ReportError
    from cnnbench.report.output import check_report_folder

    _check_report_arguments(output, title, baselines, max_plots)
    settings = _report_settings(rows, columns, observations, effects, baselines, ignore, include_warned, where,
                                title, noise, max_plots)
    out = None if output is None else check_report_folder(output)
    if out is None:
        records, problems, _ = _records(results, "results", ReportError)
        return build_report(records, ReportOptions(**settings, problems=problems))
    from cnnbench.report.render.drawing import prepare_drawing

    # the drawing processes forked before the read, as the command forks them (see cnnbench report)
    with prepare_drawing(None if max_plots else 0, reusing=out) as pool:
        records, problems, _ = _records(results, "results", ReportError)
        return _build_and_write_report(records, ReportOptions(**settings, problems=problems), out, max_plots, pool)


def _check_report_arguments(output: PathLike | None, title: Any, baselines: Any, max_plots: Any) -> None:
    """Raise ``ReportError`` (``ValueError`` for a negative ``max_plots``) for a :func:`make_report`
    argument of the wrong type."""
    from cnnbench.report.options import ReportError

    if isinstance(max_plots, bool) or not isinstance(max_plots, int):
        raise ReportError(f"max_plots: is {_given(max_plots)}; give a whole number (0 draws no plot)")
    if max_plots < 0:
        raise ValueError(f"max_plots: must be >= 0, got {max_plots}")
    if output is not None and not _is_path(output):
        raise ReportError(f"output: is {_given(output)}; name a folder (a str or a path)")
    if not isinstance(title, str):
        raise ReportError(f"title: is {_given(title)}; give a text")
    if baselines is not None and not (isinstance(baselines, Mapping) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in baselines.items())):
        raise ReportError(f"baselines: is {_given(baselines)}; give a dict of field to value, both texts")


def _report_settings(rows: Any, columns: Any, observations: Any, effects: Any, baselines: Mapping[str, str] | None,
                     ignore: Any, include_warned: bool, where: Any, title: str, noise: Any,
                     max_plots: int) -> dict[str, Any]:
    """The :class:`~cnnbench.report.ReportOptions` arguments (all but ``problems``) from
    :func:`make_report`'s; ``ReportError`` for a field list or ``noise`` of the wrong type."""
    from cnnbench.report.layout import split_fields
    from cnnbench.report.options import ReportError

    optional = {name: None if value is None else _texts(value, name, ReportError) for name, value in (
        ("columns", columns), ("observations", observations), ("effects", effects))}
    row_fields = _texts(rows, "rows", ReportError)
    ignored, wheres = _texts(ignore, "ignore", ReportError), _texts(where, "where", ReportError)
    return {
        "rows": split_fields(row_fields),
        "columns": None if columns is None else split_fields(optional["columns"] or ()),
        "observations": None if observations is None else split_fields(optional["observations"] or ()),
        "effects": optional["effects"], "baselines": dict(baselines or {}),
        "ignore": ignored, "include_warned": bool(include_warned), "where": wheres,
        "title": title, "noise": _number(noise, "noise", ReportError), "max_plots": max_plots,
    }


def _build_and_write_report(records: list[Mapping[str, Any]], options: ReportOptions, out: Path,
                            max_plots: int, pool: DrawingPool) -> Report:
    """Build the report and write it in ``out``, as ``cnnbench report`` does: each plot drawn by
    ``pool``'s processes as soon as it is known, while the rest is built."""
    from cnnbench.report import build_report, write_report

    built = build_report(records, options, on_figures=lambda figures: pool.draw_ahead(figures, out))
    write_report(built, out, plots=max_plots > 0, drawing_pool=pool)
    return built


# --- study ----------------------------------------------------------------------------------
def run_study(name: str, *, smoke: bool = False, results_dir: PathLike | None = None,
              output: PathLike | None = None, rerun: bool = False, machine_label: str | None = None,
              skip_invalid: bool = False, max_plots: int = 8, progress: bool = False) -> StudyRun:
    """Run a study end to end, as ``cnnbench study NAME`` does: its sweep (cases recorded ``ok``
    in ``results_dir`` are skipped), then its report in ``output`` (defaults ``results/NAME`` and
    ``report/NAME``, ``NAME-smoke`` with ``smoke``). ``name``: a shipped study
    (``cnnbench study --list``) or a study file. Returns the
    :class:`~cnnbench.study.StudyRun` (``.report``, ``.written``, ``.sweep``); ``progress=True``
    prints a line per case on stderr. Raises ``SuiteError`` (a ``ValueError``) for a study that
    cannot run, ``InvalidCases`` for cases this machine would refuse (unless ``skip_invalid``).

    >>> run = cnnbench.run_study("host-cpus", smoke=True)
    >>> [t.id for t in run.report.tables]
    """
    from cnnbench.study import StudyRequest, execute_study
    from cnnbench.sweep.progress import PlainReporter
    from cnnbench.sweep.suite import SuiteError

    if not _is_path(name):
        raise SuiteError(f"name: is {_given(name)}; give a shipped study's name or a study file")
    for what, value in (("results_dir", results_dir), ("output", output)):
        if value is not None and not _is_path(value):
            raise SuiteError(f"{what}: is {_given(value)}; name a folder (a str or a path)")
    if machine_label is not None and not isinstance(machine_label, str):
        raise SuiteError(f"machine_label: is {_given(machine_label)}; give a text")
    if isinstance(max_plots, bool) or not isinstance(max_plots, int):
        raise SuiteError(f"max_plots: is {_given(max_plots)}; give a whole number (0 draws no plot)")
    request = StudyRequest(study=name, smoke=smoke, results_dir=results_dir, output=output, rerun=rerun,
                           machine_label=machine_label, skip_invalid=skip_invalid, max_plots=max_plots)
    return execute_study(request, reporter=PlainReporter() if progress else None)
