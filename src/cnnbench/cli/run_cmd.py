"""``cnnbench run``: train (or, with --forward-only, infer) one model and report throughput.

Flags follow tf_cnn_benchmarks (``--model``, ``--batch-size``, ``--num-batches``, ...; the
underscore spellings work too). Output is tf_cnn_benchmarks' log format; the record is
appended to the results store. ``--num-devices N`` starts one worker per device;
under ``torchrun`` the same command runs as one worker of torchrun's job (rank 0 prints
and writes). ``--scaling`` runs 1, 2, 4, ... up to N devices in turn, each in worker
processes of its own (1 device too). After the steps come the record's warnings (a busy
machine, unstable step times, throttling), with ``--profile-steps`` the top operators by self
time, the record's path, and last the ``total images/sec`` block, so that the log ends as
tf_cnn_benchmarks' logs do (their parsers read the second-to-last line). Exit codes: 0 ok,
1 the run failed (out of memory, an error, a worker that died: the record says which),
2 invalid options (nothing ran), 130/143 stopped by Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cnnbench.cli.common import UserError, check_output, print_warnings
from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.cli_args import add_config_arguments, config_from_args
from cnnbench.words import duration, one_line, plural


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="Benchmark one model (training, or inference with --forward-only).",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
    )
    add_config_arguments(p)
    p.add_argument("--quiet", action="store_true", help="Print only the final figure and the record's path.")
    p.add_argument("--scaling", action="store_true",
                   help="Run on 1, 2, 4, ... up to --num-devices devices in turn, record each, and print "
                   "images/sec, speedup and efficiency per device count.")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        raise UserError.from_config(exc) from None
    check_output(config.results_dir, [config.machine_label], traces=bool(config.profile_steps))  # torchrun too

    from cnnbench.distributed.world import launched_by_torchrun

    emit = None if args.quiet else (lambda line: print(line, flush=True))
    if launched_by_torchrun():
        if args.scaling:
            raise UserError("--scaling starts its own workers; run it without torchrun")
        return _under_torchrun(config, emit, quiet=args.quiet)
    if args.scaling:
        return _scaling(config, emit, quiet=args.quiet)
    record, path = _execute(config, emit)
    return _report(record, path, quiet=args.quiet)


def _execute(config: RunConfig, emit: Any, *, own_process: bool = False) -> tuple[Any, Any]:
    from cnnbench.api import check_store_and_run
    from cnnbench.engine.multidevice.launch import WorkersStopped
    from cnnbench.results.files import FileProblem
    from cnnbench.results.outputs import OutputError

    try:
        return check_store_and_run(config, emit=emit, own_process=own_process)
    except ConfigError as exc:
        raise UserError.from_config(exc) from None
    except OutputError as exc:  # the store's file for the derived machine label, checked before the run
        raise UserError(str(exc)) from None
    except FileProblem as exc:  # the store's file for this machine: a FIFO, a symlink out of the folder
        raise UserError(f"--results-dir: cannot append the record: {exc}", exit_code=1) from None
    except WorkersStopped as exc:
        raise UserError(str(exc), exit_code=128 + exc.signum) from None


def _report(record: Any, path: Any, *, quiet: bool) -> int:
    if record.status != "ok":
        print(f"cnnbench run: {record.status}: {one_line(record.error or '')} (record {record.run_id} written to "
              f"{path})",
              file=sys.stderr)
        print_warnings(record, "run")
        return 1
    from cnnbench.engine.log_format import closing_lines

    compile_s = record.metrics.get("compile_time_s")
    if compile_s is not None and not quiet:
        print(f"compile time: {duration(compile_s)} (the first step, torch.compile included)")
    print_warnings(record, "run")
    if not quiet:
        _print_profile(record, path)
    print(f"record {record.run_id} appended to {path}")
    # Last, as tf_cnn_benchmarks ends its logs: parsers read the second-to-last line.
    closing = closing_lines(record.metrics)
    for line in closing[1:2] if quiet else closing:
        print(line)
    sys.stdout.flush()
    return 0


def _print_profile(record: Any, path: Any) -> None:
    """The profiled steps' top operators by self time, and where the trace is."""
    from pathlib import Path

    metrics = record.metrics or {}
    trace, rows = metrics.get("profile_trace"), metrics.get("profile_top_operators")
    if not trace:
        return
    from rich.table import Table
    from rich.text import Text

    from cnnbench.terminal import print_table

    on_device = any(r.get("self_device_ms") is not None for r in rows or [])
    kind = "device" if on_device else "CPU"
    steps = (record.config or {}).get("profile_steps")
    table = Table(title=f"Top operators by self {kind} time ({steps} profiled steps)", header_style="bold")
    table.add_column("operator", overflow="fold")
    for name in ("calls", "self CPU ms", *(("self device ms",) if on_device else ()), "share"):
        table.add_column(name, justify="right")
    for r in rows or []:
        cells = [str(r["name"]), str(r["calls"]), f"{r['self_cpu_ms']:.3f}"]
        if on_device:
            cells.append(f"{r['self_device_ms']:.3f}")
        cells.append(f"{r['self_share']:.1%}")
        table.add_row(*map(Text, cells))  # an operator's name is text, never rich's markup
    console = print_table(table)
    console.print(Text(f"profiler trace (Chrome trace JSON): {Path(path).parent / trace}"), soft_wrap=True)


