"""``cnnbench results``: look at a results store (``list``), flatten it into a table (``export``),
ask it in SQL (``query``) or fold stores into one (``merge``).

Unreadable lines (a truncated last line after a crash, a malformed one) are reported
with their file and line and skipped; the files are never modified.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cnnbench.cli.common import CliParser, UserError
from cnnbench.results import fields as F
from cnnbench.words import one_line, plural

if TYPE_CHECKING:
    from cnnbench.results.engine import Exported

LIST_COLUMNS = tuple((name, F.field(name).label) for name in (
    "started_at", F.MACHINE, "case_name", F.MODEL, F.BATCH, F.PRECISION, F.DATA_FORMAT, F.FORWARD_ONLY, "status",
    F.IPS))
"""``results list``'s columns: each field with its registry label."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("results", help="List or export the runs in a results store.",
                       description="Look at a results store (list), flatten it into one table (export) or ask "
                       "it in SQL (query). Unreadable lines are reported with their file and line and skipped; "
                       "files are never modified.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=CliParser)
    actions.required = True

    ls = actions.add_parser("list", help="Show runs as a table.", description="Show runs as a table, newest last.")
    ls.add_argument("results", nargs="*", default=["results"], metavar="DIR",
                    help="Results folders or .jsonl files (default: results).")
    _add_where(ls)
    ls.add_argument("--limit", type=int, default=50, metavar="N",
                    help="Show the newest N runs (default 50; 0 = all).")
    ls.set_defaults(handler=handle_list)

    ex = actions.add_parser("export", help="Write runs as one flat table (dotted column names).",
                            description="Write runs as a flat table whose columns are dotted record "
                            "field names (config.model, metrics.total_images_per_sec, ...).")
    ex.add_argument("results", nargs="+", metavar="DIR", help="Results folders or .jsonl files.")
    ex.add_argument("--format", required=True, choices=("csv", "parquet", "json"), help="Output format.")
    ex.add_argument("-o", "--output", metavar="FILE",
                    help="Output file (default: standard output; required for parquet).")
    ex.add_argument("--no-step-times", action="store_true", help="Leave out metrics.step_times_s (smaller, faster).")
    _add_where(ex)
    ex.set_defaults(handler=handle_export)

    qu = actions.add_parser("query", help="Run SQL over the runs (view runs) and their step times (view steps).",
                            description="Run one SQL query (DuckDB) over two views of the stores: runs, one row per "
                            "run with the dotted column names of 'results export' (quote them: "
                            "\"config.model\"), and steps (run_id, step, seconds). Read-only: no file can be read "
                            "or written and no setting changed. Examples: docs/queries.md.")
    qu.add_argument("sql", metavar="SQL", help="One query, e.g. 'SELECT \"config.model\", "
                    "max(\"metrics.total_images_per_sec\") FROM runs GROUP BY 1'.")
    qu.add_argument("results", nargs="*", default=["results"], metavar="DIR",
                    help="Results folders or .jsonl files (default: results).")
    qu.add_argument("--format", choices=("table", "csv", "json"), default="table",
                    help="table (default), csv (formula-safe), or json (a list of objects).")
    qu.set_defaults(handler=handle_query)

    mg = actions.add_parser("merge", help="Fold stores into one, each run once (by run id).",
                            description="Append the runs of the sources that DIR lacks, each once (deduplicated by "
                            "run id): stores written to node-local storage, several files of one machine label. "
                            "Sources are never modified; merging twice adds nothing.")
    mg.add_argument("sources", nargs="+", metavar="SRC", help="Results folders or .jsonl files.")
    mg.add_argument("--into", required=True, metavar="DIR", help="The results folder to append to (made if missing).")
    mg.add_argument("--dry-run", action="store_true", help="Count what would be appended; write nothing.")
    mg.set_defaults(handler=handle_merge)


