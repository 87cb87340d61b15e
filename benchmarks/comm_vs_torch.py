"""`cnnbench comm` against a plain torch.distributed all-reduce loop timed the same way.

    .venv/bin/python benchmarks/comm_vs_torch.py --rounds 3

Each round runs, one after the other (the order alternates between rounds):

* ``cnnbench comm --num-devices 2 --device cpu --collective all_reduce`` (its default sizes,
  1 KiB to 64 MiB on CPU, 5 warm-up and 20 timed iterations per size) into a fresh store,
  timing the command's wall clock;
* a plain loop: ``torch.multiprocessing.spawn`` of 2 ranks, a Gloo process group, the same
  sizes, float32 zeros; per size 5 warm-up all-reduces, then 20 iterations each after a
  ``dist.barrier()`` and timed with ``perf_counter``; per iteration the slowest rank's time
  (an all-reduce MAX of the times); the median; busbw = size / time x 2(n-1)/n.

Prints, per size, the median over rounds of both bus bandwidths and of their ratio (cnnbench /
plain), and the wall time of each ``cnnbench comm``. The goal (issue 21): within a factor of 2.

``--interleaved``: one pair of ranks, and per size the two timings alternate ``--rounds`` times
within it (cnnbench's own :func:`~cnnbench.engine.comm.timing.time_op` on
:func:`~cnnbench.engine.comm.ops.make_op`'s buffers, then the plain loop), so that both sides of
each ratio were measured seconds apart: on a busy machine, where whole commands minutes apart
see different loads, this is the comparison that still says something.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARMUP, ITERS, N = 5, 20, 2


def sizes(top: int) -> list[int]:
    out, s = [], 1024
    while s <= top:
        out.append(s)
        s *= 2
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _plain_rank(rank: int, port: int, all_sizes: list[int], out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // N))  # as cnnbench splits the cores
    dist.init_process_group("gloo", rank=rank, world_size=N)
    medians = {}
    for size in all_sizes:
        x = torch.zeros(size // 4, dtype=torch.float32)
        for _ in range(WARMUP):
            dist.all_reduce(x)
        times = []
        for _ in range(ITERS):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(x)
            times.append(time.perf_counter() - start)
        slowest = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        medians[size] = statistics.median(slowest.tolist())
    dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(medians))


def _plain_once(x: object, dist: object, torch: object) -> float:
    """One size of the plain loop in a running group: the median of the slowest rank's times."""
    for _ in range(WARMUP):
        dist.all_reduce(x)  # type: ignore[attr-defined]
    times = []
    for _ in range(ITERS):
        dist.barrier()  # type: ignore[attr-defined]
        start = time.perf_counter()
        dist.all_reduce(x)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
    slowest = torch.tensor(times, dtype=torch.float64)  # type: ignore[attr-defined]
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # type: ignore[attr-defined]
    return float(statistics.median(slowest.tolist()))


