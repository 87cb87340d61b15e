"""``cnnbench history`` on real runs of this machine: a planted slowdown found, named and explained (issue 46).

Makes a store of one configuration (``trivial``, CPU, batch 64, one thread, ``--host-cpus 1``:
the run keeps to the first core it may use) by ``cnnbench sweep``: ``--sweeps`` sweeps of
``--repeats`` runs each (each sweep is one invocation, so its runs share a ``session_id``: a job),
then ``--slow-sweeps`` more sweeps of the same suite with a CPU burner (``while True: pass``)
pinned to that same core, so the runs share their core with it. The configuration is the same
throughout, so the runs are one series. The burner is stopped (by its own process id) as soon
as those sweeps end, whatever happens.

Then runs ``cnnbench history`` (table and ``--format json``) and ``cnnbench report`` on the
store, and prints the verdict: the change found (where, size, 95% interval, p, suspects), the
false changes in the baseline runs (in the whole series, and in a history of the baseline runs
alone), the outliers; and the series itself with each job's mean and the noise estimates of
:func:`cnnbench.analysis.history.build_history`. Exit 0 when the check passes, 1 when it does not.
One cnnbench process at a time.

    .venv/bin/python benchmarks/history_real.py --out /tmp/histcheck
Runs are numbered from 1 in start order; the change is planted before run ``sweeps x repeats + 1``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CNNBENCH = [str(ROOT / ".venv" / "bin" / "cnnbench")] if (ROOT / ".venv" / "bin" / "cnnbench").exists() \
    else [sys.executable, "-m", "cnnbench"]
NEAR = 3
"""A change within this many runs of the planted one counts as found."""

SUITE = """\
name: history-real
description: One configuration, repeated, for cnnbench history on real runs (benchmarks/history_real.py).
base:
  device: cpu
  batch_size: {batch}
  num_batches: {batches}
  threads_per_worker: 1
  host_cpus: 1
matrix:
  model: [trivial]
