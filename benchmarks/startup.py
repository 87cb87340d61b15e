"""Start-up of each cnnbench command, wall and CPU time (user + system), side by side.

    .venv/bin/python benchmarks/startup.py --rounds 7

Each round runs every command once, in a rotating order, as a fresh process (what a user
waits for), and takes the wall time and the child's CPU time (``resource.getrusage`` of
children); a bare ``python -c pass`` gives the interpreter's own floor. The reading commands
run against a store imported from the tf_cnn_benchmarks fixtures (120 records). Prints a
markdown table of medians and ranges. CPU time varies much less than wall time on a shared
machine, so it is the figure to compare.

cnnbench's modules are compiled first (``compileall``), as an installed package's are: where
``PYTHONDONTWRITEBYTECODE`` is set (this development machine sets it), an editable checkout
would otherwise compile every module it imports from source in every process.
``--from-source`` leaves them uncompiled (and removes compiled ones), to time that case.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "tf_cnn_benchmarks_logs"


def commands(store: Path, out: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "cnnbench"]
    return {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "cnnbench --help": [*cli, "--help"],
        "cnnbench run --help": [*cli, "run", "--help"],
        "cnnbench results list": [*cli, "results", "list", str(store), "--limit", "1"],
        "cnnbench report --no-plots": [*cli, "report", str(store), "-o", str(out), "--no-plots", "--rebuild"],
        "cnnbench models --list": [*cli, "models", "--list"],
    }


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``argv`` as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def compiled(src: Path, keep: bool) -> None:
    """Compile the modules under ``src`` as an install does (``keep``), or remove what is compiled."""
    if keep:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)
    else:
        for cache in src.rglob("__pycache__"):
            shutil.rmtree(cache)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--from-source", action="store_true",
                        help="Time cnnbench's modules compiled from source in every process (no __pycache__).")
    args = parser.parse_args()
    compiled(ROOT / "src", not args.from_source)
    with tempfile.TemporaryDirectory() as tmp:
        store, out = Path(tmp) / "store", Path(tmp) / "report"
        subprocess.run([sys.executable, "-m", "cnnbench", "import", "tf-cnn-benchmarks", str(FIXTURES),
                        "--results-dir", str(store)], check=True, stdout=subprocess.DEVNULL)
        cmds = commands(store, out)
        names = list(cmds)
        walls: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:  # rotate the order each round
                wall, cpu = timed(cmds[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
    print("| command | wall s (median, range) | CPU s (median, range) |")
    print("|--|--|--|")
    for name in names:
        w, c = walls[name], cpus[name]
        print(f"| `{name}` | {statistics.median(w):.2f} ({min(w):.2f}–{max(w):.2f}) | "
              f"{statistics.median(c):.2f} ({min(c):.2f}–{max(c):.2f}) |")


if __name__ == "__main__":
    main()