def _interleaved_rank(rank: int, port: int, all_sizes: list[int], rounds: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    from cnnbench.engine.comm.ops import make_op
    from cnnbench.engine.comm.timing import time_op

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // N))
    dist.init_process_group("gloo", rank=rank, world_size=N)
    cpu = torch.device("cpu")
    result: dict[int, list[tuple[float, float]]] = {s: [] for s in all_sizes}
    for size in all_sizes:
        for r in range(rounds):
            def ours(size: int = size) -> float:
                op, _, _ = make_op("all_reduce", size, N, torch.float32, cpu)
                return time_op(op, WARMUP, ITERS, cpu).median

            def theirs(size: int = size) -> float:
                return _plain_once(torch.zeros(size // 4, dtype=torch.float32), dist, torch)

            a, b = (ours(), theirs()) if r % 2 == 0 else tuple(reversed((theirs(), ours())))
            result[size].append((a, b))
    dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(result))


def interleaved(all_sizes: list[int], rounds: int) -> None:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "both.json")
        mp.spawn(_interleaved_rank, args=(_free_port(), all_sizes, rounds, out), nprocs=N)
        result = {int(k): v for k, v in json.loads(Path(out).read_text()).items()}
    print("| size (B) | cnnbench busbw GB/s | plain busbw GB/s | ratio (median of rounds) |")
    print("|--:|--:|--:|--:|")
    every = []
    for s in all_sizes:
        ratios = [b / a for a, b in result[s]]  # busbw ratio = inverse time ratio
        every += ratios
        print(f"| {s:,} | {s / statistics.median(a for a, _ in result[s]) / 1e9:.3f} | "
              f"{s / statistics.median(b for _, b in result[s]) / 1e9:.3f} | {statistics.median(ratios):.2f} |")
    print(f"\nmedian ratio over sizes and rounds: {statistics.median(every):.2f} (min {min(every):.2f}, "
          f"max {max(every):.2f}); load average after: {os.getloadavg()[0]:.2f}")


def plain(all_sizes: list[int]) -> dict[int, float]:
    """busbw (GB/s) per size of the plain loop."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plain.json")
        mp.spawn(_plain_rank, args=(_free_port(), all_sizes, out), nprocs=N)
        medians = {int(k): v for k, v in json.loads(Path(out).read_text()).items()}
    return {s: s / t / 1e9 * 2 * (N - 1) / N for s, t in medians.items()}


def cnnbench(top: int) -> tuple[dict[int, float], float]:
    """busbw (GB/s) per size of ``cnnbench comm``, and the command's wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [str(ROOT / ".venv" / "bin" / "cnnbench"), "comm", "--num-devices", str(N), "--device", "cpu",
                "--collective", "all_reduce", "--max-bytes", str(top), "--results-dir", tmp]
        if len(os.sched_getaffinity(0)) < N:
            argv.append("--oversubscribe")
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - start
        records = [json.loads(line) for f in Path(tmp).glob("*.jsonl") for line in f.read_text().splitlines()]
    return {r["config"]["bytes"]: r["metrics"]["busbw_gbps"] for r in records if r["status"] == "ok"}, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--interleaved", action="store_true",
                        help="Alternate the two timings per size within one pair of ranks (see the module).")
    args = parser.parse_args()
    all_sizes = sizes(args.max_bytes)
    if args.interleaved:
        print(f"load average before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
        interleaved(all_sizes, args.rounds)
        return
    ours: dict[int, list[float]] = {s: [] for s in all_sizes}
    theirs: dict[int, list[float]] = {s: [] for s in all_sizes}
    ratios: dict[int, list[float]] = {s: [] for s in all_sizes}
    walls = []
    for r in range(args.rounds):
        print(f"round {r + 1}: load average {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
        if r % 2 == 0:
            a, wall = cnnbench(args.max_bytes)
            b = plain(all_sizes)
        else:
            b = plain(all_sizes)
            a, wall = cnnbench(args.max_bytes)
        walls.append(wall)
        for s in all_sizes:
            ours[s].append(a[s])
            theirs[s].append(b[s])
            ratios[s].append(a[s] / b[s])
    print("| size (B) | cnnbench busbw GB/s | plain busbw GB/s | ratio (median of rounds) | ratios per round |")
    print("|--:|--:|--:|--:|--|")
    for s in all_sizes:
        per_round = ", ".join(f"{x:.2f}" for x in ratios[s])
        print(f"| {s:,} | {statistics.median(ours[s]):.3f} | {statistics.median(theirs[s]):.3f} | "
              f"{statistics.median(ratios[s]):.2f} | {per_round} |")
    every = [x for s in all_sizes for x in ratios[s]]
    print(f"\nmedian ratio over sizes and rounds: {statistics.median(every):.2f} (min {min(every):.2f}, "
          f"max {max(every):.2f}); cnnbench comm wall time: {', '.join(f'{w:.1f} s' for w in walls)}; "
          f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
