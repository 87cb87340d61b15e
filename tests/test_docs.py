"""The docs (issue 19 item 8): a short README, and a flag reference generated from the option
metadata that drives ``--help``, so no flag can be missing from it. ``make test`` also runs
``mkdocs build --strict``, which fails on a broken link; these checks need no MkDocs."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from cnnbench.config import RunConfig, flag_for

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_MAX_LINES = 150


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _generator()


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the detail to a page of docs/")


def _run_flag(field: dataclasses.Field) -> str:
    flag = flag_for(field.name)
    return "--no-" + flag[2:] if field.default is True else flag  # a switch that is on by default


def test_every_run_flag_is_in_the_generated_reference(gen: ModuleType) -> None:
    reference = gen.command_reference("run")
    missing = [_run_flag(f) for f in dataclasses.fields(RunConfig) if f"`{_run_flag(f)}`" not in reference]
    assert not missing, f"cnnbench run flags missing from the generated reference: {missing}"
    for flag in ("--quiet", "--scaling"):  # the command's own flags, besides RunConfig's
        assert f"`{flag}`" in reference


def test_the_reference_carries_the_metadata(gen: ModuleType) -> None:
    """Help text and choices come from ``option(...)``, not from a copy."""
    reference = gen.command_reference("run")
    precision = next(f for f in dataclasses.fields(RunConfig) if f.name == "precision")
    row = next(line for line in reference.splitlines() if line.startswith("| `--precision`"))
    assert all(f"`{choice}`" in row for choice in precision.metadata["choices"])
    assert precision.metadata["help"].split("(")[0].strip() in row


def test_every_command_has_a_page_with_its_flags(gen: ModuleType) -> None:
    asked = {m.group(1) for page in DOCS.rglob("*.md")
             for m in gen.FLAGS_MARKER.finditer(page.read_text(encoding="utf-8"))}
    commands = set(gen.command_parsers())
    assert {"run", "sweep", "report", "compare", "import", "results list", "results export", "models",
            "sysinfo", "data", "make-dataset"} <= commands
    assert asked == commands, f"pages without their flags: {commands - asked}; unknown: {asked - commands}"
    for command in commands:
        assert "| Flag | Value | What it does |" in gen.command_reference(command)


def test_tf_flags_and_api_references_build(gen: ModuleType) -> None:
    from cnnbench.config.tf_flags import TF_FLAGS

    tf = gen.tf_flags_reference()
    assert all(f"--{name}" in tf for name in TF_FLAGS)
    api = gen.api_reference()
    assert all(f"`cnnbench.api.{name}`" in api for name in ("run", "read_results", "compare_results", "make_report",
                                                            "run_study"))


def test_readme_and_docs_links_resolve() -> None:
    """Relative links of the README land on files (MkDocs checks the pages' own links)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages == set(re.findall(r":\s+(\S+\.md)\s*$", nav, re.MULTILINE)), "every page is in mkdocs.yml's nav"


def test_the_home_page_and_the_readme_link_every_commands_page(gen: ModuleType) -> None:
    """Issue 42 item 4: the docs' home page once left study, comm and predict out of its list."""
    top = {command.split()[0] for command in gen.command_parsers()}
    for where in (DOCS / "index.md", ROOT / "README.md"):
        text = where.read_text(encoding="utf-8")
        prefix = "docs/" if where.name == "README.md" else ""
        missing = sorted(c for c in top if f"]({prefix}commands/{c}.md)" not in text)
        assert not missing, f"{where.name} does not link the page of: {missing}"


def test_the_readme_names_the_extra_an_export_format_needs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Parquet" in text and "[parquet]" in text


def _path_section() -> str:
    text = (DOCS / "layout.md").read_text(encoding="utf-8")
    return text.split("## From `cnnbench.run` to the first timed step", 1)[1].split("\n## ", 1)[0]


def test_the_run_path_in_the_layout_page_names_what_exists() -> None:
    """Issue 45 item 7: the modules and entry points from ``cnnbench.run`` to the first timed step
    are listed in docs/layout.md; a renamed or removed one fails here, so the list cannot rot, and
    no two layers' entry points share a name."""
    section = _path_section()
    modules = re.findall(r"`([\w/]+\.py)`", section)
    missing = [m for m in modules if not (ROOT / "src" / "cnnbench" / m).is_file()]
    assert modules and not missing, f"docs/layout.md names modules that do not exist: {missing}"
    chain = re.findall(r"^\d+\. `([\w/]+\.py)`", section, re.MULTILINE)
    count = re.search(r"Count: (\d+) modules", section)
    assert count and int(count.group(1)) == len(chain), "the stated count is the length of the list"
    entry = section.split("The entry points along it:", 1)[1].split(". ", 1)[0]
    names = re.findall(r"`([\w.]+)`", entry)
    for name in names:
        module, attr = name.rsplit(".", 1)
        assert hasattr(importlib.import_module(f"cnnbench.{module}"), attr), f"docs/layout.md names {name}"
    attrs = [name.rsplit(".", 1)[1] for name in names]
    repeated = sorted({a for a in attrs if attrs.count(a) > 1})
    assert not repeated, f"two layers' entry points share a name: {repeated}"


def test_the_reference_fills_in_what_help_fills_in(gen: ModuleType) -> None:
    """``%(kinds)s`` and the like read in the docs as ``--help`` prints them."""
    left = [c for c in gen.command_parsers() if "%(" in gen.command_reference(c) or "%%" in gen.command_reference(c)]
    assert not left, f"raw %(...)s or %% in the reference of {left}"
    assert "scaling, effects" in gen.command_reference("report")
