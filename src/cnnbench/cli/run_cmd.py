"""``cnnbench run``: train (or, with --forward-only, infer) one model and report throughput.

Flags follow tf_cnn_benchmarks (``--model``, ``--batch-size``, ``--num-batches``, ...; the
underscore spellings work too). Output is tf_cnn_benchmarks' log format; the record is
appended to the results store. Exit codes: 0 ok, 1 the run failed (out of memory, an
error: the record says which), 2 invalid options (nothing ran).
"""

from __future__ import annotations

import argparse
import sys

from cnnbench.cli.common import UserError
from cnnbench.config import ConfigError
from cnnbench.config.cli_args import add_config_arguments, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="Benchmark one model (training, or inference with --forward-only).",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
    )
    add_config_arguments(p)
    p.add_argument("--quiet", action="store_true", help="Print only the final figure and the record's path.")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        raise UserError.from_config(exc) from None

    from cnnbench.engine import execute

    emit = None if args.quiet else (lambda line: print(line, flush=True))
    try:
        record, path = execute(config, emit=emit)
    except ConfigError as exc:
        raise UserError.from_config(exc) from None
    if record.status != "ok":
        print(f"cnnbench run: {record.status}: {record.error} (record {record.run_id} written to {path})",
              file=sys.stderr)
        return 1
    if args.quiet:
        print(f"total images/sec: {record.metrics['total_images_per_sec']:.2f}")
    print(f"record {record.run_id} appended to {path}")
    return 0
