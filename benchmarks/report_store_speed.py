"""Reports, store reads and CSV exports of big stores, old code against new, side by side.

Each figure is one fresh process (interpreter start and imports included, as a user waits for
it), run for the old code (a git worktree of ``--old`` at ``/tmp/cnnbench-old-<rev>``, put first
on ``PYTHONPATH``) and for this tree's, alternating which goes first from round to round. Wall
time and CPU time (user + system of the process and of the processes it started: the drawing
processes) are printed per side and round, with the machine's load average before each round,
and the peak memory (the largest resident set of the process and of those it started).
Each side reads its own hard-linked copy of the stores, so that the two never rebuild each
other's parsed-record cache.

    .venv/bin/python benchmarks/report_store_speed.py --rounds 3
    .venv/bin/python benchmarks/report_store_speed.py --only report --rounds 2
    .venv/bin/python benchmarks/report_store_speed.py --only tables --old c2fcad2 --rounds 6

"again": the same report into the same folder. Since ``cnnbench report`` keeps a report of
unchanged results (:mod:`cnnbench.report.reuse`), "again" writes nothing on the new side;
"again, --rebuild" makes it anyway (plots of unchanged data still kept), as the old code did; the
tables-only case always passes ``--rebuild`` (it measures building the tables).

Stores: 10,000 and 100,000 report records (``report_speed.synthetic_records``: 20 models x 10
machines, 100 step times each) and 100,000 engine-shaped records (``sweep_overhead.write_store``:
4 KB each, 100 step times). They are written once into ``--data`` and kept.

Both sides' modules are compiled first (``compileall``), as an installed package's are: where
``PYTHONDONTWRITEBYTECODE`` is set (this development machine sets it), each process would
otherwise compile every cnnbench module it imports from source (``startup.py --from-source``).

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

READ = ("import sys; from cnnbench.results.store import read_records; "
        "r, _ = read_records(sys.argv[1], step_times={'1': True, '0': False}.get(sys.argv[2], sys.argv[2])); "
        "assert len(r) > 1000")
"""Reads a store: ``1`` with step times as lists, ``0`` without, ``lazy`` as views (the code
before issue 22's lazy read takes any true value as ``1``: lists, as its report read)."""


def make_stores(data: Path, only: set[str]) -> dict[str, Path]:
    """The stores the ``only`` cases read (``tables``, ``plots``: the 10,000-record one alone)."""
    from report_speed import synthetic_records
    from sweep_overhead import write_store

    names = ["report-10k"] if only & {"report", "tables", "plots"} else []
    names += ["report-100k"] if "report" in only else []
    names += ["engine-100k"] if only & {"store", "export", "cold", "list", "warm"} else []
    stores = {name: data / name for name in names}
    for name, n in (("report-10k", 10_000), ("report-100k", 100_000)):
        folder = stores.get(name)
        if folder is not None and not (folder / "all.jsonl").exists():
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / "all.jsonl.tmp", "w") as f:
                for r in synthetic_records(n):
                    f.write(json.dumps(r, separators=(",", ":")) + "\n")
            os.replace(folder / "all.jsonl.tmp", folder / "all.jsonl")
    if "engine-100k" in stores and not any(stores["engine-100k"].glob("*.jsonl")):
        stores["engine-100k"].mkdir(parents=True, exist_ok=True)
        write_store(stores["engine-100k"], 100_000)
    return stores


def side_copy(stores: dict[str, Path], where: Path) -> dict[str, Path]:
    """Hard-linked copies of the stores' files (own folders: own caches)."""
    out = {}
    for name, folder in stores.items():
        dest = where / name
        dest.mkdir(parents=True, exist_ok=True)
        for f in folder.glob("*.jsonl"):
            if not (dest / f.name).exists():
                os.link(f, dest / f.name)
        out[name] = dest
    return out


def old_tree(rev: str) -> Path:
    path = Path(f"/tmp/cnnbench-old-{rev}")
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev], check=True,
                       capture_output=True)
    return path


