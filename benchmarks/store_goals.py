"""Issue 44's goal figures, old code against new, side by side.

Each side is the ``src`` folder of a cnnbench checkout: ``--old-src`` and ``--new-src`` (default
this tree's). Every command is a fresh ``python -m cnnbench ...`` (interpreter start and imports
included, as a user waits for it) with that side's ``src`` first on ``PYTHONPATH`` and its own
parsed-record cache folder (``CNNBENCH_CACHE_DIR``, one per side and store, under
``--data``/goals-caches), so the two sides never share caches. In every round each measure runs
for both sides, one right after the other, the order turned from round to round; wall time, CPU
time (user + system of the process and of the processes it waited for), peak memory (the largest
resident set among them) and the load average before and after are printed per run, and a table
of the ranges over ``--rounds`` at the end.

Parts (``--parts``), on each store of ``--stores`` (``varied``, ``uniform``: :mod:`store_engines`'
stores of ``--records`` records, written once into ``--data`` and kept):

- ``list``: ``cnnbench results list --limit 1 STORE``, cold (the store's files dropped from the
  page cache, the side's cache folder emptied) and warm (the same command run once just before);
- ``append``: the same after one record is appended: on a copy of the store (``<store>-append``,
  made once), the command run once, one new record (its own ``run_id``) appended to the file of its
  machine, then the command timed; the copy's files are cut back to the store's sizes afterwards;
- ``export``: ``cnnbench results export --format FORMAT --no-step-times STORE`` for each of
  ``--export-formats`` (default csv; output discarded, a Parquet file written under ``--data``'s
  ``goals-out/``), cold and warm;
- ``query``: ``cnnbench results query`` of the median images/sec per model (view ``runs``) and of
  the five runs with the longest tail of step times (view ``steps``), cold and warm;
- ``frame``: ``cnnbench.read_results(STORE, step_times=False)`` in a fresh interpreter (import
  included), cold and warm;
- ``records``: ``cnnbench.api.read_records(STORE, step_times="lazy")`` in a fresh interpreter (import
  included; what ``report``, ``compare`` and ``predict`` read, through the parsed-record cache), cold
  and warm, on each store and on the report's store;
- ``report``: ``cnnbench report --no-plots`` and ``cnnbench report`` (default plots) of a varied
  store of ``--report-records`` records (default 10,000), each into a fresh output folder, with
  the side's caches warm (one untimed report per side first).

    .venv/bin/python benchmarks/store_goals.py --old-src /tmp/old/src --rounds 3
    .venv/bin/python benchmarks/store_goals.py --old-src /tmp/old/src --records 2000 --data /tmp/goals-small
    .venv/bin/python benchmarks/store_goals.py --old-src /tmp/old/src --parts list,append --stores varied

This is a benchmark, not a test: it prints figures and asserts nothing about them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from report_store_speed import use_record_caches  # noqa: E402
from store_engines import (  # noqa: E402
    drop_from_page_cache,
    load,
    span,
    template_record,
    timed,
    varied_record,
    write_store,
)

PARTS = ("list", "append", "export", "query", "frame", "records", "report")
LISTING = ["results", "list", "--limit", "1"]
EXPORT = ["results", "export", "--no-step-times"]
QUERIES = {
    "runs": 'SELECT "config.model", count(*), median("metrics.total_images_per_sec") FROM runs GROUP BY 1',
    "steps": "SELECT run_id, max(seconds) / median(seconds) AS tail FROM steps GROUP BY 1 ORDER BY 2 DESC LIMIT 5",
}


@dataclass(frozen=True)
class Side:
    """One version of the code: its ``src`` folder and its own cache folders."""

    name: str
    src: Path
    caches: Path

    def cache(self, store: Path) -> Path:
        return self.caches / self.name / store.name

    def command(self, store: Path, *args: str) -> list[str]:
        """``python -m cnnbench ARGS`` with this side's code and cache folder for ``store`` (``env``
        execs the interpreter: the process timed is cnnbench's own)."""
        return ["env", f"PYTHONPATH={self.src}", f"CNNBENCH_CACHE_DIR={self.cache(store)}", sys.executable, "-m",
                "cnnbench", *args]

    def python(self, store: Path, code: str) -> list[str]:
        """``python -c CODE`` with this side's code and cache folder for ``store``."""
        return ["env", f"PYTHONPATH={self.src}", f"CNNBENCH_CACHE_DIR={self.cache(store)}", sys.executable, "-c",
                code]


