"""``cnnbench data``: measure a data set's input pipeline alone, without a model.

Reads ``--data-dir`` as ``cnnbench run`` would (the same decoding, augmentation and loader
processes), prints images/sec in total, per loader process and per core, and appends a
record with ``config.mode = "data"`` to the results store. Exit codes: 0 ok, 1 the run
failed (a bad image without ``--skip-bad-images``: the record says which), 2 invalid
options or a folder that holds no data set (nothing ran).
"""

from __future__ import annotations

import argparse
import sys

from cnnbench.cli.common import UserError, print_warnings
from cnnbench.config import ConfigError
from cnnbench.config.choices import REAL_DATA_NAMES
from cnnbench.config.cli_args import FlagOverride, add_config_arguments, config_from_args
from cnnbench.config.data_bench import DATA_SECTIONS, DataBenchConfig
from cnnbench.words import one_line

# The input options as this command uses them: a data set is always read (no synthetic input).
_FLAGS = {
    "data_dir": FlagOverride(
        "Folder of the data set to read (required): ImageNet layout (train/<class>/*.jpg|jpeg|png, "
        "val/<class>/...) or the python pickle batches of CIFAR-10 (data_batch_1..5, test_batch) or CIFAR-100 "
        "(train, test); `cnnbench make-dataset` writes one."),
    "data_name": FlagOverride(
        f"Data set: {', '.join(REAL_DATA_NAMES)} [default: guessed from the folder's contents].",
        choices=REAL_DATA_NAMES),
    "num_workers": FlagOverride(
        "DataLoader worker processes that decode and augment the images; 0: the main process does "
        "[default: from the cores this run may use]."),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "data",
        help="Measure a data set's input pipeline alone (no model): images/sec in total, per worker, per core.",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
    )
    add_config_arguments(p, DataBenchConfig, DATA_SECTIONS, exclude=("synthetic_location",), overrides=_FLAGS)
    p.add_argument("--quiet", action="store_true", help="Print only the final figures and the record's path.")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args, DataBenchConfig)
    except ConfigError as exc:
        raise UserError.from_config(exc, "data") from None

    from cnnbench.api import measure_data
    from cnnbench.results.files import FileProblem
    from cnnbench.results.outputs import OutputError

    emit = None if args.quiet else (lambda line: print(line, flush=True))
    try:
        record, path = measure_data(config, emit=emit)
    except ConfigError as exc:
        raise UserError.from_config(exc, "data") from None
    except OutputError as exc:  # the results folder, or its file for this machine, checked before the work
        raise UserError(str(exc)) from None
    except FileProblem as exc:  # the store's file for this machine: a FIFO, a symlink out of the folder
        raise UserError(f"--results-dir: cannot append the record: {exc}", exit_code=1) from None
    if record.status != "ok":
        print(f"cnnbench data: {record.status}: {one_line(record.error or '')} (record {record.run_id} written to "
              f"{path})",
              file=sys.stderr)
        print_warnings(record, "data")
        return 1
    if args.quiet:
        m = record.metrics
        print(f"total images/sec: {m['total_images_per_sec']:.2f} (per loading process "
              f"{m['images_per_sec_per_worker']:.2f}, per core {m['images_per_sec_per_core']:.2f})")
    print_warnings(record, "data")
    print(f"record {record.run_id} appended to {path}")
    return 0
