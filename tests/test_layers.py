"""The layers of cnnbench, from the bottom, and the imports they may make (issue 19, item 9).

    leaves     errors, words, terminal, lifetime, oom, version   (one concern each, no package)
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
reads every ``import`` in src/cnnbench (also those inside functions, ``from cnnbench import
__version__`` too, and ``importlib.import_module`` of a name it can read) and fails on any other,
and on any cycle between packages (the root's own lazy imports included).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "cnnbench"

LEAVES = {"errors", "words", "terminal", "lifetime", "oom", "version"}
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
    "compare": {"config", "results", "analysis"},
    "study": {"config", "machine", "results", "data", "analysis", "sweep", "report"},
    "api": {"config", "machine", "results", "models", "data", "engine", "analysis", "sweep", "report", "compare",
            "study"},
    "cli": {"config", "machine", "results", "models", "data", "distributed", "engine", "analysis", "sweep",
            "report", "compare", "study", "api", "predict"},
    "__init__": {"api"},
    "__main__": {"cli"},
}
"""Per package (or top-level module), the packages it may import besides itself and the leaves."""


def _owner(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, package)`` of every cnnbench import in ``path``: ``import``, ``from ... import``
    (``from cnnbench import __version__`` names the package root, ``__init__``) and
    ``import_module`` of a string whose package part can be read (``f"cnnbench.cli.{name}_cmd"``)."""
    out = []
    package = list(path.relative_to(SRC).with_suffix("").parts[:-1])  # where a relative import starts
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level > 0:  # from . import x, from ..engine import y
            base = package[:len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
            full = [*base, *(node.module.split(".") if node.module else [])]
            names = [f"cnnbench.{'.'.join(full)}"] if full else [
                f"cnnbench.{a.name}" if (SRC / a.name).is_dir() or (SRC / f"{a.name}.py").exists()
                else "cnnbench.__init__" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "cnnbench":
                names += [f"cnnbench.{a.name}" if (SRC / a.name).is_dir() or (SRC / f"{a.name}.py").exists()
                          else "cnnbench.__init__" for a in node.names]
        elif isinstance(node, ast.Import):  # a bare ``import cnnbench`` reaches the package root
            names = ["cnnbench.__init__" if a.name == "cnnbench" else a.name for a in node.names]
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            names = [_constant_prefix(node.args[0])]
        for name in names:
            parts = name.split(".")
            if parts[0] == "cnnbench" and len(parts) > 1 and parts[1]:
                out.append((node.lineno, parts[1]))
    return out


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module")


def _constant_prefix(arg: ast.expr) -> str:
    """The text of a string argument up to its first replacement field (``""`` when it starts
    with one, or is not a string: a name in a variable, or ``f"{__name__}.x"``, its own package)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        return prefix if len(arg.values) == 1 or prefix.count(".") >= 2 else ""
    return ""


def package_graph() -> dict[str, set[str]]:
    """Which package imports which (itself and the leaves left out)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        owner = _owner(path)
        for _, target in _imports(path):
            if target != owner and target not in LEAVES:
                graph.setdefault(owner, set()).add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles between packages, each once, from its smallest name (``[a, b, a]``)."""
    cycles: set[tuple[str, ...]] = set()

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                loop = path[path.index(nxt):]
                start = loop.index(min(loop))
                cycles.add(tuple(loop[start:] + loop[:start]))
            else:
                walk(nxt, [*path, nxt])

    for node in sorted(graph):
        walk(node, [node])
    return [[*c, c[0]] for c in sorted(cycles)]


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


def test_no_cycle_between_packages():
    """Issue 45 item 6: five modules read ``__version__`` from the package root, whose lazy
    ``api`` import imports everything: a cycle over 11 packages. The version is a leaf now."""
    assert import_cycles(package_graph()) == []


def test_every_package_is_in_the_table():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py")}
    assert packages | modules <= set(ALLOWED) | LEAVES | {"api"}, (packages | modules) - set(ALLOWED) - LEAVES


def test_the_check_catches_an_upward_import(tmp_path, monkeypatch):
    """The test bites: a lower package importing a higher one is reported with file and line."""
    fake = tmp_path / "cnnbench"
    (fake / "results").mkdir(parents=True)
    (fake / "results" / "__init__.py").write_text("")
    (fake / "results" / "x.py").write_text("def f():\n    from cnnbench.engine import run_in_process\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert upward_imports() == ["results/x.py:2: results imports engine"]


def test_the_check_sees_the_package_root_import_module_and_cycles(tmp_path, monkeypatch):
    fake = tmp_path / "cnnbench"
    for name in ("results", "engine", "cli"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("def __getattr__(name):\n    from cnnbench import engine\n")
    (fake / "results" / "record.py").write_text("from cnnbench import __version__\n")
    (fake / "results" / "load.py").write_text(
        "import importlib\n\ndef f(name):\n    return importlib.import_module(f'cnnbench.engine.{name}')\n")
    (fake / "cli" / "main.py").write_text(
        "from importlib import import_module\nimport_module(f'cnnbench.cli.{1}_cmd')\n")
    (fake / "engine" / "x.py").write_text("from cnnbench.results import record\n")
    (fake / "results" / "bare.py").write_text("import cnnbench\n\nversion = cnnbench.__version__\n")
    (fake / "results" / "up.py").write_text("from .. import engine\nfrom ..cli import main\nfrom . import record\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert upward_imports() == ["__init__.py:2: __init__ imports engine",
                                "results/bare.py:1: results imports __init__",
                                "results/load.py:4: results imports engine",
                                "results/record.py:1: results imports __init__",
                                "results/up.py:1: results imports engine",
                                "results/up.py:2: results imports cli"]
    assert import_cycles(package_graph()) == [["__init__", "engine", "results", "__init__"],
                                              ["engine", "results", "engine"]]


def test_the_version_leaf_and_pyproject_say_the_same():
    import re

    import cnnbench
    from cnnbench.version import __version__

    declared = re.search(r'^version = "([^"]+)"$', (SRC.parent.parent / "pyproject.toml").read_text(), re.MULTILINE)
    assert declared is not None and declared.group(1) == __version__ == cnnbench.__version__