def timed(cmd: list[str], src: Path, setup=None) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Wall and CPU seconds (user + system, with the processes it started) of one command, and
    its peak memory in MB (the largest resident set of it and of the processes it waited for)."""
    if setup is not None:
        setup()
    env = dict(os.environ, PYTHONPATH=str(src))
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            raise subprocess.CalledProcessError(proc.returncode, cmd, stderr=err.read())
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def use_record_caches(data: Path) -> Path:
    """Keep the parsed-record caches of this script and of every process it starts in ``data``
    (``CNNBENCH_CACHE_DIR``), not in the user's cache folder: what :func:`drop_cache` clears."""
    folder = data / "record-caches"
    os.environ["CNNBENCH_CACHE_DIR"] = str(folder)
    return folder


def record_caches(folder: Path) -> list[Path]:
    """The parsed-record caches of the results files in ``folder`` that exist: in the cache folder
    (cnnbench now), or beside each file (older cnnbench, as an old side writes them)."""
    sys.path.insert(0, str(ROOT / "src"))
    from cnnbench.results.cache import cache_path

    found = [cache_path(p) for p in folder.glob("*.jsonl")] + list(folder.glob(".*.cache"))
    return [c for c in found if c.is_file()]


def drop_cache(folder: Path) -> None:
    for c in record_caches(folder):
        c.unlink()


def rebuild_flag(src: Path) -> list[str]:
    """``--rebuild`` where the code has it (code before it made every report again anyway)."""
    return ["--rebuild"] if "--rebuild" in (src / "cnnbench" / "cli" / "report_cmd.py").read_text() else []


def cases(s: dict[str, Path], out: Path, only: set[str], rebuild: list[str] | None = None,
          ) -> list[tuple[str, list[str], object]]:
    py = sys.executable
    cnnbench = [py, "-m", "cnnbench"]
    r10, r100, e100 = (s.get(name, Path()) for name in ("report-10k", "report-100k", "engine-100k"))
    todo: list[tuple[str, list[str], object]] = []
    if "tables" in only and "report" not in only:
        todo.append(("report 10k, tables only (--no-plots)", [*cnnbench, "report", str(r10), "-o",
                                                                str(out / "t10"), "--no-plots", *(rebuild or [])],
                     None))
    if "plots" in only and "report" not in only:
        todo.append(("report 10k, default plots, first", [*cnnbench, "report", str(r10), "-o", str(out / "p10")],
                     lambda: shutil.rmtree(out / "p10", ignore_errors=True)))
    if "report" in only:
        todo += [
            ("report 10k, tables only (--no-plots)", [*cnnbench, "report", str(r10), "-o", str(out / "t10"),
                                                       "--no-plots", *(rebuild or [])], None),
            ("report 10k, default plots, first", [*cnnbench, "report", str(r10), "-o", str(out / "p10")],
             lambda: shutil.rmtree(out / "p10", ignore_errors=True)),
            ("report 10k, default plots, again", [*cnnbench, "report", str(r10), "-o", str(out / "p10")], None),
            ("report 10k, default plots, again, --rebuild",
             [*cnnbench, "report", str(r10), "-o", str(out / "p10"), *(rebuild or [])], None),
            ("report 100k, default plots, first", [*cnnbench, "report", str(r100), "-o", str(out / "p100")],
             lambda: shutil.rmtree(out / "p100", ignore_errors=True)),
        ]
    cold_lists = ("read 100k engine records, cold", [py, "-c", READ, str(e100), "1"], lambda: drop_cache(e100))
    cold_lazy = ("read 100k, cold, as the report reads", [py, "-c", READ, str(e100), "lazy"],
                 lambda: drop_cache(e100))
    cold_freed = ("read 100k, cold, as the report reads, records freed before exit",  # as every command frees them
                  [py, "-c", READ + "; del r", str(e100), "lazy"], lambda: drop_cache(e100))
    if "cold" in only and "store" not in only:
        todo += [cold_lists, cold_lazy, cold_freed]
    if "store" in only:
        todo += [
            cold_lists,
            ("read 100k engine records, warm", [py, "-c", READ, str(e100), "1"], None),
            ("read 100k, warm, step_times=False", [py, "-c", READ, str(e100), "0"], None),
            ("read 100k, warm, as the report reads", [py, "-c", READ, str(e100), "lazy"], None),
            cold_lazy,
        ]
    if "warm" in only and "store" not in only:
        todo += [
            ("read 100k engine records, warm", [py, "-c", READ, str(e100), "1"], None),
            ("read 100k, warm, as the report reads", [py, "-c", READ, str(e100), "lazy"], None),
            ("read 100k, warm, as the report reads, records freed before exit",
             [py, "-c", READ + "; del r", str(e100), "lazy"], None),
        ]
    if "list" in only:
        listing = [*cnnbench, "results", "list", "--limit", "1", str(e100)]
        todo += [
            ("results list --limit 1 100k, cold", listing, lambda: drop_cache(e100)),
            ("results list --limit 1 100k, warm", listing, None),
        ]
    if "export" in only:
        export = [*cnnbench, "results", "export", str(e100), "--format", "csv", "--no-step-times", "-o",
                  str(out / "e.csv")]
        todo += [
            ("export csv --no-step-times 100k, cold", export, lambda: drop_cache(e100)),
            ("export csv --no-step-times 100k, warm", export, None),
        ]
    return todo


