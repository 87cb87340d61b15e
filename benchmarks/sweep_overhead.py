"""What a sweep costs on top of its runs, and how long a big results store takes to load.

    .venv/bin/python benchmarks/sweep_overhead.py                    # 20 cases, 100,000 records
    .venv/bin/python benchmarks/sweep_overhead.py --cases 40 --records 20000

Part 1, per-case overhead (goal: at most 1 s per case beyond the run's own work). A suite
of ``--cases`` cases runs through the real sweep runner (a process per case, forked from
the fork server that imported torch once; time limit; record appended by the parent;
progress callbacks), twice:

* ``no-op worker``: the child returns a small record at once, so the whole case time is
  harness (fork, pipe, the parent's append with fsync, clean-up);
* ``engine``: the real engine runs the built-in ``trivial`` model for 2 steps at 32 px;
  the worker's own time is measured inside the child and subtracted from the case's wall
  time as the parent sees it.

Side by side, the cost a fresh interpreter per case would pay just to import torch,
torchvision and the engine (``python -c 'import cnnbench.engine.benchmark'``), which the
fork server avoids. "parent preload" is the one-off start of that server.

Part 2, loading (goal: under 2 s for 100,000 records). ``--records`` records shaped like
the engine's (a full config and environment, the C4 metrics, 100 raw step times) are
written to a temporary store, then read back with ``read_records`` with and without the
step times, next to a plain ``json.loads`` of every line as the baseline: as before this
change (standard-library JSON, no cache), with orjson alone, and through the parsed-record
cache (the first read that builds it, warm reads, a read after one more record was appended).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cnnbench.config import RunConfig
from cnnbench.results import cache, lines
from cnnbench.results.record import Record
from cnnbench.results.store import append_record, machine_file_name, read_records
from cnnbench.sweep.runner import SweepOptions, preload_engine, run_suite
from cnnbench.sweep.suite import parse_suite


def noop_worker(config, emit, extra):  # type: ignore[no-untyped-def]
    emit("1\timages/sec: 1.0 +/- 0.0 (jitter = 0.0)\t0.000")
    return Record(config=config.recorded(), environment={"machine": "bench", "hostname": "h"},
                  metrics={"total_images_per_sec": 1.0}, extra=extra)


def sweep_overhead(cases: int, worker, label: str, results: Path) -> dict[str, float]:  # type: ignore[no-untyped-def]
    suite = parse_suite({
        "name": f"overhead-{label}",
        "base": {"model": "trivial", "device": "cpu", "num_batches": 2, "num_warmup_batches": 1,
                 "display_every": 1, "image_size": 32},
        "matrix": {"seed": list(range(cases))},
        "timeout_s": 300,
    })
    t0 = time.perf_counter()
    result = run_suite(suite, SweepOptions(results_dir=results), worker=worker)
    wall = time.perf_counter() - t0
    bad = [r for r in result.results if r.status != "ok"]
    if bad:
        raise SystemExit(f"{label}: {len(bad)} cases failed: {bad[0].record.get('error')}")
    per_case = [r.seconds - (r.work_s or 0.0) for r in result.results]
    work = [r.work_s or 0.0 for r in result.results]
    return {
        "wall_s": wall,
        "case_overhead_median_s": statistics.median(per_case),
        "case_overhead_max_s": max(per_case),
        "work_median_s": statistics.median(work),
        # everything the sweep spent outside the workers (probe, store read, appends, forks), per case
        "sweep_overhead_per_case_s": (wall - sum(work)) / cases,
    }


def fresh_interpreter_import_s(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import cnnbench.engine.benchmark"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def write_store(folder: Path, n: int) -> int:
    """``n`` engine-shaped records in one machine file; returns its size in bytes."""
    rng = random.Random(0)
    config = RunConfig(model="resnet50", batch_size=64, device="cpu").recorded()
    env = {"machine": "bench-box", "hostname": "bench", "cpu_model": "AMD EPYC 7B13 64-Core Processor",
           "cpu_cores": 64, "cpu_threads": 128, "memory_bytes": 540_000_000_000, "gpu_model": "NVIDIA H100 80GB HBM3",
           "gpu_count": 8, "gpu_driver": "550.54.15", "cuda_version": "12.4", "cudnn_version": 90100,
           "nccl_version": "2.21.5", "torch_version": "2.14.1", "torchvision_version": "0.29.1",
           "torch_num_threads": 64, "python_version": "3.11.7", "platform": "Linux-6.8.0-x86_64-with-glibc2.36"}
    path = folder / machine_file_name("bench-box")
    with open(path, "w") as f:
        for i in range(n):
            steps = [rng.uniform(0.05, 0.07) for _ in range(100)]
            metrics = {"total_images_per_sec": 1000 + rng.random(), "images_per_sec_mean": 1001.0,
                       "images_per_sec_stderr": 1.5, "images_per_sec_jitter": 4.2, "images_per_sec_median": 1000.5,
                       "images_per_sec_p5": 990.0, "images_per_sec_p95": 1010.0, "step_times_s": steps,
                       "peak_device_memory_bytes": 12_345_678_901, "peak_host_memory_bytes": 2_345_678_901,
                       "input_wait_fraction": 0.001, "loss_first": 6.91, "loss_last": 6.85,
                       "achieved_flops_per_sec": 1.2e15}
            rec = Record(config=config, environment=env, metrics=metrics,
                         extra={"case_name": "syn-replicated-1cpus", "suite_name": "big", "case_key": f"{i:016x}",
                                "repeat": 1})
            f.write(json.dumps(rec.to_dict(), separators=(",", ":")) + "\n")
    return path.stat().st_size


def timed(fn, repeats: int, setup=None) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Best wall and best CPU seconds of ``repeats`` calls (CPU time shows the work on a shared box),
    each after ``setup()`` (not timed)."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
        del result  # freeing what was loaded is not part of loading it
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=20, help="Cases per sweep (default 20).")
    parser.add_argument("--records", type=int, default=100_000, help="Records in the store to load (default 100000).")
    parser.add_argument("--repeats", type=int, default=3, help="Loads per variant; the best is reported (default 3).")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    args = parser.parse_args()

    if not args.skip_sweep:
        t0 = time.perf_counter()
        preload_engine()
        elapsed = time.perf_counter() - t0
        print(f"fork server start (imports torch, torchvision, engine; once per sweep): {elapsed:.2f} s")
        with tempfile.TemporaryDirectory() as tmp:
            noop = sweep_overhead(args.cases, noop_worker, "noop", Path(tmp) / "a")
            engine = sweep_overhead(args.cases, None, "engine", Path(tmp) / "b")
        fresh = fresh_interpreter_import_s(3)
        print(f"\nper-case overhead, {args.cases} cases per sweep (goal <= 1 s):")
        for label, r in (("no-op worker", noop), ("engine, trivial", engine)):
            print(f"  {label:<16} case wall - worker time: median {r['case_overhead_median_s']:.3f} s, "
                  f"max {r['case_overhead_max_s']:.3f} s; whole sweep minus work, per case: "
                  f"{r['sweep_overhead_per_case_s']:.3f} s (worker median {r['work_median_s']:.3f} s)")
        print(f"  fresh interpreter per case, import only: {fresh:.2f} s "
              f"= {fresh / max(engine['sweep_overhead_per_case_s'], 1e-9):.0f}x the fork runner's per-case overhead")

    if not args.skip_load:
        load_benchmark(args.records, args.repeats)


def load_benchmark(n: int, repeats: int) -> None:
    """Loading a big store: the reader before (standard-library JSON, no cache), with
    orjson alone, and with the parsed-record cache (cold, warm, after one append), side by side."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        size = write_store(folder, n)
        print(f"\nstore: {n} records, {size / 1e6:.0f} MB (written in {time.perf_counter() - t0:.1f} s)")
        path = next(folder.glob("*.jsonl"))

        def baseline() -> object:
            with open(path, "rb") as f:
                return [json.loads(line) for line in f]

        def no_cache(parser: Any, step_times: bool) -> Callable[[], object]:
            def read() -> object:
                with patched(lines, "loads", parser), patched(cache, "MIN_BYTES", 1 << 62):
                    return read_records(folder, step_times=step_times)
            return read

        def cold() -> object:
            cache.cache_path(path).unlink(missing_ok=True)
            return read_records(folder)

        def cached_then_append() -> None:
            """The store as written, its cache warm, then one more record appended."""
            with open(path, "rb+") as f:
                f.truncate(size)
            read_records(folder, step_times=False)
            append_record(folder, one_record())

        rows = [
            ("json.loads per line (baseline)", baseline, None),
            ("before: stdlib json, all fields", no_cache(json.loads, True), None),
            ("before: stdlib json, step_times=False", no_cache(json.loads, False), None),
            ("orjson, no cache, all fields", no_cache(lines.loads, True), None),
            ("orjson, no cache, step_times=False", no_cache(lines.loads, False), None),
            ("cache: first read (builds it), all fields", cold, None),
            ("cache: warm, all fields", lambda: read_records(folder), None),
            ("cache: warm, step_times=False", lambda: read_records(folder, step_times=False), None),
            # the covered lines are hashed again, the new one parsed, the cache written again
            ("cache: 1 record appended since, all fields", lambda: read_records(folder), cached_then_append),
        ]
        print(f"load {n} records (goal < 2 s), best of {repeats}, wall / CPU:")
        first_cpu = None
        for label, fn, setup in rows:
            wall, cpu = timed(fn, repeats, setup)
            first_cpu = first_cpu or cpu
            print(f"  {label:<44} {wall:6.2f} s / {cpu:6.2f} s  ({first_cpu / cpu:5.2f}x the baseline's speed, CPU)")
        records, problems = read_records(folder, step_times=False)
        assert len(records) == n + 1 and not problems


@contextlib.contextmanager
def patched(module: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def one_record() -> dict[str, Any]:
    return Record(config={"model": "resnet50"}, environment={"machine": "bench-box"},
                  metrics={"total_images_per_sec": 1.0, "step_times_s": [0.1] * 100}).to_dict()

if __name__ == "__main__":
    main()
