"""Reports from run records: build (the document: tables, observations, figures), tables/ (kinds), render/ (formats).
Imports cnnbench.analysis, results, config, machine, models (cost, lazily) and words; never torch, nor cnnbench.compare.

    from cnnbench.report import ReportOptions, build_report, write_report
    report = build_report(records, ReportOptions(rows=("model",), columns=("machine",), where=["model=resnet50"]))
    write_report(report, "out/")          # summary.md, report.html, tables/*.csv|json, plots/*.svg

or, from results folders/files, :func:`make_report`. Nothing here imports torch, and
matplotlib is imported only to draw plots.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cnnbench.report.build import NoMatchingRecords, ReportError, ReportOptions, build_report
from cnnbench.report.document import Report
from cnnbench.report.options import OBSERVATION_KINDS
from cnnbench.report.output import Written, write_report

__all__ = [
    "OBSERVATION_KINDS",
    "NoMatchingRecords",
    "Report",
    "ReportError",
    "ReportOptions",
    "Written",
    "build_report",
    "make_report",
    "write_report",
]


def make_report(
    results: Sequence[str | os.PathLike[str]],
    outdir: str | os.PathLike[str],
    options: ReportOptions | None = None,
) -> tuple[Report, Written]:
    """Read records from results folders/files, build the report and write it to ``outdir``."""
    from dataclasses import replace

    from cnnbench.results.store import read_records

    records, problems = read_records(list(results), step_times="lazy")  # step times feed the significance test
    opts = options or ReportOptions()
    if problems:
        opts = replace(opts, problems=[*opts.problems, *map(str, problems)])
    report = build_report(records, opts)
    return report, write_report(report, outdir)
