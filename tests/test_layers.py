"""The layers of cnnbench, from the bottom, and the imports they may make (issue 19, item 9).

    leaves     errors, words, terminal, lifetime, oom   (one concern each, no package)
    1          machine, config
    2          results, models, data
    3          distributed          (collectives and strategies)
    4          engine               (a run on one device or many)
    5          analysis             (torch-free, above results only)
    5b         predict              (scaling predictions, torch-free)
    6          sweep, report, compare
    6b         study                (a sweep and its report: above both)
    7          api                  (the Python API)
    8          cli

A package imports only from the layers below it (and the leaves), as the table says; the test
reads every ``import`` in src/cnnbench (also those inside functions) and fails on any other.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "cnnbench"

LEAVES = {"errors", "words", "terminal", "lifetime", "oom"}
ALLOWED: dict[str, set[str]] = {
    "machine": set(),
    "config": {"machine"},
    "results": {"config", "machine"},
    "models": {"config", "machine"},
    "data": {"config", "machine", "results"},
    "distributed": {"config", "machine", "models", "results"},
    "engine": {"config", "machine", "results", "models", "data", "distributed"},
    "analysis": {"config", "results"},
    "sweep": {"config", "machine", "results", "models", "engine", "analysis"},
    "predict": {"config", "results", "analysis"},
    "report": {"config", "machine", "results", "models", "analysis", "predict"},
    "compare": {"config", "results", "analysis", "report"},
    "study": {"config", "machine", "results", "data", "analysis", "sweep", "report"},
    "api": {"config", "machine", "results", "models", "data", "engine", "analysis", "sweep", "report", "compare",
            "study"},
    "cli": {"config", "machine", "results", "models", "data", "distributed", "engine", "analysis", "sweep",
            "report", "compare", "study", "api", "predict"},
    "__init__": {"api", "report", "compare", "study"},
    "__main__": {"cli"},
}
"""Per package (or top-level module), the packages it may import besides itself and the leaves."""


def _owner(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, package)`` of every cnnbench import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                     if node.module == "cnnbench" and not a.name.startswith("__")]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "cnnbench" and len(parts) > 1:
                out.append((node.lineno, parts[1]))
    return out


def upward_imports() -> list[str]:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        owner = _owner(path)
        for line, target in _imports(path):
            if target == owner or target in LEAVES:
                continue
            if owner in LEAVES:
                bad.append(f"{path.relative_to(SRC)}:{line}: the leaf module {owner} imports {target}")
            elif target not in ALLOWED.get(owner, set()):
                bad.append(f"{path.relative_to(SRC)}:{line}: {owner} imports {target}")
    return bad


def test_no_package_imports_a_layer_above_it():
    assert upward_imports() == []


def test_every_package_is_in_the_table():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py")}
    assert packages | modules <= set(ALLOWED) | LEAVES | {"api"}, (packages | modules) - set(ALLOWED) - LEAVES


def test_the_check_catches_an_upward_import(tmp_path, monkeypatch):
    """The test bites: a lower package importing a higher one is reported with file and line."""
    fake = tmp_path / "cnnbench"
    (fake / "results").mkdir(parents=True)
    (fake / "results" / "__init__.py").write_text("")
    (fake / "results" / "x.py").write_text("def f():\n    from cnnbench.engine import run_benchmark\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert upward_imports() == ["results/x.py:2: results imports engine"]
