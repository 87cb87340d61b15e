"""``make gpu-check`` (benchmarks/gpu_acceptance.py): every decision it makes, on the CPU.

The GPU steps are replaced by a scripted runner that answers each command as the real one
would (a record in the results folder, the bare loop's JSON line, timm's ``--result``), so
the gate, the exit code, the summary and the commands are checked without a GPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cnnbench.results.store import append_record

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_acceptance.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_acceptance", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_acceptance"] = module
    spec.loader.exec_module(module)
    return module


ga = _load()

TIMM_STDOUT = """Benchmarking in amp_bfloat16 precision. NHWC layout. torchscript disabled
Model resnet50 created, param count: 25557032
Running train benchmark on resnet50 for 100 steps w/ input size (3, 224, 224) and batch size 256.
Train benchmark of resnet50 done. 2801.50 samples/sec, 91.38 ms/sample
--result
{
    "model": "resnet50",
    "train_samples_per_sec": 2801.5,
    "train_step_time": 91.379,
    "train_batch_size": 256,
    "train_img_size": 224,
    "param_count": 25.56
}
"""


def _arg(cmd, flag):
    return cmd[cmd.index(flag) + 1]


def _record(rate, *, per_device=None):
    return {
        "schema_version": 2, "tool_version": "test", "run_id": "r", "started_at": "2026-01-01T00:00:00",
        "status": "ok", "error": None, "config": {},
        "environment": {"machine": "gpu", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 1,
                        "torch_version": "2.14.1", "cuda_version": "13.0"},
        "metrics": {
            "total_images_per_sec": rate, "per_device_images_per_sec": per_device or [rate],
            "compile_time_s": None, "input_wait_fraction": 0.01, "energy_j": 1500.0, "images_per_joule": 4.25,
            "warnings": ["at the power cap"],
            "gpu_telemetry": [{"index": 0, "name": "H100", "power_mean_w": 612.5, "power_max_w": 700.0,
                               "sm_clock_mean_mhz": 1755.0, "sm_clock_max_mhz": 1980.0,
                               "memory_clock_mean_mhz": 2619.0, "temperature_max_c": 61.0, "energy_j": 1500.0,
                               "throttled": False, "throttle_reasons": []}],
        },
    }


def _comm_record(size, timer):
    from tests.test_comm import comm

    record = comm(size=size, busbw=100.0)
    record["run_id"] += timer
    record["config"].update(device="cuda", backend="nccl")
    record["metrics"]["timer"] = timer
    return record


class FakeGpuMachine:
    """Answers each command of the acceptance as the real step would; records them in order."""

    def __init__(self, *, ours=3000.0, bare=3050.0, tests_rc=0, fail=None, bare_step=None, timm=TIMM_STDOUT):
        self.ours, self.bare, self.tests_rc = ours, bare, tests_rc
        self.fail = fail or {}  # a word of the command -> (exit code, stderr)
        self.bare_step = bare_step
        self.timm = timm
        self.commands: list[list[str]] = []
        self.comm_timer = "cuda events"

    def __call__(self, cmd, timeout_s):
        cmd = list(cmd)
        self.commands.append(cmd)
        for word, (rc, err) in self.fail.items():
            if word in cmd:
                return ga.Completed(rc, "", err, 1.0)
        if "make-dataset" in cmd:  # two classes of three files (link_copies makes the rest)
            for c in ("circle", "square"):
                (Path(cmd[3]) / "train" / c).mkdir(parents=True)
                for i in range(3):
                    (Path(cmd[3]) / "train" / c / f"{i}.jpg").write_bytes(b"jpeg")
            return ga.Completed(0, "wrote", "", 5.0)
        if "pytest" in cmd:
            out = "12 passed in 80.1s" if self.tests_rc == 0 else "1 failed, 11 passed in 80.1s"
            return ga.Completed(self.tests_rc, out, "", 80.0)
        if "bare" in cmd:
            r = self.bare_step if "--compile-step" in cmd and self.bare_step else self.bare
            return ga.Completed(0, "noise\n" + json.dumps({"images_per_sec": r, "compile_time_s": None}), "", 20.0)
        if "comm" in cmd:  # cnnbench comm: a record per size, timed by CUDA events (tests/test_comm_truth.py)
            for size in (1024, 1 << 30):
                append_record(_arg(cmd, "--results-dir"), _comm_record(size, self.comm_timer))
            return ga.Completed(0, "# cnnbench comm", "", 15.0)
        if "--results-dir" in cmd:
            n = int(_arg(cmd, "--nproc-per-node")) if "--nproc-per-node" in cmd else 1
            rate = self.ours * n * (0.97 if "--data-dir" in cmd and "run" in cmd else 1.0)
            record = _record(rate, per_device=[self.ours] * n)
            if "--data-dir" in cmd:  # real JPEGs: cnnbench's default loaders, the host's CPU
                record["config"] = {"num_workers": 15}
                record["metrics"]["host_telemetry"] = {"cpu_percent_mean": 68.3}
            if "data" in cmd:  # cnnbench data: the pipeline alone
                record["config"]["mode"] = "data"
                record["metrics"].update(total_images_per_sec=7000.0, images_per_sec_per_worker=466.7)
            if "--input-pipeline" in cmd:  # DALI: decoded on the GPU, a few host cores
                compiled = "--compile-mode" in cmd
                record["config"]["input_pipeline"] = _arg(cmd, "--input-pipeline")
                record["metrics"]["dali"] = {"decode_device": "mixed", "hw_decoder_load": 0.65, "threads": 4}
                record["metrics"]["host_telemetry"] = {"cpu_percent_mean": 20.0,
                                                       "cores_used_mean": 5.0 if compiled else 3.2}
                record["metrics"]["total_images_per_sec"] = (
                    13000.0 if "data" in cmd else self.ours * (1.2 * 0.98 if compiled else 0.99))
            elif "--compile-mode" in cmd and "run" in cmd:  # synthetic, compiled: 1.2 times the eager rate
                record["metrics"]["total_images_per_sec"] = self.ours * 1.2
            if "--local-parameter-device" in cmd:  # a parameter server: the host waits where its master is
                record["metrics"].update(step_syncs_host=_arg(cmd, "--local-parameter-device") == "cpu",
                                         optimizer_implementation="fused")
            append_record(_arg(cmd, "--results-dir"), record)
            return ga.Completed(0, f"total images/sec: {rate}", "", 20.0)
        if "sysinfo" in cmd:
            return ga.Completed(0, "GPU 0  NVIDIA H100 80GB HBM3", "", 1.0)
        if "--bench" in cmd:
            return ga.Completed(0, self.timm, "", 30.0)
        raise AssertionError(f"unexpected command {cmd}")


def _accept(tmp_path, machine, *extra, gpus=1):
    summary = tmp_path / "summary.md"
    said: list[str] = []
    code = ga.main(["--summary", str(summary), "--work-dir", str(tmp_path / "work"), *extra],
                   gpus=lambda: gpus, runner=machine, say=said.append)
    return code, summary.read_text(), said


# --- the CPU-only machine --------------------------------------------------------------

def test_cpu_only_machine_says_one_line_and_exits_0(tmp_path):
    said: list[str] = []

    def no_runner(cmd, timeout_s):
        raise AssertionError("nothing runs without a GPU")

    code = ga.main(["--summary", str(tmp_path / "s.md")], gpus=lambda: 0, runner=no_runner, say=said.append)
    assert code == 0
    assert said == [ga.NO_GPU_LINE] and "no NVIDIA GPU" in said[0]
    assert not (tmp_path / "s.md").exists()


def test_the_script_on_this_machine(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the acceptance would run for minutes")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--summary", str(tmp_path / "s.md")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines() == [ga.NO_GPU_LINE]


# --- the gate and the exit code --------------------------------------------------------

def test_gate_at_0_96_fails_and_at_0_98_passes():
    assert not ga.gate_verdict(0.96).passed
    low = ga.gate_verdict(0.98)
    assert low.passed and "goal 0.99 not met" in low.text
    assert ga.gate_verdict(0.995).passed and "goal met" in ga.gate_verdict(0.995).text
    assert not ga.gate_verdict(None).passed  # a side that failed to run fails the machine
    assert ga.gate_verdict(0.97).passed  # the gate itself passes


def test_exit_code():
    ok, bad = ga.Verdict(True, ""), ga.Verdict(False, "")
    assert ga.exit_code(True, ok) == 0
    assert ga.exit_code(False, ok) == 1
    assert ga.exit_code(True, bad) == 1


def test_median_ratio_of_the_rounds():
    assert ga.median_ratio([(98.0, 100.0), (90.0, 100.0), (101.0, 100.0)]) == pytest.approx(0.98)
    assert ga.median_ratio([(98.0, 100.0), (None, 100.0), (97.0, None)]) == pytest.approx(0.98)
    assert ga.median_ratio([(None, 100.0)]) is None


@pytest.mark.parametrize(("ours", "code"), [(2940.0, 0), (2880.0, 1)])
def test_harness_against_bare_sets_the_exit_code(tmp_path, ours, code):
    got, summary, said = _accept(tmp_path, FakeGpuMachine(ours=ours, bare=3000.0))
    assert got == code
    assert f"{ours / 3000.0:.3f}" in summary
    assert ("accepted" if code == 0 else "NOT accepted") in summary
    assert said[-1].startswith(f"gpu-check: exit {code}")


def test_a_failed_gpu_test_fails_the_machine(tmp_path):
    code, summary, _ = _accept(tmp_path, FakeGpuMachine(tests_rc=1))
    assert code == 1
    assert "**FAILED** (exit 1): 1 failed, 11 passed" in summary
    assert "### GPU tests (tests/test_gpu.py) (exit 1)" in summary


def test_cnnbench_and_bare_alternate_which_goes_first(tmp_path):
    machine = FakeGpuMachine()
    _accept(tmp_path, machine, "--rounds", "3", "--skip",
            "tests,timm,locations,jpeg,compile,ddp,fsdp,parameter_server,comm,sysinfo,dali")
    order = ["bare" if "bare" in c else "cnnbench" for c in machine.commands]
    assert order == ["cnnbench", "bare", "bare", "cnnbench", "cnnbench", "bare"]


# --- the summary -----------------------------------------------------------------------

def test_summary_lists_a_failed_step_with_command_exit_code_and_tail(tmp_path):
    err = "\n".join(f"line {i}" for i in range(100)) + "\ntorch.distributed.DistBackendError: NCCL error"
    code, summary, _ = _accept(tmp_path, FakeGpuMachine(fail={"torch.distributed.run": (1, err)}),
                               "--skip", "parameter_server,fsdp", gpus=2)
    assert code == 0  # only the GPU tests and the gate decide the exit code
    failures = summary.split("## Failures", 1)[1]
    assert "### DDP over NCCL (exit 1)" in failures
    assert "--nproc-per-node 2" in failures and "-m cnnbench run" in failures
    assert "DistBackendError: NCCL error" in failures
    assert "line 99" in failures and "line 10\n" not in failures  # the tail, not the whole output
    assert "| DDP over NCCL **(failed)** | 1 |" in summary
    assert "1 step failed" in summary


def test_a_stopped_acceptance_leaves_the_summary_of_the_steps_it_finished(tmp_path):
    """Ctrl-C mid-way keeps every finished step's figure, says so in one line, and exits 130."""
    machine = FakeGpuMachine(ours=3000.0, bare=3050.0)

    def stopped_at_the_fourth(cmd, timeout_s):
        if len(machine.commands) == 3:
            raise KeyboardInterrupt  # Ctrl-C while the fourth step runs
        return machine(cmd, timeout_s)

    code, text, said = _accept(tmp_path, stopped_at_the_fourth, "--skip", "timm")
    assert code == 130
    assert "**Stopped by SIGINT during bare loop round 2, after 3 finished steps (0 failed): not accepted.**" in text
    assert "| cnnbench round 1 | 0 | 20.0 | 3,000.0 |" in text
    assert "| bare loop round 1 | 0 | 20.0 | 3,050.0 |" in text
    assert "Exit " not in text
    assert said[-1].startswith("gpu-check: stopped by SIGINT during bare loop round 2; the figures of the 3 "
                               "finished steps are in ")


