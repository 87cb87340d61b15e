"""``cnnbench import KIND PATH...``: turn other tools' output into records in a results store.

Kinds: ``tf-cnn-benchmarks`` (plain logs, or ``<machine>.logs/`` folders of the Lambda
benchmark layout with their ``metadata``) and ``csv`` (a flat table whose columns are
dotted record field names). Records that are already in the store (same content) are
not added twice. A log that did not finish becomes a record with status ``error``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cnnbench.cli.common import UserError

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
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        field, sep, text = item.partition("=")
        if not sep or not field.strip():
            raise UserError(f"--set: expected FIELD=VALUE, got {item!r}")
        try:
            out[field.strip()] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            out[field.strip()] = text
    return out


def handle(args: argparse.Namespace) -> int:
    from cnnbench.results.importers import ImportOptions, get_importer
    from cnnbench.results.store import append_records, existing_run_ids

    try:
        importer = get_importer(args.kind)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    options = ImportOptions(machine_label=args.machine_label, overrides=_overrides(args.overrides))
    paths = [Path(p) for p in args.paths]
    for p in paths:
        if not p.exists():
            raise UserError(f"no such file or folder: {p}")
    try:
        result = importer.run(paths, options)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    for problem in result.problems:
        print(f"warning: skipped {problem}", file=sys.stderr)
    if not result.records:
        raise UserError(f"nothing to import from {', '.join(args.paths)}", exit_code=1)

    present = existing_run_ids(args.results_dir)
    new = [r for r in result.records if r.get("run_id") not in present]
    seen: set[str] = set()
    unique = []
    for r in new:
        if r["run_id"] not in seen:
            seen.add(r["run_id"])
            unique.append(r)
    statuses: dict[str, int] = {}
    for r in unique:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    if not args.dry_run:
        append_records(args.results_dir, unique)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "none new"
    verb = "would import" if args.dry_run else "imported"
    skipped = len(result.records) - len(unique)
    print(f"{verb} {len(unique)} records ({summary}) into {args.results_dir}"
          + (f"; {skipped} already there" if skipped else ""))
    return 0
