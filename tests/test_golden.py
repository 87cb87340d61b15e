"""Golden files: the report of tests/fixtures and every command's ``--help``, byte for byte.

They hold what users see while the code is moved around (issue 19 changes no behaviour).
A change that is meant to alter them regenerates them on purpose:

    CNNBENCH_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_golden.py

and the diff of tests/golden/ is then part of the change, for a reviewer to read.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

from cnnbench.cli import main

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures" / "tf_cnn_benchmarks_logs"
UPDATE = os.environ.get("CNNBENCH_UPDATE_GOLDEN") == "1"

COMMANDS = [
    [], ["run"], ["sweep"], ["report"], ["compare"], ["import"], ["import", "tf-cnn-benchmarks"],
    ["import", "csv"], ["results"], ["results", "list"], ["results", "export"], ["results", "query"], ["models"],
    ["sysinfo"], ["data"], ["comm"], ["make-dataset"], ["study"], ["predict"], ["history"],
]


def _check(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing: regenerate with CNNBENCH_UPDATE_GOLDEN=1"
    expected = path.read_text()
    assert text == expected, f"{path.relative_to(GOLDEN)} differs (CNNBENCH_UPDATE_GOLDEN=1 rewrites it on purpose)"


def _help(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: "-".join(a) or "cnnbench")
def test_help_text_is_unchanged(argv, monkeypatch):
    name = "-".join(argv) or "cnnbench"
    _check(GOLDEN / "help" / f"{name}.txt", _help(argv, monkeypatch))


def test_the_report_of_the_fixtures_is_unchanged(tmp_path, capsys):
    store, out = tmp_path / "store", tmp_path / "report"
    assert main(["import", "tf-cnn-benchmarks", str(FIXTURES), "--results-dir", str(store)]) == 0
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--title", "Fixtures"]) == 0
    capsys.readouterr()
    produced = sorted(p.relative_to(out) for p in out.rglob("*")
                      if p.is_file() and (p.name == "summary.md" or p.suffix == ".csv"))
    assert produced, "the report wrote no summary or tables"
    names = [str(p) for p in produced]
    _check(GOLDEN / "report" / "FILES", "\n".join(names) + "\n")
    for rel in produced:
        _check(GOLDEN / "report" / rel, (out / rel).read_text())
