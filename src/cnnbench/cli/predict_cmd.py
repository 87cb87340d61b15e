"""``cnnbench predict RESULTS...``: images/sec, speedup, efficiency and bound at N devices on M nodes.

Thin: parses flags, reads the store (as ``report``), calls :func:`cnnbench.predict.predict_scaling`,
prints. Never imports torch at import time; only a cnnbench record without ``model_cost`` makes
it trace the model (:func:`cnnbench.models.cost.model_cost`).
"""

from __future__ import annotations

import argparse
import functools
import math
import re
import sys

from cnnbench.cli.common import UserError
from cnnbench.config.strategy_rules import VARIABLE_UPDATES

FORMATS = ("table", "csv", "json")
LINKS = ("nvlink", "pcie", "pcie-host", "loopback", "ib", "ethernet")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict",
        help="Predict images/sec, speedup and efficiency at N devices on M nodes, and what bounds each point.",
        description="From the selection's one-device training records (step time and forward/backward split), "
        "the model's gradient bytes, a link description (--link, a cnnbench comm record, or what sysinfo "
        "recorded) and the input pipeline (cnnbench data records x --host-cpus): one row per model, "
        "configuration, strategy and point, with the measured images/sec beside where a record exists. "
        "docs/predict.md writes the model down with every assumption.",
    )
    p.add_argument("results", nargs="+", metavar="RESULTS", help="Results folders or .jsonl files (as report).")
    p.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                   help="Keep only matching records, as in report (repeatable; all must hold).")
    p.add_argument("--devices", default=None, metavar="N,N,...",
                   help="Device counts to predict [default: 1,2,4,...,1024].")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--devices-per-node", type=int, default=None, metavar="K",
                       help="Devices in one node; more take more nodes [default: 8 GPUs; CPU workers all on one host "
                       "where their measured records ran on one node, else one host each].")
    group.add_argument("--nodes", type=int, default=None, metavar="M",
                       help="Spread every point over M nodes (device counts M does not divide are left out).")
    p.add_argument("--strategy", default=None, metavar="NAME[,NAME...]",
                   help=f"Strategies to predict: {', '.join(VARIABLE_UPDATES)} [default: all].")
    p.add_argument("--link", choices=LINKS, default=None,
                   help="The link within a node [default: a cnnbench comm record of the machine, else the "
                   "peer access sysinfo recorded, else the usual one for the GPU's name].")
    p.add_argument("--bandwidth", type=float, default=None, metavar="GB/S",
                   help="The link's bandwidth in GB/s (10^9 bytes; nccl-tests' bus bandwidth) [default: the "
                   "link's].")
    p.add_argument("--latency", type=float, default=None, metavar="US",
                   help="The link's latency per message step, microseconds [default: the link's].")
    p.add_argument("--inter-link", choices=LINKS, default=None,
                   help="The link between nodes [default: ib for GPUs, ethernet for CPUs].")
    p.add_argument("--inter-bandwidth", type=float, default=None, metavar="GB/S",
                   help="The link between nodes' bandwidth, GB/s [default: the link's].")
    p.add_argument("--inter-latency", type=float, default=None, metavar="US",
                   help="The link between nodes' latency, microseconds [default: the link's].")
    p.add_argument("--inter-rails", type=int, default=None, metavar="N",
                   help="Network rails (NICs) per node between nodes; a node's traffic spreads over one per "
                   "device, at most N [default: 8 for ib, 1 for ethernet].")
    p.add_argument("--host-cpus", type=int, default=None, metavar="N",
                   help="Cores of each node that feed the input pipeline [default: the recording machine's].")
    p.add_argument("--input-rate", type=float, default=None, metavar="IMG/S",
                   help="The input pipeline's images/sec per core [default: the best cnnbench data record of "
                   "the data set; synthetic data has no input bound].")
    p.add_argument("--calibrate", action="store_true",
                   help="Fit one effective bandwidth per link to the selection's multi-device records, and "
                   "print how well it fits each.")
    p.add_argument("--format", choices=FORMATS, default="table", help="Output format [default: table].")
    p.set_defaults(handler=handle)