def test_a_stop_signal_ends_the_acceptance_as_ctrl_c_does(tmp_path):
    """SIGTERM (a lease that ends, ``timeout``) mid-way: the same summary, exit 143, and the
    signal's old handler back afterwards."""
    machine = FakeGpuMachine()
    before = signal.getsignal(signal.SIGTERM)

    def terminated_at_the_second(cmd, timeout_s):
        if len(machine.commands) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the handler raises at the next bytecode
                time.sleep(0.01)
            raise AssertionError("SIGTERM did not stop the acceptance")
        return machine(cmd, timeout_s)

    code, text, said = _accept(tmp_path, terminated_at_the_second, "--skip", "tests,timm")
    assert code == 143
    assert "**Stopped by SIGTERM during bare loop round 1, after 1 finished step (0 failed)" in text
    assert "| cnnbench round 1 | 0 |" in text
    assert said[-1].startswith("gpu-check: stopped by SIGTERM during bare loop round 1")
    assert signal.getsignal(signal.SIGTERM) is before


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (an unreaped process has exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _wait_for(condition, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _pid_in(path: Path) -> int | None:
    text = path.read_text() if path.exists() else ""
    return int(text) if text.strip() else None


def _driver(tmp_path: Path, step: str, *, grace_s: float = 15.0) -> subprocess.Popen:
    """A process that runs ``step`` (Python code) as the acceptance runs a step, under its signal
    handling (a Ctrl-C while the step starts is held: without, a loaded machine can deliver it
    inside Popen, and the step is lost, as ``test_a_signal_while_a_step_starts...`` shows)."""
    driver = tmp_path / "driver.py"
    call = f"ga.run_command([sys.executable, '-c', {step!r}], 600, grace_s={grace_s})"
    driver.write_text("import importlib.util, sys\n"
                      f"spec = importlib.util.spec_from_file_location('gpu_acceptance', {str(SCRIPT)!r})\n"
                      "ga = sys.modules['gpu_acceptance'] = importlib.util.module_from_spec(spec)\n"
                      "spec.loader.exec_module(ga)\n"
                      + f"with ga.stop_signals():\n    {call}\n")
    return subprocess.Popen([sys.executable, str(driver)], stderr=subprocess.PIPE, text=True)


def _stubborn(pid_file: Path, *, own_session: bool = False, term_file: Path | None = None) -> str:
    """Python code of a step that writes its pid, notes SIGTERM (in ``term_file``) but goes on,
    and sleeps; with ``own_session``, the step starts such a process in a session of its own
    (as torchrun starts its workers) and waits for it."""
    worker = ("import os, signal, time\n"
              f"signal.signal(signal.SIGTERM, lambda *_: open({str(term_file)!r}, 'w').write('TERM'))\n"
              if term_file else "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n")
    worker += f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n"
    if not own_session:
        return worker
    return ("import subprocess, sys\n"
            f"subprocess.Popen([sys.executable, '-c', {worker!r}], start_new_session=True).wait()\n")


@pytest.fixture
def reaper():
    """Pids to SIGKILL after the test, whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_stops_the_step_under_way_and_leaves_no_process(tmp_path, reaper):
    """A step runs in a session of its own, so the terminal's Ctrl-C reaches only the
    acceptance: its run_command must stop the step before going up, or the step runs on."""
    pid_file = tmp_path / "step.pid"
    proc = _driver(tmp_path, f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
                             "time.sleep(300)")
    _wait_for(lambda: _pid_in(pid_file) is not None or proc.poll() is not None, "the step")
    assert proc.poll() is None, proc.communicate()[1]
    reaper.append(child := _pid_in(pid_file))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert "KeyboardInterrupt" in err  # run_command lets it go on up, to main
    _wait_for(lambda: not _alive(child), "the step to end (it outlived the acceptance)", 60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_stopped_step_takes_the_processes_it_started_in_sessions_of_their_own(tmp_path, reaper):
    """torchrun starts each worker in a session of its own: stopping the step's session does not
    reach them, so they are stopped one by one, and killed when they ignore SIGTERM."""
    pid_file = tmp_path / "worker.pid"
    proc = _driver(tmp_path, _stubborn(pid_file, own_session=True), grace_s=1)
    _wait_for(lambda: _pid_in(pid_file) is not None or proc.poll() is not None, "the worker")
    assert proc.poll() is None, proc.communicate()[1]
    reaper.append(worker := _pid_in(pid_file))
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    _wait_for(lambda: not _alive(worker), "the worker to end (it outlived the acceptance)", 60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_second_signal_while_a_step_is_stopped_kills_it_at_once(tmp_path, reaper):
    """Ctrl-C, and again while the step has its grace after SIGTERM: the step is killed then,
    not left with only the SIGTERM it ignores."""
    pid_file, term_file = tmp_path / "step.pid", tmp_path / "step.term"
    proc = _driver(tmp_path, _stubborn(pid_file, term_file=term_file), grace_s=600)
    _wait_for(lambda: _pid_in(pid_file) is not None or proc.poll() is not None, "the step")
    assert proc.poll() is None, proc.communicate()[1]
    reaper.append(step := _pid_in(pid_file))
    proc.send_signal(signal.SIGINT)
    _wait_for(term_file.exists, "the step's SIGTERM")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    _wait_for(lambda: not _alive(step), "the step to end (only its SIGTERM, which it ignores, was sent)", 60)


def test_signals_while_a_step_is_being_stopped_wait_until_it_is_signalled(tmp_path, monkeypatch, reaper):
    """Ctrl-C held down: a signal while the stop finds and signals the step's processes must not
    cut that short, or the step (here one that ignores SIGTERM) runs on."""
    real_descendants = ga._descendants

    def descendants_with_ctrl_c(pid):
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # where the handler would raise, were signals not held back
            time.sleep(0.01)
        return real_descendants(pid)

    monkeypatch.setattr(ga, "_descendants", descendants_with_ctrl_c)
    pid_file = tmp_path / "step.pid"
    with pytest.raises(KeyboardInterrupt), ga.stop_signals():
        ga.run_command([sys.executable, "-c", _stubborn(pid_file)], 5, grace_s=600)
    if (step := _pid_in(pid_file)) is not None:  # else it never started: nothing to stop
        reaper.append(step)
        _wait_for(lambda: not _alive(step), "the step to end (it outlived the acceptance)", 60)


def test_a_step_that_ended_is_not_signalled_by_its_old_pid(monkeypatch):
    """Once the step is reaped its pid may be another process's: no SIGKILL to that group."""
    real_killpg = os.killpg
    sent: list[int] = []

    def recorded_killpg(pgid, sig):
        sent.append(sig)
        real_killpg(pgid, sig)

    monkeypatch.setattr(ga.os, "killpg", recorded_killpg)
    done = ga.run_command([sys.executable, "-c", "import time; time.sleep(300)"], 2, grace_s=60)
    assert done.returncode == 124
    assert sent == [signal.SIGTERM]  # it ended on SIGTERM and was reaped: nothing more


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")
def test_a_worker_started_as_its_launcher_is_stopped_is_taken_in_and_killed(tmp_path, reaper):
    """A launcher that starts a worker in a session of its own as it dies (torchrun stopped while
    it starts its workers): the worker is orphaned after the stop looked for processes, so only
    a subreaper still finds it below the acceptance."""
    ready, worker_pid = tmp_path / "ready", tmp_path / "worker.pid"
    worker = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(300)\n"
    launcher = ("import os, signal, subprocess, sys, time\n"
                "def stop(*_):\n"
                f"    p = subprocess.Popen([sys.executable, '-c', {worker!r}], start_new_session=True)\n"
                f"    open({str(worker_pid)!r}, 'w').write(str(p.pid))\n"
                "    os._exit(0)\n"
                "signal.signal(signal.SIGTERM, stop)\n"
                f"open({str(ready)!r}, 'w').write('ready')\n"
                "time.sleep(300)\n")
    driver = tmp_path / "driver.py"
    driver.write_text("import importlib.util, sys\n"
                      f"spec = importlib.util.spec_from_file_location('gpu_acceptance', {str(SCRIPT)!r})\n"
                      "ga = sys.modules['gpu_acceptance'] = importlib.util.module_from_spec(spec)\n"
                      "spec.loader.exec_module(ga)\n"
                      "assert ga.become_subreaper()\n"
                      "with ga.stop_signals():\n"
                      f"    ga.run_command([sys.executable, '-c', {launcher!r}], 600, grace_s=2)\n")
    proc = subprocess.Popen([sys.executable, str(driver)], stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: ready.exists() or proc.poll() is not None, "the launcher")
    assert proc.poll() is None, proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert (worker := _pid_in(worker_pid)) is not None, "the launcher started no worker"
    reaper.append(worker)
    _wait_for(lambda: not _alive(worker), "the worker to end (it outlived the acceptance)", 60)


def test_a_signal_while_a_step_starts_is_held_until_the_step_can_be_stopped(monkeypatch):
    """The step's process exists before Popen returns it: a stop signal in that moment must not
    leave it running unseen."""
    real_popen = subprocess.Popen
    started: list[subprocess.Popen] = []

    def popen_then_signal(*args, **kwargs):
        p = real_popen(*args, **kwargs)
        started.append(p)
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # where the handler would raise, were the signal not held
            time.sleep(0.01)
        return p

    monkeypatch.setattr(ga.subprocess, "Popen", popen_then_signal)
    try:
        with pytest.raises(ga.Stopped), ga.stop_signals():
            ga.run_command([sys.executable, "-c", "import time; time.sleep(300)"], 600, grace_s=5)
        assert started and started[0].poll() is not None, "the step outlived the acceptance"
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_signals_that_are_ignored_stay_ignored():
    """``nohup make gpu-check &``: SIGHUP is ignored on purpose, so a logout must not stop it."""
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with ga.stop_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is ga._on_stop_signal
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_a_run_that_exits_0_without_a_record_is_a_failure(tmp_path):
    machine = FakeGpuMachine()

    def no_record(cmd, timeout_s):
        if "--synthetic-location" in cmd and _arg(cmd, "--synthetic-location") == "loader":
            return ga.Completed(0, "", "", 1.0)  # exits 0, writes no record
        return machine(cmd, timeout_s)

    _, summary, _ = _accept(tmp_path, no_record, "--skip", "tests,timm,compile,ddp,sysinfo,dali")
    assert "### synthetic loader (exit 0; no record under" in summary


def test_summary_has_every_figure(tmp_path):
    machine = FakeGpuMachine(ours=3000.0, bare=3030.0, bare_step=3200.0)
    _, summary, _ = _accept(tmp_path, machine, "--timm-benchmark", "/timm/benchmark.py", "--compile-step", gpus=2)
    for text in ("3,000.0", "3,030.0", "0.990",  # harness, bare, ratio
                 "timm 2,801.5 img/s", "cnnbench / timm = 1.071",
                 "| device | 3,000.0 | 1.000 |", "| host |", "| loader |",
                 "cnnbench --compile (default mode)", "cnnbench --compile-mode reduce-overhead",
                 "it helps: keep it", "3,200.0",
                 "Total 6,000.0 img/s; per device 3,000.0, 3,000.0", "1.000.",  # DDP and its efficiency
                 "612.5 / 700.0", "1,755 / 1,980", "4.25",  # power, SM clock, img/J
                 "at the power cap (cnnbench round 1, cnnbench round 2", "NVIDIA H100 80GB HBM3",
                 "eager: 3,000.0 img/s, aim > 3,000: not met"):
        assert text in summary, text


def test_real_jpegs_feed_the_model_and_the_pipeline_alone(tmp_path):
    machine = FakeGpuMachine(ours=3000.0)
    _, summary, _ = _accept(tmp_path, machine, "--skip", "tests,bare,timm,compile,ddp,sysinfo,dali")
    joined = [" ".join(c) for c in machine.commands]
    data = str(tmp_path / "work" / "jpegs")
    made = [c for c in machine.commands if "make-dataset" in c]
    assert len(made) == 1 and _arg(made[0], "--image-size") == "500x375" and made[0][3] == data
    run = next(c for c in machine.commands if "--data-dir" in c and "run" in c)
    pipe = next(c for c in machine.commands if "--data-dir" in c and "data" in c)
    for cmd in (run, pipe):
        assert _arg(cmd, "--data-dir") == data and "--distortions" in cmd
        assert "--num-workers" not in cmd  # the loaders users get by default
    assert _arg(pipe, "--device") == "cuda" and _arg(run, "--model") == "resnet50"
    assert joined.index(" ".join(made[0])) < joined.index(" ".join(pipe)) < joined.index(" ".join(run))
    section = summary.split("## Real JPEGs", 1)[1].split("\n## ", 1)[0]
    assert "| `cnnbench run` resnet50 on the JPEGs | 15 | 2,910.0 | 0.970 | 1.0% | 68% |" in section
    assert "| `cnnbench data --device cuda` (the pipeline alone) | 15 | 7,000.0 | — | 1.0% | 68% |" in section
    assert "60 training JPEGs" in section and "hard linked, every file read once" in section  # 2 x 3 files, 10 times
    assert "The synthetic rate is the synthetic-on-the-device run's (3,000.0 img/s)" in section
    assert "The pipeline alone makes 2.41× what resnet50 consumed (466.7 img/s per loader process)" in section
    telemetry = summary.split("## Telemetry", 1)[1].split("\n## ", 1)[0]
    assert "| resnet50 on JPEGs |" in telemetry and "JPEG pipeline alone" not in telemetry  # no model, no training
    assert not (tmp_path / "work" / "jpegs").exists()  # removed after the runs


def test_jpegs_that_cannot_be_made_give_no_real_data_runs(tmp_path):
    machine = FakeGpuMachine(fail={"make-dataset": (1, "No space left on device")})
    _, summary, _ = _accept(tmp_path, machine, "--skip", "tests,bare,timm,compile,ddp,sysinfo,dali")
    assert not any("--data-dir" in c for c in machine.commands)
    assert "`cnnbench make-dataset` failed (see Failures)" in summary
    assert "### make JPEGs (exit 1)" in summary and "No space left on device" in summary


def test_the_device_location_is_the_median_round_where_the_rounds_ran(tmp_path):
    """The rounds are synthetic on the device already: the locations table takes the median one
    (not another run), with its input wait, and says so."""
    rates = iter([3000.0, 2900.0, 3100.0])
    machine = FakeGpuMachine()

    def rounds_differ(cmd, timeout_s):
        if " run " in f" {' '.join(cmd)} " and "--num-batches" in cmd and _arg(cmd, "--num-batches") == "100":
            machine.ours = next(rates)
        elif "--synthetic-location" in cmd:
            machine.ours = 2800.0
        return machine(cmd, timeout_s)

    _, summary, _ = _accept(tmp_path, rounds_differ, "--skip",
                            "tests,timm,jpeg,compile,ddp,fsdp,parameter_server,sysinfo,dali")
    assert not any("--synthetic-location" in c and _arg(c, "--synthetic-location") == "device"
                   and _arg(c, "--num-batches") == "50" for c in machine.commands)
    section = summary.split("## Synthetic input location", 1)[1].split("##", 1)[0]
    assert "| device | 3,000.0 | 1.000 | 1.0% |" in section and "| host | 2,800.0 | 0.933 |" in section
    assert "The device row is cnnbench round 1 (the rounds' median, 100 timed steps)" in section


def test_with_an_even_number_of_rounds_the_device_location_runs_on_its_own(tmp_path):
    """Two rounds' median is no one round's: the device gets a run of its own, and the JPEGs are
    compared with that run, as the summary says."""
    rates = iter([3000.0, 2800.0])
    machine = FakeGpuMachine()

    def rounds_differ(cmd, timeout_s):
        if "--num-batches" in cmd and _arg(cmd, "--num-batches") == "100" and "--synthetic-location" in cmd:
            machine.ours = next(rates)
        elif "--synthetic-location" in cmd:
            machine.ours = 2950.0
        return machine(cmd, timeout_s)

    _, summary, _ = _accept(tmp_path, rounds_differ, "--rounds", "2", "--skip", "tests,timm,compile,ddp,sysinfo,dali")
    assert any("--synthetic-location" in c and _arg(c, "--synthetic-location") == "device"
               and _arg(c, "--num-batches") == "50" for c in machine.commands)
    assert "Median cnnbench 2,900.0" in summary
    assert "| device | 2,950.0 | 1.000 |" in summary and "The device row is" not in summary
    assert "The synthetic rate is the synthetic-on-the-device run's (2,950.0 img/s)" in summary


def test_jpegs_against_the_rounds_median_where_no_location_ran(tmp_path):
    _, summary, _ = _accept(tmp_path, FakeGpuMachine(ours=3000.0), "--skip",
                            "tests,timm,locations,compile,ddp,sysinfo,dali")
    assert ("The synthetic rate is the cnnbench rounds' median (synthetic input on the device) (3,000.0 img/s)"
            in summary)


def test_a_failed_pipeline_alone_still_runs_the_model_on_the_jpegs(tmp_path):
    machine = FakeGpuMachine(fail={"data": (1, "RuntimeError: DataLoader worker (pid 12) is killed by signal")})
    _, summary, _ = _accept(tmp_path, machine, "--skip", "tests,bare,timm,compile,ddp,sysinfo,dali")
    assert "| `cnnbench data --device cuda` (the pipeline alone) | — | — | — | — | — |" in summary
    assert "| `cnnbench run` resnet50 on the JPEGs | 15 | 2,910.0 | 0.970 |" in summary
    assert "### JPEG pipeline alone (exit 1)" in summary and "killed by signal" in summary
    assert "The pipeline alone makes" not in summary


def test_link_copies_copies_where_hard_links_are_refused(tmp_path, monkeypatch):
    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        (tmp_path / c / "0.jpg").write_bytes(b"x")

    def refused(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(ga.os, "link", refused)
    assert ga.link_copies(tmp_path, 3) == ga.Copies(files=6, copied=4)
    assert (tmp_path / "b_copy3" / "0.jpg").read_bytes() == b"x"


def test_link_copies_links_each_class_folder(tmp_path):
    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        for i in range(4):
            (tmp_path / c / f"{i}.jpg").write_bytes(bytes([i]) * 10)
    assert ga.link_copies(tmp_path, 3) == ga.Copies(files=24, copied=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "a_copy2", "a_copy3", "b", "b_copy2", "b_copy3"]
    assert (tmp_path / "b_copy3" / "2.jpg").read_bytes() == bytes([2]) * 10
    assert (tmp_path / "b_copy3" / "2.jpg").stat().st_ino == (tmp_path / "b" / "2.jpg").stat().st_ino


def test_compiling_the_optimizer_step_that_does_not_help_is_said(tmp_path):
    _, summary, _ = _accept(tmp_path, FakeGpuMachine(bare=3000.0, bare_step=2900.0), "--skip", "tests,ddp",
                            "--compile-step")
    assert "it does not help" in summary and "keep it" not in summary


def test_the_compiled_optimizer_step_is_timed_only_when_asked(tmp_path):
    machine = FakeGpuMachine()
    _, summary, _ = _accept(tmp_path, machine, "--skip", "tests,timm,locations,jpeg,ddp,sysinfo,dali")
    assert not any("--compile-step" in c for c in machine.commands)
    assert "Compiling optimizer.step too: not measured (`--compile-step` adds it)." in summary
    assert "bare, model and optimizer.step compiled" not in summary


@pytest.mark.parametrize(("ratio", "verdict"), [
    (1.001, "no difference beyond 1% (one run each): nothing to choose"),  # the H100's 5,772.5 / 5,768.8
    (0.995, "no difference beyond 1% (one run each): nothing to choose"),
    (1.01, "it helps: keep it"), (0.99, "it does not help"),
])
def test_a_compiled_step_within_noise_of_the_model_alone_is_not_called_a_help(ratio, verdict):
    assert ga.step_compile_verdict(ratio) == verdict


# --- timm ------------------------------------------------------------------------------

def test_timm_absent_gives_one_skipped_line(tmp_path, monkeypatch):
    monkeypatch.delenv("TIMM_BENCHMARK", raising=False)
    machine = FakeGpuMachine()
    _, summary, _ = _accept(tmp_path, machine)
    section = summary.split("## timm benchmark.py", 1)[1].split("\n## ", 1)[0].strip()
    assert len(section.splitlines()) == 1 and "skipped" in section and "TIMM_BENCHMARK" in section
    assert not any("--bench" in c for c in machine.commands)


def test_timm_path_from_the_environment_and_empty_means_absent(monkeypatch):
    monkeypatch.setenv("TIMM_BENCHMARK", "/x/benchmark.py")
    assert ga.settings_from(ga.parse_args([])).timm_benchmark == "/x/benchmark.py"
    monkeypatch.setenv("TIMM_BENCHMARK", "")  # what `make gpu-check` passes when it is unset
    assert ga.settings_from(ga.parse_args([])).timm_benchmark is None


def test_parse_timm_output():
    r = ga.parse_timm_output(TIMM_STDOUT)
    assert r.images_per_sec == 2801.5 and r.batch_size == 256 and r.error is None
    retried = ga.parse_timm_output(TIMM_STDOUT.replace('"train_batch_size": 256', '"train_batch_size": 128'))
    assert retried.batch_size == 128
    failed = ga.parse_timm_output('--result\n{"model": "resnet50", "error": "CUDA out of memory"}')
    assert failed.images_per_sec is None and "CUDA out of memory" in failed.error
    assert ga.parse_timm_output("Traceback ...").error == "no '--result' in timm's output"
    assert "not JSON" in ga.parse_timm_output("--result\n{oops").error


def test_timm_batch_retry_is_shown(tmp_path):
    machine = FakeGpuMachine(timm=TIMM_STDOUT.replace('"train_batch_size": 256', '"train_batch_size": 128'))
    _, summary, _ = _accept(tmp_path, machine, "--timm-benchmark", "/t/benchmark.py", "--skip", "tests,ddp")
    assert "(at batch 128, not 256)" in summary


def test_timm_without_a_figure_is_a_failed_step(tmp_path):
    machine = FakeGpuMachine(timm='--result\n{"model": "resnet50", "error": "CUDA out of memory"}')
    _, summary, _ = _accept(tmp_path, machine, "--timm-benchmark", "/t/benchmark.py", "--skip", "tests,ddp")
    assert "### timm benchmark.py (exit 0; timm: CUDA out of memory)" in summary


# --- commands --------------------------------------------------------------------------

def test_cnnbench_command_measures_the_issue_configuration(tmp_path):
    s = ga.Settings(cnnbench="/venv/bin/cnnbench")
    cmd = ga.cnnbench_command(s, tmp_path, steps=100)
    assert cmd[:2] == ["/venv/bin/cnnbench", "run"]
    for flag, value in (("--model", "resnet50"), ("--batch-size", "256"), ("--precision", "amp_bf16"),
                        ("--data-format", "NHWC"), ("--device", "cuda"), ("--synthetic-location", "device"),
                        ("--num-batches", "100"), ("--num-warmup-batches", "20"), ("--results-dir", str(tmp_path))):
        assert _arg(cmd, flag) == value


def test_the_venvs_cnnbench_is_the_one_beside_its_python(tmp_path):
    (tmp_path / "python").touch()
    (tmp_path / "cnnbench").touch()
    assert ga.Settings(python=str(tmp_path / "python")).cnnbench_exe() == str(tmp_path / "cnnbench")


def test_torchrun_command_uses_every_gpu_over_nccl(tmp_path):
    cmd = ga.torchrun_command(ga.Settings(python="/venv/bin/python"), tmp_path, 8)
    assert cmd[:3] == ["/venv/bin/python", "-m", "torch.distributed.run"]
    assert _arg(cmd, "--nproc-per-node") == "8"
    i = cmd.index("-m", 3)
    assert cmd[i:i + 3] == ["-m", "cnnbench", "run"]
    assert _arg(cmd, "--all-reduce") == "nccl" and _arg(cmd, "--variable-update") == "replicated"


def test_timm_command_matches_the_configuration():
    cmd = ga.timm_command(ga.Settings(python="py"), "/t/benchmark.py")
    assert cmd[:2] == ["py", "/t/benchmark.py"]
    assert _arg(cmd, "--bench") == "train" and _arg(cmd, "--model") == "resnet50"
    assert _arg(cmd, "--batch-size") == "256" and _arg(cmd, "--amp-dtype") == "bfloat16"
    assert "--amp" in cmd and "--channels-last" in cmd
    assert _arg(cmd, "--num-warm-iter") == "20" and _arg(cmd, "--num-bench-iter") == "100"


def test_every_step_runs_the_variant_it_names(tmp_path, monkeypatch):
    monkeypatch.setattr(ga, "dali_installed", lambda: True)
    machine = FakeGpuMachine()
    _accept(tmp_path, machine, "--rounds", "1", "--timm-benchmark", "/t/benchmark.py", "--compile-step", gpus=4)
    joined = [" ".join(c) for c in machine.commands]
    assert any(c.endswith("pytest tests/test_gpu.py -q -rs -p no:cacheprovider --durations=8") for c in joined)
    located = [c for c in joined if " run " in c and "--synthetic-location" in c and "--compile" not in c
               and "torch.distributed.run" not in c]
    assert [c.split("--synthetic-location ")[1].split()[0] for c in located] == ["device", "host", "loader"]
    assert "--num-batches 100" in located[0]  # the round; no location run of its own for the device
    assert sum(" make-dataset " in c for c in joined) == 1  # the JPEGs made once, for both pipelines
    assert sum("--data-dir" in c and "--input-pipeline" not in c for c in joined) == 2
    dali = [c for c in joined if "--input-pipeline dali" in c]
    assert len(dali) == 3 and " data " in dali[0] and "--compile-mode reduce-overhead" in dali[2]
    assert sum(c.endswith("--compile") for c in joined) == 1
    assert sum("--compile-mode reduce-overhead" in c and " run " in c and "dali" not in c for c in joined) == 1
    bare_compiled = [c for c in joined if " bare " in c and "--compile-mode reduce-overhead" in c]
    assert len(bare_compiled) == 2 and sum(c.endswith("--compile-step") for c in bare_compiled) == 1
    assert any("--nproc-per-node 4" in c for c in joined)
    assert any(c.endswith(" sysinfo") for c in joined)


def test_a_command_past_its_time_is_stopped_with_124():
    done = ga.run_command([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], 2)
    assert done.returncode == 124 and "started" in done.stdout and "stopped after 2 s" in done.stderr
    assert done.seconds < 30


def _dali_section(summary: str) -> str:
    return summary.split("## JPEGs through DALI", 1)[1].split("\n## ", 1)[0]


def test_dali_feeds_the_model_eager_and_compiled_against_the_synthetic_rates(tmp_path, monkeypatch):
    monkeypatch.setattr(ga, "dali_installed", lambda: True)
    machine = FakeGpuMachine(ours=3000.0)
    _, summary, _ = _accept(tmp_path, machine, "--skip", "tests,bare,timm,locations,ddp,fsdp,parameter_server,comm,"
                            "sysinfo", "--rounds", "1")
    section = _dali_section(summary)
    assert "| `cnnbench data --device cuda --input-pipeline dali` (the pipeline alone) | 13,000.0 | — |" in section
    # against the compile section's reduce-overhead run (3,600 img/s), not the eager rate
    assert ("| `cnnbench run` resnet50 through DALI, compiled (reduce-overhead) | 3,528.0 | 0.980 | 1.0% | 20% | "
            "5.0 | mixed, hardware decoder 0.65 |") in section
    assert "- compiled through DALI / compiled synthetic: 0.980 (goal ≥ 0.97: met);" in section
    assert "- host cores of that run: 5.0 (goal ≤ 4: **not met**);" in section
    assert "- the pipeline alone: 13,000.0 img/s (goal ≥ 12,000 on one H100: met)." in section
    joined = [" ".join(c) for c in machine.commands]
    assert sum(" make-dataset " in c for c in joined) == 1
    # the JPEG step's synthetic rate and the compile section's are DALI's too: none measured again
    assert sum("--synthetic-location device" in c and "--compile" not in c for c in joined) == 1
    assert sum("--synthetic-location device" in c and "--compile-mode reduce-overhead" in c for c in joined) == 1
    assert not (tmp_path / "work" / "jpegs").exists()  # removed at the end


def test_only_dali_runs_the_dali_step_alone_with_its_own_synthetic_rates(tmp_path, monkeypatch):
    monkeypatch.setattr(ga, "dali_installed", lambda: True)
    machine = FakeGpuMachine(ours=3000.0)
    code, summary, _ = _accept(tmp_path, machine, "--only", "dali")
    joined = [" ".join(c) for c in machine.commands]
    assert not any("test_gpu.py" in c or " bare " in c or c.endswith(" sysinfo") or "--bench" in c for c in joined)
    assert sum(" make-dataset " in c for c in joined) == 1 and sum("--input-pipeline dali" in c for c in joined) == 3
    synthetic = [c for c in joined if "--synthetic-location device" in c]
    assert len(synthetic) == 2 and "--compile-mode reduce-overhead" in synthetic[1]  # eager, then compiled
    section = _dali_section(summary)
    assert "| `cnnbench run` resnet50 through DALI, eager | 2,970.0 | 0.990 |" in section
    assert "compiled synthetic: 0.980 (goal ≥ 0.97: met)" in section
    assert "## Real JPEGs" not in summary and "## torch.compile" not in summary
    assert code == 0


def test_without_dali_the_step_says_so_in_one_line_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(ga, "dali_installed", lambda: False)
    machine = FakeGpuMachine()
    _, summary, said = _accept(tmp_path, machine, "--only", "dali")
    assert machine.commands == []  # not even the JPEGs
    assert f"gpu-check: {ga.DALI_MISSING_LINE}" in said and "cnnbench[dali]" in ga.DALI_MISSING_LINE
    assert _dali_section(summary).strip() == ga.DALI_MISSING_LINE


def test_jpegs_that_cannot_be_made_give_no_dali_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(ga, "dali_installed", lambda: True)
    machine = FakeGpuMachine(fail={"make-dataset": (1, "No space left on device")})
    _, summary, _ = _accept(tmp_path, machine, "--only", "jpeg,dali")
    joined = [" ".join(c) for c in machine.commands]
    assert joined and all(" make-dataset " in c for c in joined) and len(joined) == 1  # tried once, not per step
    assert "`cnnbench make-dataset` failed (see Failures): no DALI figures." in _dali_section(summary)


def test_only_jpeg_measures_its_own_synthetic_rate(tmp_path):
    machine = FakeGpuMachine(ours=3000.0)
    _, summary, _ = _accept(tmp_path, machine, "--only", "jpeg")
    joined = [" ".join(c) for c in machine.commands]
    assert sum("--synthetic-location device" in c for c in joined) == 1  # no rounds ran: one run of its own
    section = summary.split("## Real JPEGs", 1)[1].split("\n## ", 1)[0]
    assert "| `cnnbench run` resnet50 on the JPEGs | 15 | 2,910.0 | 0.970 |" in section
    assert "The synthetic rate is cnnbench's on the device, measured for this step (3,000.0 img/s)." in section


def test_only_jpeg_and_dali_measure_the_synthetic_rate_once(tmp_path, monkeypatch):
    monkeypatch.setattr(ga, "dali_installed", lambda: True)
    machine = FakeGpuMachine(ours=3000.0)
    _, summary, _ = _accept(tmp_path, machine, "--only", "jpeg,dali")
    joined = [" ".join(c) for c in machine.commands]
    eager = [c for c in joined if "--synthetic-location device" in c and "--compile-mode" not in c]
    assert len(eager) == 1  # the JPEG step's, which the DALI step compares with too
    assert "| `cnnbench run` resnet50 through DALI, eager | 2,970.0 | 0.990 |" in _dali_section(summary)


def test_skip_and_only_together_are_refused():
    with pytest.raises(SystemExit, match="give one of them"):
        ga.settings_from(ga.parse_args(["--skip", "tests", "--only", "dali"]))
    with pytest.raises(SystemExit, match="--only: unknown section"):
        ga.settings_from(ga.parse_args(["--only", "dali,nope"]))
    assert ga.settings_from(ga.parse_args(["--only", "dali"])).skip == frozenset(ga.SECTIONS) - {"dali"}


def test_unknown_skip_is_refused():
    with pytest.raises(SystemExit, match="unknown section"):
        ga.settings_from(ga.parse_args(["--skip", "tests,nope"]))


# --- parsing a record ------------------------------------------------------------------

def test_record_figures():
    f = ga.record_figures(_record(3123.4))
    assert f["images_per_sec"] == 3123.4 and f["images_per_joule"] == 4.25 and f["energy_j"] == 1500.0
    (gpu,) = f["gpus"]
    assert gpu["power_mean_w"] == 612.5 and gpu["sm_clock_max_mhz"] == 1980.0
    assert f["gpu_model"] == "NVIDIA H100 80GB HBM3" and f["warnings"] == ["at the power cap"]


def test_last_record_reads_the_results_folder(tmp_path):
    assert ga.last_record(tmp_path / "none")[0] is None
    append_record(tmp_path, {**_record(1.0), "run_id": "r1"})
    append_record(tmp_path, {**_record(2.0), "run_id": "r2"})
    record, problem = ga.last_record(tmp_path)
    assert record["metrics"]["total_images_per_sec"] == 2.0 and problem is None


def test_parse_bare_output():
    assert ga.parse_bare_output('log\n{"images_per_sec": 12.5}\n')["images_per_sec"] == 12.5
    with pytest.raises(ValueError):
        ga.parse_bare_output("Traceback: CUDA error")


def test_pytest_summary():
    out = "....F.s\n=========================== 1 failed, 5 passed, 1 skipped in 3.2s ===\n"
    assert ga.pytest_summary(out) == "1 failed, 5 passed, 1 skipped in 3.2s"


# --- the bare loop ---------------------------------------------------------------------

def test_which_compile_modes_replay_cuda_graphs():
    """The bare loop marks each step's start in these modes (cudagraph_mark_step_begin)."""
    assert ga.replays_cuda_graphs("reduce-overhead", "cuda") and ga.replays_cuda_graphs("max-autotune", "cuda")
    assert not ga.replays_cuda_graphs("max-autotune-no-cudagraphs", "cuda")
    assert not ga.replays_cuda_graphs("default", "cuda") and not ga.replays_cuda_graphs(None, "cuda")
    assert not ga.replays_cuda_graphs("reduce-overhead", "cpu")


def test_bare_optimizer_is_cnnbench_default_fused_on_cuda():
    import torch

    from cnnbench.config import RunConfig
    from cnnbench.engine.step import make_optimizer

    params = [torch.nn.Parameter(torch.zeros(2))]
    ours = make_optimizer(RunConfig(model="trivial", device="cpu").with_derived_defaults(), params)
    bare = torch.optim.SGD(params, **ga.bare_optimizer_kwargs(False))
    assert type(ours) is type(bare)
    for key in ("lr", "momentum", "weight_decay", "nesterov", "dampening"):
        assert ours.defaults[key] == bare.defaults[key], key
    assert ga.bare_optimizer_kwargs(True)["fused"] is True
    from cnnbench.engine.backend import optimizer_implementation, optimizer_kwargs

    cuda = optimizer_kwargs(optimizer_implementation("sgd", "cuda"))  # what cnnbench builds on CUDA
    assert {k: v for k, v in ga.bare_optimizer_kwargs(True).items() if k in ("fused", "foreach")} == cuda
    assert "fused" not in ga.bare_optimizer_kwargs(True, compiled_step=True)
    assert "fused" not in ga.bare_optimizer_kwargs(False)


def test_bare_loop_runs_on_cpu():
    proc = subprocess.run([sys.executable, str(SCRIPT), "bare", "--device", "cpu", "--model", "trivial",
                           "--image-size", "32", "--batch-size", "4", "--precision", "fp32", "--data-format", "NHWC",
                           "--warmup", "1", "--steps", "2"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = ga.parse_bare_output(proc.stdout)
    assert out["images_per_sec"] > 0 and out["steps"] == 2 and out["compile_time_s"] is None
