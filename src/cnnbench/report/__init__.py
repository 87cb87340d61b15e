"""Reports from run records: build (the document: tables, observations, figures), tables/ (kinds), render/ (formats).
Imports cnnbench.analysis, results, config, machine, models (cost, lazily) and words; never torch, nor cnnbench.compare.

    from cnnbench.report import ReportOptions, build_report, write_report
    report = build_report(records, ReportOptions(rows=("model",), columns=("machine",), where=["model=resnet50"]))
    write_report(report, "out/")          # summary.md, report.html, tables/*.csv|json, plots/*.svg

or, from results folders/files, :func:`report_results`. Nothing here imports torch, and
matplotlib is imported only to draw plots.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cnnbench.report.build import NoMatchingRecords, ReportError, ReportOptions, build_report
    from cnnbench.report.document import Report
    from cnnbench.report.make import report_results
    from cnnbench.report.options import OBSERVATION_KINDS
    from cnnbench.report.output import Written, write_report

_HOMES = {
    "NoMatchingRecords": "build", "ReportError": "build", "ReportOptions": "build", "build_report": "build",
    "Report": "document", "OBSERVATION_KINDS": "options", "Written": "output", "write_report": "output",
    "report_results": "make",
}
"""Where each public name lives: loaded on first use, so that the light modules of this
package (``folder``, ``reuse``) load without the tables and the rendering."""


def __getattr__(name: str) -> Any:
    """A public name, or a submodule (``cnnbench.report.output``), loaded on first use."""
    home = _HOMES.get(name)
    if home is None:
        try:
            return importlib.import_module(f"{__name__}.{name}")  # the import sets it here too
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})

__all__ = [
    "OBSERVATION_KINDS",
    "NoMatchingRecords",
    "Report",
    "ReportError",
    "ReportOptions",
    "Written",
    "build_report",
    "report_results",
    "write_report",
]
