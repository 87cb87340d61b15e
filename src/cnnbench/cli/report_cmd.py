"""``cnnbench report RESULTS... -o OUTDIR``: tables, scaling, effects, observations and plots.

Thin: parses flags, reads the store, calls :mod:`cnnbench.report`, prints what it wrote.
Never imports torch.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cnnbench.cli.common import UserError
from cnnbench.words import message_line

if TYPE_CHECKING:
    from pathlib import Path

    from cnnbench.report.output import Written
    from cnnbench.report.render.drawing import DrawingPool
    from cnnbench.report.reuse import Said
    from cnnbench.results.lines import StoreProblem


class _ObservationKinds:
    """The kinds of observation, as the kinds of table declare them: read when ``--help`` is
    printed (the kinds of table are heavy to load, and the command line is built for every command)."""

    def __str__(self) -> str:
        from cnnbench.report.kinds import observation_kinds

        return ", ".join(observation_kinds())


class _Observations(argparse._StoreAction):
    """``--observations``, whose help lists the kinds (``%(kinds)s``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kinds = _ObservationKinds()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="Turn results into tables, scaling, effects, observations and plots.",
        description="Write OUTDIR/summary.md (OUTDIR: -o, default report/), OUTDIR/report.html "
        "(self-contained), OUTDIR/tables/<table>.csv and .json for every table, and OUTDIR/plots/*.svg. "
        "Fields are dotted record names (config.model, environment.gpu_model, ...) or the aliases model, "
        "machine, gpu, cpu, num_devices, batch_size, data, variable_update, precision, compile, source, status.",
    )
    p.add_argument("results", nargs="+", metavar="RESULTS", help="Results folders or .jsonl files.")
    p.add_argument("-o", "--output", default="report", metavar="OUTDIR",
                   help="Folder to write the report to (default: report, in the current folder): new, empty, or "
                   "an earlier report's (whose files alone a new report replaces; it deletes nothing it did not "
                   "write).")
    p.add_argument("--rows", default="model", metavar="FIELD[,FIELD...]",
                   help="Row dimension of the per-configuration tables: any field, several joined by commas "
                   "(--rows machine,num_devices: a row per machine and device count; default: model).")
    p.add_argument("--columns", default=None, metavar="FIELD[,FIELD...]",
                   help="Column dimension of the per-configuration tables, as --rows (default: machine; model "
                   "where the rows hold the machine). A "
                   "configuration is what the rows, columns and batch size leave; --rows num_devices --columns "
                   "synthetic_location puts device, host and loader runs in one table.")
    observations = p.add_argument("--observations", action=_Observations, default=None, metavar="KIND[,KIND...]")
    # set after add_argument: Python 3.14's add_argument fills in %(kinds)s at once, which would load
    # every kind of table for every command
    observations.help = "Make only these kinds of observation: %(kinds)s (default: all)."
    p.add_argument("--effect", action="append", default=None, metavar="FIELD",
                   help="Show 'speedup from A vs B' for this field (repeatable; default: every field "
                   "that takes exactly two values).")
    p.add_argument("--baseline", action="append", default=[], metavar="FIELD=VALUE",
                   help="Value the other values of FIELD are compared with in effect tables.")
    p.add_argument("--ignore", nargs="+", action="extend", default=[], metavar="FIELD",
                   help="Fields results may differ in and still pair in effect tables, e.g. --effect precision "
                   "--ignore batch_size when fp16 ran twice the fp32 batch (the table's caption names them).")
    p.add_argument("--include-warned", action="store_true",
                   help="Let cells whose runs recorded warnings (busy machine, throttling, ...) into the "
                   "observations; they are always in the tables, marked.")
    p.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                   help="Keep only matching results: FIELD=V, FIELD=V1,V2 (any of), FIELD!=V; "
                   "repeatable (all must hold).")
    p.add_argument("--predict", action="store_true",
                   help="Show cnnbench predict's images/sec, efficiency and bound beside each scaling series "
                   "(from its 1-device run), and observe where measured scaling falls short of it.")
    p.add_argument("--title", default="cnnbench report", metavar="T", help="Report title.")
    p.add_argument("--noise", default="3", metavar="PCT",
                   help="Differences under PCT percent are never called significant (default 3); larger ones "
                   "must also pass the t-test on repeats or step times.")
    p.add_argument("--max-plots", type=int, default=8, metavar="N",
                   help="Draw at most N plots (default 8: scaling first, then training curves, then throughput).")
    p.add_argument("--no-plots", action="store_true", help="Draw no plots (same as --max-plots 0).")
    p.add_argument("--rebuild", action="store_true",
                   help="Make the report even when OUTDIR already holds it: by default a report of unchanged "
                   "results files, with the same options and the same cnnbench, is not made again.")
    p.set_defaults(handler=handle)


def parse_noise(text: str, flag: str = "--noise") -> float:
    """``3`` or ``3%`` -> 0.03."""
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise UserError(f"{flag}: expected a percentage such as 3 or 3%, got {text!r}") from None
    if not 0 <= value < 100:
        raise UserError(f"{flag}: must be between 0 and 100 percent, got {text!r}")
    return value / 100