def _add_where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                   help="Keep runs whose field has this value: config.model=resnet* (shell wildcards), "
                   "model=resnet18,resnet50 (any of), precision!=fp32 (not). Dotted record names, their "
                   "aliases (model, machine, gpu, ...) or a bare name found in config, environment or "
                   "metrics. Repeat to require several.")


def _load(paths: Sequence[str], where: Sequence[str], step_times: bool,
          warn: bool = True) -> tuple[list[Mapping[str, Any]], int]:
    """The matching records (:func:`cnnbench.api.read_records`; equal sections shared: these
    commands change no record), and how many lines were skipped (each named, with ``warn``)."""
    from cnnbench.api import read_records
    from cnnbench.results.store import problem_text

    def named(problem: str) -> None:
        if warn:
            print(f"warning: {problem_text(problem)}", file=sys.stderr)

    try:
        records, problems = read_records(list(paths), where=where, step_times=step_times, on_problem=named,
                                         shared=True)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:  # a malformed --where, or a FieldError naming the nearest fields
        raise UserError(f"--where: {exc}") from None
    return records, len(problems)


def _text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return one_line(str(value))


def _newest(paths: Sequence[str], where: Sequence[str], limit: int) -> tuple[list[dict[str, Any]], int]:
    """The newest ``limit`` runs (flat) that meet ``where``, and how many do; each unreadable line warned of."""
    from cnnbench.analysis.fields import resolve_field
    from cnnbench.results.engine import newest_runs
    from cnnbench.results.store import problem_text

    def warn(problem: str) -> None:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)

    fields = [name for name, _ in LIST_COLUMNS] + ["kind", "config.bytes", "config.collective", F.BUSBW]
    try:
        found = newest_runs(list(paths), fields, resolve=resolve_field, where=where, limit=limit, on_problem=warn)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:  # a malformed --where, or a FieldError naming the nearest fields
        raise UserError(f"--where: {exc}") from None
    return found.rows, found.total


def handle_list(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise UserError(f"--limit: must be >= 0 (0 shows all), got {args.limit}")
    rows, total = _newest(args.results, args.where, args.limit)

    from rich.table import Table
    from rich.text import Text

    from cnnbench.terminal import print_table

    table = Table(show_lines=False, header_style="bold")
    for col, title in LIST_COLUMNS:
        table.add_column(title, justify="right" if col in (F.BATCH, F.IPS) else "left")
    styles = {"ok": "green", "oom": "yellow", "error": "red", "timeout": "magenta"}
    names = [c for c, _ in LIST_COLUMNS]
    for row in rows:
        cells = [_text(row.get(col)) for col in names]
        if row.get("kind") == "comm":  # cnnbench comm: what it timed, where a run names its model
            cells[names.index(F.MODEL)] = one_line(_comm_text(row))
        cells[0] = cells[0][:16].replace("T", " ")  # minutes are enough to tell runs apart
        status = str(row.get("status"))
        if status != "ok":  # a failed run has no figure, whatever a line written by hand or merged in holds
            cells[names.index(F.IPS)] = "—"
        # a record's text is text, never rich's markup ("[/b]" raised): a Text where it could read so
        texts: list[str | Text] = [Text(c) if "[" in c else c for c in cells]
        texts[names.index("status")] = Text(one_line(status), style=styles.get(status, "white"))
        table.add_row(*texts)
    console = print_table(table)
    count = f"{len(rows)} of {plural(total, 'run')}" if len(rows) < total else plural(total, "run")
    hint = " (newest shown; --limit 0 for all)" if len(rows) < total else ""
    console.print(f"{count}{hint}")
    return 0


def handle_query(args: argparse.Namespace) -> int:
    from cnnbench.results.sql import QueryError, run_query
    from cnnbench.results.store import problem_text

    try:
        result = run_query(args.sql, args.results)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    except QueryError as exc:
        raise UserError(f"query: {exc}") from None
    for problem in result.problems:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)
    _print_query(result, args.format)  # `| head`: the rest goes nowhere (cli.output_dropped_once_its_reader_goes)
    return 0


