"""Open a ``report.html`` in headless Chromium (Debian's ``chromium``, driven by Playwright's Python
API; Playwright cannot download its own browsers here) and say what a reader would find wrong.

:func:`report_problems` checks one report folder: no console message of type error and no page
error; no request leaves the page (it is self-contained: plots are ``data:`` URIs); every link of
the table of contents lands on its heading (the hash is set, the target is the heading of that
text, scrolled into view); every plot renders with a non-zero size; and at a narrow viewport the
page is no wider than the window: a table wider than the page scrolls inside its own box.

Any report folder, from the command line (a line per problem, exit 1 when there is one)::

    .venv/bin/python -m tests.browser report/quick [more report folders]
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTALL = "apt-get install -y --no-install-recommends chromium"
NARROW = {"width": 800, "height": 900}
"""A narrow window: the wide-table check runs at this size."""
WIDE = {"width": 1280, "height": 900}

ARGS = [
    "--no-sandbox",  # root in CI, and containers without user namespaces
    "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
"""Playwright adds --headless and a fresh temporary --user-data-dir of its own (deleted on close)."""


def chromium_path() -> str | None:
    """The Chromium to drive: ``$CNNBENCH_CHROMIUM``, else ``chromium`` on the PATH, else None."""
    wanted = os.environ.get("CNNBENCH_CHROMIUM")
    if wanted:
        return wanted if Path(wanted).is_file() else None
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None)


def missing_browser() -> str | None:
    """Why the browser checks cannot run here (with the command that fixes it), or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "needs Playwright: .venv/bin/pip install -e '.[test]'"
    if chromium_path() is None:
        return f"needs Chromium (Debian's chromium package): {INSTALL}  (.ci/run installs it)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (a Playwright ``Browser``), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Page:
    """What happened while one report was open."""

    page: Any
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@contextmanager
def open_report(browser: Any, folder: Path, viewport: dict[str, int] = NARROW) -> Iterator[Page]:
    """``folder/report.html`` loaded in a new page of ``browser``; console errors, page errors and
    requests for anything but the file itself and ``data:`` URIs are collected as they come."""
    url = (Path(folder) / "report.html").resolve().as_uri()
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    seen = Page(page)
    page.on("console", lambda m: seen.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.errors.append(f"page error: {e}"))
    page.on("request", lambda r: None if r.url == url or r.url.startswith("data:") else seen.requests.append(r.url))
    try:
        page.goto(url, wait_until="load")
        yield seen
    finally:
        context.close()


CONTENTS_JS = """() => [...document.querySelectorAll('nav a[href^="#"]')].map(a => a.getAttribute('href'))"""

LANDED_JS = """(href) => {
  const id = decodeURIComponent(href.slice(1));
  const el = document.getElementById(id);
  if (!el) return {found: false, hash: location.hash};
  const r = el.getBoundingClientRect();
  return {found: true, hash: location.hash, tag: el.tagName, text: el.textContent,
          top: r.top, bottom: r.bottom, height: window.innerHeight};
}"""


def contents_problems(page: Any) -> list[str]:
    """Click every link of the table of contents; each must land on its heading, in view."""
    problems = []
    hrefs = page.evaluate(CONTENTS_JS)
    if not hrefs:
        return ["the table of contents has no links"]
    for href in hrefs:
        link = page.locator(f'nav a[href="{href}"]')
        text = link.text_content()
        link.click()
        at = page.evaluate(LANDED_JS, href)
        if not at["found"]:
            problems.append(f"contents link {href}: no element has that id")
        elif at["hash"] != href:
            problems.append(f"contents link {href}: the location is {at['hash']!r} after the click")
        elif not at["tag"].startswith("H") or at["text"] != text:
            problems.append(f"contents link {href} ({text!r}) lands on <{at['tag']}> {at['text'][:60]!r}")
        elif not (-2 <= at["top"] < at["height"] and at["bottom"] > 0):
            problems.append(f"contents link {href}: its heading is out of view (top {at['top']:.0f} px)")
    return problems


