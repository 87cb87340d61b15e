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


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports by an import statement, in any form: at the
    top, inside a function, under ``TYPE_CHECKING``; ``from a import b`` imports ``a.b`` where that
    is a module, else ``a`` (a package above a module it imports is not counted, as for ``from a.b import c``)."""
    name = ".".join(("cnnbench", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return (found & modules) - {name}


def report_imports(package: str = "report") -> dict[str, set[str]]:
    """Which module under ``src/cnnbench/<package>`` imports which of them, by an import statement in any form
    (not what ``importlib.import_module`` loads by a name made at run time: the kinds' own modules)."""
    paths = {".".join(("cnnbench", *p.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__"): p
             for p in (SRC / package).rglob("*.py")}
    return {name: _module_imports(path, set(paths)) for name, path in paths.items()}


def mutual_imports(package: str = "report") -> set[tuple[str, str]]:
    """The pairs of modules under ``src/cnnbench/<package>`` that import each other by import statements."""
    imports = report_imports(package)
    return {(a, b) for a, targets in imports.items() for b in targets if a < b and a in imports[b]}


def module_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import loops of ``graph``: its strongly connected components of two or more modules
    (Tarjan's algorithm), each sorted, in order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_two_report_modules_import_each_other():
    """Issue 45: each dependency goes one way (a configuration section, a scaling series: modules of
    their own that the tables and the observations import; each kind's observations in its table
    module; the kinds declare what they read of the options, which read the kinds' names)."""
    assert mutual_imports() == set(), "report modules that import each other (make it one way)"


def test_no_import_loop_among_report_modules():
    """No loop of any length either (``observations -> scaling -> predicted -> observations`` was one)."""
    assert module_cycles(report_imports()) == [], "report modules in an import loop (make it one way)"


def test_the_loop_check_finds_loops_of_every_length():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}, "g": {"g"}}
    assert module_cycles(graph) == [["a", "b", "c"], ["e", "f"]]
    assert module_cycles({"a": {"b"}, "b": {"c"}}) == []


def test_the_mutual_import_check_sees_function_and_type_checking_imports(tmp_path, monkeypatch):
    fake = tmp_path / "cnnbench"
    (fake / "report" / "tables").mkdir(parents=True)
    for init in ("report/__init__.py", "report/tables/__init__.py"):
        (fake / init).write_text("")
    (fake / "report" / "a.py").write_text("from cnnbench.report.tables import b\nfrom .c import x\n")
    (fake / "report" / "tables" / "b.py").write_text("def f():\n    from cnnbench.report.a import y\n")
    (fake / "report" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    (fake / "report" / "d.py").write_text("import cnnbench.report.a\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert mutual_imports() == {("cnnbench.report.a", "cnnbench.report.tables.b"),
                                ("cnnbench.report.a", "cnnbench.report.c")}

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
