"""``cnnbench compare BASELINE CANDIDATE``: matched results side by side, with significance.

Thin: parses flags, reads the stores, calls :func:`cnnbench.compare.sets.compare_sets`, prints in the
chosen format and returns the exit code (1 with ``--fail-on-slowdown`` when a significant
slowdown beyond the threshold exists). Never imports torch.
"""

from __future__ import annotations

import argparse
import sys

from cnnbench.cli.common import UserError
from cnnbench.cli.report_cmd import parse_noise
from cnnbench.words import message_line, plural

DESCRIPTION = """\
Match the results of BASELINE and CANDIDATE (results folders or .jsonl files) that agree on
every configuration field that changes what is measured and on the machine, and print for
each pair both images/sec, the ratio (candidate / baseline), its 95% interval and whether the
difference is significant: a t-test on the runs' images/sec where both sides have two or
more runs (repeats; their run-to-run spread pooled per machine over all pairs), else on block means of the
per-step times; a difference under --noise is never significant. One folder split by a field:
cnnbench compare RESULTS --by precision.

Exit codes: 0 done; 1 with --fail-on-slowdown PCT when a pair is significantly slower than the
baseline by more than PCT percent; 2 bad input (nothing to compare, unknown field, ...)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="Compare two sets of results: ratios and whether each difference is significant.",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", nargs="+", metavar="RESULTS",
                   help="BASELINE CANDIDATE (two results folders or .jsonl files), or one with --by FIELD.")
    p.add_argument("--by", metavar="FIELD",
                   help="Split one set of results by this field's two values (precision, machine, "
                   "torch_version, ...); the baseline is --baseline or the first value (fp32 for precision).")
    p.add_argument("--baseline", metavar="VALUE", help="With --by: the value that is the baseline.")
    p.add_argument("--candidate", metavar="VALUE", help="With --by: the value that is the candidate.")
    p.add_argument("--ignore", nargs="+", action="extend", default=[], metavar="FIELD",
                   help="Fields two results may differ in and still be compared (e.g. batch_size).")
    p.add_argument("--across-machines", action="store_true",
                   help="Compare results from different machines (the machine is not matched).")
    p.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                   help="Keep only matching results on both sides: FIELD=V, FIELD=V1,V2, FIELD!=V; repeatable.")
    p.add_argument("--noise", default="3", metavar="PCT",
                   help="Differences under PCT percent are never significant (default 3).")
    p.add_argument("--format", choices=("table", "md", "csv", "json"), default="table",
                   help="Output format (default: table; a rich table on a terminal, plain text when piped).")
    p.add_argument("--fail-on-slowdown", metavar="PCT", default=None,
                   help="Exit 1 when a pair is significantly slower than the baseline by more than PCT percent.")
    p.set_defaults(handler=handle)


def _read(paths: list[str]) -> list:
    from cnnbench.results.store import problem_text, read_records

    try:
        records, problems = read_records(paths, step_times="lazy")
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    for problem in problems:
        print(f"cnnbench compare: {problem_text(problem)}", file=sys.stderr)
    return records


def handle(args: argparse.Namespace) -> int:
    from cnnbench.compare.build import CompareError, CompareOptions
    from cnnbench.compare.render import print_rich, render
    from cnnbench.compare.sets import compare_sets

    threshold = None if args.fail_on_slowdown is None else parse_noise(args.fail_on_slowdown, "--fail-on-slowdown")
    options = CompareOptions(ignore=args.ignore, across_machines=args.across_machines, where=args.where,
                             noise=parse_noise(args.noise))
    try:
        if args.by:
            if len(args.results) != 1:
                raise UserError(f"--by {args.by}: give one results folder or file (got {len(args.results)})")
            result = compare_sets(_read(args.results), options=options, by=args.by, baseline_value=args.baseline,
                                  candidate_value=args.candidate)
        else:
            if len(args.results) != 2:
                raise UserError(f"expected BASELINE CANDIDATE (two results folders or files), got "
                                f"{len(args.results)}; or one with --by FIELD")
            if args.baseline or args.candidate:
                raise UserError("--baseline and --candidate name values of --by FIELD; without --by the first "
                                "results are the baseline")
            base = _read(args.results[:1])
            cand = _read(args.results[1:])
            result = compare_sets(base, cand, options, labels=(args.results[0], args.results[1]))
    except CompareError as exc:
        raise UserError(str(exc)) from None
    if args.format == "table":
        print_rich(result)
    else:
        sys.stdout.write(render(result, args.format))
    if threshold is not None:
        slow = result.slowdowns(threshold)
        if slow:
            worst = min(slow, key=lambda p: p.comparison.ratio or 1.0)
            print(f"cnnbench compare: {plural(len(slow), 'significant slowdown')} beyond "
                  f"{threshold * 100:g}% (worst: {message_line(f'{worst.name} on {worst.machine}')}, ratio "
                  f"{worst.comparison.ratio:.3f})", file=sys.stderr)  # names from records: one line
            return 1
    return 0