def parse_devices(text: str | None) -> tuple[int, ...] | None:
    """``1,2,8`` -> (1, 2, 8); a one-line error otherwise."""
    if text is None:
        return None
    parts = text.split(",")  # an empty count (1,,2 or 1,2,) is no count, nor 1_0 or a digit of another script
    if not all(re.fullmatch(r"\s*[0-9]{1,9}\s*", v) for v in parts):
        raise UserError(f"--devices: expected counts such as 1,2,4, got {text!r}")
    values = tuple(int(v) for v in parts)
    if not values or any(v < 1 for v in values):
        raise UserError(f"--devices: expected counts of 1 or more, got {text!r}")
    return values


def _positive(value: float | int | None, flag: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{flag}: must be a finite number more than 0, got {value}")


def handle(args: argparse.Namespace) -> int:
    from cnnbench.predict import STRATEGIES, LinkChoice, PredictError, PredictOptions, predict_scaling
    from cnnbench.predict.render import as_csv, as_json
    from cnnbench.predict.scaling import DEFAULT_DEVICES, check_options
    from cnnbench.results.store import problem_text, read_records

    for flag in ("bandwidth", "latency", "inter_bandwidth", "inter_latency", "host_cpus", "input_rate",
                 "devices_per_node", "nodes", "inter_rails"):
        _positive(getattr(args, flag), "--" + flag.replace("_", "-"))
    options = PredictOptions(
        devices=parse_devices(args.devices) or DEFAULT_DEVICES,
        devices_per_node=args.devices_per_node, nodes=args.nodes,
        strategies=[s.strip() for s in args.strategy.split(",") if s.strip()] if args.strategy is not None
        else STRATEGIES,
        link=LinkChoice(args.link, args.bandwidth, args.latency),
        inter_link=LinkChoice(args.inter_link, args.inter_bandwidth, args.inter_latency),
        host_cpus=args.host_cpus, input_rate_per_core=args.input_rate, calibrate=args.calibrate, where=args.where,
        inter_rails=args.inter_rails)
    try:
        check_options(options)  # before the store is read
    except PredictError as exc:
        raise UserError(str(exc)) from None
    try:
        records, problems = read_records(args.results, step_times="lazy")
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    for problem in problems:
        print(f"warning: {problem_text(problem)}", file=sys.stderr)
    try:
        result = predict_scaling(records, options, parameter_count)
    except (PredictError, ValueError) as exc:
        raise UserError(str(exc)) from None
    for line in result.skipped:
        print(f"warning: left out {line}", file=sys.stderr)
    if args.format == "csv":
        sys.stdout.write(as_csv(result))
    elif args.format == "json":
        print(as_json(result))
    else:
        _print_table(result)
    return 0


def _print_table(result: object) -> None:
    from rich.table import Table
    from rich.text import Text

    from cnnbench.predict.render import COLUMNS, assumption_lines, calibration_lines, cells
    from cnnbench.terminal import print_table
    from cnnbench.words import one_line

    table = Table(*COLUMNS, title="Predicted scaling (docs/predict.md)")
    for row in result.rows:  # type: ignore[attr-defined]
        table.add_row(*(Text(one_line(c)) for c in cells(row)))  # a record's model is text, never markup
    print_table(table)
    for line in assumption_lines(result) + calibration_lines(result) + result.verdicts:  # type: ignore[arg-type,attr-defined]
        print(one_line(line))  # machine and model names from the store


@functools.cache
def parameter_count(model: str) -> int | None:
    """Parameters of a model name: a tf_cnn_benchmarks name's torchvision model (from the cached
    table; None for a tf name without one), else a registry model's traced cost (imports torch),
    else None."""
    from cnnbench.report.tables.tf_models import TF_MODELS, UNMAPPED, tf_cost

    found = tf_cost(model)
    if found is not None:
        return int(found[0]["params"])
    if model in TF_MODELS or model in UNMAPPED:
        return None
    try:
        from cnnbench.models.cost import model_cost

        return model_cost(model).params
    except Exception:  # an unknown name, a model not buildable here (timm missing)
        return None