PLOTS_JS = """() => [...document.querySelectorAll('img, svg:not(svg svg)')].map(e => {
  const r = e.getBoundingClientRect(), img = e.tagName === 'IMG';  /* an image's content box, not its border */
  return {tag: e.tagName, alt: e.getAttribute('alt') || '', width: img ? e.clientWidth : r.width,
          height: img ? e.clientHeight : r.height, natural: img ? (e.complete ? e.naturalWidth : 0) : r.width};
})"""
SMALLEST_PLOT = 50
"""px: a plot rendered smaller than this either way cannot be read."""


def plot_boxes(page: Any) -> list[dict[str, Any]]:
    """Every image and inline SVG of the page with its rendered size."""
    return page.evaluate(PLOTS_JS)


def plot_problems(page: Any) -> list[str]:
    return [f"plot {p['alt'] or p['tag']!r} renders at {p['width']:.0f}×{p['height']:.0f} px"
            f" (natural width {p['natural']})" for p in plot_boxes(page)
            if min(p["width"], p["height"]) < SMALLEST_PLOT or p["natural"] <= 0]


WIDTH_JS = """() => {
  const doc = document.documentElement;
  const heading = (e) => { while (e && !/^H[1-6]$/.test(e.tagName)) e = e.previousElementSibling || e.parentElement;
                           return e ? e.textContent : ''; };
  const tables = [...document.querySelectorAll('table')].map(t => {
    const box = t.parentElement, style = getComputedStyle(box);
    const before = box.scrollLeft; box.scrollLeft = 40; const moved = box.scrollLeft; box.scrollLeft = before;
    return {under: heading(box), table: t.scrollWidth, box: box.clientWidth, boxScroll: box.scrollWidth,
            overflow: style.overflowX, moved: moved};
  });
  const past = (e) => !e.closest('table') && (e.getBoundingClientRect().right > doc.clientWidth + 1
                                               || e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0);
  const wide = [...document.body.querySelectorAll('*')].filter(past).slice(0, 3)
    .map(e => e.tagName + ' ' + (e.textContent || '').slice(0, 40));
  return {page: doc.scrollWidth, window: doc.clientWidth, tables: tables, wide: wide};
}"""


def width_facts(page: Any) -> dict[str, Any]:
    """The page's scroll width against the window's, and per table its own width, its box's."""
    return page.evaluate(WIDTH_JS)


def width_problems(page: Any) -> list[str]:
    """The page must not be wider than the window; a table wider than its box must scroll in it."""
    facts = width_facts(page)
    problems = []
    if facts["page"] > facts["window"]:
        problems.append(f"the page is {facts['page']} px wide in a {facts['window']} px window "
                        f"(widened by: {'; '.join(facts['wide'])})")
    for t in facts["tables"]:
        if t["table"] > t["box"] and (t["overflow"] not in ("auto", "scroll") or t["moved"] <= 0):
            problems.append(f"a {t['table']} px table in a {t['box']} px box does not scroll in it "
                            f"(overflow-x {t['overflow']}; under {t['under']!r})")
    return problems


def report_problems(browser: Any, folder: Path) -> list[str]:
    """Everything :mod:`tests.browser` checks, for one report folder (empty: nothing wrong)."""
    with open_report(browser, folder) as seen:
        problems = width_problems(seen.page) + plot_problems(seen.page) + contents_problems(seen.page)
    problems += seen.errors + [f"request for {u} (the page must be self-contained)" for u in seen.requests]
    return problems


def screenshot(browser: Any, folder: Path, png: Path, anchor: str = "", viewport: dict[str, int] = WIDE) -> None:
    """A PNG of the window (not the whole page) with ``folder``'s report scrolled to ``#anchor``."""
    with open_report(browser, folder, viewport) as seen:
        if anchor:
            seen.page.evaluate("(id) => { document.getElementById(id).scrollIntoView(); window.scrollBy(0, -12); }",
                               anchor)
        png.parent.mkdir(parents=True, exist_ok=True)
        seen.page.screenshot(path=str(png), type="png")


def main(argv: list[str]) -> int:
    why = missing_browser()
    if why:
        print(why, file=sys.stderr)
        return 2
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    found = 0
    with chromium() as browser:
        for folder in argv:
            for line in report_problems(browser, Path(folder)):
                print(f"{folder}: {line}")
                found += 1
    print(f"{found} problem(s) in {len(argv)} report(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