def _under_torchrun(config: RunConfig, emit: Any, *, quiet: bool) -> int:
    from cnnbench.distributed.world import World
    from cnnbench.engine.multidevice.worker import run_under_torchrun

    main = World.from_env().is_main
    try:
        record, path = run_under_torchrun(config, emit=emit)
    except ConfigError as exc:
        if not main:
            return 2
        raise UserError.from_config(exc) from None
    except Exception as exc:  # this worker failed; rank 0 has recorded it
        if main:
            from cnnbench.results.error_text import error_text

            first = error_text(exc).splitlines()[0]
            print(f"cnnbench run: error: {first} (recorded in {config.results_dir})", file=sys.stderr)
        return 1
    if record is None:
        return 0
    return _report(record, path, quiet=quiet)


def scaling_counts(max_devices: int) -> list[int]:
    """1, 2, 4, ... up to ``max_devices`` (which is included when not a power of two)."""
    counts, n = [], 1
    while n < max_devices:
        counts.append(n)
        n *= 2
    return counts + [max_devices]


def _scaling(config: RunConfig, emit: Any, *, quiet: bool) -> int:
    top = config.requested_devices()
    if top < 2:
        raise UserError("--scaling needs --num-devices 2 or more (the largest device count to run)")
    if config.gpu_indices is not None:
        raise UserError("--scaling picks GPUs 0..N-1 itself; leave out --gpu-indices")
    print(_scaling_header(config, scaling_counts(top)), flush=True)
    from cnnbench.results.sessions import invocation

    with invocation():  # one invocation: its points share its id
        rows, path = _scaling_points(config, emit, top, quiet=quiet)
    _print_scaling(rows, str(path))
    return 0 if all(r.status == "ok" for _, r in rows) else 1


def _scaling_points(config: RunConfig, emit: Any, top: int, *, quiet: bool) -> tuple[list[tuple[int, Any]], Any]:
    """Each device count's record, in worker processes of its own, and the file the last went to."""
    rows: list[tuple[int, Any]] = []
    path = None
    for n in scaling_counts(top):
        if not quiet:
            print(f"=== {plural(n, 'device')} ===", flush=True)
        # each point in worker processes of its own: none leaves memory or a CUDA context here
        record, path = _execute(config.replace(num_devices=n), emit, own_process=True)
        rows.append((n, record))
        if record.status != "ok":
            print(f"cnnbench run: {plural(n, 'device')}: {record.status}: {record.error}", file=sys.stderr)
        print_warnings(record, "run")
    return rows, path