repeats: {repeats}
timeout_s: 300
"""


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, text=True, **kw)


def sweep(suite: Path, store: Path) -> None:
    t = time.perf_counter()
    done = sh([*CNNBENCH, "sweep", str(suite), "--results-dir", str(store), "--rerun", "--plain"],
              capture_output=True)
    tail = (done.stdout + done.stderr).strip().splitlines()[-2:]
    print(f"  exit {done.returncode}, {time.perf_counter() - t:.0f} s: " + " | ".join(tail), flush=True)
    if done.returncode:
        raise SystemExit(f"sweep failed:\n{done.stdout}\n{done.stderr}")


def make_store(args: argparse.Namespace) -> Path:
    out = Path(args.out)
    store = out / "store"
    if store.exists():
        shutil.rmtree(store)
    out.mkdir(parents=True, exist_ok=True)
    suite = out / "history-real.yaml"
    suite.write_text(SUITE.format(batch=args.batch_size, batches=args.num_batches, repeats=args.repeats))
    core = min(os.sched_getaffinity(0))  # --host-cpus 1 keeps a run to the first core it may use
    for i in range(args.sweeps):
        print(f"baseline sweep {i + 1}/{args.sweeps}", flush=True)
        sweep(suite, store)
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(burner.pid, {core})
        print(f"CPU burner: process {burner.pid} pinned to core {core}", flush=True)
        for i in range(args.slow_sweeps):
            print(f"slowed sweep {i + 1}/{args.slow_sweeps} (burner on core {core})", flush=True)
            sweep(suite, store)
    finally:
        burner.kill()
        burner.wait()
        print(f"CPU burner {burner.pid} stopped", flush=True)
    return store


def _load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def check(store: Path, out: Path, baseline: int) -> bool:
    from cnnbench.analysis.history import build_history, fit_levels
    from cnnbench.api import read_records

    table = sh([*CNNBENCH, "history", str(store)], capture_output=True)
    print(table.stdout + table.stderr)
    js = sh([*CNNBENCH, "history", str(store), "--format", "json"], capture_output=True)
    (out / "history.json").write_text(js.stdout)
    rep = sh([*CNNBENCH, "report", str(store), "-o", str(out / "report")], capture_output=True)
    print(f"  report exit {rep.returncode}: {(rep.stdout + rep.stderr).strip().splitlines()[-1:]}")
    hist = json.loads(js.stdout)

    records, _ = read_records(store, step_times=False)
    records = sorted(records, key=lambda r: str(r.get("started_at")))
    sessions = [r.get("session_id") for r in records]
    print(f"\n{len(records)} records, {sum(1 for s in sessions if s)} with a session_id, "
          f"{len(set(sessions))} distinct ids")
    print("run  session           images/sec  busy-CPU cores  warnings")
    for i, r in enumerate(records):
        m = r["metrics"]
        kinds = sorted({str(w).split(":", 1)[0] for w in m.get("warnings") or []})
        print(f"{i + 1:3d}  {r.get('session_id')}  {m['total_images_per_sec']:10.1f}  "
              f"{m.get('other_processes_cpu_cores')!s:>14}  {', '.join(kinds)}")

    history = build_history(records)
    ok = True
    if len(history.series) != 1:
        print(f"FAIL: {len(history.series)} series, expected 1")
        return False
    s = history.series[0]
    ids = [run.run_id for run in s.runs]
    print(f"\nseries {s.label}: {len(s.runs)} runs in {s.jobs} jobs; noise within a job "
          f"{s.fit.noise.within:.2%}, between jobs {s.fit.noise.between:.2%}, df {s.fit.noise.df}")
    jobs: dict[str, list[float]] = {}
    for run in s.runs:
        jobs.setdefault(str(run.job), []).append(run.ips)
    print("job means (images/sec): " + ", ".join(f"{math.exp(sum(map(math.log, v)) / len(v)):.0f}"
                                                  for v in jobs.values()))
    print("levels: " + ", ".join(f"runs {lv.start + 1}-{lv.stop} at {lv.value:.0f}" for lv in s.fit.levels))

    found = []
    false_changes = []
    for c in s.changes:
        at = ids.index(c.after.run_id)
        print(f"change at run {at + 1}: {c.text()}  (p {c.p:.2g})")
        near = abs(at - baseline) <= NEAR and c.ratio < 1.0
        (found if near else false_changes).append(c)
    for o in s.outliers:
        print(f"outlier: run {ids.index(o.run.run_id) + 1}, {o.run.ips:.0f} images/sec, "
              f"{o.ratio - 1:+.1%} off its level")
    alone = build_history(records[:baseline])
    alone_changes = alone.changes
    print(f"history of the first {baseline} runs alone: {len(alone_changes)} change(s), "
          f"{len(alone.outliers)} outlier(s); noise within {alone.series[0].fit.noise.within:.2%}, "
          f"between {alone.series[0].fit.noise.between:.2%}" if alone.series else "no series")
    no_jobs = fit_levels([r.ips for r in s.runs])
    print(f"the same series without job ids: changes at runs {[sh_.index + 1 for sh_ in no_jobs.shifts]}")

    print("\nVERDICT")
    if not found:
        ok = False
        print(f"FAIL: no slowdown found within {NEAR} runs of run {baseline + 1}")
    else:
        c = found[0]
        named = [x for x in c.suspects if x.field.startswith("warnings: busy CPU")]
        print(f"change found: {c.percent:+.1f}% (95% CI {(c.low - 1) * 100:+.1f}% to {(c.high - 1) * 100:+.1f}%), "
              f"p {c.p:.2g}, between run {ids.index(c.before.run_id) + 1} and run {ids.index(c.after.run_id) + 1} "
              f"(planted at run {baseline + 1})")
        print("suspects: " + ("; ".join(x.text() for x in c.suspects) or "none"))
        if not named:
            ok = False
            print("FAIL: the busy CPU is not among the suspects")
    print(f"false changes: {len(false_changes)} in the whole series, {len(alone_changes)} in the first "
          f"{baseline} runs alone")
    if false_changes or alone_changes:
        ok = False
        print("FAIL: a change called where none was planted")
    json_changes = [c for ser in hist["series"] for c in ser["changes"]]
    print(f"history --format json: {len(json_changes)} change(s): " + "; ".join(c["text"] for c in json_changes))
    print(f"machine now: {_load_text()}")
    print("PASS" if ok else "FAIL")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/tmp/histcheck", help="Folder of the store, the suite, the report.")
    p.add_argument("--sweeps", type=int, default=6, help="Baseline sweeps (jobs).")
    p.add_argument("--repeats", type=int, default=5, help="Runs per sweep.")
    p.add_argument("--slow-sweeps", type=int, default=2, help="Sweeps with the CPU burner beside them.")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-batches", type=int, default=600, help="Timed steps (at least 1 s for the busy-CPU guard).")
    p.add_argument("--check-only", action="store_true", help="Read the store in --out as it is; make nothing.")
    args = p.parse_args(argv)
    print(f"start: {_load_text()}", flush=True)
    store = Path(args.out) / "store" if args.check_only else make_store(args)
    return 0 if check(store, Path(args.out), args.sweeps * args.repeats) else 1


if __name__ == "__main__":
    sys.exit(main())
