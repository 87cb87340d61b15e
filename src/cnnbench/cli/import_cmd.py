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

from cnnbench.cli.common import UserError, check_output
from cnnbench.words import plural

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

    import yaml

    from cnnbench.results.importers import check_overrides

    out: dict[str, Any] = {}
    for item in items:
        field, sep, text = item.partition("=")
        if not sep or not field.strip():
            raise UserError(f"--set: expected FIELD=VALUE, got {item!r}")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            value = text
        if isinstance(value, datetime.date):  # YAML reads 2024-01-31T12:00:00 as a time; a record holds text
            value = text.strip()
        try:
            check_overrides({field.strip(): value})
        except ValueError as exc:
            raise UserError(f"--set {item}: {exc}") from None
        out[field.strip()] = value
    try:
        check_overrides(out)
    except ValueError as exc:
        raise UserError(f"--set: {exc}") from None
    return out


def _checked(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records every check of ``cnnbench run`` and the record contract passes, whatever
    importer made them (:func:`~cnnbench.results.importers.check_imported`); each other one is
    reported as ``file:line: why`` and left out."""
    from cnnbench.results.importers import check_imported

    kept = []
    for record in records:
        try:
            check_imported(record)
        except ValueError as exc:
            line = record.get("source_line")
            where = f"{record.get('source_path') or 'input'}{f':{line}' if line else ''}"
            print(f"warning: skipped {where}: {exc}", file=sys.stderr)
            continue
        kept.append(record)
    return kept


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
    from cnnbench.results.importers import ImportOptions, get_importer
    from cnnbench.results.store import append_new_records, problem_text

    try:
        importer = get_importer(args.kind)
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
    paths = [Path(p) for p in args.paths]
    for p in paths:
        _check_input(p)
    if not args.dry_run:
        check_output(args.results_dir, [args.machine_label])
    try:
        result = importer.run(paths, options)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    for problem in result.problems:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)
    result.records = _checked(result.records)
    if "run_id" in options.overrides and len(result.records) > 1:
        raise UserError(f"--set run_id={options.overrides['run_id']}: would give {len(result.records)} records "
                        "one run_id, which names one run (the store would keep one and call the others already "
                        "there); nothing imported")
    if not result.records:
        # every input refused as the wrong kind (a vendor's table, a folder): a usage error
        usage = bool(result.refused) and len(result.refused) == len(result.problems)
        raise UserError(f"nothing to import from {', '.join(args.paths)}", exit_code=2 if usage else 1)

    unique: dict[str, dict[str, Any]] = {}
    for record in result.records:
        unique.setdefault(str(record.get("run_id")), record)
    if args.dry_run:
        from cnnbench.results.store import stored_run_ids

        present, store_problems = stored_run_ids(args.results_dir)
        written = [r for key, r in unique.items() if key not in present]
        already = {key: present[key] for key in unique if key in present}
    else:
        outcome = append_new_records(args.results_dir, unique.values())
        written, already, store_problems = outcome.written, outcome.already, outcome.problems
    for problem in store_problems:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)
    statuses: dict[str, int] = {}
    for r in written:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "none new"
    verb = "would import" if args.dry_run else "imported"
    skipped = len(result.records) - len(written)
    line = f"{verb} {plural(len(written), 'record')} ({summary}) into {args.results_dir}"
    if skipped:
        line += f"; {skipped} already there"
        elsewhere = sorted({m for m in already.values() if args.machine_label and m != args.machine_label})
        if elsewhere:
            line += (f" (stored under machine {', '.join(elsewhere)}: a run is imported once, whatever "
                     f"--machine-label says; the records already there were left as they are)")
    print(line)
    return 0
