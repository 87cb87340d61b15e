"""Accept a GPU machine in one command (issue 18): ``make gpu-check``.

    .venv/bin/python benchmarks/gpu_acceptance.py [--summary out/gpu-acceptance.md]
    TIMM_BENCHMARK=~/pytorch-image-models/benchmark.py make gpu-check

On a machine with one or more NVIDIA GPUs it runs, each step as a subprocess of its own:

1. ``tests/test_gpu.py`` (pytest);
2. ``cnnbench run`` on resnet50, batch 256, amp_bf16, NHWC, synthetic input on the device,
   against a bare PyTorch loop with identical settings (cuDNN autotuning on, channels_last,
   cnnbench's default optimizer built with ``fused=True``, autocast bf16, the same warm-up
   and timed steps bracketed by ``torch.cuda.synchronize``), alternating ``--rounds`` times
   and swapping which goes first each round;
3. the same configuration through timm's ``benchmark.py`` (``--timm-benchmark`` or
   ``$TIMM_BENCHMARK``; one "skipped" line without it);
4. the three ``--synthetic-location`` choices (the device's figure is step 2's median round
   where there is one: an odd number of rounds);
5. real JPEGs (``cnnbench make-dataset``, 500×375 px) decoded and augmented by the default
   loader processes: the pipeline alone into the GPU (``cnnbench data``) and resnet50 fed by it,
   against its synthetic rate;
6. ``--compile`` (default mode) and ``--compile-mode reduce-overhead`` (CUDA graphs), and the
   bare loop with the model compiled under reduce-overhead (``--compile-step`` adds the bare
   loop with ``optimizer.step`` compiled too, about 45 s more);
   then the same JPEGs through ``--input-pipeline dali`` (nvJPEG and the hardware JPEG decoder;
   one line and no steps where DALI is not installed): the pipeline alone into the GPU, and
   resnet50 fed by it, eager and compiled (reduce-overhead), each against its synthetic rate,
   with the host cores each used, against issue 47's goals;
7. DDP over NCCL under ``torchrun --nproc-per-node <every local GPU>``; then FSDP2
   (``--variable-update fsdp``, NCHW: FSDP2 refuses channels_last) the same way, within
   ``FSDP_TIMEOUT_S`` (on one GPU a group of one: it proves the CUDA path runs, not that it scales);
   then ``--variable-update parameter_server`` (NHWC, the measured precision) the same way, master
   weights on rank 0's GPU and then in pinned host memory, each within ``PARAMETER_SERVER_TIMEOUT_S``;
8. ``cnnbench comm`` (every collective over NCCL, timed by CUDA events) on every local GPU,
   within ``COMM_TIMEOUT_S``: on one GPU a torchrun world of 1, which proves the NCCL and
   CUDA-event paths run, not how they scale;
9. telemetry (power, clocks, images per joule) from the records, and ``cnnbench sysinfo``.

It writes one markdown summary with every figure and every failure (each step's command,
exit code and the tail of its output; full logs beside it). ``--skip SECTION,...`` leaves sections
out and ``--only SECTION,...`` runs just those (``--only dali``: the new step alone). It exits 1 if a GPU test fails
or if cnnbench's median rate falls below ``GATE`` of the bare loop's, else 0. On a machine
without an NVIDIA GPU it prints one line and exits 0. Ctrl-C, SIGTERM or SIGHUP stops the step
under way with every process it started, writes the summary of the finished steps, says so in
one line and exits 128 + the signal's number.

``gpu_acceptance.py bare ...`` is the bare loop itself (one JSON line on stdout).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
GATE = 0.97  # cnnbench / bare below this fails the machine (room for noise)
GOAL = 0.99  # what the harness aims for
TIMM_GOAL = 1.0
STEP_COMPILE_BAND = 0.01  # compiled optimizer.step vs not: smaller differences are noise of one run each
H100_GOALS = {"eager": 3000.0, "compiled": 3500.0}  # img/s on one H100, issue 18's aims
DEFAULT_SUMMARY = "out/gpu-acceptance.md"
DEFAULT_WORK_DIR = "out/gpu-acceptance"
TAIL_LINES = 25
FSDP_TIMEOUT_S = 300.0  # the FSDP step's budget: start-up, 20 warm-up and 50 timed steps take well under it
NO_GPU_LINE = "gpu-check: no NVIDIA GPU on this machine (torch sees no CUDA device): nothing to accept."
PARAMETER_SERVER_TIMEOUT_S = 240.0
"""Each parameter-server step's budget: start-up, 20 warm-up and 50 timed steps take well under it."""
SECTIONS = ("tests", "bare", "timm", "locations", "jpeg", "compile", "dali", "ddp", "fsdp", "parameter_server",
            "comm", "sysinfo")
DALI_TIMEOUT_S = {"pipeline": 180.0, "eager": 240.0, "compiled": 420.0}
"""The DALI step's budget per command: start-up (DALI's own, then the model's), warm-up and timed
steps take well under each; compiling under reduce-overhead takes most of its."""
DALI_GOALS = {"compiled_vs_synthetic": 0.97, "host_cores": 4.0, "pipeline_images_per_sec": 12000.0}
"""Issue 47's goals: the compiled DALI-fed run at 0.97 of its synthetic rate or more, on 4 host
cores or fewer; the pipeline alone at 12,000 img/s or more into one H100."""
DALI_MISSING_LINE = ("NVIDIA DALI is not installed here (pip install 'cnnbench[dali]', or 'cnnbench[dali-cuda120]' for "
                     "drivers before 580): no DALI steps.")
TIMM_PRECISION = {  # cnnbench --precision -> timm benchmark.py flags
    "fp32": ["--precision", "float32"],
    "amp_fp16": ["--amp", "--amp-dtype", "float16"],
    "amp_bf16": ["--amp", "--amp-dtype", "bfloat16"],
    "fp16": ["--precision", "float16"],
    "bf16": ["--precision", "bfloat16"],
}


# --- settings and commands ------------------------------------------------------------

@dataclass(frozen=True)
class JpegData:
    """The real-data step's JPEGs: ``classes`` x ``per_class`` photo-sized files written by
    ``cnnbench make-dataset``, each class folder linked ``copies`` times (10,000 training images
    that cost what 10,000 do: a loader reads and decodes every file it is handed)."""

    classes: int = 10
    per_class: int = 100
    copies: int = 10
    size: str = "500x375"
    quality: int = 90


JPEG_DATA = JpegData()


@dataclass(frozen=True)
class Settings:
    """The measured configuration and how long each part runs."""

    model: str = "resnet50"
    batch_size: int = 256
    image_size: int = 224
    precision: str = "amp_bf16"
    data_format: str = "NHWC"
    warmup: int = 20
    steps: int = 100  # timed steps of the cnnbench / bare comparison
    short_steps: int = 50  # timed steps of every other measurement
    rounds: int = 3
    timeout_s: float = 420.0  # per command
    tests_timeout_s: float = 900.0
    python: str = sys.executable
    cnnbench: str = ""
    timm_benchmark: str | None = None
    work_dir: Path = Path(DEFAULT_WORK_DIR)
    skip: frozenset[str] = frozenset()
    compile_step: bool = False  # also the bare loop with optimizer.step compiled (reduce-overhead)

    def cnnbench_exe(self) -> str:
        """The venv's ``cnnbench`` (beside this interpreter), else the one on PATH."""
        if self.cnnbench:
            return self.cnnbench
        beside = Path(self.python).parent / "cnnbench"
        return str(beside) if beside.exists() else (shutil.which("cnnbench") or "cnnbench")


def measured_flags(s: Settings, steps: int) -> list[str]:
    """The flags every cnnbench measurement shares (one device, synthetic input)."""
    return ["--model", s.model, "--batch-size", str(s.batch_size), "--image-size", str(s.image_size),
            "--precision", s.precision, "--data-format", s.data_format, "--device", "cuda",
            "--num-warmup-batches", str(s.warmup), "--num-batches", str(steps)]


def cnnbench_command(s: Settings, results_dir: Path, *, steps: int, location: str = "device",
                     extra: Sequence[str] = ()) -> list[str]:
    return [s.cnnbench_exe(), "run", *measured_flags(s, steps), "--synthetic-location", location,
            "--results-dir", str(results_dir), *extra]


def torchrun_command(s: Settings, results_dir: Path, gpus: int) -> list[str]:
    """DDP over NCCL on every local GPU: torchrun starting ``python -m cnnbench run``."""
    return [s.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(gpus),
            "-m", "cnnbench", "run", *measured_flags(s, s.short_steps), "--synthetic-location", "device",
            "--variable-update", "replicated", "--all-reduce", "nccl", "--results-dir", str(results_dir)]


