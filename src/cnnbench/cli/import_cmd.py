"""``cnnbench import KIND PATH...``: turn other tools' output into records in a results store.

Kinds: ``tf-cnn-benchmarks`` (plain logs, or ``<machine>.logs/`` folders of the Lambda
benchmark layout with their ``metadata``) and ``csv`` (a flat table whose columns are
dotted record field names). Records that are already in the store (same content) are
not added twice, even by two imports at once: the look and the write happen under the
store's lock. A log that did not finish becomes a record with status ``error``; an input
that cannot be used is reported as ``path: problem`` and the others are imported. Exit
codes: 0 something was imported (or was there already), 1 nothing could be used, 2 a usage
error (also when every input was refused as the wrong kind: a folder, a vendor's table).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cnnbench.cli.common import UserError
from cnnbench.words import plural, shortened

KINDS = ("tf-cnn-benchmarks", "csv")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="Import tf_cnn_benchmarks logs or a CSV table into a results store.",
        description="Turn other tools' output into records in a results store. KIND is tf-cnn-benchmarks "
        "(plain log files, or <machine>.logs/ folders of the Lambda benchmark layout with their metadata "
        "file) or csv (a flat table whose columns are dotted record field names). Records already in the "
        "store are not added twice; a log that did not finish becomes a record with status error.",
    )
    p.add_argument("kind", metavar="KIND", help=f"What to import: {', '.join(KINDS)}.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="Files or folders.")
    p.add_argument("--results-dir", default="results", metavar="DIR", help="Results folder (default: results).")
    p.add_argument("--machine-label", metavar="LABEL",
                   help="environment.machine of every imported record (default: from the input, "
                   "e.g. the <machine>.logs folder name).")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", dest="overrides",
                   help="Set a dotted record field on every record, e.g. config.precision=amp_fp16 "
                   "(values are read as YAML: 8, true, text). Repeatable.")
    p.add_argument("--dry-run", action="store_true", help="Parse and report, but write nothing.")
    p.set_defaults(handler=handle)


def _overrides(items: list[str]) -> dict[str, Any]:
    """``--set`` fields, each checked against what a record may hold."""
    import datetime

    from cnnbench.results.importers import check_overrides
    from cnnbench.sweep.suite import SuiteError, yaml_value

    out: dict[str, Any] = {}
    for item in items:
        field, sep, text = item.partition("=")
        if not sep or not field.strip():
            raise UserError(f"--set: expected FIELD=VALUE, got {item!r}")
        try:
            value = yaml_value(text, f"--set {shortened(field.strip(), 60)}") if text.strip() else None
        except SuiteError as exc:
            raise UserError(str(exc)) from None
        if isinstance(value, datetime.date):  # YAML reads 2024-01-31T12:00:00 as a time; a record holds text
            value = text.strip()
        try:
            check_overrides({field.strip(): value})
        except ValueError as exc:
            raise UserError(f"--set {shortened(item, 200)}: {exc}") from None
        out[field.strip()] = value
    try:
        check_overrides(out)
    except ValueError as exc:
        raise UserError(f"--set: {exc}") from None
    return out


def _check_input(path: Path) -> None:
    """A PATH that exists and is a folder or a regular file (a FIFO or a device would hang
    the import or never end), and that can be a path at all."""
    import stat

    from cnnbench.results.files import kind, path_too_long, shown

    why = path_too_long(path)
    if why is not None:
        raise UserError(f"PATH {shown(path)}: {why}")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UserError(f"no such file or folder: {shown(path)}") from None
    except OSError as exc:
        raise UserError(f"PATH {shown(path)}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise UserError(f"PATH {shown(path)}: is {kind(mode)}, not a regular file or a folder")


def handle(args: argparse.Namespace) -> int:
    from cnnbench.results.files import FileProblem
    from cnnbench.results.importers import ImportOptions, get_importer
    from cnnbench.results.importing import ImportProblem, import_into
    from cnnbench.results.outputs import OutputError

    try:
        get_importer(args.kind)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    if args.machine_label is not None:
        from cnnbench.config.errors import ConfigError
        from cnnbench.config.run_config import RunConfig

        try:
            RunConfig(machine_label=args.machine_label)
        except ConfigError as exc:
            raise UserError(str(exc)) from None
    options = ImportOptions(machine_label=args.machine_label, overrides=_overrides(args.overrides))
    for p in args.paths:
        _check_input(Path(p))
    try:
        outcome = import_into(args.results_dir, args.kind, args.paths, options, dry_run=args.dry_run, warn=_warn)
    except ImportProblem as exc:
        raise UserError(str(exc), exit_code=exc.exit_code) from None
    except OutputError as exc:
        raise UserError(str(exc)) from None
    except FileProblem as exc:  # a full disk (the file left as it was), a store file swapped meanwhile
        raise UserError(f"--results-dir: cannot append the records: {exc}", exit_code=1) from None
    summary = ", ".join(f"{n} {s}" for s, n in sorted(outcome.statuses().items())) or "none new"
    verb = "would import" if args.dry_run else "imported"
    line = f"{verb} {plural(len(outcome.written), 'record')} ({summary}) into {args.results_dir}"
    if outcome.not_written:
        line += f"; {outcome.not_written} already there"
        elsewhere = outcome.stored_elsewhere(args.machine_label)
        if elsewhere:
            line += (f" (stored under machine {', '.join(elsewhere)}: a run is imported once, whatever "
                     f"--machine-label says; the records already there were left as they are)")
    print(line)
    return 0


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr)