def _print_query(result: Any, fmt: str) -> None:
    from cnnbench.results.sql import cell_value, unique_names

    if fmt == "csv":
        from cnnbench.results.csv_out import CsvWriter

        writer = CsvWriter(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        for row in result.rows:
            writer.writerow([cell_value(v, text=True) for v in row])
        return
    if fmt == "json":
        import json

        import orjson

        keys = unique_names(result.columns)
        for index, row in enumerate(result.rows):
            cells = dict(zip(keys, map(cell_value, row), strict=True))
            try:
                item = orjson.dumps(cells).decode()
            except TypeError:  # an integer beyond 64 bits (HUGEINT): the standard library writes it
                item = json.dumps(cells, ensure_ascii=False, separators=(",", ":"))
            sys.stdout.write(("[" if index == 0 else " ") + item + ("]\n" if index == len(result.rows) - 1 else ",\n"))
        if not result.rows:
            sys.stdout.write("[]\n")
        return
    from rich.table import Table
    from rich.text import Text

    from cnnbench.terminal import print_table

    table = Table(show_lines=False, header_style="bold")
    numeric = [t in ("BIGINT", "INTEGER", "DOUBLE", "FLOAT", "HUGEINT", "SMALLINT", "TINYINT", "UBIGINT")
               or t.startswith("DECIMAL") for t in result.types]
    for name, right in zip(result.columns, numeric, strict=False):  # a column's name is text, never markup
        table.add_column(Text(one_line(str(name))), justify="right" if right else "left")
    for row in result.rows:
        table.add_row(*(Text(_query_text(v)) for v in row))
    console = print_table(table)
    console.print(plural(len(result.rows), "row"))


def _query_text(value: Any) -> str:
    """A cell of ``results query``'s table, as it shows (on one line: :func:`~cnnbench.words.one_line`)."""
    from cnnbench.results.sql import cell_value

    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = cell_value(value, text=True)
    return one_line(text if isinstance(text, str) else str(text))


def handle_merge(args: argparse.Namespace) -> int:
    from cnnbench.results.lines import StoreNotice
    from cnnbench.results.merge import MergeError, merge_stores
    from cnnbench.results.space import NoSpace
    from cnnbench.results.store import problem_text

    try:
        result = merge_stores(args.sources, args.into, write=not args.dry_run)
    except MergeError as exc:
        raise UserError(str(exc)) from None
    except NoSpace as exc:  # a full disk, in one line: the file it was appending to is left as it was
        raise UserError(f"--into {args.into}: cannot append: {exc}; merge again once there is room (runs "
                        "already appended are not added twice)", exit_code=1) from None
    except OSError as exc:  # a file of the store swapped meanwhile (a FIFO, a link out of it), a folder gone
        raise UserError(f"--into {args.into}: cannot append: {files_text(exc)}", exit_code=1) from None
    for problem in result.problems:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)
    verb = "would append" if args.dry_run else "appended"
    skipped = [p for p in result.problems if not isinstance(p, StoreNotice)]  # a notice's record was kept
    noticed = len(result.problems) - len(skipped)
    print(f"{verb} {plural(len(result.written), 'run')} to {args.into}; {result.already} already there or repeated"
          + (f"; {plural(len(skipped), 'unreadable line')} skipped" if skipped else "")
          + (f"; {plural(noticed, 'line')} read with values replaced (named above)" if noticed else ""))
    return 0


def files_text(exc: OSError) -> str:
    """An ``OSError`` in one line: a :class:`~cnnbench.results.files.FileProblem` names its path
    itself; any other, its path and the system's words."""
    from cnnbench.results.files import FileProblem

    if isinstance(exc, FileProblem) or not exc.filename:
        return str(exc) if isinstance(exc, FileProblem) else str(exc.strerror or exc)
    return f"{exc.filename}: {exc.strerror or exc}"


