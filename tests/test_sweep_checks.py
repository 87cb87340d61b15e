"""Sweeps check what ``cnnbench run`` checks: every case goes through run's own pre-work
checks (the same function) before the first case runs; an invalid case stops the sweep
with one line naming the suite, the case and the flag (exit 2), or, with --skip-invalid, is
skipped with a warning. Suite files with an empty matrix, a key written twice or bytes that
are not UTF-8 are one line; Ctrl-C while the sweep starts is one line and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import cnnbench
from cnnbench.cli import main
from cnnbench.results.store import read_records
from cnnbench.sweep.suite import SuiteError, load_suite

REPO = Path(__file__).resolve().parents[1]
SRC = Path(cnnbench.__file__).resolve().parents[1]  # the code under test, wherever it is

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except Exception:  # pragma: no cover
    HAS_CUDA = False

INVALID = [
    # (base fields of the invalid case, the same case as `cnnbench run` flags, what names it)
    ({"model": "inception_v3", "image_size": 40}, ["--model", "inception_v3", "--image-size", "40"], "--image-size"),
    ({"model": "trivial", "precision": "fp16"}, ["--model", "trivial", "--precision", "fp16"], "--precision"),
    ({"model": "resnet_18"}, ["--model", "resnet_18"], "--model"),
]
if not HAS_CUDA:
    INVALID.append(({"model": "trivial", "device": "cuda"}, ["--model", "trivial", "--device", "cuda"], "--device"))


def _yaml(value) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"


@pytest.mark.parametrize("bad,flags,flag", INVALID, ids=[i[2] + "-" + str(n) for n, i in enumerate(INVALID)])
def test_an_invalid_case_stops_the_sweep_before_anything_runs(tmp_path, capsys, bad, flags, flag):
    device = [] if "device" in bad else ["--device", "cpu"]
    assert main(["run", *flags, *device, "--num-batches", "1", "--results-dir", str(tmp_path / "x")]) == 2
    run_error = capsys.readouterr().err.strip().removeprefix("cnnbench run: error: ")
    run_error = run_error.removesuffix(" (see cnnbench run --help)")

    suite = tmp_path / "s.yaml"
    fields = {"device": "cpu", "num_batches": 1, "num_warmup_batches": 0, "image_size": 32, **bad}
    case = _yaml({k: v for k, v in fields.items() if k not in ("num_batches", "num_warmup_batches")})
    suite.write_text(f"name: s\nbase: {{num_batches: 1, num_warmup_batches: 0}}\nmatrix: {{model: [trivial]}}\n"
                     f"include:\n  - {case}\n")
    results = tmp_path / "r"
    assert main(["sweep", str(suite), "--results-dir", str(results), "--plain"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"cnnbench sweep: error: {suite}: case ")
    assert f"{flag}:" in err and run_error in err  # the very message `cnnbench run` gives
    assert "--skip-invalid" in err
    assert not results.exists()  # nothing ran


def test_skip_invalid_runs_the_valid_cases(tmp_path, capsys):
    suite = tmp_path / "s.yaml"
    suite.write_text(textwrap.dedent("""\
        name: s
        base: {device: cpu, num_batches: 1, num_warmup_batches: 0}
        matrix: {model: [trivial, inception_v3], image_size: [40]}
        """))
    results = tmp_path / "r"
    assert main(["sweep", str(suite), "--results-dir", str(results), "--plain", "--skip-invalid"]) == 0
    out, err = capsys.readouterr()
    warning = [line for line in err.splitlines() if "skipped invalid case" in line]
    assert len(warning) == 1 and "model=inception_v3 image_size=40: --image-size: 40 is too small" in warning[0]
    records, problems = read_records(results)
    assert problems == [] and [r["config"]["model"] for r in records] == ["trivial"]


@pytest.mark.parametrize("data,message", [
    (b"name: s\nmatrix: {}\ninclude: [{model: trivial}]\n", "matrix: is empty"),
    (b"name: s\nbase: {device: cpu}\nmatrix:\n  model: [trivial]\n  model: [alexnet]\n",
     "key 'model' written twice (lines 4 and 5)"),
    (b"name: s\nmatrix: {batch_size: [1], batch_size: [2]}\n", "key 'batch_size' written twice"),
    (b"name: s\nrepeats: 1\nrepeats: 2\nmatrix: {batch_size: [1]}\n", "key 'repeats' written twice"),
    ("name: caf\u00e9\nmatrix: {model: [trivial]}\n".encode("latin-1"), "not UTF-8 text (byte b'\\xe9' on line 1)"),
    (b"name: s\nmatrix: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
    # 1.1 MB of junk: PyYAML took about 19 s and 400 MB to parse it before it was refused
    (b"name: s\nzzz: [" + b"1," * 550_000 + b"1]\n", "larger than 1 MiB; not a file cnnbench reads whole"),
])
def test_odd_suite_files_are_one_line(tmp_path, capsys, data, message):
    path = tmp_path / "s.yaml"
    path.write_bytes(data)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


SCRIPT = """
import sys

if __name__ == "__main__":
    import cnnbench.sweep.isolation as isolation
    from cnnbench.cli import main

    isolation.SERVER_PRELOAD = ("tests.slow_preload",)  # stands for torch, slow to import
    sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_while_the_sweep_starts_is_one_line(tmp_path):
    script = tmp_path / "sweep_script.py"
    script.write_text(SCRIPT)
    suite = tmp_path / "s.yaml"
    suite.write_text("name: k\nbase: {model: trivial, device: cpu}\nmatrix: {batch_size: [2]}\n")
    marker = tmp_path / "preloading"
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{REPO}", "CNNBENCH_TEST_PRELOAD_MARKER": str(marker),
           "CNNBENCH_TEST_PRELOAD_SLEEP": "30"}
    cmd = [sys.executable, str(script), "sweep", str(suite), "--results-dir", str(tmp_path / "r"), "--plain"]
    # A session of its own, as a terminal's foreground job: Ctrl-C reaches every process of the group.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() or not marker.read_text():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the fork server never started"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out, err)
    assert err.strip() == "cnnbench sweep: interrupted", err
    assert "Traceback" not in out + err and "leaked" not in out + err
    assert not (tmp_path / "r").exists()
