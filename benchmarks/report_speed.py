"""How long ``cnnbench report`` takes on 10,000 and 100,000 synthetic records.

Goal (issue 5): under 2 s for 10,000 records and under 15 s for 100,000. The records are
made up but shaped like a real sweep: 20 models x 10 machines x 1/2/4/8 devices x
synthetic/real data x two variable updates x two precisions, with repeats and 2% OOMs.
Each size is timed in phases (reading the store, building the tables, writing
markdown/HTML/CSV/JSON without plots, and writing everything with the default plots, as
``cnnbench report`` does: the drawing processes are started, and import matplotlib, before
the records are read; the plots are drawn there while the tables are written) in one
process, side by side.

    .venv/bin/python benchmarks/report_speed.py            # 10,000 and 100,000
    .venv/bin/python benchmarks/report_speed.py 10000      # one size

To compare with other code, put its ``src`` first: ``PYTHONPATH=/tmp/old/src python
benchmarks/report_speed.py 10000`` (the script uses only the report's public API).

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODELS = ["resnet50", "resnet101", "resnet152", "inception3", "inception4", "vgg16", "alexnet", "googlenet",
          "mobilenet_v2", "densenet121", "efficientnet_b0", "resnext50_32x4d", "wide_resnet50_2", "vgg19",
          "squeezenet1_1", "shufflenet_v2_x1_0", "mnasnet1_0", "regnet_y_8gf", "convnext_tiny", "vit_b_16"]
MACHINES = [f"box{i:02d}" for i in range(10)]
DEVICES = [1, 2, 4, 8]
STEPS = 100  # timed steps per record (cnnbench run's default --num-batches)
CONFIGS = [(d, v, p) for d in ("synthetic", "imagenet") for v in ("replicated", "parameter_server")
           for p in ("fp32", "amp_fp16")]


def synthetic_records(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` records cycling over every case (so repeats accumulate evenly)."""
    rng = random.Random(seed)
    cases = [(m, mach, d, c) for c in CONFIGS for d in DEVICES for mach in MACHINES for m in MODELS]
    speed = {m: 50.0 + 40 * i for i, m in enumerate(MODELS)}
    out = []
    for i in range(n):
        model, machine, devices, (data, vu, prec) = cases[i % len(cases)]
        ips = speed[model] * (1 + MACHINES.index(machine) / 10) * devices * (0.97 ** devices)
        ips *= (1.6 if prec == "amp_fp16" else 1.0) * (0.97 if data == "imagenet" else 1.0)
        status = "oom" if rng.random() < 0.02 else "ok"
        out.append({
            "schema_version": 1, "tool_version": "0.1.0", "run_id": f"{i:016x}",
            "started_at": "2024-01-01T00:00:00+00:00", "status": status, "error": None,
            "config": {"model": model, "batch_size": 64, "image_size": 224, "forward_only": False,
                       "num_batches": 100, "num_warmup_batches": 10, "seed": 1234, "device": "cuda",
                       "num_devices": devices, "variable_update": vu, "all_reduce": None,
                       "data_format": "NCHW", "precision": prec, "compile": False, "optimizer": "sgd",
                       "data_name": data, "synthetic_location": "device", "distortions": False},
            "environment": {"machine": machine, "hostname": machine, "cpu_model": f"CPU {machine}",
                            "gpu_model": "GPU-A" if MACHINES.index(machine) < 5 else "GPU-B",
                            "gpu_count": 8, "torch_version": "2.5.0"},
            "metrics": {} if status != "ok" else {
                "total_images_per_sec": ips * rng.uniform(0.98, 1.02),
                "step_times_s": [round(0.1 * rng.uniform(0.97, 1.03), 6) for _ in range(STEPS)]},
        })
    return out


def time_one(n: int, max_plots: int, workers: int | None = None) -> dict[str, float]:
    from cnnbench.report import ReportOptions, build_report, write_report
    from cnnbench.results.store import read_records

    try:
        from cnnbench.report.render.drawing import prepare_drawing
    except ImportError:  # older code: no drawing processes started ahead
        prepare_drawing = None

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "results"
        store.mkdir()
        recs = synthetic_records(n)
        with open(store / "all.jsonl", "w") as f:
            for r in recs:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")  # as the store writes them
        del recs
        c0 = time.perf_counter()
        read_records([store])  # the first read of a big file also writes its parsed-record cache
        cold = time.perf_counter() - c0
        t0 = time.perf_counter()
        pool = prepare_drawing(workers) if prepare_drawing is not None else None  # as cnnbench report does, first
        records, _ = read_records([store])  # warm, as every later report of these results (with step times)
        t1 = time.perf_counter()
        report = build_report(records, ReportOptions(max_plots=max_plots))
        t2 = time.perf_counter()
        drawn = [f.drawn for f in report.figures]
        write_report(report, Path(tmp) / "no-plots", plots=False)
        t3 = time.perf_counter()
        for f, d in zip(report.figures, drawn, strict=True):
            f.drawn = d
        extra = {"drawing_pool": pool} if pool is not None else {}
        write_report(report, Path(tmp) / "out", **extra)  # tables again, and the plots, as cnnbench report does
        t4 = time.perf_counter()
    return {"cold_read": cold, "read": t1 - t0, "build": t2 - t1, "write": t3 - t2, "write_plots": t4 - t3,
            "tables": float(len(report.tables)), "figures": float(sum(drawn))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[10_000, 100_000])
    ap.add_argument("--max-plots", type=int, default=8, help="Plots drawn (the report default).")
    ap.add_argument("--workers", type=int, default=None,
                    help="Drawing processes (default: as cnnbench report chooses; 0: draw in this process).")
    args = ap.parse_args(argv)
    print(f"{'records':>8} {'1st read':>8} {'read':>7} {'build':>7} {'write':>7} {'no-plot total':>14} "
          f"{'write+plots':>12} {'total':>7}  tables figures")
    for n in args.sizes:
        t = time_one(n, args.max_plots, args.workers)
        base = t["read"] + t["build"]
        print(f"{n:>8} {t['cold_read']:>8.2f} {t['read']:>7.2f} {t['build']:>7.2f} {t['write']:>7.2f} "
              f"{base + t['write']:>14.2f} {t['write_plots']:>12.2f} {base + t['write_plots']:>7.2f}  "
              f"{int(t['tables']):>6} {int(t['figures']):>7}")
    print("seconds; 'write+plots' (markdown, HTML, CSV/JSON and the plots) includes importing matplotlib "
          "(first size only); 'total' = read + build + write+plots; 'read' is a warm read (the parsed-record "
          "cache written by the '1st read' of the file).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