Setup = Callable[[Side, list[str]], None]


@dataclass
class Case:
    label: str
    store: Path  # the store whose cache folder the command uses
    args: Callable[[Side], list[str]]  # cnnbench's arguments for a side
    setup: Setup  # run just before the timed command
    finish: Callable[[], None] = lambda: None  # run after it, timed or failed
    code: str | None = None  # Python to run instead of cnnbench's command line (``args`` unused)

    def command(self, side: Side) -> list[str]:
        return side.command(self.store, *self.args(side)) if self.code is None else side.python(self.store, self.code)


def same(args: list[str]) -> Callable[[Side], list[str]]:
    """The same arguments for either side."""
    return lambda side: args


def cold(store: Path) -> Setup:
    def setup(side: Side, cmd: list[str]) -> None:
        shutil.rmtree(side.cache(store), ignore_errors=True)
        side.cache(store).mkdir(parents=True)
        drop_from_page_cache(store)

    return setup


def warm(side: Side, cmd: list[str]) -> None:
    timed(cmd)  # once just before, untimed: its caches and the page cache kept


def append_copy(store: Path) -> Path:
    """A real copy of ``store`` (appended to, so no hard links), made once; its files cut back to
    the store's sizes."""
    copy = store.with_name(store.name + "-append")
    marker = (store / ".complete").read_text()
    if not (copy / ".complete").exists() or (copy / ".complete").read_text() != marker:
        shutil.rmtree(copy, ignore_errors=True)
        copy.mkdir()
        for f in sorted(store.glob("*.jsonl")):
            shutil.copyfile(f, copy / f.name)
        (copy / ".complete").write_text(marker)
        print(f"copied {store} to {copy}", flush=True)
    restore(store, copy)
    return copy


def restore(store: Path, copy: Path) -> None:
    """The copy's files cut back to the store's sizes (appended records removed)."""
    for f in copy.glob("*.jsonl"):
        original = store / f.name
        if original.exists():
            os.truncate(f, original.stat().st_size)
        else:
            f.unlink()


def appending(store: Path, copy: Path, template: dict[str, Any], uniform: bool,
              first: int) -> tuple[Setup, Callable[[], None]]:
    """The setup of the append case (the command run once, then one new record appended to the
    file of its machine) and its finish (the copy cut back)."""
    from cnnbench.results.store import machine_file_name

    rng = random.Random(4444)
    count = [first]

    def setup(side: Side, cmd: list[str]) -> None:
        restore(store, copy)
        timed(cmd)
        rec = varied_record(template, count[0], rng, uniform)  # run_id and started_at of its own
        count[0] += 1
        with open(copy / machine_file_name(rec["environment"]["machine"]), "a") as f:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    return setup, lambda: restore(store, copy)


