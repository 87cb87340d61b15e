"""``cnnbench.results.record`` is the record contract (issue 45, item 7): the helpers it once held
have homes named for them (:mod:`cnnbench.results.cleaning`, :mod:`cnnbench.results.error_text`,
:mod:`cnnbench.results.stamps`), and every importer takes them from there. A name imported from
``record`` is one ``record`` defines: it re-exports nothing."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "src" / "cnnbench" / "results" / "record.py"


def _own_names(path: Path) -> set[str]:
    """The names a module's top level defines (functions, classes, assignments), not imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _taken_from_record(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` of every name ``path`` imports from the record module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "cnnbench.results.record":
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def test_names_imported_from_the_record_module_are_its_own():
    own = _own_names(RECORD)
    borrowed = [f"{path.relative_to(ROOT)}:{line}: {name}"
                for folder in ("src", "tests", "benchmarks") for path in sorted((ROOT / folder).rglob("*.py"))
                for line, name in _taken_from_record(path) if name not in own]
    assert not borrowed, "import these from their own module (cleaning, error_text, stamps):\n" + "\n".join(borrowed)


def test_the_helpers_live_in_modules_named_for_them():
    from cnnbench.results import cleaning, error_text, record, stamps

    assert {"check_record", "Record", "RecordError", "check_figures", "SCHEMA_VERSION"} <= _own_names(RECORD)
    assert not {"finite_numbers", "drop_unusable_figures", "unusable_figure", "without_native_stack",
                "error_text", "new_run_id", "now_iso", "MAX_FIGURE", "clip"} & _own_names(RECORD)
    fields = record.Record.__dataclass_fields__
    assert fields["run_id"].default_factory is stamps.new_run_id
    assert fields["started_at"].default_factory is stamps.now_iso
    assert error_text.error_text(ValueError("x\nException raised from f at a.cpp:1\nframe #0: g")) == "ValueError: x"
    assert cleaning.finite_numbers({"metrics": {"a": float("nan")}})["metrics"]["a"] is None
