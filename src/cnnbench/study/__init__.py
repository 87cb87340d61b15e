"""Study recipes: a suite with a report layout and a smoke size, run end to end (``cnnbench study``).
Above sweep and report, below api: imports cnnbench.sweep, report, analysis, config, results and (for a
study's generated data set, lazily) data; never torch at import.

    from cnnbench.study import StudyRequest, execute_study, shipped_studies
    shipped_studies()                       # {"host-cpus": "...", "input-location": "...", ...}
    run = execute_study(StudyRequest("host-cpus", smoke=True))
    run.written.summary                     # report/host-cpus-smoke/summary.md

The shipped studies are package data (``cnnbench/study/recipes/*.yaml``); a study file of one's
own is written the same way (:mod:`cnnbench.study.recipe`).
"""

from __future__ import annotations

from cnnbench.study.recipe import Study, StudyError, StudyLayout, load_study, shipped_studies
from cnnbench.study.run import StudyRequest, StudyRun, execute_study, prepare, prepare_data, report_study

__all__ = ["Study", "StudyError", "StudyLayout", "StudyRequest", "StudyRun", "load_study", "prepare", "prepare_data",
           "report_study", "execute_study", "shipped_studies"]