def parse_baselines(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--baseline {item!r}: expected FIELD=VALUE")
        out[name.strip()] = value
    return out


def handle(args: argparse.Namespace) -> int:
    if args.max_plots < 0:
        raise UserError(f"--max-plots: must be >= 0, got {args.max_plots}")
    from cnnbench.report.folder import check_report_folder
    from cnnbench.report.reuse import inputs_key, up_to_date
    from cnnbench.results.outputs import OutputError

    try:
        out = check_report_folder(args.output)  # before any work
        key = inputs_key(args.results, report_options(args))
    except OutputError as exc:
        raise UserError(str(exc)) from None
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    said = None if args.rebuild or key is None else up_to_date(out, key)
    if said is not None:
        for line in said.warnings:  # the manifest's, a file of the folder's: shown as text, never as escapes
            print(message_line(line), file=sys.stderr)
        print(f"up to date, not written again (the same results files, options and cnnbench; --rebuild makes it "
              f"again): {_done(out, said)}")
        for line in said.more:
            print(message_line(line))
        return 0
    from cnnbench.report.render.drawing import prepare_drawing

    # the drawing processes import matplotlib while the store is read and the tables are built
    # (unless the folder's plots may all be kept: then only once a plot needs drawing); forked
    # before the read, so that the records are not the parent's to copy page by page as it writes
    # them (forked after the read of 10,000 runs, they made the report's build 0.2 s slower)
    with prepare_drawing(0 if args.no_plots or not args.max_plots else None, reusing=out) as drawing_pool:
        records, problems = _read(args.results)
        said, written = _report(args, out, records, problems, drawing_pool)
    if key is not None:
        from cnnbench.report.reuse import remember

        remember(out, key, said, written.outputs)
    return 0


def _done(out: Path, said: Said) -> str:
    """What a report holds, in a few words."""
    from cnnbench.report.folder import HTML, SUMMARY
    from cnnbench.words import plural

    return (f"{out / SUMMARY} and {HTML}: {plural(said.tables, 'table')} (csv+json in {out / 'tables'}), "
            f"{plural(said.plots, 'plot')}, from {plural(said.results, 'result')}")


def report_options(args: argparse.Namespace) -> dict[str, object]:
    """The options a report is made with: every flag but the folder, ``--rebuild`` and ``-v``."""
    return {name: value for name, value in sorted(vars(args).items())
            if name not in ("handler", "output", "rebuild", "verbose") and not callable(value)}


def _read(results: list[str]) -> tuple[list[dict[str, Any]], list[StoreProblem]]:
    from cnnbench.results.store import read_records

    try:
        return read_records(results, step_times="lazy")  # the significance test, the spread marks
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None


def _report(args: argparse.Namespace, out: Path, records: list[dict[str, Any]], problems: list[StoreProblem],
            drawing_pool: DrawingPool) -> tuple[Said, Written]:
    from cnnbench.report import NoMatchingRecords, ReportError, ReportOptions, build_report, write_report
    from cnnbench.report.layout import split_fields
    from cnnbench.report.reuse import Said
    from cnnbench.results.outputs import OutputError
    from cnnbench.results.store import StoreNotice, problem_text
    from cnnbench.words import plural

    warnings = [f"warning: {problem_text(problem)}" for problem in problems]
    for line in warnings:
        print(line, file=sys.stderr)
    if not records:  # bad input, as history and compare say it (none left by --where is exit 1, below)
        raise UserError(f"no results to read in {' '.join(args.results)}; nothing written")
    try:
        options = ReportOptions(
            rows=split_fields(args.rows),
            columns=None if args.columns is None else split_fields(args.columns),
            observations=None if args.observations is None else split_fields(args.observations),
            effects=args.effect,
            baselines=parse_baselines(args.baseline),
            ignore=args.ignore,
            include_warned=args.include_warned,
            where=args.where,
            title=args.title,
            noise=parse_noise(args.noise),
            max_plots=0 if args.no_plots else args.max_plots,
            predict=args.predict,
            problems=[str(p) for p in problems],
        )
        # the plots known early are drawn while the effect tables and the observations are made
        report = build_report(records, options, on_figures=lambda figures: drawing_pool.draw_ahead(figures, out))
    except NoMatchingRecords as exc:
        raise UserError(f"{exc}; nothing written", exit_code=1) from None
    except ReportError as exc:
        raise UserError(str(exc)) from None
    for line in report.warnings:
        warnings.append(f"warning: {line}")
        print(warnings[-1], file=sys.stderr)
    try:
        written = write_report(report, out, drawing_pool=drawing_pool)
    except OutputError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:  # a full disk: one line naming the folder and its free space
        from cnnbench.results.space import os_error_text

        raise UserError(f"-o {out}: cannot write the report: {os_error_text(exc, out)}", exit_code=1) from None
    more = []
    skipped = sum(not isinstance(p, StoreNotice) for p in problems)
    if skipped:
        more.append(f"skipped {plural(skipped, 'unreadable line')}; listed at the end of the report")
    if len(problems) > skipped:
        more.append(f"{plural(len(problems) - skipped, 'record')} with figures shown as not available (or text that "
                    "is not Unicode shown as \ufffd); listed at the end of the report")
    said = Said(len(written.tables) // 2, len(written.plots), report.n_records, tuple(more), tuple(warnings))
    print(f"wrote {_done(written.outdir, said)}")
    for line in more:
        print(line)
    return said, written
