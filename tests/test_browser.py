"""Issue 20, item 9: ``report.html`` in a real browser (headless Chromium driven by Playwright;
the checks are in :mod:`tests.browser`).

Each report opens without a console or page error and fetches nothing; every link of its table
of contents lands on its heading; every plot renders with a non-zero size; in an 800 px window
the page is no wider than the window, and a table wider than that scrolls inside its own box.
The checks themselves are shown to fail on broken copies of a report.

Without Chromium the tests skip, naming the install command; ``.ci/run`` installs it and sets
``CNNBENCH_REQUIRE_BROWSER=1``, which turns that skip into a failure. The screenshots of the docs
(docs/img/report-*.png) are rewritten on purpose only:

    CNNBENCH_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest -q tests/test_browser.py -k screenshot
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cnnbench.cli import main
from tests import browser as B
from tests.report_fixtures import record, write_store
from tests.test_golden import FIXTURES

DOCS_IMG = Path(__file__).parent.parent / "docs" / "img"
UPDATE_SCREENSHOTS = os.environ.get("CNNBENCH_UPDATE_SCREENSHOTS") == "1"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium():
    why = B.missing_browser()
    if why:
        if os.environ.get("CNNBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(f"CNNBENCH_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    with B.chromium() as browser:
        yield browser


def _report(store: Path, out: Path, *args: str) -> Path:
    assert main(["report", str(store), "-o", str(out), *args]) == 0
    return out


@pytest.fixture(scope="module")
def fixtures_report(tmp_path_factory) -> Path:
    """The report of tests/fixtures (as tests/test_golden.py builds it), with its plots."""
    root = tmp_path_factory.mktemp("fixtures")
    assert main(["import", "tf-cnn-benchmarks", str(FIXTURES), "--results-dir", str(root / "store")]) == 0
    return _report(root / "store", root / "report", "--title", "Fixtures")


LONG_NAME = "dgx_a100_640gb_partition_gpu_large_node_0001_cluster_west_europe_rack_17_slot_3_" * 2
WIDE_MACHINES = [LONG_NAME] + [f"hyperplane-8x-a100-sxm4-80gb-node-{i:02d}" for i in range(1, 12)]


@pytest.fixture(scope="module")
def wide_report(tmp_path_factory) -> Path:
    """Twelve machines with long names as columns: tables far wider than an 800 px window, and
    a name with no place to break a line: the fastest, so an observation says it in a sentence."""
    root = tmp_path_factory.mktemp("wide")
    recs = [record(model, machine, 100.0 * (2.2 - i / 10) * n * (0.95 if n > 1 else 1.0), num_devices=n,
                   environment={"gpu_model": f"GPU-{i}", "cpu_model": "AMD EPYC 7763 64-Core Processor"})
            for i, machine in enumerate(WIDE_MACHINES) for model in ("resnet50", "vgg16") for n in (1, 2)]
    write_store(root / "store", recs)
    return _report(root / "store", root / "report", "--title", "Twelve machines")


@pytest.fixture(params=["fixtures", "wide"])
def any_report(request) -> Path:
    return request.getfixturevalue(f"{request.param}_report")


def test_the_report_reads_cleanly_in_chromium(chromium, any_report):
    assert B.report_problems(chromium, any_report) == []
    with B.open_report(chromium, any_report) as seen:
        plots = B.plot_boxes(seen.page)
        links = seen.page.evaluate(B.CONTENTS_JS)
    drawn = list((any_report / "plots").glob("*.svg"))
    assert drawn and len(plots) == len(drawn), "every drawn plot is on the page"
    assert len(links) > 3, "the contents were checked"


def test_a_wide_table_scrolls_in_its_box_not_the_page(chromium, wide_report):
    with B.open_report(chromium, wide_report, B.NARROW) as seen:
        facts = B.width_facts(seen.page)
    assert facts["window"] <= B.NARROW["width"]
    assert facts["page"] <= facts["window"]
    wide = [t for t in facts["tables"] if t["table"] > facts["window"]]
    assert wide, "the wide report has a table wider than the window (else this test proves nothing)"
    for t in wide:
        assert t["boxScroll"] > t["box"] and t["moved"] > 0, t


def test_the_history_timeline_shows_in_chromium(chromium, tmp_path):
    """A store with a planted step: the History section's timeline renders, and the page reads cleanly."""
    from tests.test_report_history import _step, _store

    report = _report(_store(tmp_path / "store", _step()), tmp_path / "report")
    assert B.report_problems(chromium, report) == []
    with B.open_report(chromium, report) as seen:
        timelines = [p for p in B.plot_boxes(seen.page) if p["alt"].startswith("History: ")]
    assert len(timelines) == 1 and min(timelines[0]["width"], timelines[0]["height"]) >= B.SMALLEST_PLOT


def _studies() -> list[str]:
    try:
        from cnnbench.study import shipped_studies
    except ImportError:  # pragma: no cover - before cnnbench study existed
        return []
    return sorted(shipped_studies())


@pytest.mark.slow
@pytest.mark.parametrize("study", _studies())
def test_each_smoke_study_report_reads_cleanly_in_chromium(chromium, smoke_study, study):
    """The report of ``cnnbench study NAME --smoke`` (the run is shared with any other test of it)."""
    _, report = smoke_study(study)
    assert B.report_problems(chromium, report) == []
    with B.open_report(chromium, report) as seen:
        assert len(B.plot_boxes(seen.page)) == len(list((report / "plots").glob("*.svg"))) > 0


BREAKAGES = {
    # what is broken: (text replaced in report.html, its replacement, words of the problem found)
    "tables widen the page": ("overflow-x:auto", "overflow-x:visible", "px wide in a"),
    "a contents link misses": ('id="systems"', 'id="systems-moved"', "contents link #systems"),
    "a plot is empty": ('src="data:image/svg+xml;base64,', 'src="data:image/svg+xml;base64,AAAA', "renders at"),
    "a script fails": ("</body>", "<script>window.undefinedFunction()</script></body>", "page error"),
    "the console logs an error": ("</body>", "<script>console.error('boom')</script></body>", "console error"),
    "the page fetches": ("</body>", '<img alt="x" src="http://127.0.0.1:9/x.png"></body>', "request for http"),
}


@pytest.mark.parametrize("broken", BREAKAGES)
def test_the_checks_find_a_broken_page(chromium, fixtures_report, tmp_path, broken):
    old, new, found = BREAKAGES[broken]
    copy = tmp_path / "report"
    shutil.copytree(fixtures_report, copy)
    page = copy / "report.html"
    text = page.read_text()
    assert old in text
    page.write_text(text.replace(old, new, 1))
    problems = B.report_problems(chromium, copy)
    assert any(found in p for p in problems), problems


@pytest.mark.parametrize(("name", "anchor"), [("report-top", ""), ("report-throughput", "syn-replicated-fp32-1gpus")])
def test_screenshot(chromium, fixtures_report, tmp_path, name, anchor):
    """Screenshots of the fixtures report for docs/reports.md: written to docs/img only with
    CNNBENCH_UPDATE_SCREENSHOTS=1, otherwise to a temporary folder (checked, then dropped)."""
    png = (DOCS_IMG if UPDATE_SCREENSHOTS else tmp_path) / f"{name}.png"
    B.screenshot(chromium, fixtures_report, png, anchor)
    data = png.read_bytes()
    assert data.startswith(PNG) and 10_000 < len(data) < 400_000, len(data)
    shown = DOCS_IMG / f"{name}.png"
    assert shown.is_file(), f"docs/reports.md shows {shown.name}: regenerate with CNNBENCH_UPDATE_SCREENSHOTS=1"
