"""``cnnbench history RESULTS...``: each machine's and configuration's runs over time, change points and outliers.

Thin: parses flags, reads the stores, calls :func:`cnnbench.analysis.history.build_history`, prints
in the chosen format and returns the exit code (1 with ``--fail-on-regression`` when a series'
newest level is a significant slowdown beyond the threshold). Never imports torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from cnnbench.cli.common import UserError
from cnnbench.cli.report_cmd import parse_noise
from cnnbench.words import message_line, one_line, plural

DESCRIPTION = """\
Read results folders or .jsonl files as a history: one series per machine and configuration
(every field that changes what is measured), its runs in started_at order (or --order-by FIELD,
then time). Runs of one session (the same session_id) are a job; the noise model holds the spread
within a job and the drift between jobs, both estimated from the series. For each series: its
levels, each lasting change (the last run before and the first after, its size with a 95%
interval, its p-value, and the suspects: environment fields such as torch, CUDA, cuDNN, the
driver or a GPU's clocks and power limit, and warnings, that differ between the two sides), and
lone outliers, which are not changes. A series needs 8 runs; shorter ones are listed. Imported
records whose start time the import filled in are left out and counted.

Exit codes: 0 done; 1 with --fail-on-regression PCT when the newest level of a series is
significantly slower than the level before by more than PCT percent; 2 bad input."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "history",
        help="Performance over time per machine and configuration: change points, their suspects, outliers.",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", nargs="+", metavar="RESULTS", help="Results folders or .jsonl files.")
    p.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                   help="Keep runs whose field has this value: model=resnet50, machine=box-*, precision!=fp32 "
                   "(as cnnbench results list takes it); repeatable.")
    p.add_argument("--order-by", metavar="FIELD",
                   help="Order each series by this field first (a version: torch_version, gpu_driver), then by "
                   "started_at.")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="Output format (default: table). csv: one row per change and per outlier; json: "
                   "every series with its levels, changes and outliers.")
    p.add_argument("--fail-on-regression", metavar="PCT", default=None,
                   help="Exit 1 when the newest level of a series is significantly slower than the one before "
                   "by more than PCT percent.")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cnnbench.analysis.fields import FieldError, resolve_field
    from cnnbench.analysis.history import build_history
    from cnnbench.api import read_records
    from cnnbench.results.store import problem_text

    threshold = None if args.fail_on_regression is None else parse_noise(args.fail_on_regression,
                                                                          "--fail-on-regression")

    def warn(problem: str) -> None:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)

    try:
        records, _ = read_records(list(args.results), where=args.where, step_times=False, on_problem=warn,
                                  shared=True)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:  # a malformed --where, or a FieldError naming the nearest fields
        raise UserError(f"--where: {exc}") from None
    if not records:
        raise UserError("no results to read" + (" (none matched --where)" if args.where else ""))
    order_by = None
    if args.order_by is not None:
        try:
            order_by = resolve_field(args.order_by, records)
        except FieldError as exc:
            raise UserError(f"--order-by: {exc}") from None
    history = build_history(records, order_by=order_by)
    if args.format == "json":
        from cnnbench.results.cleaning import finite_values  # a ratio of 1e-300 and 1e17 images/sec: null

        sys.stdout.write(json.dumps(finite_values(history.as_dict()), indent=2, default=str, allow_nan=False) + "\n")
    elif args.format == "csv":
        sys.stdout.write(csv_rows(history))
    else:
        sys.stdout.write(table_text(history))
    if threshold is not None:
        slow = history.regressions(threshold)
        if slow:
            worst = min(slow, key=lambda c: c.ratio)
            print(message_line(f"cnnbench history: {plural(len(slow), 'significant regression')} beyond "
                               f"{threshold * 100:g}% (worst: {worst.series}, {worst.percent:+.1f}% from run "
                               f"{worst.after.run_id})"), file=sys.stderr)  # names from records: one line
            return 1
    return 0


