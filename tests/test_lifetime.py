"""No process of a run outlives it: SIGKILL to `cnnbench run --num-devices 2`, or to a sweep
whose case runs on 2 devices, leaves no worker behind (issue 17, item 2)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from cnnbench.lifetime import die_with_parent

DEADLINE_S = 180.0
"""Generous: on a loaded 2-core machine, starting two workers that import torch takes long."""
GONE_WITHIN_S = 5.0
"""The promise: no process of a killed run survives it by more than this."""

LONG = ["--model", "trivial", "--device", "cpu", "--batch-size", "4", "--num-batches", "100000",
        "--num-warmup-batches", "1", "--display-every", "5", "--machine-label", "box",
        "--oversubscribe"]  # 2 CPU workers, also where fewer cores are usable


class _Lines:
    """Reads a process's stdout on a thread, so that a test can wait for a line."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        assert proc.stdout is not None
        stream = proc.stdout
        threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True).start()

    def seen(self, words: str) -> bool:
        return any(words in line for line in list(self.lines))


def _wait_for(condition, what: str, proc: subprocess.Popen, deadline_s: float = DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"the command ended (exit {proc.returncode}) before {what}")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"{what}: not within {deadline_s:.0f} s")


def _workers(root: int) -> list[psutil.Process]:
    try:
        tree = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in tree if "spawn_main" in " ".join(_cmdline(p))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _kill_and_expect_no_survivor(proc: subprocess.Popen, tree: list[psutil.Process]) -> None:
    assert _alive(tree), "nothing to kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed = time.monotonic()
    while _alive(tree) and time.monotonic() - killed < GONE_WITHIN_S:
        time.sleep(0.05)
    survivors = _alive(tree)
    for p in survivors:  # do not leave them burning the machine for the tests after this one
        p.kill()
    assert not survivors, [" ".join(_cmdline(p)) or p.pid for p in survivors]


def _start(argv: list[str]) -> tuple[subprocess.Popen, _Lines]:
    proc = subprocess.Popen([sys.executable, "-m", "cnnbench", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    return proc, _Lines(proc)


def test_sigkill_to_run_on_two_devices_leaves_no_worker(tmp_path):
    proc, out = _start(["run", *LONG, "--num-devices", "2", "--results-dir", str(tmp_path)])
    workers = _wait_for(lambda: len(_workers(proc.pid)) >= 2 and _workers(proc.pid), "two workers start", proc)
    _wait_for(lambda: out.seen("images/sec"), "the first progress line", proc)
    tree = psutil.Process(proc.pid).children(recursive=True)
    assert len(workers) == 2
    _kill_and_expect_no_survivor(proc, tree)


def test_sigkill_to_a_sweep_whose_case_runs_on_two_devices_leaves_no_process(tmp_path):
    suite = tmp_path / "two.yaml"
    suite.write_text("name: two\n"
                     "base: {model: trivial, device: cpu, batch_size: 4, num_batches: 100000, "
                     "num_warmup_batches: 1, num_devices: 2, oversubscribe: true}\n"
                     "timeout_s: 600\n")
    proc, _ = _start(["sweep", str(suite), "--results-dir", str(tmp_path / "results"), "--plain",
                      "--machine-label", "box"])
    _wait_for(lambda: len(_workers(proc.pid)) >= 2, "the case's two workers start", proc)
    # sweep -> fork server -> case -> workers: every one of them must go
    tree = psutil.Process(proc.pid).children(recursive=True)
    assert len(tree) >= 4, [" ".join(_cmdline(p)) for p in tree]
    _kill_and_expect_no_survivor(proc, tree)


def test_a_child_whose_parent_is_already_gone_leaves_at_once():
    """The parent may die before the child asks to die with it: the child checks and exits."""
    code = (f"import os, sys; sys.path[:0] = {sys.path!r}; from cnnbench.lifetime import die_with_parent; "
            "die_with_parent(os.getppid() + 999999); print('still here')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "still here" not in done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_request_is_made_and_kept_for_a_living_parent():
    assert die_with_parent(os.getppid()) is True
    # PR_GET_PDEATHSIG = 2 reads it back
    import ctypes

    libc = ctypes.CDLL(None)
    value = ctypes.c_int()
    assert libc.prctl(2, ctypes.byref(value), 0, 0, 0) == 0 and value.value == signal.SIGKILL
    libc.prctl(1, 0, 0, 0, 0)  # leave pytest's own process as it was
    assert Path("/proc/self").exists()


def _maps_torch(p: psutil.Process) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{p.pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/maps")
def test_ctrl_c_while_workers_import_torch_is_one_line(tmp_path):
    """Issue 17 item 9: SIGINT to the terminal's group while the workers are still importing
    torch (before their entry ignores it) printed a KeyboardInterrupt traceback per worker."""
    proc = subprocess.Popen([sys.executable, "-m", "cnnbench", "run", *LONG, "--num-devices", "2",
                             "--results-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def importing() -> bool:
        workers = _workers(proc.pid)
        return len(workers) >= 2 and all(_maps_torch(w) for w in workers)

    deadline = time.monotonic() + DEADLINE_S
    while not importing() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert importing(), "the workers did not start"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip() == "cnnbench run: interrupted"
