"""Where the floor of a cold read of 100,000 engine records is, and the columnar route measured.

Issue 22 asks for the first read of 100,000 engine records (409 MB of JSON lines, 100 step times
each) in under 3 s, and names a columnar cache (Arrow / Parquet through pyarrow) as one route.
This script measures, on the same store as ``report_store_speed.py`` (made there if missing):

- **per line, one process** (CPU time, best of ``--rounds``): ``orjson.loads`` of each line
  alone, the floor of any reader that makes Python records of the JSON; and what each process of
  cnnbench's cold read does per line (``parse_line``: orjson, the migrations, the record contract;
  then ``CachedRecords.add``: the shared sections, the step-time column);
- **pyarrow's own reader** (a fresh process each): ``pyarrow.json.read_json`` of the whole file
  (multi-threaded C++, every CPU), then ``Table.to_pylist()`` (the records as Python dicts, as
  every reader of cnnbench takes them); and a columnar cache of that table (Arrow IPC, memory
  mapped) read back whole as records, against cnnbench's warm read (lazy, as the report reads);
- **this machine's new memory**: the same bytes written into a new file, then again after it was
  removed (its pages just freed), and read into new memory against into one reused buffer;
- **writing a cache-sized file in calls of each size** (``--only writes``): 160 MiB into a new
  file in one ``write`` call, in calls of 2 MiB, of 2044 KiB, of 1 MiB (``files.WRITE_PIECE``, what
  cnnbench's writers hand the system at a time) and of 256 KiB, the sizes alternating from round to round
  and every file kept until the end (a removal frees pages the next write would reuse).

    .venv/bin/python benchmarks/read_floor.py --rounds 3
    .venv/bin/python benchmarks/read_floor.py --only writes --rounds 5

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

ARROW_READ = ("import sys, pyarrow.json as pj; t = pj.read_json(sys.argv[1], "
              "read_options=pj.ReadOptions(block_size=16 << 20)); assert t.num_rows > 1000")
ARROW_RECORDS = ARROW_READ + "; r = t.to_pylist(); assert len(r) > 1000"
ARROW_WRITE = ARROW_READ + ("; import pyarrow.feather as pf; "
                            "pf.write_feather(t, sys.argv[2], compression='uncompressed')")
ARROW_WARM = ("import sys, pyarrow.feather as pf; t = pf.read_table(sys.argv[2], memory_map=True); "
              "r = t.to_pylist(); assert len(r) > 1000")
PER_LINE_LINES = 20_000
"""Lines of the per-line figures: their records kept, as a reader keeps them (all 100,000 at once would
measure this machine's new memory as much as the parsing)."""
CNNBENCH_WARM = ("import sys; from cnnbench.results.store import read_records; "
                 "r, _ = read_records(sys.argv[1], step_times='lazy'); assert len(r) > 1000")


def per_line(lines: list[bytes], rounds: int) -> dict[str, float]:
    """Best CPU seconds over ``rounds`` of each way of taking every line in."""
    import orjson

    from cnnbench.results.cache import CachedRecords
    from cnnbench.results.lines import loads, parse_line

    def cnnbench_part() -> None:
        part = CachedRecords(digest=None)
        for raw in lines:
            record, _ = parse_line(raw, loads, truncated=False)
            if record is not None:
                part.add(record)

    ways = {"orjson.loads alone": lambda: [orjson.loads(raw) for raw in lines],
            "cnnbench: parse_line + CachedRecords.add": cnnbench_part}
    best = {}
    for label, way in ways.items():
        times = []
        for _ in range(rounds):
            t0 = time.process_time()
            way()
            times.append(time.process_time() - t0)
        best[label] = min(times)
    return best


def new_memory(size: int, where: Path) -> dict[str, float]:
    """Seconds to write ``size`` bytes into a new file, then again once it was removed; and to
    read a file of that size into new memory against into a reused buffer."""
    block = os.urandom(1 << 20) * (size >> 20)
    out = {}
    for label in ("write into a new file (first)", "write into a new file (after a removal)"):
        path = where / "floor.bin"
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            f.write(block)
        out[label] = time.perf_counter() - t0
        if "first" in label:
            path.unlink()
    fd = os.open(where / "floor.bin", os.O_RDONLY)
    try:
        t0 = time.perf_counter()
        data = os.pread(fd, size, 0)
        out["read into new memory"] = time.perf_counter() - t0
        del data
        buf = bytearray(16 << 20)
        t0 = time.perf_counter()
        for at in range(0, size, len(buf)):
            os.preadv(fd, [buf], at)
        out["read 16 MiB at a time into one buffer"] = time.perf_counter() - t0
    finally:
        os.close(fd)
        (where / "floor.bin").unlink()
    return out


WRITE_CALLS = {"one call": 0, "2 MiB calls": 2 << 20, "2044 KiB calls": 2044 << 10, "1 MiB calls": 1 << 20,
               "256 KiB calls": 256 << 10}


def writes_per_call_size(where: Path, rounds: int, size: int = 160 << 20) -> dict[str, list[float]]:
    """Seconds to write ``size`` bytes into a new file, per size of ``write`` call, ``rounds`` each
    (the order turned each round; every file kept until all are written)."""
    block = memoryview(os.urandom(1 << 20) * (size >> 20))
    out: dict[str, list[float]] = {label: [] for label in WRITE_CALLS}
    written: list[Path] = []
    try:
        for rnd in range(rounds):
            labels = list(WRITE_CALLS)
            for label in labels[rnd % len(labels):] + labels[:rnd % len(labels)]:
                step = WRITE_CALLS[label] or size
                path = where / f"calls-{rnd}-{step}.bin"
                written.append(path)
                t0 = time.perf_counter()
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    for at in range(0, size, step):
                        os.write(fd, block[at:at + step])
                finally:
                    os.close(fd)
                out[label].append(time.perf_counter() - t0)
    finally:
        for path in written:
            path.unlink(missing_ok=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "cnnbench-bench-stores")
    ap.add_argument("--only", choices=["all", "writes"], default="all",
                    help="writes: only the writes of a new 160 MiB file per size of write call")
    args = ap.parse_args()
    if args.only == "writes":
        args.data.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=args.data) as tmp:
            print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {os.uname().sysname} "
                  f"{os.uname().release}", flush=True)
            for label, seconds in writes_per_call_size(Path(tmp), args.rounds).items():
                print(f"| 160 MiB into a new file, {label} | {' '.join(f'{x:.3f}' for x in seconds)} s |")
        return 0
    from report_store_speed import READ, drop_cache, make_stores, timed, use_record_caches

    store = make_stores(args.data, {"cold"})["engine-100k"]
    use_record_caches(args.data)
    (path,) = sorted(store.glob("*.jsonl"))
    src = HERE.parent / "src"
    print(f"{path}: {path.stat().st_size / 1e6:.0f} MB; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; CPUs: {os.cpu_count()}", flush=True)
    with tempfile.TemporaryDirectory(dir=args.data) as tmp:
        feather = Path(tmp) / "records.arrow"
        py = sys.executable
        cases = [("pyarrow.json.read_json", [py, "-c", ARROW_READ, str(path)], None),
                 ("pyarrow.json.read_json + to_pylist", [py, "-c", ARROW_RECORDS, str(path)], None),
                 ("cnnbench cold read (lazy)", [py, "-c", READ, str(store), "lazy"],
                  lambda: drop_cache(store)),
                 ("writing the Arrow IPC cache (read_json included)", [py, "-c", ARROW_WRITE, str(path), str(feather)],
                  None),
                 ("Arrow IPC cache, memory-mapped, to_pylist (warm)", [py, "-c", ARROW_WARM, str(path), str(feather)],
                  None),
                 ("cnnbench warm read (lazy)", [py, "-c", CNNBENCH_WARM, str(store)], None)]
        for rnd in range(args.rounds):
            for label, cmd, setup in cases:
                try:
                    wall, cpu, peak = timed(cmd, src, setup)
                except Exception as exc:  # pyarrow missing, or its reader refusing the file
                    print(f"| {label} | failed: {str(exc).splitlines()[0][:160]} |", flush=True)
                    continue
                print(f"| {label} (round {rnd + 1}) | {wall:.2f} s wall | {cpu:.2f} s CPU | {peak:,.0f} MB peak |",
                      flush=True)
            print(f"(feather file: {feather.stat().st_size / 1e6:.0f} MB)" if feather.exists() else "", flush=True)
        for label, seconds in new_memory(path.stat().st_size // (1 << 20) << 20, Path(tmp)).items():
            print(f"| {label}, {path.stat().st_size >> 20} MiB | {seconds:.2f} s |", flush=True)
    with open(path, "rb") as f:  # the first lines: each round's records freed before the next
        lines = [f.readline() for _ in range(PER_LINE_LINES)]
    for label, cpu in per_line(lines, args.rounds).items():
        print(f"| {label} | {cpu / len(lines) * 1e6:.1f} µs a line ({len(lines):,} lines, CPU) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