CSV_HEADER = ("kind", "series", "machine", "run_before", "started_before", "run_after", "started_after",
              "level_before", "level_after", "change_pct", "ci_low_pct", "ci_high_pct", "p", "suspects")


def csv_rows(history: Any) -> str:
    """One row per change (``kind`` change) and per outlier (``kind`` outlier: its run is ``run_after``)."""
    from cnnbench.results.csv_out import csv_text

    rows: list[Sequence[Any]] = []
    for s in history.series:
        for c in s.changes:
            rows.append(("change", c.series, c.machine, c.before.run_id, c.before.started_at, c.after.run_id,
                         c.after.started_at, _figure(c.level_before), _figure(c.level_after), round(c.percent, 2),
                         round((c.low - 1) * 100, 2), round((c.high - 1) * 100, 2), float(f"{c.p:.3g}"),
                         "; ".join(x.text() for x in c.suspects)))
        for o in s.outliers:
            rows.append(("outlier", o.series, o.machine, "", "", o.run.run_id, o.run.started_at, _figure(o.level),
                         _figure(o.run.ips), round((o.ratio - 1) * 100, 2), "", "", "", ""))
    return csv_text(CSV_HEADER, rows)


def table_text(history: Any) -> str:
    """The history in plain words: a summary line, then each series with its changes and outliers."""
    lines = [_summary(history)]
    for s in history.series:
        noise = s.fit.noise
        lines += ["", f"{s.label}: {plural(len(s.runs), 'run')} in {plural(s.jobs, 'job')}, noise "
                  f"{noise.within * 100:.1f}% within a job and {noise.between * 100:.1f}% between jobs"]
        levels = " -> ".join(_rate(lv.value) for lv in s.fit.levels)
        lines.append(f"  levels (images/sec): {levels}")
        for c in s.changes:
            lines.append(f"  change {c.percent:+.1f}% (95% CI {(c.low - 1) * 100:+.1f} to {(c.high - 1) * 100:+.1f}%, "
                         f"p {c.p:.2g}) between run {c.before.run_id} ({c.before.started_at}) and run "
                         f"{c.after.run_id} ({c.after.started_at})")
            if c.suspects:
                lines.append("    suspects: " + "; ".join(x.text() for x in c.suspects))
        for o in s.outliers:
            lines.append(f"  outlier {(o.ratio - 1) * 100:+.1f}% run {o.run.run_id} ({o.run.started_at}): "
                         f"{_rate(o.run.ips)} against a level of {_rate(o.level)}")
    for t in history.too_short:
        lines.append(f"too short: {t.label} ({plural(t.points, 'run')}; a series needs 8)")
    return "\n".join(map(one_line, lines)) + "\n"  # one line each, whatever a record's text holds


def _summary(history: Any) -> str:
    runs = sum(len(s.runs) for s in history.series)
    parts = [f"{plural(len(history.series), 'series', 'series')} ({plural(runs, 'run')})",
             plural(len(history.changes), "change"), plural(len(history.outliers), "outlier")]
    if history.too_short:
        parts.append(f"{plural(len(history.too_short), 'series', 'series')} too short")
    if history.no_start_time:
        parts.append(f"{plural(history.no_start_time, 'run')} without a real start time (none, one that is no "
                     "time, or an import's) left out")
    if history.not_ok:
        parts.append(f"{plural(history.not_ok, 'run')} without images/sec left out")
    return "; ".join(parts) + "."


def _rate(images_per_sec: float) -> str:
    """A throughput in the table: one decimal, or three digits where that shows none (0.0012)."""
    return f"{images_per_sec:.1f}" if images_per_sec >= 0.05 else f"{images_per_sec:.3g}"


def _figure(images_per_sec: float) -> float:
    """A throughput in the CSV: six significant digits (0.000321 stays itself; three decimals wrote 0.0)."""
    return float(f"{images_per_sec:.6g}")
