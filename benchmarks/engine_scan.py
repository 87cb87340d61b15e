"""The engine's read of a store alone, old code against new, in one process per side.

``store_goals.py`` times whole commands in fresh processes: the interpreter's start, the imports
and printing are in every figure, and on a busy machine their spread hides a change of a tenth
of a second in the read itself. This script times :func:`cnnbench.results.engine.scan` alone,
``--repeats`` times in one process per side (its imports done once, before the first), with the
side's ``src`` first on ``PYTHONPATH``; the sides alternate, the order turned each round, and both
read the same cache folder (``--cache``: the sidecars a side writes, the other reads, so give two
sides of one sidecar format, or expect the first read of each round to write them). Fields
(``--fields``): ``list``, the 11 that ``results list`` reads, or ``every`` (an export's read of
every field but the step times). Prints the minimum and median per side and round.

    .venv/bin/python benchmarks/engine_scan.py --old-src /tmp/old/src --store /tmp/eng/varied-100000 \\
        --cache /tmp/scan-cache --fields list --repeats 8 --rounds 2

The store must have been read once through the engine with that cache folder (its sidecars
written) for a warm figure. This is a benchmark, not a test: it asserts nothing about its figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, statistics, sys, time
from cnnbench.results import engine
store, fields, repeats = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
leave_out = ["metrics.step_times_s"] if fields is None else ()
times = []
for _ in range(repeats):
    start = time.perf_counter()
    with engine.scan([store], fields, leave_out=leave_out) as scanned:
        rows = scanned.con.execute("SELECT count(*) FROM scanned").fetchone()[0]
    times.append(time.perf_counter() - start)
print(json.dumps({"rows": rows, "min": min(times), "median": statistics.median(times)}))
"""

LIST_FIELDS = ["started_at", "config.model", "config.batch_size", "run_id", "environment.machine", "status",
               "metrics.total_images_per_sec", "config.precision", "config.channels_last", "config.forward_only",
               "extra.case_name"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-src", type=Path, required=True)
    ap.add_argument("--new-src", type=Path, default=ROOT / "src")
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True, help="CNNBENCH_CACHE_DIR of both sides")
    ap.add_argument("--fields", choices=("list", "every"), default="list")
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    import json

    if not args.store.exists():
        ap.error(f"--store {args.store}: no such folder or file")
    for label, folder in (("--old-src", args.old_src), ("--new-src", args.new_src)):
        if not folder.is_dir():
            ap.error(f"{label} {folder}: no such folder")
    fields = json.dumps(LIST_FIELDS if args.fields == "list" else None)
    sides = [("old", args.old_src.resolve()), ("new", args.new_src.resolve())]
    for r in range(args.rounds):
        for name, src in sides if r % 2 == 0 else sides[::-1]:
            env = {**os.environ, "PYTHONPATH": str(src), "CNNBENCH_CACHE_DIR": str(args.cache.resolve())}
            run = subprocess.run([sys.executable, "-c", CHILD, str(args.store), fields, str(args.repeats)],
                                 env=env, capture_output=True, text=True)
            if run.returncode:
                last = (run.stderr.strip().splitlines() or ["no output"])[-1]
                sys.exit(f"engine_scan.py: the {name} side failed: {last}")
            got = json.loads(run.stdout.splitlines()[-1])
            load = os.getloadavg()[0]
            print(f"round {r + 1} {name}: {args.fields} fields, {got['rows']:,} runs, min {got['min']:.3f} s, "
                  f"median {got['median']:.3f} s (load {load:.2f})")


if __name__ == "__main__":
    main()