def _span(xs: list[float]) -> str:
    return f"{min(xs):.2f}–{max(xs):.2f} s" if len(xs) > 1 else f"{xs[0]:.2f} s" if xs else "—"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", default="264d1d6", help="The commit to compare with (default: before issue 22's "
                    "report and store work).")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "cnnbench-bench-stores")
    ap.add_argument("--only", default="report,store,export", help="Comma-separated: report, store, export; or "
                    "tables (the 10,000-record report without plots alone), plots (the 10,000-record report with the "
                    "default plots, first in its folder, alone), cold (the store's two cold reads "
                    "alone), warm (the store's warm reads alone: step times as lists, as the report reads, and "
                    "so with the records freed before the interpreter exits), list (results list --limit 1 of the "
                    "100,000 engine records, cold and warm).")
    args = ap.parse_args()
    only = set(args.only.split(","))
    stores = make_stores(args.data, only)
    use_record_caches(args.data)
    sides = {"old": old_tree(args.old) / "src", "new": ROOT / "src"}
    from startup import compiled

    for src in sides.values():  # as installed: cnnbench's modules compiled once, not in every process
        compiled(src, keep=True)
    copies = {side: side_copy(stores, args.data / f"side-{side}") for side in sides}
    outs = {side: args.data / f"out-{side}" for side in sides}
    for side in sides:  # warm both sides' caches (and the page cache) once, untimed
        for folder in copies[side].values():
            subprocess.run([sys.executable, "-c", READ, str(folder), "1"], check=True,
                           env=dict(os.environ, PYTHONPATH=str(sides[side])))
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}: load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        order = list(sides) if rnd % 2 == 0 else list(reversed(sides))
        per_side = {side: cases(copies[side], outs[side], only, rebuild_flag(sides[side])) for side in sides}
        for i in range(len(per_side["new"])):
            for side in order:
                label, cmd, setup = per_side[side][i]
                wall, cpu, peak = timed(cmd, sides[side], setup)  # type: ignore[arg-type]
                results.setdefault(label, {}).setdefault(side, []).append((wall, cpu, peak))
                print(f"  {side:3} {label:<42} wall {wall:6.2f} s  CPU {cpu:6.2f} s  peak {peak:5.0f} MB", flush=True)
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"CPUs: {os.cpu_count()}\n")
    print("| measure | old wall | new wall | old CPU | new CPU | old peak | new peak |\n|--|--:|--:|--:|--:|--:|--:|")
    for label, by_side in results.items():
        cells = [_span([r[k] for r in by_side.get(side, [])]) for k in (0, 1) for side in ("old", "new")]
        peaks = [f"{max(r[2] for r in by_side[side]):,.0f} MB" if by_side.get(side) else "" for side in ("old", "new")]
        print(f"| {label} | " + " | ".join(cells + peaks) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