def fsdp_command(s: Settings, results_dir: Path, gpus: int) -> list[str]:
    """FSDP2 on every local GPU, as the DDP step runs, in NCHW (FSDP2 cannot shard channels_last weights)."""
    nchw = dataclasses.replace(s, data_format="NCHW")
    return [s.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(gpus),
            "-m", "cnnbench", "run", *measured_flags(nchw, s.short_steps), "--synthetic-location", "device",
            "--variable-update", "fsdp", "--results-dir", str(results_dir)]


def parameter_server_command(s: Settings, results_dir: Path, gpus: int, where: str) -> list[str]:
    """``--variable-update parameter_server`` on every local GPU under torchrun (a group of one on one
    GPU), in the measured configuration (NHWC, amp_bf16), master weights on ``where``: ``device``
    (rank 0's GPU) or ``cpu`` (pinned host memory)."""
    return [s.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(gpus),
            "-m", "cnnbench", "run", *measured_flags(s, s.short_steps), "--synthetic-location", "device",
            "--variable-update", "parameter_server", "--local-parameter-device", where,
            "--results-dir", str(results_dir)]


def bare_command(s: Settings, *, steps: int, compile_mode: str | None = None, compile_step: bool = False) -> list[str]:
    cmd = [s.python, str(Path(__file__).resolve()), "bare", "--model", s.model, "--batch-size", str(s.batch_size),
           "--image-size", str(s.image_size), "--precision", s.precision, "--data-format", s.data_format,
           "--warmup", str(s.warmup), "--steps", str(steps)]
    if compile_mode:
        cmd += ["--compile-mode", compile_mode]
    if compile_step:
        cmd.append("--compile-step")
    return cmd


def timm_command(s: Settings, script: str) -> list[str]:
    """timm's ``benchmark.py``, training only, in the same configuration (timm's own resnet50
    and optimizer; it syncs at the end of every step)."""
    cmd = [s.python, script, "--bench", "train", "--model", s.model, "--batch-size", str(s.batch_size),
           "--img-size", str(s.image_size), *TIMM_PRECISION[s.precision],
           "--num-warm-iter", str(s.warmup), "--num-bench-iter", str(s.steps)]
    if s.data_format == "NHWC":
        cmd.append("--channels-last")
    return cmd


def make_jpegs_command(s: Settings, folder: Path) -> list[str]:
    d = JPEG_DATA
    return [s.cnnbench_exe(), "make-dataset", "imagefolder", str(folder), "--num-classes", str(d.classes),
            "--images-per-class", str(d.per_class), "--image-size", d.size, "--quality", str(d.quality)]


def jpeg_run_command(s: Settings, results_dir: Path, data: Path) -> list[str]:
    """resnet50 fed from JPEG files, augmented as for training, by the default loader processes."""
    return [s.cnnbench_exe(), "run", *measured_flags(s, s.short_steps), "--data-dir", str(data), "--distortions",
            "--results-dir", str(results_dir)]


def jpeg_pipeline_command(s: Settings, results_dir: Path, data: Path) -> list[str]:
    """The same input pipeline alone, its batches into the GPU (``cnnbench data``)."""
    return [s.cnnbench_exe(), "data", "--data-dir", str(data), "--distortions", "--device", "cuda",
            "--batch-size", str(s.batch_size), "--image-size", str(s.image_size),
            "--num-warmup-batches", "10", "--num-batches", str(s.short_steps), "--results-dir", str(results_dir)]


def dali_pipeline_command(s: Settings, results_dir: Path, data: Path) -> list[str]:
    """The JPEG pipeline alone through DALI, decoded on the GPU (``cnnbench data``)."""
    return [*jpeg_pipeline_command(s, results_dir, data), "--input-pipeline", "dali"]


def dali_run_command(s: Settings, results_dir: Path, data: Path, *, compiled: bool = False) -> list[str]:
    """resnet50 fed from the JPEG files through DALI, augmented as for training; ``compiled``:
    under ``--compile-mode reduce-overhead``, as the compiled synthetic run."""
    extra = ["--compile-mode", "reduce-overhead"] if compiled else []
    return [*jpeg_run_command(s, results_dir, data), "--input-pipeline", "dali", *extra]


def dali_installed() -> bool:
    """Can this interpreter (the venv's, whose ``cnnbench`` the steps run) import DALI?"""
    import importlib.util

    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Copies:
    """What :func:`link_copies` made: the training files in all, and how many of the copies
    are real copies (where the file system refused a hard link)."""

    files: int
    copied: int


def link_copies(train: Path, copies: int) -> Copies:
    """Each class folder of a fresh ``train`` folder ``copies`` times in all, the original
    included (``<class>_copy<k>``, files hard linked, else copied); then every file is read
    once, so that the runs read them from the page cache."""
    classes = sorted(p for p in train.iterdir() if p.is_dir())
    copied = 0
    for folder in classes:
        for k in range(2, copies + 1):
            twin = folder.with_name(f"{folder.name}_copy{k}")
            twin.mkdir()
            for f in folder.iterdir():
                try:
                    os.link(f, twin / f.name)
                except OSError:
                    shutil.copyfile(f, twin / f.name)
                    copied += 1
    files = [p for p in train.rglob("*") if p.is_file()]
    for f in files:
        f.read_bytes()
    return Copies(len(files), copied)


def tests_command(s: Settings) -> list[str]:
    return [s.python, "-m", "pytest", "tests/test_gpu.py", "-q", "-rs", "-p", "no:cacheprovider", "--durations=8"]


# --- running commands -----------------------------------------------------------------

@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


Runner = Callable[[Sequence[str], float], Completed]


STOP_GRACE_S = 15.0
"""How long a stopped step's processes have between SIGTERM and SIGKILL."""


def run_command(cmd: Sequence[str], timeout_s: float, grace_s: float = STOP_GRACE_S) -> Completed:
    """Run ``cmd`` in the repository in a session of its own; past ``timeout_s`` the step and
    every process it started are stopped (:func:`stop_session`) and the exit code is 124. A
    Ctrl-C or a stop signal meanwhile stops them too before it goes on up: being a session of
    its own, the step would not get the terminal's Ctrl-C and would run on, holding the GPU.
    Under :func:`stop_signals`, a signal that comes while the step is being started is held
    until it can be stopped."""
    t0 = time.monotonic()
    proc: subprocess.Popen[str] | None = None
    try:
        with _signals_held():
            proc = subprocess.Popen(list(cmd), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
        out, err = proc.communicate(timeout=timeout_s)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        assert proc is not None  # only communicate times out
        out, err = stop_session(proc, grace_s)
        code = 124
        err += f"\ngpu-check: stopped after {timeout_s:.0f} s"
    except BaseException:
        if proc is not None:
            stop_session(proc, grace_s)
        raise
    return Completed(code, out or "", err or "", time.monotonic() - t0)


def stop_session(proc: subprocess.Popen[str], grace_s: float = STOP_GRACE_S) -> tuple[str, str]:
    """Stop the step ``proc`` and every process it started: SIGTERM to its session and to each
    of its descendants (torchrun starts each worker in a session of its own), then SIGKILL to
    whatever is left after ``grace_s``, or at once if another signal cuts the wait short;
    returns what ``proc`` printed. Under :func:`stop_signals`, stop signals are held back while
    it finds and signals the processes (a Ctrl-C held down would otherwise cut that short, and
    the step run on; a signal mask would not do: it holds back only this thread's); once
    the acceptance is a subreaper (:func:`become_subreaper`), the processes orphaned meanwhile
    (a worker started as its launcher died) are its children, and are killed too."""
    tree: list[psutil.Process] = []
    out = err = ""
    done = False
    try:
        with _signals_held():
            tree = _descendants(proc.pid)  # before anything dies: a dead parent's children are no longer found
            _send(proc.pid, tree, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            out, err = proc.communicate(timeout=grace_s)
            done = True
    finally:
        with _signals_held():
            unreaped = proc.returncode is None  # once reaped, its pid may be another process's
            late = (_descendants(proc.pid) if unreaped else []) + _orphans_taken_in(proc.pid)
            _send(proc.pid if unreaped else None, tree + late, signal.SIGKILL)
    if not done:
        try:
            out, err = proc.communicate(timeout=grace_s)
        except subprocess.TimeoutExpired as exc:  # a process out of reach holds the pipes: keep what came
            out, err = _text(exc.output), _text(exc.stderr)
    return out or "", err or ""


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def _descendants(pid: int) -> list[psutil.Process]:
    """The processes below ``pid``, alive (not ``pid``'s own: its group is signalled, and
    torchrun, given SIGTERM twice, would cut short its own stop of its workers)."""
    from cnnbench.machine.host import process_tree

    return [p for p in process_tree([pid]) if p.pid != pid]


_subreaper = False
"""Whether this process takes in the orphans of its descendants (:func:`become_subreaper`)."""


def become_subreaper() -> bool:
    """Make this process the one that a descendant's orphans are handed to, so that a step's
    worker whose launcher died is still found below this process; True when it could."""
    global _subreaper
    from cnnbench.lifetime import become_subreaper as ask

    _subreaper = ask()
    return _subreaper


def _orphans_taken_in(step: int) -> list[psutil.Process]:
    """The processes below this one other than the step ``step`` and its tree: orphans of the
    step taken in as a subreaper (the acceptance runs one step at a time). None otherwise."""
    if not _subreaper:
        return []
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return []
    from cnnbench.machine.host import process_tree

    return process_tree([child.pid for child in children if child.pid != step])


def _send(session: int | None, processes: Sequence[psutil.Process], sig: int) -> None:
    """``sig`` to the process group ``session`` (if any) and to each of ``processes`` still
    running (psutil checks that a pid was not reused)."""
    from cnnbench.sweep.waiting import kill_group

    kill_group(session, sig, leader_alive=False)
    for p in processes:
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)


class Stopped(BaseException):
    """A stop signal (SIGTERM, SIGHUP) arrived: the acceptance ends where it is (a
    BaseException, like KeyboardInterrupt, so that no ``except Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_held: list[int] | None = None
"""Signals that came while :func:`_signals_held` held them (None: not holding)."""


def _stop_exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


def _on_stop_signal(signum: int, _frame: object) -> None:
    if _held is not None:
        _held.append(signum)
        return
    raise _stop_exception(signum)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """For the duration, in the main thread: Ctrl-C raises KeyboardInterrupt, SIGTERM and
    SIGHUP (a lease that ends, ``timeout``) raise :class:`Stopped`; a signal ignored when it
    begins (``nohup``) stays ignored. The old handlers come back at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, _on_stop_signal) for sig in STOP_SIGNALS
           if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in old.items():
            if handler is not None:
                signal.signal(sig, handler)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """A stop signal that comes inside the block is raised at its end (where
    :func:`stop_signals` handles it): a step's process exists before ``Popen`` returns it, and
    only once it is returned can it be stopped; a stopped step's processes are found and
    signalled whole."""
    global _held
    outer, _held = _held, []
    try:
        yield
    finally:
        held, _held = _held, outer
        if held:
            raise _stop_exception(held[0])