def _scaling_header(config: RunConfig, counts: list[int]) -> str:
    """``Scaling on cpu: 1, 2 devices; threads: 1 per worker (fixed)``: the series, and on CPU
    which rule gave each worker its torch threads (``--threads-per-worker``, or the default)."""
    from cnnbench.config.parallel_options import thread_rule
    from cnnbench.machine.devices import resolve_device_kind

    kind = resolve_device_kind(config.device)
    line = f"Scaling on {kind}: {', '.join(map(str, counts))} devices"
    return line + (f"; threads: {thread_rule(config.threads_per_worker)}" if kind == "cpu" else "")


def _scaling_cells(n: int, record: Any, base: tuple[int, float, bool] | None) -> tuple[str, str, str]:
    """images/sec, speedup and efficiency of one point, ``⚠`` where it or the base run recorded
    warnings, and ``superlinear`` on an efficiency over 105%."""
    from cnnbench.analysis.marks import WARNED
    from cnnbench.analysis.speedup import speedup_efficiency
    from cnnbench.report.tables.scaling import SUPERLINEAR

    ips = record.metrics["total_images_per_sec"]
    warned = _warned(record)
    ips_text = f"{ips:,.1f}" + (f" {WARNED}" if warned else "")
    if base is None:
        return ips_text, "—", "—"
    base_n, base_ips, base_warned = base
    mark = f" {WARNED}" if warned or base_warned else ""
    speedup, efficiency = speedup_efficiency(ips, n, base_ips, base_n)
    eff_text = f"{efficiency:,.1%}" + (" superlinear" if efficiency > SUPERLINEAR else "") + mark
    return ips_text, f"{speedup:.2f}x{mark}", eff_text


def _scaling_notes(rows: list[tuple[str, ...]], base_n: int, path: str) -> list[str]:
    """The lines under the table: what the figures are against, the marks present, the records."""
    from cnnbench.analysis.marks import WARNED
    from cnnbench.report.tables.scaling import SUPERLINEAR, SUPERLINEAR_CAUSE

    lines = [f"speedup and efficiency against {plural(base_n, 'device')}; "
             f"{plural(len(rows), 'record')} appended to {path}"]
    texts = [cell for r in rows for cell in r]
    if any("superlinear" in t for t in texts):
        lines.append(f"superlinear: efficiency over {SUPERLINEAR:.0%}, more than each added device can give, "
                     f"{SUPERLINEAR_CAUSE}")
    if any(WARNED in t for t in texts):
        lines.append(f"{WARNED} the run, or the {plural(base_n, 'device')} run it is compared with, recorded "
                     f"warnings (printed above): the figure is less certain")
    return lines


def _warned(record: Any) -> bool:
    """Did the run record warnings (or throttling)?"""
    from cnnbench.analysis.marks import run_warnings

    return bool(run_warnings({"metrics": record.metrics or {}}))


def _print_scaling(rows: list[tuple[int, Any]], path: str) -> None:
    """The table of ``run --scaling``: images/sec, speedup and efficiency per device count, marked
    ``⚠`` where a run (or the base run) recorded warnings and ``superlinear`` over 105%."""
    from rich.table import Table
    from rich.text import Text

    from cnnbench.results import fields as R
    from cnnbench.terminal import print_table

    ok = [(n, r) for n, r in rows if r.status == "ok"]
    base = (ok[0][0], ok[0][1].metrics["total_images_per_sec"], _warned(ok[0][1])) \
        if ok and ok[0][1].metrics["total_images_per_sec"] else None
    table = Table(title="Scaling", header_style="bold")
    for name in (*R.headers(R.DEVICES, R.IPS), "speedup", "efficiency"):
        table.add_column(name, justify="right")
    printed: list[tuple[str, ...]] = []
    for n, record in rows:
        if record.status != "ok":
            cells: tuple[str, ...] = (str(n), "OOM" if record.status == "oom" else record.status, "—", "—")
        else:
            cells = (str(n), *_scaling_cells(n, record, base))
        table.add_row(*cells)
        printed.append(cells)
    console = print_table(table)
    if base is not None:
        for line in _scaling_notes(printed, base[0], path):
            console.print(Text(line), soft_wrap=True)  # the path as it is ("runs[v2]/" is no markup)
