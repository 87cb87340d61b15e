"""build_report pauses the cycle collector while it builds, and always leaves it as it found it."""

from __future__ import annotations

import gc

import pytest

from cnnbench.report import NoMatchingRecords, ReportOptions, build_report
from cnnbench.report.gc_pause import collector_paused
from tests.report_fixtures import scaling_records


def test_collector_paused_during_the_block_and_enabled_after_it() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_enabled_again_after_an_error() -> None:
    with pytest.raises(NoMatchingRecords):
        build_report([], ReportOptions())
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_collector_left_disabled_when_it_was() -> None:
    gc.disable()
    try:
        report = build_report(scaling_records(), ReportOptions(max_plots=0))
        assert report.tables
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_report_built_with_the_collector_enabled_after() -> None:
    report = build_report(scaling_records(), ReportOptions(max_plots=0))
    assert report.tables
    assert gc.isenabled()
