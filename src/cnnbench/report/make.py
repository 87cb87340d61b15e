"""A report from results folders or files, in one call: :func:`report_results`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from cnnbench.report.build import ReportOptions, build_report
from cnnbench.report.document import Report
from cnnbench.report.output import Written, write_report
from cnnbench.results.store import read_records


def report_results(
    results: Sequence[str | os.PathLike[str]],
    outdir: str | os.PathLike[str],
    options: ReportOptions | None = None,
) -> tuple[Report, Written]:
    """Read records from results folders/files, build the report and write it to ``outdir``."""
    records, problems = read_records(list(results), step_times="lazy")  # step times feed the significance test
    opts = options or ReportOptions()
    if problems:
        opts = replace(opts, problems=[*opts.problems, *map(str, problems)])
    report = build_report(records, opts)
    return report, write_report(report, outdir)
