"""Start-up stays light: the commands that read results never import torch (issue 22, item 4).

torch's import is about a second and a half of CPU here; `cnnbench --help`, `results list`,
`results export`, `report` and `compare` need none of it. Each runs in a fresh interpreter,
and the test asserts what it imported, never how long it took.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "tf_cnn_benchmarks_logs" / "LambdaCloud-RTX_A6000.logs"

PROBE = """
import contextlib, io, sys
from cnnbench.cli import main
argv = sys.argv[1:]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(argv)
    except SystemExit:
        pass
print(sorted(m for m in ("torch", "torchvision", "matplotlib", "numpy", "yaml") if m in sys.modules))
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from cnnbench.cli import main

    folder = tmp_path_factory.mktemp("startup") / "store"
    assert main(["import", "tf-cnn-benchmarks", str(FIXTURES), "--results-dir", str(folder)]) == 0
    return folder


@pytest.mark.parametrize("argv", [
    ["--help"], ["run", "--help"], ["results", "list", "{store}"], ["results", "export", "{store}", "--format", "csv"],
    ["report", "{store}", "-o", "{out}", "--no-plots"], ["compare", "{store}", "--by", "precision",
                                                         "--ignore", "batch_size"],
], ids=lambda a: " ".join(a[:2]))
def test_reading_commands_never_import_torch(argv, store, tmp_path):
    args = [a.format(store=store, out=tmp_path / "report") for a in argv]
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    imported = done.stdout.strip().splitlines()[-1]
    assert "torch" not in imported, f"cnnbench {' '.join(argv)} imported {imported}"
    if argv[0] in ("--help", "run", "results", "compare"):
        assert "matplotlib" not in imported  # plots load it, nothing else
    if argv[0] in ("--help", "run") or argv[:2] == ["results", "list"]:
        assert "numpy" not in imported  # building the command line needs none (make-dataset's choices included)
    if argv[0] == "--help" or argv[0] == "results":
        assert "yaml" not in imported  # nor the reading of suites (the executors' flags are built from their own)


UP_TO_DATE_PROBE = """
import sys
from cnnbench.cli import main
main(sys.argv[1:])
heavy = ("numpy", "scipy", "matplotlib", "cnnbench.report.build", "cnnbench.report.output", "cnnbench.analysis")
print(sorted(m for m in heavy if m in sys.modules))
"""


def test_a_report_that_is_up_to_date_loads_no_tables_numpy_or_matplotlib(store, tmp_path):
    """The second report of an unchanged store only checks that it is up to date (report/reuse.py)."""
    import os

    for path in store.glob("*.jsonl"):  # settled: older than the seconds in which a change may not show
        back = path.stat().st_mtime_ns - 60 * 10**9
        os.utime(path, ns=(back, back))
    argv = ["report", str(store), "-o", str(tmp_path / "report")]
    said = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", UP_TO_DATE_PROBE, *argv], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        said.append(done.stdout.strip().splitlines())
    assert said[0][0].startswith("wrote ") and "cnnbench.report.build" in said[0][-1]
    assert said[1][0].startswith("up to date") and said[1][-1] == "[]"


def test_building_the_command_line_loads_no_kind_of_report_table():
    """The ``--observations`` help lists the kinds of table, read only when help is printed: on
    Python 3.14, whose ``add_argument`` fills in a help's ``%(...)s`` at once, a help given to it
    would load every kind of table for every command."""
    import subprocess
    import sys

    code = ("import sys, argparse\n"
            "real = argparse._ActionsContainer.add_argument\n"
            "def add(self, *a, **k):\n"
            "    action = real(self, *a, **k)\n"
            "    if action.help and '%' in action.help:\n"
            "        argparse.HelpFormatter('x')._expand_help(action)  # as 3.14's _check_help does\n"
            "    return action\n"
            "argparse._ActionsContainer.add_argument = add\n"
            "from cnnbench.cli import build_parser\n"
            "build_parser()\n"
            "print('cnnbench.report.kinds' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
