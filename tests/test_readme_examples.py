"""Issue 42 item 2: every README example a CPU can run runs as written, in order, after ``make run``.

The examples are taken from the README itself (its ``bash`` block of one example per command, its
Python block and the line after it), and ``make run``'s commands from the Makefile's ``run``
recipe, so neither can drift from what a newcomer reads. They run in a folder of their own that
holds what a fresh clone gives the examples (``suites/`` and the logs the import example names).
A line that needs what this machine lacks (``--device cuda``: a GPU; ``--executor slurm``: a
cluster) is not run here; ``make gpu-check`` and ``tests/test_slurm.py`` run those paths."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CNNBENCH = Path(sys.executable).parent / "cnnbench"
NEEDS = {"--device cuda": "a GPU", "--executor slurm": "a Slurm cluster"}
"""What a line needs that a CPU machine has not, by the words that say so."""
COPIED = ("suites", "tests/fixtures/tf_cnn_benchmarks_logs")
"""What of the clone the examples read."""


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else None]


def shell_examples(readme: str) -> list[str]:
    """The command lines of the README's block of one example per command (comments dropped,
    continued lines joined)."""
    block = re.search(r"```bash\n(.*?)```", _section(readme, "## One example per command"), re.DOTALL)
    assert block is not None, "the README has no bash block of examples"
    lines: list[str] = []
    for raw in block.group(1).replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        lines.append(re.sub(r"\s+#\s.*$", "", line))  # a comment after the command
    return lines


def python_examples(readme: str) -> tuple[str, list[str]]:
    """The README's Python block, and the ``python -c`` lines that follow it."""
    section = _section(readme, "## From Python")
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the README has no Python block"
    after = re.findall(r"`(python -c .*?)`(?=[.:]?\s)", section)
    return block.group(1), after


def make_run_commands(makefile: str) -> list[list[str]]:
    """``make run``'s cnnbench commands, its variables filled in from the Makefile's defaults."""
    values = dict(re.findall(r"^(\w+)\s*\?=\s*(.*?)\s*$", makefile, re.MULTILINE))
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None, "the Makefile has no run recipe"
    commands = []
    for line in recipe.group(1).splitlines():
        line = line.strip()
        if line.startswith("$(CNNBENCH)"):
            line = line.replace("$(CNNBENCH)", "cnnbench")
            line = re.sub(r"\$\((\w+)\)", lambda m: values.get(m.group(1), m.group(0)), line)
            commands.append(shlex.split(line))
    assert [c[1] for c in commands] == ["sweep", "report"], commands
    return commands


def needs(line: str) -> str | None:
    return next((what for words, what in NEEDS.items() if words in line), None)


def test_the_examples_are_found_and_each_is_a_cnnbench_command():
    """The parsing itself: a README edit that hid the examples from the test would fail here."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = shell_examples(readme)
    assert len(lines) >= 15 and all(line.startswith("cnnbench ") for line in lines), lines
    runnable = [line for line in lines if needs(line) is None]
    assert {shlex.split(line)[1] for line in runnable} >= {
        "sweep", "study", "report", "compare", "import", "results", "models", "sysinfo", "predict",
        "make-dataset", "data"}
    code, after = python_examples(readme)
    assert "cnnbench.run(" in code and after
    assert make_run_commands((ROOT / "Makefile").read_text(encoding="utf-8"))


def _run(words: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "120", "PATH": f"{CNNBENCH.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(words, cwd=cwd, capture_output=True, text=True, timeout=1800, env=env)


def _shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``line`` as a user types it in bash (globs expanded), with the environment's
    ``cnnbench`` and ``python`` first on the PATH, as after ``. .venv/bin/activate``."""
    return _run(["bash", "-c", line], cwd)


@pytest.mark.slow
def test_every_cpu_readme_example_runs_as_written_after_make_run(tmp_path):
    clone = tmp_path / "clone"
    for name in COPIED:
        shutil.copytree(ROOT / name, clone / name)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for words in make_run_commands((ROOT / "Makefile").read_text(encoding="utf-8")):
        done = _run([str(CNNBENCH), *words[1:]], clone)
        assert done.returncode == 0, f"make run: {shlex.join(words)}\n{done.stderr[-3000:]}"
    assert (clone / "report" / "quick" / "summary.md").is_file()

    ran, left = [], []
    for line in shell_examples(readme):
        if needs(line):
            left.append(line)
            continue
        done = _shell(line, clone)
        assert done.returncode == 0, f"README example failed: {line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, line
        ran.append((line, done))
    assert left and all(needs(line) for line in left)

    outputs = dict((line.split()[1] + " " + line.split()[2], done.stdout) for line, done in ran)
    # the examples see every store below results/: make run's, the study's, the import's
    assert "resnet50" in outputs["results list"]
    assert (clone / "report" / "all" / "summary.md").is_file()
    assert (clone / "runs.csv").read_text().count("\n") > 24

    code, after = python_examples(readme)
    done = _run([sys.executable, "-c", code], clone)
    assert done.returncode == 0, f"README's Python block failed:\n{done.stderr[-3000:]}"
    assert done.stdout == "" and "Traceback" not in done.stderr  # the API prints nothing unless asked
    assert (clone / "report" / "api" / "summary.md").is_file()
    for line in after:
        done = _shell(line, clone)
        assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
        assert re.fullmatch(r"\(\d+, \d+\)\n", done.stdout), done.stdout