def build_cases(parts: set[str], stores: dict[str, Path], report_store: Path, out: Path, n: int,
                formats: Sequence[str],
                template: dict[str, Any]) -> list[Case]:
    todo: list[Case] = []
    for name, store in stores.items():
        if "list" in parts:
            todo += [Case(f"results list --limit 1, {name} {n:,}, cold", store, same([*LISTING, str(store)]),
                          cold(store)),
                     Case(f"results list --limit 1, {name} {n:,}, warm", store, same([*LISTING, str(store)]), warm)]
        if "append" in parts:
            copy = append_copy(store)
            setup, finish = appending(store, copy, template, name == "uniform", n + 1_000_000)
            todo.append(Case(f"results list --limit 1, {name} {n:,}, after one append", copy,
                             same([*LISTING, str(copy)]), setup, finish))
        for fmt in formats if "export" in parts else ():
            target = ["-o", str(out / f"export-{name}.parquet")] if fmt == "parquet" else []
            args = same([*EXPORT, "--format", fmt, *target, str(store)])
            todo += [Case(f"results export {fmt} --no-step-times, {name} {n:,}, cold", store, args, cold(store)),
                     Case(f"results export {fmt} --no-step-times, {name} {n:,}, warm", store, args, warm)]
        if "query" in parts:
            for view, sql in QUERIES.items():
                args = same(["results", "query", sql, str(store)])
                todo += [Case(f"results query over {view}, {name} {n:,}, cold", store, args, cold(store)),
                         Case(f"results query over {view}, {name} {n:,}, warm", store, args, warm)]
        if "frame" in parts:
            code = f"import cnnbench; cnnbench.read_results({str(store)!r}, step_times=False)"
            todo += [Case(f"read_results(step_times=False), {name} {n:,}, cold", store, same([]), cold(store),
                          code=code),
                     Case(f"read_results(step_times=False), {name} {n:,}, warm", store, same([]), warm, code=code)]
    if "records" in parts:
        for name, store in [*stores.items(), ("varied", report_store)]:
            size = int(store.name.rsplit("-", 1)[-1])
            code = f"from cnnbench.api import read_records; read_records({str(store)!r}, step_times='lazy')"
            todo += [Case(f"read_records(step_times='lazy'), {name} {size:,}, cold", store, same([]), cold(store),
                          code=code),
                     Case(f"read_records(step_times='lazy'), {name} {size:,}, warm", store, same([]), warm,
                          code=code)]
    if "report" in parts:
        r = str(report_store)

        def fresh(kind: str) -> Setup:
            def setup(side: Side, cmd: list[str]) -> None:
                shutil.rmtree(out / side.name / kind, ignore_errors=True)

            return setup

        records = f"varied {int(report_store.name.rsplit('-', 1)[-1]):,}"
        todo += [Case(f"report --no-plots, {records}", report_store,
                      lambda side: ["report", "--no-plots", "-o", str(out / side.name / "tables"), r], fresh("tables")),
                 Case(f"report (default plots), {records}", report_store,
                      lambda side: ["report", "-o", str(out / side.name / "plots"), r], fresh("plots"))]
    return todo


def measure(todo: list[Case], sides: list[Side], rounds: int) -> dict[str, dict[str, list[tuple]]]:
    results: dict[str, dict[str, list[tuple]]] = {}
    for rnd in range(rounds):
        print(f"\nround {rnd + 1}: load average {load()}", flush=True)
        order = sides if rnd % 2 == 0 else sides[::-1]
        for case in todo:
            for side in order:
                cmd = case.command(side)
                try:
                    case.setup(side, cmd)
                    before = os.getloadavg()[0]
                    wall, cpu, peak = timed(cmd)
                    loads = f"{before:.2f} → {os.getloadavg()[0]:.2f}"
                except (RuntimeError, IndexError) as exc:  # IndexError: it failed saying nothing
                    print(f"  {side.name:3} {case.label}: failed: {exc}", flush=True)
                    continue
                finally:
                    case.finish()
                results.setdefault(case.label, {}).setdefault(side.name, []).append((wall, cpu, peak, loads))
                print(f"  {side.name:3} {case.label:<58} wall {wall:6.2f} s  CPU {cpu:6.2f} s  peak {peak:6,.0f} MB"
                      f"  load {loads}", flush=True)
    return results