@dataclass
class Step:
    """One command the acceptance ran, and whether its output could be used."""

    name: str
    cmd: list[str]
    returncode: int
    seconds: float
    stdout: str = ""
    stderr: str = ""
    problem: str | None = None  # why an output that exited 0 could not be used
    log: Path | None = None
    images_per_sec: float | None = None  # the step's figure, where it measures one

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.problem is None

    def tail(self, lines: int = TAIL_LINES) -> str:
        text = self.stderr.strip() or self.stdout.strip()
        kept = text.splitlines()[-lines:]
        if self.problem:
            kept.append(f"gpu-check: {self.problem}")
        return "\n".join(kept)


@dataclass
class Acceptance:
    """The steps run so far and the summary's sections, in order."""

    settings: Settings
    runner: Runner = run_command
    say: Callable[[str], None] = print
    steps: list[Step] = field(default_factory=list)
    sections: list[tuple[str, list[str]]] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    after_step: Callable[[], None] | None = None  # called before each step after the first: the summary so far
    current: str | None = None  # the step under way, if any

    def run(self, name: str, cmd: list[str], timeout_s: float | None = None) -> Step:
        if self.after_step is not None and self.steps:  # the steps before this one, their figures parsed
            self.after_step()
        self.say(f"gpu-check: {name} ...")
        self.current = name
        done = self.runner(cmd, timeout_s or self.settings.timeout_s)
        self.current = None
        step = Step(name, cmd, done.returncode, done.seconds, done.stdout, done.stderr)
        step.log = write_log(self.settings.work_dir / "logs", len(self.steps) + 1, step)
        self.steps.append(step)
        self.say(f"gpu-check: {name}: exit {step.returncode}, {step.seconds:.1f} s")
        return step

    def results_dir(self, name: str) -> Path:
        path = self.settings.work_dir / "results" / slug(name)
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def cnnbench(self, name: str, cmd_of: Callable[[Path], list[str]],
                 timeout_s: float | None = None) -> dict[str, Any] | None:
        """Run a cnnbench command with a fresh results folder; its record's figures, or None."""
        folder = self.results_dir(name)
        step = self.run(name, cmd_of(folder), timeout_s)
        record, problem = last_record(folder)
        if record is not None:
            self.records[name] = record
        if record is not None and record.get("status") == "ok":
            figures = record_figures(record)
            step.images_per_sec = figures["images_per_sec"]
            return figures
        if step.returncode == 0:
            step.problem = problem or f"the record's status is {record.get('status') if record else None}"
        return None

    def bare(self, name: str, **kwargs: Any) -> dict[str, Any] | None:
        step = self.run(name, bare_command(self.settings, **kwargs))
        if step.returncode != 0:
            return None
        try:
            figures = parse_bare_output(step.stdout)
            step.images_per_sec = figures["images_per_sec"]
            return figures
        except ValueError as exc:
            step.problem = str(exc)
            return None

    def section(self, title: str, lines: list[str]) -> None:
        self.sections.append((title, lines))


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def write_log(folder: Path, number: int, step: Step) -> Path | None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{number:02d}-{slug(step.name)}.log"
        path.write_text(f"$ {shlex.join(step.cmd)}\nexit {step.returncode} after {step.seconds:.1f} s\n"
                        f"--- stdout\n{step.stdout}\n--- stderr\n{step.stderr}\n")
        return path
    except OSError:
        return None


# --- parsing outputs ------------------------------------------------------------------

