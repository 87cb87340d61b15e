"""pyproject.toml as setuptools wants it: an SPDX license expression and the license files."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_license_is_an_spdx_expression_with_its_files():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"  # a string (PEP 639), not the deprecated table
    assert project["license-files"] and all((ROOT / f).is_file() for f in project["license-files"])
    assert "Apache License" in (ROOT / project["license-files"][0]).read_text()
    assert any(d.startswith("orjson") for d in project["dependencies"])  # the store's parser


def test_make_run_ends_with_the_line_to_type_next():
    """Issue 17 item 15: after `make run`, the user is told how to call cnnbench (it lives in .venv)."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    plan = subprocess.run(["make", "-n", "run", "VENV=/nonexistent-venv"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60).stdout.splitlines()
    report = next(i for i, line in enumerate(plan) if " report " in line)
    after = "\n".join(plan[report + 1:])
    assert ". /nonexistent-venv/bin/activate && cnnbench run --help" in after
    assert "/nonexistent-venv/bin/cnnbench run" in after


def test_a_cpu_only_install_is_one_variable_away():
    """Issue 17 item 16: TORCH_SPEC carries pip's arguments, so PyTorch's CPU index fits in it."""
    makefile = (ROOT / "Makefile").read_text()
    assert "$(PIP) install --quiet $(TORCH_SPEC)" in makefile
    assert "download.pytorch.org/whl/cpu" in makefile


def _next_line() -> list[str]:
    import shlex
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    plan = subprocess.run(["make", "-n", "run", "VENV=/nonexistent-venv"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60).stdout
    command = plan.split("(or call it by its path: ", 1)[1].split(";", 1)[0]
    return shlex.split(command)


def test_the_line_to_type_next_is_a_small_run():
    """Issue 42 item 1: the run `make run` suggests is sized for a CPU (the defaults, 224 px and 100
    batches of 64, took 14.6 minutes on 2 cores): at most a twentieth of the defaults' pixels."""
    words = _next_line()
    assert words[:2] == ["/nonexistent-venv/bin/cnnbench", "run"] and "--device" in words
    value = {flag: int(words[words.index(flag) + 1]) for flag in ("--image-size", "--batch-size", "--num-batches")}
    work = value["--image-size"] ** 2 * value["--batch-size"] * value["--num-batches"]
    assert work * 20 <= 224 ** 2 * 64 * 100


@pytest.mark.slow
def test_the_line_to_type_next_runs_as_printed(tmp_path):
    """Issue 42 item 1: the suggested line, as printed, runs to a record (in a folder of its own)."""
    import subprocess
    import sys

    words = _next_line()
    cnnbench = Path(sys.executable).parent / "cnnbench"
    done = subprocess.run([str(cnnbench), *words[1:]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "total images/sec" in done.stdout
    assert len(list((tmp_path / "results").glob("*.jsonl"))) == 1
