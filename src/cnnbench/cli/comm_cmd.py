"""``cnnbench comm``: collective bandwidth over message sizes, with nccl-tests' definitions.

Times all_reduce, reduce, broadcast, all_gather, reduce_scatter and all_to_all from
``--min-bytes`` to ``--max-bytes`` (each size ``--step-factor`` times the last) on
``--num-devices`` workers of this node, started as ``cnnbench run --num-devices`` starts
them, or as one rank of a torchrun job across nodes: NCCL on GPUs, Gloo on CPUs. Prints
nccl-tests' table (size, count, type, time, algbw, busbw, spread) and appends one record
per collective and size (``kind: comm``). Exit codes: 0 ok, 1 a collective did not run or
a worker failed (the records say which), 2 invalid options (nothing ran), 130/143 stopped
by Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import sys

from cnnbench.cli.common import UserError

_COLLECTIVES = "all_reduce, reduce, broadcast, all_gather, reduce_scatter, all_to_all"
_DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64", "float8_e4m3fn",
           "float8_e5m2")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "comm",
        help="Measure collective bandwidth over message sizes (nccl-tests' algbw and busbw).",
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", ""),
    )
    p.add_argument("--collective", default="all_reduce", metavar="NAMES",
                   help=f"Collectives to time, comma-separated ({_COLLECTIVES}) or all [default: all_reduce].")
    p.add_argument("--min-bytes", default="1K", metavar="SIZE",
                   help="Smallest message: bytes, or with K, M, G (powers of 1024) [default: 1K].")
    p.add_argument("--max-bytes", default=None, metavar="SIZE",
                   help="Largest message [default: 1G on cuda, 64M on cpu].")
    p.add_argument("--step-factor", type=int, default=2, metavar="F",
                   help="Each size is the previous times F [default: 2].")
    p.add_argument("--warmup", type=int, default=5, metavar="N", help="Untimed calls per size [default: 5].")
    p.add_argument("--iters", type=int, default=20, metavar="N",
                   help="Back-to-back calls per timed batch (5 batches per size) [default: 20].")
    p.add_argument("--dtype", default="float32", choices=_DTYPES, help="Element type [default: float32].")
    p.add_argument("--num-devices", type=int, default=None, metavar="N",
                   help="Workers to start on this node, one per device [default: every GPU on cuda, 2 on cpu; "
                   "under torchrun: its world].")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="cuda (NCCL), cpu (Gloo), auto: cuda when present [default: auto].")
    p.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"),
                   help="Process group back end [default: nccl on cuda, gloo on cpu].")
    p.add_argument("--results-dir", default="results", metavar="DIR", help="Folder of the results store.")
    p.add_argument("--machine-label", default=None, metavar="LABEL",
                   help="Name of this machine in the results (default: derived from CPU and GPU names).")
    p.add_argument("--oversubscribe", action="store_true",
                   help="On CPU, start more workers than the cores this process may use (tests).")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="Seconds a collective may wait for the other ranks, at most one week (604800) "
                   "[default: 300].")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cnnbench.config import ConfigError
    from cnnbench.engine.comm.spec import CommConfig, parse_bytes, parse_collectives

    try:
        config = CommConfig(
            collectives=parse_collectives(args.collective), min_bytes=parse_bytes(args.min_bytes, "min_bytes"),
            max_bytes=None if args.max_bytes is None else parse_bytes(args.max_bytes, "max_bytes"),
            step_factor=args.step_factor, warmup=args.warmup, iters=args.iters, dtype=args.dtype,
            num_devices=args.num_devices, device=args.device, backend=args.backend, results_dir=args.results_dir,
            machine_label=args.machine_label, oversubscribe=args.oversubscribe, timeout=args.timeout)
    except ConfigError as exc:
        raise UserError.from_config(exc, "comm") from None
    from cnnbench.results.outputs import OutputError, check_run_store

    try:  # the file of the label it derives too, before any worker starts
        check_run_store(config.results_dir, config.device, config.machine_label)
    except OutputError as exc:
        raise UserError(str(exc)) from None
    return _run(config)


def _run(config: object) -> int:
    from cnnbench.config import ConfigError
    from cnnbench.engine.comm.run import measure_comm
    from cnnbench.engine.multidevice.launch import WorkersStopped
    from cnnbench.results.files import FileProblem

    try:
        result = measure_comm(config, emit=lambda line: print(line, flush=True))  # type: ignore[arg-type]
    except ConfigError as exc:
        raise UserError.from_config(exc, "comm") from None
    except FileProblem as exc:
        raise UserError(f"--results-dir: cannot append the record: {exc}", exit_code=1) from None
    except WorkersStopped as exc:
        raise UserError(str(exc), exit_code=128 + exc.signum) from None
    if not result.main:
        return 0  # a torchrun rank other than 0: rank 0 prints and writes
    if result.failure is not None:
        print(f"cnnbench comm: error: {result.failure} (recorded in {result.path})", file=sys.stderr)
        return 1
    failed = [r for r in result.records if r.get("status") != "ok"]
    for record in failed:
        print(f"cnnbench comm: error: {record.get('error')}", file=sys.stderr)
    print(f"{len(result.records)} records appended to {result.path}")
    return 1 if failed else 0
