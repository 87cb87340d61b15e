"""PNG against SVG for a report's plots: the same figures drawn and saved both ways, alternating.

    .venv/bin/python benchmarks/plot_format.py            # the 8 default plots of 10,000 records, 2 rounds

Builds the report of ``report_speed.py``'s synthetic records, then, per round, draws every
figure and saves it as PNG (matplotlib's default), PNG with zlib level 1, and SVG with text
kept as text (``svg.fonttype: none``, as ``cnnbench report`` writes them). Prints the time to
draw and save, the time in ``savefig`` alone, and the size of the last file. A benchmark, not
a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_speed import synthetic_records


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)

    import matplotlib

    from cnnbench.report import ReportOptions, build_report
    from cnnbench.report.render import plot_scaling, plot_style, plot_throughput, plots
    from cnnbench.results.store import read_records

    tmp = Path(tempfile.mkdtemp())
    store = tmp / "results"
    store.mkdir()
    with open(store / "all.jsonl", "w") as f:
        for r in synthetic_records(args.records):
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    records, _ = read_records([store])
    figures = [f for f in build_report(records, ReportOptions(max_plots=8)).figures if f.drawn]
    makers = {"scaling": plot_scaling._scaling, "throughput": plot_throughput._throughput, "training": plots._training}
    ways = [("png", "png", {}), ("png, zlib 1", "png", {"pil_kwargs": {"compress_level": 1}}), ("svg", "svg", {})]
    print(f"{len(figures)} figures of {args.records:,} records")
    for r in range(1, args.rounds + 1):
        for name, fmt, kwargs in ways:
            start, saving = time.perf_counter(), 0.0
            path = tmp / f"figure.{fmt}"
            with matplotlib.rc_context({"svg.fonttype": "none"}):
                for fig in figures:
                    drawn = makers[fig.kind](fig)
                    t = time.perf_counter()
                    drawn.savefig(path, dpi=plot_style.DPI, format=fmt, **kwargs)
                    saving += time.perf_counter() - t
            print(f"round {r}: {name:<12} draw+save {time.perf_counter() - start:6.3f} s   savefig {saving:6.3f} s   "
                  f"last file {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