def table(todo: list[Case], sides: list[Side], results: dict[str, dict[str, list[tuple]]], rounds: int) -> None:
    print(f"\n{rounds} round(s); load average now {load()}; CPUs: {os.cpu_count()}\n")
    print("| measure | code | wall | CPU | peak memory | load average (1 min) before → after, each round |\n"
          "|--|--|--:|--:|--:|--|")
    for case in todo:
        for side in sides:
            rs = results.get(case.label, {}).get(side.name)
            if not rs:
                print(f"| {case.label} | {side.name} | failed | | | |")
                continue
            peaks = [r[2] for r in rs]
            low, high = f"{min(peaks):,.0f}", f"{max(peaks):,.0f}"
            peak = f"{low}–{high} MB" if low != high else f"{high} MB"
            print(f"| {case.label} | {side.name} | {span([r[0] for r in rs])} | {span([r[1] for r in rs])} | "
                  f"{peak} | {'; '.join(r[3] for r in rs)} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-src", type=Path, required=True, help="The old code: a cnnbench checkout's src folder.")
    ap.add_argument("--new-src", type=Path, default=ROOT / "src", help="The new code (default: this tree's src).")
    ap.add_argument("--records", type=int, default=100_000, help="Records in each store (default 100,000).")
    ap.add_argument("--report-records", type=int, default=10_000, help="Records in the report's store "
                    "(default 10,000).")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "cnnbench-engines",
                    help="Folder of the stores (written once and kept, as store_engines.py's), caches and outputs.")
    ap.add_argument("--template", type=Path, help="A JSONL file whose first line is the real record to vary "
                    "(default: store_engines.py's, made once in --data).")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", default=",".join(PARTS), help=f"Comma-separated: {', '.join(PARTS)}.")
    ap.add_argument("--stores", default="varied,uniform", help="Comma-separated: varied, uniform.")
    ap.add_argument("--export-formats", default="csv", help="Comma-separated formats of part export: csv, json, "
                    "parquet (default csv).")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if parts - set(PARTS):
        ap.error(f"unknown parts: {', '.join(sorted(parts - set(PARTS)))}")
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; CPUs: {os.cpu_count()}; memory: "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB; load average {load()}; "
          f"Python {sys.version.split()[0]}", flush=True)
    from startup import compiled

    args.data.mkdir(parents=True, exist_ok=True)
    use_record_caches(args.data)  # this script's own reads (none timed) keep theirs in --data
    sides = [Side("old", args.old_src.resolve(), args.data / "goals-caches"),
             Side("new", args.new_src.resolve(), args.data / "goals-caches")]
    for src in dict.fromkeys(side.src for side in sides):  # as installed: compiled once, not in every process
        compiled(src, keep=True)
    for side in sides:
        where = subprocess.run(["env", f"PYTHONPATH={side.src}", sys.executable, "-c",
                                "import cnnbench; print(cnnbench.__file__)"], check=True, capture_output=True,
                               text=True).stdout.strip()
        print(f"{side.name}: {side.src} (imports {where})", flush=True)
    template = template_record(args.data, args.template)
    stores = {name: args.data / f"{name}-{args.records}" for name in args.stores.split(",")}
    if parts & {"list", "append", "export", "query", "frame", "records"}:
        for name, store in stores.items():
            write_store(store, template, args.records, uniform=name == "uniform")
            mb = sum(p.stat().st_size for p in store.glob("*.jsonl")) / 1e6
            print(f"{name} store: {store}, {args.records:,} records, {mb:,.0f} MB", flush=True)
    else:
        stores = {}
    report_store = args.data / f"varied-{args.report_records}"
    out = args.data / "goals-out"
    if parts & {"report", "records"}:
        write_store(report_store, template, args.report_records, uniform=False)
    out.mkdir(parents=True, exist_ok=True)
    todo = build_cases(parts, stores, report_store, out, args.records, args.export_formats.split(","), template)
    if "report" in parts:
        for side in sides:  # the side's caches of the report's store warm, untimed
            try:
                timed(side.command(report_store, "report", "--no-plots", "-o", str(out / side.name / "tables"),
                                   str(report_store)))
            except (RuntimeError, IndexError) as exc:
                print(f"  {side.name:3} warming the report's caches: failed: {exc}", flush=True)
    results = measure(todo, sides, args.rounds)
    table(todo, sides, results, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