def last_record(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The last record a run appended under ``folder`` (a fresh folder per run), or why none."""
    from cnnbench.results.store import read_records

    try:
        records, problems = read_records(folder, step_times=False)
    except FileNotFoundError:
        return None, f"no record under {folder}"
    if not records:
        return None, f"no record under {folder}" + (f" ({problems[0]})" if problems else "")
    return records[-1], None


def record_figures(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the summary shows of one record: throughput, compile time, input wait, energy,
    and each GPU's power, clocks and temperature."""
    m = record.get("metrics") or {}
    env = record.get("environment") or {}
    gpus = []
    for g in m.get("gpu_telemetry") or []:
        gpus.append({k: g.get(k) for k in (
            "rank", "index", "name", "power_mean_w", "power_max_w", "sm_clock_mean_mhz", "sm_clock_max_mhz",
            "memory_clock_mean_mhz", "temperature_max_c", "utilization_mean_pct", "energy_j",
            "throttled", "throttle_reasons")})
    return {
        "images_per_sec": m.get("total_images_per_sec"),
        "per_device_images_per_sec": m.get("per_device_images_per_sec"),
        "compile_time_s": m.get("compile_time_s"),
        "input_wait_fraction": m.get("input_wait_fraction"),
        "num_workers": (record.get("config") or {}).get("num_workers"),
        "images_per_sec_per_worker": m.get("images_per_sec_per_worker"),
        "host_cpu_percent": (m.get("host_telemetry") or {}).get("cpu_percent_mean"),
        "host_cores_used": (m.get("host_telemetry") or {}).get("cores_used_mean"),
        "dali": m.get("dali"),
        "energy_j": m.get("energy_j"),
        "images_per_joule": m.get("images_per_joule"),
        "throttled": m.get("throttled"),
        "warnings": list(m.get("warnings") or []),
        "gpus": gpus,
        "gpu_model": env.get("gpu_model"),
        "gpu_count": env.get("gpu_count"),
        "torch_version": env.get("torch_version"),
        "cuda_version": env.get("cuda_version"),
    }


def parse_bare_output(stdout: str) -> dict[str, Any]:
    """The bare loop's JSON line (its last line of output)."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            data = json.loads(line)
            if isinstance(data.get("images_per_sec"), (int, float)):
                return data
            break
    raise ValueError("the bare loop printed no images_per_sec")


@dataclass(frozen=True)
class TimmResult:
    images_per_sec: float | None
    batch_size: int | None
    error: str | None = None


def parse_timm_output(stdout: str) -> TimmResult:
    """timm's benchmark.py ends with ``--result`` and a JSON object: ``train_samples_per_sec``
    and ``train_batch_size`` (the batch it settled on: it retries smaller ones after an
    error), or ``error`` when every batch size failed."""
    head, sep, rest = stdout.rpartition("--result")
    if not sep:
        return TimmResult(None, None, "no '--result' in timm's output")
    try:
        data = json.loads(rest)
    except json.JSONDecodeError as exc:
        return TimmResult(None, None, f"timm's result is not JSON ({exc})")
    if isinstance(data, list):
        data = data[0] if data else {}
    if "error" in data:
        return TimmResult(None, None, f"timm: {data['error']}")
    rate = data.get("train_samples_per_sec")
    if not isinstance(rate, (int, float)):
        return TimmResult(None, None, "timm's result has no train_samples_per_sec")
    batch = data.get("train_batch_size")
    return TimmResult(float(rate), int(batch) if isinstance(batch, int) else None)


def pytest_summary(stdout: str) -> str:
    """pytest's last line ("12 passed, 3 skipped in 80.2s"), or its last line of output."""
    lines = [ln.strip("= ").strip() for ln in stdout.strip().splitlines() if ln.strip()]
    for line in reversed(lines):
        if any(word in line for word in (" passed", " failed", " error", " skipped", "no tests ran")):
            return line
    return lines[-1] if lines else "(no output)"


# --- decisions ------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    passed: bool
    text: str


def gate_verdict(ratio: float | None, gate: float = GATE, goal: float = GOAL) -> Verdict:
    """cnnbench's median images/sec over the bare loop's: below ``gate`` fails the machine."""
    if ratio is None:
        return Verdict(False, f"FAIL: no cnnbench / bare ratio (a side failed to run); gate {gate}")
    if ratio < gate:
        return Verdict(False, f"FAIL: cnnbench / bare = {ratio:.3f}, below the gate {gate} (goal {goal})")
    met = "goal met" if ratio >= goal else f"goal {goal} not met"
    return Verdict(True, f"pass: cnnbench / bare = {ratio:.3f} >= gate {gate} ({met})")


def exit_code(tests_passed: bool, gate: Verdict) -> int:
    return 0 if tests_passed and gate.passed else 1


def median_ratio(pairs: Sequence[tuple[float | None, float | None]]) -> float | None:
    """Median over rounds of cnnbench / bare, from rounds where both sides gave a figure."""
    ratios = [a / b for a, b in pairs if a is not None and b is not None and b > 0]
    return statistics.median(ratios) if ratios else None


def median_of(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return statistics.median(xs) if xs else None


def fmt(x: Any, digits: int = 1) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return str(x)


def rate(fig: Mapping[str, Any] | None) -> float | None:
    return None if fig is None else fig.get("images_per_sec")


def ratio_text(a: float | None, b: float | None) -> str:
    return f"{a / b:.3f}" if a is not None and b else "—"


# --- the sections ---------------------------------------------------------------------

def step_compile_verdict(ratio: float, band: float = STEP_COMPILE_BAND) -> str:
    """What one run each of the bare loop with and without a compiled ``optimizer.step`` says:
    a difference inside ``band`` is not told apart from run-to-run noise."""
    if ratio >= 1.0 + band:
        return "it helps: keep it"
    if ratio <= 1.0 - band:
        return "it does not help"
    return f"no difference beyond {band:.0%} (one run each): nothing to choose"


def gpu_tests_section(acc: Acceptance) -> bool:
    step = acc.run("GPU tests (tests/test_gpu.py)", tests_command(acc.settings), acc.settings.tests_timeout_s)
    passed = step.returncode == 0
    acc.section("GPU tests", [f"`{shlex.join(step.cmd)}`: **{'passed' if passed else 'FAILED'}** "
                              f"(exit {step.returncode}): {pytest_summary(step.stdout)}"])
    return passed


def harness_section(acc: Acceptance) -> tuple[Verdict, float | None]:
    """cnnbench against the bare loop, alternating which goes first; returns the gate's
    verdict and cnnbench's median images/sec."""
    s = acc.settings
    pairs: list[tuple[float | None, float | None]] = []
    rows = ["| round | first | cnnbench img/s | bare img/s | cnnbench / bare |", "|--|--|--|--|--|"]
    for r in range(1, s.rounds + 1):
        def ours(r: int = r) -> float | None:
            return rate(acc.cnnbench(f"cnnbench round {r}", lambda d: cnnbench_command(s, d, steps=s.steps)))

        def bare(r: int = r) -> float | None:
            fig = acc.bare(f"bare loop round {r}", steps=s.steps)
            return None if fig is None else fig["images_per_sec"]

        if r % 2:
            a, b = ours(), bare()
        else:
            b, a = bare(), ours()
        pairs.append((a, b))
        rows.append(f"| {r} | {'cnnbench' if r % 2 else 'bare'} | {fmt(a)} | {fmt(b)} | {ratio_text(a, b)} |")
    ratio = median_ratio(pairs)
    verdict = gate_verdict(ratio)
    ours_median = median_of([a for a, _ in pairs])
    rows += ["", f"Median cnnbench {fmt(ours_median)} img/s, bare {fmt(median_of([b for _, b in pairs]))} img/s. "
             f"**Gate: {verdict.text}**", "",
             f"{s.model}, batch {s.batch_size}, {s.image_size}px, {s.precision}, {s.data_format}, synthetic input "
             f"on the device, {s.warmup} warm-up and {s.steps} timed steps per side, each side a fresh process. "
             "The bare loop: cuDNN autotuning on, channels_last, cnnbench's default optimizer "
             f"({bare_optimizer_text(True)}), autocast, synchronize-bracketed wall clock."]
    acc.section("cnnbench run against a bare PyTorch loop", rows)
    return verdict, ours_median


def timm_lines(acc: Acceptance, ours: float | None) -> list[str]:
    s = acc.settings
    script = s.timm_benchmark
    if not script:
        return ["timm comparison skipped: TIMM_BENCHMARK is not set (the path of benchmark.py at the root of "
                "timm's repository)."]
    if s.precision not in TIMM_PRECISION:
        return [f"timm comparison skipped: benchmark.py has no precision like {s.precision}."]
    step = acc.run("timm benchmark.py", timm_command(s, script))
    result = parse_timm_output(step.stdout) if step.returncode == 0 else TimmResult(None, None, "failed")
    if step.returncode == 0 and result.error:
        step.problem = result.error
    lines = [f"`{shlex.join(step.cmd)}`", ""]
    if result.images_per_sec is None:
        return [*lines, f"timm benchmark.py gave no figure ({result.error}; see Failures)."]
    batch = "" if result.batch_size in (None, s.batch_size) else f" (at batch {result.batch_size}, not {s.batch_size})"
    verdict = ""
    if ours is not None:
        r = ours / result.images_per_sec
        verdict = f"; cnnbench / timm = {r:.3f} (goal >= {TIMM_GOAL}: {'met' if r >= TIMM_GOAL else 'not met'})"
    return [*lines, f"timm {fmt(result.images_per_sec)} img/s{batch}, cnnbench median {fmt(ours)} img/s{verdict}.",
            "timm builds its own resnet50 and its own optimizer (create_optimizer_v2), and synchronizes "
            "after every step."]


def median_round(acc: Acceptance) -> tuple[str, dict[str, Any]] | None:
    """The cnnbench round of the harness section whose rate is the rounds' median: its name and
    figures; None where no round gave a record, or an even number did (their median is no one
    round's)."""
    rounds = sorted(((record_figures(r)["images_per_sec"], name) for name, r in acc.records.items()
                     if name.startswith("cnnbench round ") and r.get("status") == "ok"))
    if len(rounds) % 2 == 0:
        return None
    _, name = rounds[len(rounds) // 2]
    return name, record_figures(acc.records[name])


def locations_section(acc: Acceptance, device_round: tuple[str, dict[str, Any]] | None) -> float | None:
    """The three ``--synthetic-location`` choices against the device; ``device_round`` (a
    harness round, synthetic on the device already) stands for the device where given."""
    s = acc.settings
    rows = ["| --synthetic-location | img/s | vs device | input wait |", "|--|--|--|--|"]
    figs: dict[str, dict[str, Any] | None] = {}
    if device_round is not None:
        figs["device"] = device_round[1]
    for where in ("device", "host", "loader"):
        if where in figs:
            continue

        def cmd(folder: Path, where: str = where) -> list[str]:
            return cnnbench_command(s, folder, steps=s.short_steps, location=where)

        figs[where] = acc.cnnbench(f"synthetic {where}", cmd)
    base = rate(figs["device"])
    for where, fig in figs.items():
        wait = None if fig is None else fig.get("input_wait_fraction")
        rows.append(f"| {where} | {fmt(rate(fig))} | {ratio_text(rate(fig), base)} | "
                    f"{'—' if wait is None else f'{wait:.1%}'} |")
    if device_round is not None:
        rows += ["", f"The device row is {device_round[0]} (the rounds' median, {s.steps} timed steps); host and "
                 f"loader ran {s.short_steps}."]
    acc.section("Synthetic input location", rows)
    return base


@dataclass
class JpegFolder:
    """The real-data steps' JPEGs (``jpeg`` and ``dali`` read the same files): made by the first
    step that asks, at most once, and removed when the acceptance ends (:meth:`remove`)."""

    acc: Acceptance
    made: Copies | None = None
    why: str | None = None
    """Why there are no JPEGs, once making them failed."""

    @property
    def path(self) -> Path:
        return self.acc.settings.work_dir / "jpegs"

    def ready(self) -> Copies | None:
        """The files made (made now, the first time); None when they could not be, :attr:`why` says."""
        if self.made is None and self.why is None:
            shutil.rmtree(self.path, ignore_errors=True)
            step = self.acc.run("make JPEGs", make_jpegs_command(self.acc.settings, self.path))
            if step.returncode != 0:
                self.why = "`cnnbench make-dataset` failed (see Failures)"
                return None
            try:
                self.made = link_copies(self.path / "train", JPEG_DATA.copies)
            except OSError as exc:
                step.problem = f"could not copy the class folders: {exc}"
                self.why = "The class folders could not be copied (see Failures)"
        return self.made

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def jpeg_section(acc: Acceptance, jpegs: JpegFolder, synthetic: float | None,
                 synthetic_label: str) -> float | None:
    """resnet50 fed from JPEG files against its synthetic rate (``synthetic``, which
    ``synthetic_label`` names; measured here when it is None), and the input pipeline alone.
    Returns the synthetic rate it compared with (for the steps after it)."""
    s = acc.settings
    made = jpegs.ready()
    if made is None:
        acc.section("Real JPEGs", [f"{jpegs.why}: no real-data figures."])
        return synthetic
    data = jpegs.path
    pipe = acc.cnnbench("JPEG pipeline alone", lambda d: jpeg_pipeline_command(s, d, data))
    train = acc.cnnbench(f"{s.model} on JPEGs", lambda d: jpeg_run_command(s, d, data))
    if synthetic is None:  # the sections that measure it were left out (--only jpeg): measured here
        synthetic = synthetic_rate(acc, "the JPEGs' ratio")
        synthetic_label = "cnnbench's on the device, measured for this step"
    rows = ["| run | loader processes | img/s | vs synthetic | input wait | host CPU |", "|--|--|--|--|--|--|"]
    for label, fig, base in (("`cnnbench data --device cuda` (the pipeline alone)", pipe, None),
                             (f"`cnnbench run` {s.model} on the JPEGs", train, synthetic)):
        rows.append(f"| {label} | {fmt(None if fig is None else fig.get('num_workers'))} | {run_cells(fig, base)} |")
    rows += ["", f"{jpegs_text(made)} `--distortions` (random resized crop, flip, colour jitter), cnnbench's default "
             f"loader processes. The synthetic rate is {synthetic_label} ({fmt(synthetic)} img/s)."]
    per = None if pipe is None else pipe.get("images_per_sec_per_worker")
    made_rate, used_rate = rate(pipe), rate(train)
    if made_rate is not None and used_rate is not None:
        rows.append(f"The pipeline alone makes {made_rate / used_rate:.2f}× what {s.model} consumed"
                    + (f" ({fmt(per)} img/s per loader process)." if per is not None else "."))
    acc.section("Real JPEGs", rows)
    return synthetic


def synthetic_rate(acc: Acceptance, purpose: str, *, compiled: bool = False,
                   timeout_s: float | None = None) -> float | None:
    """cnnbench's rate on synthetic input on the device, eager or under reduce-overhead, measured
    for ``purpose`` (a step whose baseline's section was left out: ``--only``)."""
    s = acc.settings
    extra = ["--compile-mode", "reduce-overhead"] if compiled else []
    return rate(acc.cnnbench(f"synthetic{' compiled' if compiled else ''}, for {purpose}",
                             lambda d: cnnbench_command(s, d, steps=s.short_steps, extra=extra), timeout_s))


def run_cells(fig: Mapping[str, Any] | None, base: float | None) -> str:
    """A fed run's img/s, its ratio to ``base`` (none: —), its input wait and its host CPU, as table cells."""
    wait = None if fig is None else fig.get("input_wait_fraction")
    cpu = None if fig is None else fig.get("host_cpu_percent")
    return (f"{fmt(rate(fig))} | {ratio_text(rate(fig), base) if base else '—'} | "
            f"{'—' if wait is None else f'{wait:.1%}'} | {'—' if cpu is None else f'{cpu:.0f}%'}")


def jpegs_text(made: Copies) -> str:
    d = JPEG_DATA
    how = "hard linked" if not made.copied else f"hard linked ({made.copied:,} files copied: no hard links there)"
    return (f"{made.files:,} training JPEGs of {d.size} px at quality {d.quality}: {d.classes} classes of "
            f"{d.per_class} written by `cnnbench make-dataset`, each class folder {d.copies} times over, {how}, "
            f"every file read once before the runs (so from the page cache).")


def dali_section(acc: Acceptance, jpegs: JpegFolder, synthetic: float | None, compiled: float | None) -> None:
    """The same JPEGs through ``--input-pipeline dali``: the pipeline alone into the GPU, then
    resnet50 fed by it, eager and compiled under reduce-overhead, each against the synthetic
    rate of the same mode (``synthetic``, ``compiled``: measured here when the sections that
    measure them did not run), with the host cores each used; and issue 47's goals."""
    title = "JPEGs through DALI"
    if not dali_installed():
        acc.say(f"gpu-check: {DALI_MISSING_LINE}")
        acc.section(title, [DALI_MISSING_LINE])
        return
    made = jpegs.ready()
    if made is None:
        acc.section(title, [f"{jpegs.why}: no DALI figures."])
        return
    s, data, budget = acc.settings, jpegs.path, DALI_TIMEOUT_S
    pipe = acc.cnnbench("DALI pipeline alone", lambda d: dali_pipeline_command(s, d, data), budget["pipeline"])
    eager = acc.cnnbench(f"{s.model} on JPEGs through DALI", lambda d: dali_run_command(s, d, data),
                         budget["eager"])
    comp = acc.cnnbench(f"{s.model} on JPEGs through DALI, compiled",
                        lambda d: dali_run_command(s, d, data, compiled=True), budget["compiled"])
    if synthetic is None:
        synthetic = synthetic_rate(acc, "DALI's ratio", timeout_s=budget["eager"])
    if compiled is None:
        compiled = synthetic_rate(acc, "DALI's ratio", compiled=True, timeout_s=budget["compiled"])
    rows = ["| run | img/s | vs synthetic | input wait | host CPU | host cores | decoded |", "|--|--|--|--|--|--|--|"]
    for label, fig, base in (("`cnnbench data --device cuda --input-pipeline dali` (the pipeline alone)", pipe, None),
                             (f"`cnnbench run` {s.model} through DALI, eager", eager, synthetic),
                             (f"`cnnbench run` {s.model} through DALI, compiled (reduce-overhead)", comp, compiled)):
        cores = None if fig is None else fig.get("host_cores_used")
        rows.append(f"| {label} | {run_cells(fig, base)} | {fmt(cores)} | {decoded_text(fig)} |")
    rows += ["", f"{jpegs_text(made)} `--distortions` (the crop fused into the decode, flip, colour jitter), "
             f"cnnbench's default --num-workers as DALI's threads. The synthetic rates are cnnbench's on the device, "
             f"eager ({fmt(synthetic)} img/s) and under reduce-overhead ({fmt(compiled)} img/s).", "",
             *dali_goal_lines(pipe, comp, compiled)]
    acc.section(title, rows)


def decoded_text(fig: Mapping[str, Any] | None) -> str:
    """Where DALI decoded (``mixed``: on the GPU) and the hardware decoder's share, from a record's ``metrics.dali``."""
    dali = None if fig is None else fig.get("dali")
    if not isinstance(dali, Mapping):
        return "—"
    load = dali.get("hw_decoder_load")
    return f"{dali.get('decode_device')}" + (f", hardware decoder {load:g}" if isinstance(load, (int, float)) else "")


def dali_goal_lines(pipe: Mapping[str, Any] | None, compiled_run: Mapping[str, Any] | None,
                    compiled_synthetic: float | None) -> list[str]:
    """Issue 47's goals (:data:`DALI_GOALS`) against what was measured, one line each."""
    def verdict(value: float | None, goal: float, *, at_most: bool = False) -> str:
        if value is None:
            return "not measured"
        met = value <= goal if at_most else value >= goal
        return "met" if met else "**not met**"

    g = DALI_GOALS
    ratio = rate(compiled_run) / compiled_synthetic if rate(compiled_run) is not None and compiled_synthetic else None
    cores = None if compiled_run is None else compiled_run.get("host_cores_used")
    return [
        f"- compiled through DALI / compiled synthetic: {'—' if ratio is None else f'{ratio:.3f}'} "
        f"(goal ≥ {g['compiled_vs_synthetic']}: {verdict(ratio, g['compiled_vs_synthetic'])});",
        f"- host cores of that run: {fmt(cores)} "
        f"(goal ≤ {g['host_cores']:g}: {verdict(cores, g['host_cores'], at_most=True)});",
        f"- the pipeline alone: {fmt(rate(pipe))} img/s (goal ≥ {g['pipeline_images_per_sec']:,.0f} on one H100: "
        f"{verdict(rate(pipe), g['pipeline_images_per_sec'])}).",
    ]


def compile_section(acc: Acceptance, eager: float | None) -> float | None:
    """cnnbench compiled both ways and the bare loop with the model compiled under
    reduce-overhead (with ``--compile-step``, also with optimizer.step compiled); returns
    cnnbench's best compiled rate."""
    s = acc.settings
    runs: list[tuple[str, dict[str, Any] | None]] = [
        ("cnnbench --compile (default mode)", acc.cnnbench(
            "cnnbench compile default", lambda d: cnnbench_command(s, d, steps=s.short_steps, extra=["--compile"]))),
        ("cnnbench --compile-mode reduce-overhead", acc.cnnbench(
            "cnnbench compile reduce-overhead",
            lambda d: cnnbench_command(s, d, steps=s.short_steps, extra=["--compile-mode", "reduce-overhead"]))),
        ("bare, model compiled (reduce-overhead)", acc.bare(
            "bare compile reduce-overhead", steps=s.short_steps, compile_mode="reduce-overhead")),
    ]
    if s.compile_step:
        runs.append(("bare, model and optimizer.step compiled (reduce-overhead)", acc.bare(
            "bare compile reduce-overhead + step", steps=s.short_steps, compile_mode="reduce-overhead",
            compile_step=True)))
    rows = ["| variant | img/s | vs eager cnnbench | compile time (s) |", "|--|--|--|--|"]
    for label, fig in runs:
        rows.append(f"| {label} | {fmt(rate(fig))} | {ratio_text(rate(fig), eager)} | "
                    f"{fmt(None if fig is None else fig.get('compile_time_s'))} |")
    model_only = rate(runs[2][1])
    rows += ["", *step_compile_lines(s, model_only, rate(runs[3][1]) if s.compile_step else None)]
    rows.append(f"cnnbench / bare under reduce-overhead (model compiled): {ratio_text(rate(runs[1][1]), model_only)}.")
    acc.section("torch.compile", rows)
    compiled = [r for r in (rate(runs[0][1]), rate(runs[1][1])) if r is not None]
    return max(compiled) if compiled else None


def step_compile_lines(s: Settings, model_only: float | None, with_step: float | None) -> list[str]:
    """What compiling optimizer.step too did, where ``--compile-step`` measured it."""
    if not s.compile_step:
        return ["Compiling optimizer.step too: not measured (`--compile-step` adds it)."]
    if model_only is None or with_step is None:
        return ["Compiling optimizer.step too: no comparison (a bare compiled run failed; see Failures)."]
    return [f"Compiling optimizer.step too: {fmt(with_step)} img/s against {fmt(model_only)} img/s with the model "
            f"alone ({with_step / model_only:.3f}): {step_compile_verdict(with_step / model_only)}.",
            f"The compiled step uses {bare_optimizer_text(True, compiled_step=True)}; the other bare runs "
            f"{bare_optimizer_text(True)}."]


def ddp_section(acc: Acceptance, gpus: int, single: float | None) -> None:
    s = acc.settings
    fig = acc.cnnbench("DDP over NCCL", lambda d: torchrun_command(s, d, gpus))
    total = rate(fig)
    eff = f"{total / (gpus * single):.3f}" if total is not None and single else "—"
    per = None if fig is None else fig.get("per_device_images_per_sec")
    per_text = ", ".join(fmt(float(x)) for x in per) if per else "—"
    acc.section(f"DDP over NCCL, {gpus} GPU{'s' if gpus > 1 else ''} (torchrun)", [
        f"`{shlex.join(acc.steps[-1].cmd)}`", "",
        f"Total {fmt(total)} img/s; per device {per_text}; scaling efficiency against {gpus} × the single-GPU "
        f"median ({fmt(single)} img/s): {eff}."])


def fsdp_section(acc: Acceptance, gpus: int) -> None:
    s = acc.settings
    fig = acc.cnnbench("FSDP over NCCL", lambda d: fsdp_command(s, d, gpus), FSDP_TIMEOUT_S)
    per = None if fig is None else fig.get("per_device_images_per_sec")
    acc.section(f"FSDP over NCCL, {gpus} GPU{'s' if gpus > 1 else ''} (torchrun)", [
        f"`{shlex.join(acc.steps[-1].cmd)}`", "",
        f"Total {fmt(rate(fig))} img/s; per device {', '.join(fmt(float(x)) for x in per) if per else '—'} "
        f"({s.model}, {s.precision}, NCHW: not comparable with the NHWC figures above)."
        + (" One GPU: a group of one, which proves the CUDA path runs, not that it scales." if gpus == 1 else "")])


COMM_TIMEOUT_S = 240.0
"""The ``comm`` step's budget: every collective, 1 KiB .. 1 GiB, takes well under a minute on one GPU."""


def comm_command(s: Settings, results_dir: Path, gpus: int) -> list[str]:
    """``cnnbench comm``, every collective over NCCL on every local GPU: its own launcher on two
    or more, a torchrun world of one on one GPU (the launcher needs two ranks)."""
    flags = ["comm", "--device", "cuda", "--backend", "nccl", "--collective", "all", "--results-dir", str(results_dir)]
    if gpus >= 2:
        return [s.cnnbench_exe(), *flags, "--num-devices", str(gpus)]
    return [s.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", "-m", "cnnbench", *flags]


def comm_lines(records: Sequence[Mapping[str, Any]], gpus: int) -> tuple[list[str], str | None]:
    """The ``comm`` step's summary (each collective's smallest and largest size), and what is wrong, if anything."""
    ok = [r for r in records if r.get("kind") == "comm" and r.get("status") == "ok"]
    errors = [str(r.get("error")) for r in records if r.get("status") != "ok"]
    timers = sorted({str((r.get("metrics") or {}).get("timer")) for r in ok})
    problem = (f"{len(errors)} error record(s): {errors[0]}" if errors else "no comm record" if not ok
               else None if timers == ["cuda events"] else f"timed by {', '.join(timers)}, not cuda events")
    rows = ["| collective | size (B) | time (µs) | algbw (GB/s) | busbw (GB/s) |", "|--|--|--|--|--|"]
    by_collective: dict[str, list[Mapping[str, Any]]] = {}
    for r in ok:
        by_collective.setdefault(str(r["config"]["collective"]), []).append(r)
    for name, rs in by_collective.items():
        ends = sorted(rs, key=lambda x: x["config"]["bytes"])
        for r in ends[:1] + ends[1:][-1:]:  # the smallest size and the largest
            m = r["metrics"]
            rows.append(f"| {name} | {r['config']['bytes']} | {fmt(m['time_s'] * 1e6, 2)} | "
                        f"{fmt(m.get('algbw_gbps'), 2)} | {fmt(m.get('busbw_gbps'), 2)} |")
    note = ("One rank: bus bandwidth is 0 by nccl-tests' factors; the step proves that the NCCL and CUDA-event "
            "paths run, not how they scale." if gpus == 1 else f"{gpus} ranks on this node.")
    return [f"{len(ok)} sizes measured, timed by {', '.join(timers) or '—'}. {note}", "", *rows], problem


def comm_section(acc: Acceptance, gpus: int) -> None:
    from cnnbench.results.store import read_records

    folder = acc.results_dir("comm")
    step = acc.run("cnnbench comm (NCCL)", comm_command(acc.settings, folder, gpus), COMM_TIMEOUT_S)
    try:
        records = read_records(folder, step_times=False)[0]
    except FileNotFoundError:
        records = []
    lines, problem = comm_lines(records, gpus)
    if problem and step.returncode == 0:
        step.problem = problem
    acc.section(f"cnnbench comm, {gpus} GPU{'s' if gpus > 1 else ''}", [f"`{shlex.join(step.cmd)}`", "", *lines])


def parameter_server_section(acc: Acceptance, gpus: int, single: float | None) -> None:
    """The parameter server with its master weights on the GPU and on the host. Each record must
    say what the run did: a step that waits for the device exactly where the master is on the host."""
    s = acc.settings
    rows = ["| master weights | img/s | vs single-GPU median | optimizer | step waits for the device |",
            "|--|--|--|--|--|"]
    for where, label in (("device", "rank 0's GPU"), ("cpu", "host (pinned)")):
        name = f"parameter server, master on {where}"
        fig = acc.cnnbench(name, lambda d, where=where: parameter_server_command(s, d, gpus, where),
                           PARAMETER_SERVER_TIMEOUT_S)
        metrics = (acc.records.get(name) or {}).get("metrics") or {}
        syncs, impl = metrics.get("step_syncs_host"), metrics.get("optimizer_implementation")
        if fig is not None and syncs is not (where == "cpu"):
            acc.steps[-1].problem = f"the record says step_syncs_host {syncs} with the master on {where}"
        total = rate(fig)
        rows.append(f"| {label} | {fmt(total)} | {ratio_text(total, gpus * single if single else None)} | "
                    f"{fmt(impl)} | {fmt(syncs)} |")
    note = " One GPU: a group of one, which proves the CUDA path runs, not that it scales." if gpus == 1 else ""
    acc.section(f"Parameter server, {gpus} GPU{'s' if gpus > 1 else ''} (torchrun)", [
        *rows, "", f"{s.model}, {s.precision}, {s.data_format}, {s.short_steps} timed steps; against {gpus} × the "
        f"single-GPU median ({fmt(single)} img/s).{note}"])


def telemetry_lines(figs: Mapping[str, dict[str, Any]]) -> list[str]:
    """Power, clocks and images per joule of each recorded run, per GPU."""
    rows = ["| run | GPU | power mean / max (W) | SM clock mean / max (MHz) | memory clock (MHz) | max temp (°C) "
            "| energy (J) | img/J | throttled |", "|--|--|--|--|--|--|--|--|--|"]
    for name, fig in figs.items():
        for g in fig["gpus"] or [{}]:
            reasons = ", ".join(g.get("throttle_reasons") or [])
            throttled = fmt(g.get("throttled")) + (f" ({reasons})" if reasons else "")
            rows.append(f"| {name} | {fmt(g.get('index'))} | {fmt(g.get('power_mean_w'))} / "
                        f"{fmt(g.get('power_max_w'))} | {fmt(g.get('sm_clock_mean_mhz'), 0)} / "
                        f"{fmt(g.get('sm_clock_max_mhz'), 0)} | {fmt(g.get('memory_clock_mean_mhz'), 0)} | "
                        f"{fmt(g.get('temperature_max_c'))} | {fmt(g.get('energy_j'))} | "
                        f"{fmt(fig.get('images_per_joule'), 2)} | {throttled} |")
    runs_of: dict[str, list[str]] = {}
    for name, fig in figs.items():
        for w in fig["warnings"]:
            runs_of.setdefault(w, []).append(name)
    if runs_of:
        rows += ["", "Warnings in the records:", *(f"- {w} ({', '.join(names)})" for w, names in runs_of.items())]
    return rows


def sysinfo_lines(acc: Acceptance) -> list[str]:
    step = acc.run("cnnbench sysinfo", [acc.settings.cnnbench_exe(), "sysinfo"])
    if step.returncode != 0:
        return ["`cnnbench sysinfo` failed (see Failures)."]
    return ["```", step.stdout.rstrip(), "```"]


def goal_lines(gpu_model: str | None, eager: float | None, compiled: float | None) -> list[str]:
    """Issue 18's throughput aims, set for one H100."""
    note = "" if gpu_model and "H100" in gpu_model else f" (the aims are for one H100; this GPU is {gpu_model})"
    out = []
    for label, key, value in (("eager", "eager", eager), ("--compile, best mode", "compiled", compiled)):
        aim = H100_GOALS[key]
        state = "—" if value is None else ("met" if value > aim else "not met")
        out.append(f"- {label}: {fmt(value)} img/s, aim > {aim:,.0f}: {state}{note}")
    return out


# --- the summary ----------------------------------------------------------------------

def failures_lines(steps: Sequence[Step]) -> list[str]:
    failed = [st for st in steps if not st.ok]
    if not failed:
        return ["None: every step exited 0 and gave its figures."]
    out: list[str] = []
    for st in failed:
        why = f"exit {st.returncode}" + (f"; {st.problem}" if st.problem else "")
        log = f" — full log: `{st.log}`" if st.log else ""
        out += [f"### {st.name} ({why})", "", f"`{shlex.join(st.cmd)}`{log}", "", "```", st.tail(), "```", ""]
    return out


def steps_lines(steps: Sequence[Step]) -> list[str]:
    rows = ["| step | exit | seconds | img/s | command |", "|--|--|--|--|--|"]
    for st in steps:
        mark = "" if st.ok else " **(failed)**"
        rows.append(f"| {st.name}{mark} | {st.returncode} | {st.seconds:.1f} | {fmt(st.images_per_sec)} | "
                    f"`{shlex.join(st.cmd)}` |")
    return rows


def render_summary(acc: Acceptance, *, gpus: int, tests_passed: bool | None, gate: Verdict | None,
                   code: int | None, elapsed_s: float, started: str, stopped: str | None = None) -> str:
    """The whole summary; ``code`` None while steps are still to come (a summary so far), or
    when the signal ``stopped`` names ended the acceptance."""
    s = acc.settings
    env = next((record_figures(r) for r in acc.records.values()), {})
    failed = sum(not st.ok for st in acc.steps)
    if stopped is not None:
        during = f" during {acc.current}" if acc.current else ""
        verdict = (f"**Stopped by {stopped}{during}, after {len(acc.steps)} finished "
                   f"step{'s' if len(acc.steps) != 1 else ''} ({failed} failed): not accepted.**")
    elif code is None:
        verdict = (f"**Unfinished: {len(acc.steps)} step{'s' if len(acc.steps) != 1 else ''} run so far, "
                   f"{failed} failed; the acceptance is still running or was stopped.**")
    else:
        verdict = (f"**Exit {code}: {'accepted' if code == 0 else 'NOT accepted'}.** GPU tests: "
                   f"{'skipped' if tests_passed is None else ('passed' if tests_passed else 'FAILED')}; harness "
                   f"gate: {gate.text if gate else 'skipped'}; {failed} step{'s' if failed != 1 else ''} failed "
                   f"of {len(acc.steps)}.")
    head = [
        f"# GPU acceptance ({started})", "",
        f"{gpus} GPU{'s' if gpus != 1 else ''}: {env.get('gpu_model') or 'model not recorded'}; "
        f"torch {env.get('torch_version') or '?'}, CUDA {env.get('cuda_version') or '?'}. "
        f"Measured: {s.model}, batch {s.batch_size}, {s.precision}, {s.data_format}.", "",
        f"{verdict} Total time {elapsed_s / 60:.1f} min (aim: under 10 min on one H100).",
    ]
    body: list[str] = []
    for title, lines in acc.sections:
        body += ["", f"## {title}", "", *lines]
    tail = ["", "## Steps", "", *steps_lines(acc.steps), "", "## Failures", "", *failures_lines(acc.steps)]
    return "\n".join(head + body + tail).rstrip() + "\n"


# --- the whole acceptance -------------------------------------------------------------

def count_gpus() -> int:
    """NVIDIA GPUs torch can use (a ROCm build's devices do not count)."""
    try:
        import torch
    except ImportError:
        return 0
    if getattr(torch.version, "hip", None) or not torch.cuda.is_available():
        return 0
    return int(torch.cuda.device_count())


def accept(acc: Acceptance, gpus: int) -> tuple[bool | None, Verdict | None]:
    """Every section in order (skipped ones left out); the tests' result and the gate's."""
    skip = acc.settings.skip
    tests = gpu_tests_section(acc) if "tests" not in skip else None
    gate, ours = harness_section(acc) if "bare" not in skip else (None, None)
    if "timm" not in skip:
        acc.section("timm benchmark.py", timm_lines(acc, ours))
    device_round = median_round(acc)
    device = locations_section(acc, device_round) if "locations" not in skip else None
    jpegs = JpegFolder(acc)
    compiled = None
    synthetic = device or ours
    try:
        if "jpeg" not in skip:
            synthetic = jpeg_section(acc, jpegs, synthetic, "the synthetic-on-the-device run's" if device is not None
                                     and device_round is None else
                                     "the cnnbench rounds' median (synthetic input on the device)")
        if "compile" not in skip:
            compiled = compile_section(acc, ours)
        if "dali" not in skip:
            reduce_overhead = acc.records.get("cnnbench compile reduce-overhead")
            dali_section(acc, jpegs, synthetic,
                         None if reduce_overhead is None else record_figures(reduce_overhead)["images_per_sec"])
    finally:
        jpegs.remove()
    if "ddp" not in skip:
        ddp_section(acc, gpus, ours)
    if "fsdp" not in skip:
        fsdp_section(acc, gpus)
    if "parameter_server" not in skip:
        parameter_server_section(acc, gpus, ours)
    if "comm" not in skip:
        comm_section(acc, gpus)
    figs = {name: record_figures(r) for name, r in acc.records.items()
            if r.get("status") == "ok" and (r.get("config") or {}).get("mode") != "data"}  # not the pipeline alone
    gpu_model = next((f["gpu_model"] for f in figs.values() if f.get("gpu_model")), None)
    acc.section("Throughput aims (issue 18)", goal_lines(gpu_model, ours, compiled))
    acc.section("Telemetry (from the records)", telemetry_lines(figs))
    if "sysinfo" not in skip:
        acc.section("cnnbench sysinfo", sysinfo_lines(acc))
    return tests, gate


def main(argv: Sequence[str] | None = None, *, gpus: Callable[[], int] = count_gpus, runner: Runner = run_command,
         say: Callable[[str], None] = print) -> int:
    args = parse_args(argv)
    if args.command == "bare":
        print(json.dumps(bare_loop(args)))
        return 0
    n = gpus()
    if n == 0:
        say(NO_GPU_LINE)
        return 0
    settings = settings_from(args)
    started = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    t0 = time.monotonic()
    summary = Path(args.summary)
    summary.parent.mkdir(parents=True, exist_ok=True)

    def so_far() -> None:  # a stopped acceptance (a lease ending, Ctrl-C) still leaves its figures
        summary.write_text(render_summary(acc, gpus=n, tests_passed=None, gate=None, code=None,
                                          elapsed_s=time.monotonic() - t0, started=started))

    acc = Acceptance(settings, runner=runner, say=say, after_step=so_far)
    try:
        with stop_signals():
            tests, gate = accept(acc, n)
            code = exit_code(tests is not False, gate or Verdict(True, "skipped"))
            summary.write_text(render_summary(acc, gpus=n, tests_passed=tests, gate=gate, code=code,
                                              elapsed_s=time.monotonic() - t0, started=started))
    except (KeyboardInterrupt, Stopped) as exc:  # the step under way was stopped by run_command
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        name = signal.Signals(signum).name
        summary.write_text(render_summary(acc, gpus=n, tests_passed=None, gate=None, code=None,
                                          elapsed_s=time.monotonic() - t0, started=started, stopped=name))
        during = f" during {acc.current}" if acc.current else ""
        say(f"gpu-check: stopped by {name}{during}; the figures of the {len(acc.steps)} finished steps are in "
            f"{summary}")
        return 128 + signum
    say(f"gpu-check: exit {code}; summary written to {summary}")
    return code


def settings_from(args: argparse.Namespace) -> Settings:
    skip = _sections(args.skip, "--skip")
    only = _sections(args.only, "--only")
    if skip and only:
        raise SystemExit("gpu-check: --skip and --only: give one of them")
    if only:
        skip = frozenset(SECTIONS) - only
    return Settings(warmup=args.warmup, steps=args.steps, short_steps=args.short_steps, rounds=args.rounds,
                    timm_benchmark=args.timm_benchmark or None, work_dir=Path(args.work_dir), skip=skip,
                    compile_step=args.compile_step)


def _sections(text: str | None, flag: str) -> frozenset[str]:
    """The sections a comma-separated ``--skip``/``--only`` names (exits in one line naming any unknown)."""
    named = frozenset(x for x in (text or "").split(",") if x)
    unknown = named - set(SECTIONS)
    if unknown:
        raise SystemExit(f"gpu-check: {flag}: unknown section(s) {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(SECTIONS)}")
    return named


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--summary", default=DEFAULT_SUMMARY, help=f"markdown summary to write [{DEFAULT_SUMMARY}]")
    p.add_argument("--work-dir", default=DEFAULT_WORK_DIR, help=f"records and logs of each step [{DEFAULT_WORK_DIR}]")
    p.add_argument("--timm-benchmark", default=os.environ.get("TIMM_BENCHMARK"),
                   help="timm's benchmark.py [$TIMM_BENCHMARK; without it the comparison is skipped]")
    p.add_argument("--rounds", type=int, default=Settings.rounds, help="cnnbench / bare rounds")
    p.add_argument("--warmup", type=int, default=Settings.warmup)
    p.add_argument("--steps", type=int, default=Settings.steps, help="timed steps of the cnnbench / bare rounds")
    p.add_argument("--short-steps", type=int, default=Settings.short_steps, help="timed steps of the other runs")
    p.add_argument("--skip", default="", help=f"comma-separated sections to leave out: {','.join(SECTIONS)}")
    p.add_argument("--only", default="", help="comma-separated sections to run, the others left out "
                   "(--only dali: the DALI step alone)")
    p.add_argument("--compile-step", action="store_true",
                   help="also time the bare loop with optimizer.step compiled under reduce-overhead against the "
                        "model compiled alone (about 45 s more on one H100)")
    sub = p.add_subparsers(dest="command")
    b = sub.add_parser("bare", help="the bare PyTorch loop alone (prints one JSON line)")
    b.add_argument("--model", default=Settings.model)
    b.add_argument("--batch-size", type=int, default=Settings.batch_size)
    b.add_argument("--image-size", type=int, default=Settings.image_size)
    b.add_argument("--precision", default=Settings.precision)
    b.add_argument("--data-format", default=Settings.data_format, choices=("NCHW", "NHWC"))
    b.add_argument("--device", default="cuda")
    b.add_argument("--warmup", type=int, default=Settings.warmup)
    b.add_argument("--steps", type=int, default=Settings.steps)
    b.add_argument("--compile-mode", default=None, help="torch.compile the model in this mode")
    b.add_argument("--compile-step", action="store_true", help="torch.compile optimizer.step too")
    return p.parse_args(argv)


# --- the bare loop --------------------------------------------------------------------

def bare_optimizer_kwargs(cuda: bool, *, compiled_step: bool = False) -> dict[str, Any]:
    """cnnbench's default optimizer (SGD at its default rate and weight decay, no momentum):
    ``fused=True`` on CUDA; a compiled step leaves the implementation to torch's default and
    lets inductor fuse it, as torch's compiled-optimizer recipe does."""
    from cnnbench.config.training_options import DEFAULT_LEARNING_RATE, DEFAULT_WEIGHT_DECAY

    kwargs: dict[str, Any] = {"lr": DEFAULT_LEARNING_RATE, "weight_decay": DEFAULT_WEIGHT_DECAY}
    if cuda and not compiled_step:
        kwargs["fused"] = True
    return kwargs


def bare_optimizer_text(cuda: bool, *, compiled_step: bool = False) -> str:
    kw = bare_optimizer_kwargs(cuda, compiled_step=compiled_step)
    return "torch.optim.SGD(" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")"


def replays_cuda_graphs(compile_mode: str | None, device_type: str) -> bool:
    """Whether torch.compile in ``compile_mode`` asks for CUDA graphs (inductor may still skip
    them for a graph it cannot capture); the bare loop then marks each step's start."""
    return device_type == "cuda" and compile_mode in ("reduce-overhead", "max-autotune")


def bare_loop(args: argparse.Namespace) -> dict[str, Any]:
    """The loop a user writes by hand for this configuration: no hooks, timers or records."""
    import torch

    from cnnbench.engine.precision import precision_policy
    from cnnbench.models import create_model

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        if device.index is None:  # set_device refuses a bare "cuda" on some torch releases (2.11)
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    policy = precision_policy(args.precision)
    policy.apply_backend_flags()
    torch.manual_seed(1234)
    fmt_ = torch.channels_last if args.data_format == "NHWC" else torch.contiguous_format
    with torch.device(device):
        model = create_model(args.model, image_size=args.image_size)
    model = model.to(dtype=policy.param_dtype).to(memory_format=fmt_).train()
    opt = torch.optim.SGD(model.parameters(), **bare_optimizer_kwargs(cuda, compiled_step=args.compile_step))
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    images = images.to(dtype=policy.param_dtype, memory_format=fmt_)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)
    scaler = policy.scaler(device.type, forward_only=False)
    forward = torch.compile(model, mode=args.compile_mode) if args.compile_mode else model
    opt_step = torch.compile(opt.step, mode=args.compile_mode) if args.compile_step else opt.step

    # With CUDA graphs each iteration begins with cudagraph_mark_step_begin(): with optimizer.step
    # compiled too, torch 2.11 on an H200 otherwise stopped with "accessing tensor output of
    # CUDAGraphs that has been overwritten by a subsequent run".
    mark_step = replays_cuda_graphs(args.compile_mode, device.type)

    def step() -> None:
        if mark_step:  # a new iteration: the last one's graph outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        with policy.autocast(device.type):
            loss = torch.nn.functional.cross_entropy(forward(images).float(), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt_step()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    step()
    sync()
    first_s = time.perf_counter() - t0
    for _ in range(args.warmup - 1):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    wall = time.perf_counter() - t0
    return {"images_per_sec": args.batch_size * args.steps / wall, "wall_time_s": wall, "steps": args.steps,
            "compile_time_s": first_s if args.compile_mode else None}


if __name__ == "__main__":
    become_subreaper()  # the acceptance's own process only: a subreaper takes in every orphan below it
    raise SystemExit(main())