def _comm_text(row: Mapping[str, Any]) -> str:
    """``comm all_reduce 1 MiB: busbw 1.23 GB/s`` for a ``cnnbench comm`` record."""
    from cnnbench.words import size_text

    size = row.get("config.bytes")
    text = f"comm {row.get('config.collective')}" + (f" {size_text(size)}" if isinstance(size, int) else "")
    busbw = row.get(F.BUSBW)
    return text + (f": busbw {busbw:.3g} GB/s" if isinstance(busbw, (int, float)) else "")


def _engine_export(args: argparse.Namespace) -> Exported | None:
    """The runs the export keeps, through the engine (its warnings not yet printed: :func:`_warn_of`); None
    where the checked reader reads the store instead."""
    from cnnbench.results.engine import EngineCannot, export_scan

    try:
        rows = export_scan(args.results, where=args.where, step_times=not args.no_step_times)
    except EngineCannot:
        return None
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:  # a malformed --where
        raise UserError(f"--where: {exc}") from None
    return rows


def _warn_of(rows: Exported) -> None:
    from cnnbench.results.store import problem_text

    for problem in rows.problems:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)


def handle_export(args: argparse.Namespace) -> int:
    from cnnbench.results.engine import EngineCannot
    from cnnbench.results.export import flat_table, write_exported, write_table

    if args.format == "parquet" and args.output is None:
        raise UserError("--format parquet needs -o FILE")
    if args.output is not None:
        _check_export_target(args.output, args.results)
    rows = _engine_export(args)
    if rows is not None and not rows.rows and args.format == "parquet":  # no run kept: the checked export
        rows.close()  # writes a table of no columns, which DuckDB cannot
        rows = None
    if rows is not None:
        with rows:
            _warn_of(rows)
            try:
                return _written(lambda: write_exported(rows, args.format, args.output), args.output, rows.rows,
                                len(rows.columns))
            except EngineCannot:  # values DuckDB cannot type as Parquet: nothing written, the checked export
                pass  # (the lines it cannot read named once, above)
    records, _ = _load(args.results, args.where, step_times=not args.no_step_times, warn=rows is None)
    table = flat_table(records)
    return _written(lambda: write_table(table, args.format, args.output), args.output, len(table.rows),
                    len(table.columns))


def _written(write: Callable[[], None], output: str | None, runs: int, columns: int) -> int:
    """Run ``write`` (an export to ``output``, or to standard output), its failures as one line."""
    from cnnbench.results.export import ExportError

    try:
        write()
    except ExportError as exc:
        raise UserError(str(exc)) from None
    except BrokenPipeError:  # `| head` of an export written to sys.stdout.buffer, past the wrapper of cli.main
        from cnnbench.terminal import drop_output

        drop_output(sys.stdout)
        return 0
    except OSError as exc:
        raise UserError(_export_failure(output, exc), exit_code=1) from None
    if output:
        print(f"wrote {plural(runs, 'run')} x {plural(columns, 'column')} to {output}", file=sys.stderr)
    return 0


def _export_failure(output: str | None, exc: OSError) -> str:
    """Why the export could not be written, in one line; on a full disk naming the folder and
    its free space (the file written before is left as it was: the export goes to a new file)."""
    from cnnbench.results.space import is_no_space, no_space_in

    if output is None:
        return f"standard output: cannot write: {exc.strerror or exc}"
    if is_no_space(exc):
        folder = os.path.dirname(os.path.abspath(output))
        return f"-o {output}: cannot write: {no_space_in(folder, exc, f'{os.path.basename(output)} left as it was')}"
    return f"-o {output}: cannot write: {exc.strerror or exc}"


def _check_export_target(output: str, results: Sequence[str]) -> None:
    """Before reading anything: ``-o`` is a file that can be written and is none of the inputs."""
    from cnnbench.results.outputs import OutputError, check_output_file
    from cnnbench.results.store import iter_store_files

    try:
        inputs: list[str | os.PathLike[str]] = [*results, *iter_store_files(list(results))]
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    try:
        check_output_file(output, inputs)
    except OutputError as exc:
        raise UserError(str(exc)) from None
