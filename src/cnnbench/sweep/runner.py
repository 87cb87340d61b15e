"""Running a suite: every case in its own process, results appended as cases end.

* A case that raises, crashes or is killed becomes a record with status ``error`` and the
  tail of its output; one that runs past the suite's ``timeout_s`` becomes ``timeout``;
  out of memory becomes ``oom`` (with ``auto_batch``, the case is retried with half the
  batch until one fits, and the record says which batches were tried). The sweep goes on.
* Records are appended by the parent only, after a case has ended, so an interrupted
  sweep never leaves half a record: Ctrl-C or SIGTERM stops the case in flight, records
  nothing for it, and returns; the next run skips every case this machine already has
  an ``ok`` record for (same suite, same settings, same repeat), unless ``rerun``.
* Two sweeps may write to one store at once: each claims a case before running it
  (:mod:`cnnbench.sweep.claims`) and, holding the claim, looks at what the store gained
  since it last read it; a case another sweep holds or has recorded ``ok`` meanwhile is
  left to it. Lines of the store that cannot be read are logged once, as ``file:line: why``.
* :func:`check_cases` puts every case through the checks ``cnnbench run`` makes before
  any work (:func:`cnnbench.engine.resolve.preflight`), in a process of the fork server.
* When the last repeat of a configuration has run, its repeats' figures are compared: a
  relative stdev (sample standard deviation over the mean,
  :func:`cnnbench.report.stats.relative_stdev`) above the noise threshold becomes a one-line
  warning on the case's result (:attr:`CaseResult.warnings`), as ``cnnbench report`` shows
  the same figure as the cell's ``±x%``. A case's profiler traces (``--profile-steps``)
  move to the results folder.
* Cases are forked from a fork server that has imported torch and the engine once
  (:mod:`cnnbench.sweep.isolation`); the sweep's own process needs neither. ``device:
  auto`` and the machine's environment are resolved in a probe process, so parent-made
  records (time-outs, crashes) carry the same machine label and device as the engine's.
* Workers and probes are sent to the case processes by name: module-level functions
  (or ``functools.partial`` of them). As with :mod:`multiprocessing`, a script that calls
  :func:`run_suite` must guard its top level with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cnnbench.config.run_config import RunConfig
from cnnbench.oom import is_out_of_memory_text
from cnnbench.analysis.repeat_stats import REPEAT_NOISE, SPREAD_NAME, relative_stdev, spread_percent
from cnnbench.results.naming import case_name
from cnnbench.results.record import Record, clip, without_native_stack
from cnnbench.results.store import StoreReader, append_record, machine_file_name
from cnnbench.sweep.claims import CaseClaims
from cnnbench.sweep.isolation import (
    ChildOutcome,
    Send,
    StopFlag,
    check_picklable,
    run_in_child,
    signal_name,
    wait_for_server,
)
from cnnbench.sweep.suite import Case, Suite, SuiteError

log = logging.getLogger(__name__)

Emit = Callable[[str], None]
Worker = Callable[[RunConfig, "Emit | None", Mapping[str, Any]], Any]
"""Runs one case in the child: ``worker(config, emit, extra)`` returns a record
(:class:`Record`, its dict, or ``(Record, path)`` as :func:`cnnbench.engine.execute` does)."""
Probe = Callable[[str, "str | None"], dict[str, Any]]
"""Runs in a child: ``probe(device, machine_label)`` -> ``{"device": concrete, "environment": {...}}``."""

PROBE_TIMEOUT_S = 300.0


# --------------------------------------------------------------------------- defaults (the engine)


def engine_worker(config: RunConfig, emit: Emit | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The default worker: :func:`cnnbench.engine.execute`."""
    from cnnbench.engine import execute
    from cnnbench.engine.log_format import closing_lines

    record, _ = execute(config, emit=emit, extra=extra)
    if emit is not None and record.status == "ok":
        for line in closing_lines(record.metrics):
            emit(line)
    return record.to_dict()


def engine_probe(device: str, machine_label: str | None) -> dict[str, Any]:
    """The default probe: the engine's device rule (``auto`` = cuda when present) and environment."""
    from cnnbench.machine.devices import resolve_device_kind
    from cnnbench.machine.environment import capture_environment

    device = resolve_device_kind(device)
    return {"device": device, "environment": capture_environment(device, machine_label)}


def preload_engine() -> None:
    """Start the fork server and wait until it has imported torch, torchvision and the
    engine, so that no case (and no case's time limit) pays for it. Nothing touches CUDA."""
    wait_for_server()


@dataclass(frozen=True)
class InvalidCase:
    """A case ``cnnbench run`` would refuse on this machine, and why."""

    case: Case
    error: str
    """The check's one line, naming the flag (``--image-size: 40 is too small for ...``)."""

    def message(self, suite: Suite) -> str:
        return f"{suite.where}: case {self.case.description}: {self.error}"


def _preflight_cases(send: Send, configs: list[tuple[int, RunConfig]]) -> dict[str, Any]:
    """In a case process: :func:`~cnnbench.engine.resolve.preflight`'s verdict on each configuration."""
    from cnnbench.config.errors import ConfigError
    from cnnbench.engine.resolve import preflight

    errors: dict[str, str] = {}
    for index, config in configs:
        try:
            preflight(config)
        except ConfigError as exc:
            errors[str(index)] = str(exc)
        except Exception as exc:  # a model that cannot even be built is no valid case either
            first = (str(exc).strip().splitlines() or [""])[0]
            errors[str(index)] = f"cannot be prepared: {type(exc).__name__}: {first}".rstrip(": ")
    return {"errors": errors}


def check_cases(suite: Suite) -> list[InvalidCase]:
    """The suite's cases that ``cnnbench run`` would refuse here, each with the reason.

    Every configuration goes through the very checks ``cnnbench run`` makes before any work
    (:func:`cnnbench.engine.resolve.preflight`: the model name, the image size the model
    takes, the precision the device has, CUDA present, the device count), in a process of
    the fork server (where torch is loaded). Raises :class:`SuiteError` when the checks
    themselves cannot run.
    """
    distinct = suite.distinct_cases()
    configs = [(c.index, c.config) for c in distinct]
    with tempfile.TemporaryDirectory(prefix="cnnbench-check-") as tmp:
        outcome = run_in_child(_preflight_cases, (configs,), timeout_s=PROBE_TIMEOUT_S,
                               log_path=Path(tmp) / "out.log")
    if not isinstance(outcome.result, dict):
        raise SuiteError(f"{suite.where}: could not check the cases ({_why(outcome)})")
    errors = outcome.result["errors"]
    return [InvalidCase(c, errors[str(c.index)]) for c in distinct if str(c.index) in errors]


# --------------------------------------------------------------------------- results


@dataclass
class CaseResult:
    """One case that ran (maybe several attempts with ``auto_batch``)."""

    case: Case
    record: dict[str, Any]
    seconds: float
    """Wall time of all attempts, as the parent saw it."""
    work_s: float | None = None
    """Time the worker itself took in the child (the last attempt); None when it did not return."""
    attempts: int = 1
    warnings: list[str] = field(default_factory=list)
    """What the sweep noticed about this case (its repeats disagree), one line each."""

    @property
    def status(self) -> str:
        return str(self.record.get("status"))

    @property
    def case_name(self) -> str:
        return str(self.record.get("case_name") or "")


@dataclass
class SweepResult:
    suite: Suite
    results: list[CaseResult] = field(default_factory=list)
    skipped: list[Case] = field(default_factory=list)
    """Cases already recorded ``ok`` for this machine, not run again."""
    elsewhere: list[Case] = field(default_factory=list)
    """Cases another sweep on the same store was running when this one came to them."""
    not_run: list[Case] = field(default_factory=list)
    """Cases left when the sweep was interrupted (the one in flight included)."""
    interrupted_by: int | None = None
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    @property
    def all_ok(self) -> bool:
        return all(r.status == "ok" for r in self.results)


class Reporter(Protocol):
    """What a sweep tells about its progress (see :mod:`cnnbench.sweep.progress`)."""

    def sweep_started(self, suite: Suite, to_run: list[Case], skipped: list[Case]) -> None: ...
    def case_started(self, case: Case, batch_size: int | None, attempt: int) -> None: ...
    def case_output(self, line: str) -> None: ...
    def case_finished(self, result: CaseResult) -> None: ...
    def case_skipped(self, case: Case, reason: str) -> None: ...
    def tick(self) -> None: ...
    def sweep_finished(self, result: SweepResult) -> None: ...


class NullReporter:
    """Says nothing (library use, tests); progress is still logged at debug level."""

    def sweep_started(self, suite: Suite, to_run: list[Case], skipped: list[Case]) -> None:
        log.info("suite %s: %d cases to run, %d already done", suite.name, len(to_run), len(skipped))

    def case_started(self, case: Case, batch_size: int | None, attempt: int) -> None:
        log.debug("case %s (batch %s, attempt %d)", case.label, batch_size, attempt)

    def case_output(self, line: str) -> None:
        pass

    def case_finished(self, result: CaseResult) -> None:
        log.info("case %s: %s (%.1f s)", result.case.label, result.status, result.seconds)

    def case_skipped(self, case: Case, reason: str) -> None:
        log.info("case %s: skipped (%s)", case.label, reason)

    def tick(self) -> None:
        pass

    def sweep_finished(self, result: SweepResult) -> None:
        pass


@dataclass(frozen=True)
class SweepOptions:
    results_dir: Path = Path("results")
    rerun: bool = False
    """Run every case, even those already recorded ``ok``."""
    auto_batch: bool | None = None
    """Retry out-of-memory cases with half the batch; None = what the suite says."""
    grace_s: float = 3.0
    """Seconds between SIGTERM and SIGKILL when a case is stopped."""
    noise: float = REPEAT_NOISE
    """Repeats whose images/sec have a relative stdev (stdev / mean) above this get a warning
    (``--noise``; the report shows that figure as ``±x%`` above the same threshold; see
    :data:`cnnbench.report.stats.REPEAT_NOISE` for how its default was derived)."""


# --------------------------------------------------------------------------- the runner


class SweepRunner:
    """Runs a checked :class:`Suite`; see the module documentation."""

    def __init__(
        self,
        suite: Suite,
        options: SweepOptions,
        *,
        worker: Worker | None = None,
        probe: Probe | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.suite = suite
        self.options = options
        self.worker: Worker = worker or engine_worker
        self.probe: Probe = probe or engine_probe
        check_picklable(self.worker, "worker")
        check_picklable(self.probe, "probe")
        self.reporter: Reporter = reporter or NullReporter()
        self.auto_batch = suite.auto_batch if options.auto_batch is None else options.auto_batch
        self._stop = StopFlag()
        self._envs: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._figures: dict[tuple[str, str], float] = {}
        """images/sec of every ``ok`` case of this suite, by case key and machine."""

    # -- public -----------------------------------------------------------------------
    def run(self) -> SweepResult:
        started = time.monotonic()
        result = SweepResult(self.suite)
        try:
            self._run(result)
        finally:
            self._stop.close()
        result.seconds = time.monotonic() - started
        self.reporter.sweep_finished(result)
        return result

    def _run(self, result: SweepResult) -> None:
        with self._signals():
            cases = [self._concrete(c) for c in self.suite.cases]
            store = StoreReader(self.options.results_dir, step_times=False)
            done = self._done_keys(store, initial=True)
            to_run: list[Case] = []
            for case in cases:
                (result.skipped if self._is_done(case, done) else to_run).append(case)
            self.reporter.sweep_started(self.suite, to_run, result.skipped)
            claims = CaseClaims(self.options.results_dir)
            for i, case in enumerate(to_run):
                if self._stop:
                    result.not_run = to_run[i:]
                    break
                claim = claims.try_claim(f"{case.key}-{machine_file_name(self._machine(case))[:-6]}")
                if claim is None:
                    result.elsewhere.append(case)
                    self.reporter.case_skipped(case, "another sweep on this store is running it")
                    continue
                with claim:
                    done |= self._done_keys(store, initial=False)  # what other sweeps recorded meanwhile
                    if self._is_done(case, done):
                        result.skipped.append(case)
                        self.reporter.case_skipped(case, "recorded ok meanwhile by another sweep")
                        continue
                    case_result = self._run_case(case)
                if case_result is None:  # stopped mid-case: nothing recorded
                    result.not_run = to_run[i:]
                    break
                if not any(c.index == case.index for c in to_run[i + 1:]):
                    case_result.warnings += self._repeat_warnings(case, cases)
                result.results.append(case_result)
                self.reporter.case_finished(case_result)
            claims.tidy()
            result.interrupted_by = self._stop.signum

    def _is_done(self, case: Case, done: set[tuple[str, str]]) -> bool:
        return not self.options.rerun and (case.key, self._machine(case)) in done

    def request_stop(self, signum: int = signal.SIGINT) -> None:
        """Stop the case in flight and the sweep, as Ctrl-C does."""
        self._stop.set(signum)

    # -- environment and devices --------------------------------------------------------
    def _environment(self, device: str, label: str | None) -> dict[str, Any]:
        key = (device, label)
        if key not in self._envs:
            with tempfile.TemporaryDirectory(prefix="cnnbench-probe-") as tmp:
                outcome = run_in_child(_probe_main, (self.probe, device, label), timeout_s=PROBE_TIMEOUT_S,
                                       log_path=Path(tmp) / "output.log", stop=self._stop,
                                       grace_s=self.options.grace_s)
            info = outcome.result if isinstance(outcome.result, dict) else None
            if info is None:
                if not outcome.stopped:
                    log.warning("could not probe the machine (%s); naming it from the CPU only", _why(outcome))
                from cnnbench.machine.environment import cpu_model, derive_machine_label

                cpu = cpu_model()
                info = {
                    "device": "cpu" if device == "auto" else device,
                    "environment": {"machine": label or derive_machine_label(cpu, None, 0),
                                    "hostname": socket.gethostname(), "cpu_model": cpu},
                }
            self._envs[key] = info
        return self._envs[key]

    def _concrete(self, case: Case) -> Case:
        """The case with ``device: auto`` resolved as the engine would."""
        if case.config.device != "auto":
            return case
        info = self._environment("auto", case.config.machine_label)
        device = str(info["device"])
        self._envs.setdefault((device, case.config.machine_label), info)
        return dataclasses.replace(case, config=case.config.replace(device=device))

    def _machine(self, case: Case) -> str:
        env = self._environment(case.config.device, case.config.machine_label)["environment"]
        return str(env.get("machine") or "unknown")

    def _done_keys(self, store: StoreReader, *, initial: bool) -> set[tuple[str, str]]:
        """(case key, machine) of the ``ok`` records of this suite that ``store`` gained since
        it was last read; each unreadable line is logged once, by the first read."""
        if self.options.rerun and not initial:
            return set()
        if not Path(self.options.results_dir).is_dir():
            return set()
        records, problems = store.read()
        for problem in problems:
            if initial:
                log.warning("skipped %s", problem)
        for r in records:
            ips = (r.get("metrics") or {}).get("total_images_per_sec")
            if r.get("status") == "ok" and r.get("suite_name") == self.suite.name and isinstance(ips, (int, float)):
                machine = str((r.get("environment") or {}).get("machine") or "unknown")
                self._figures[(str(r.get("case_key")), machine)] = float(ips)
        return {
            (str(r.get("case_key")), str((r.get("environment") or {}).get("machine") or "unknown"))
            for r in records
            if r.get("status") == "ok" and r.get("case_key") and r.get("suite_name") == self.suite.name
        }

    # -- one case -----------------------------------------------------------------------
    def _run_case(self, case: Case) -> CaseResult | None:
        config = case.config
        tried: list[int | None] = []
        total_s = 0.0
        attempt = 0
        while True:
            attempt += 1
            self.reporter.case_started(case, config.batch_size, attempt)
            outcome = self._attempt(case, config)
            total_s += outcome.seconds
            if outcome.stopped:
                return None
            record = self._record(case, config, outcome)
            batch = (record.get("config") or {}).get("batch_size") or config.batch_size
            tried.append(batch)
            smaller = self._smaller_batch(record, config, batch)
            if smaller is None or self._stop:
                break
            log.info("case %s: out of memory at batch %s; retrying with %d", case.label, batch, smaller)
            config = config.replace(batch_size=smaller)
        if self.auto_batch and len(tried) > 1:
            record["auto_batch"] = {
                "requested_batch_size": tried[0],
                "tried": tried,
                "fitted_batch_size": tried[-1] if record.get("status") == "ok" else None,
            }
        append_record(self.options.results_dir, record)
        ips = (record.get("metrics") or {}).get("total_images_per_sec")
        if record.get("status") == "ok" and isinstance(ips, (int, float)):
            self._figures[(case.key, self._machine(case))] = float(ips)
        work_s = outcome.result.get("work_s") if isinstance(outcome.result, dict) else None
        return CaseResult(case, record, total_s, work_s=work_s, attempts=attempt)

    def _smaller_batch(self, record: Mapping[str, Any], config: RunConfig, batch: int | None) -> int | None:
        if not self.auto_batch or record.get("status") != "oom":
            return None
        if batch is None:
            try:
                from cnnbench.models import get_model_spec

                batch = get_model_spec(config.model).default_batch_size
            except Exception:
                return None
        return batch // 2 if batch > 1 else None

    def _attempt(self, case: Case, config: RunConfig) -> ChildOutcome:
        extra = {"suite_name": self.suite.name, "case_name": case_name(config.recorded()),
                 "case_key": case.key, "repeat": case.repeat}
        tmp = Path(tempfile.mkdtemp(prefix="cnnbench-case-"))
        run_config = config.replace(results_dir=str(tmp / "results"))

        def on_message(message: dict[str, Any]) -> None:
            if message.get("kind") == "line":
                self.reporter.case_output(str(message.get("line", "")))

        try:
            return run_in_child(
                _case_main,
                (self.worker, run_config, extra),
                timeout_s=self.suite.timeout_s,
                log_path=tmp / "output.log",
                stop=self._stop,
                on_message=on_message,
                on_tick=self.reporter.tick,
                grace_s=self.options.grace_s,
            )
        finally:
            _keep_traces(tmp / "results", Path(self.options.results_dir))
            shutil.rmtree(tmp, ignore_errors=True)

    def _repeat_warnings(self, case: Case, cases: list[Case]) -> list[str]:
        """A line when the repeats of ``case``'s configuration disagree by more than the noise."""
        keys = [(c.key, self._machine(c)) for c in cases if c.index == case.index]
        figures = [self._figures[k] for k in keys if k in self._figures]
        spread = relative_stdev(figures)
        if spread is None or spread <= self.options.noise:
            return []
        mean = sum(figures) / len(figures)
        return [f"repeats of {case.label.rsplit(' #', 1)[0]} disagree: {SPREAD_NAME} {spread_percent(spread)} "
                f"({min(figures):.1f} to {max(figures):.1f} images/sec, mean {mean:.1f}; noise threshold "
                f"{self.options.noise * 100:g}%)"]

    def _record(self, case: Case, config: RunConfig, outcome: ChildOutcome) -> dict[str, Any]:
        """The record of an attempt: the worker's own, or one made here for a failure."""
        extra = {"suite_name": self.suite.name, "case_key": case.key, "repeat": case.repeat}
        returned = outcome.result.get("record") if isinstance(outcome.result, dict) else None
        if isinstance(returned, dict) and outcome.exit_code == 0:
            record = dict(returned)
            record.update(extra)
            record["case_name"] = case_name(record.get("config") or config.recorded())
            return record
        status, error = _failure(outcome, self.suite.timeout_s)
        env = dict(self._environment(config.device, config.machine_label)["environment"])
        return Record(
            config=config.recorded(),
            environment=env,
            metrics={},
            status=status,
            error=error,
            extra={**extra, "case_name": case_name(config.recorded())},
        ).to_dict()

    # -- signals --------------------------------------------------------------------------
    def _signals(self) -> _SignalScope:
        return _SignalScope(self._stop)


def _keep_traces(case_results: Path, results_dir: Path) -> None:
    """Move a case's profiler traces from its own results folder into the sweep's."""
    traces = case_results / "traces"
    if not traces.is_dir():
        return
    target = results_dir / "traces"
    target.mkdir(parents=True, exist_ok=True)
    for path in traces.iterdir():
        try:
            shutil.move(str(path), str(target / path.name))
        except OSError as exc:
            log.warning("could not keep the profiler trace %s: %s", path, exc)


def _case_main(send: Send, worker: Worker, config: RunConfig, extra: Mapping[str, Any]) -> dict[str, Any]:
    """In the case process: run the worker, stream its log lines, return its record."""

    def emit(line: str) -> None:
        print(line, flush=True)
        send({"kind": "line", "line": line})

    t0 = time.perf_counter()
    out = worker(config, emit, extra)
    work_s = time.perf_counter() - t0
    if isinstance(out, tuple):
        out = out[0]
    if isinstance(out, Record):
        out = out.to_dict()
    return {"record": dict(out) if isinstance(out, Mapping) else None, "work_s": work_s}


def _probe_main(send: Send, probe: Probe, device: str, label: str | None) -> dict[str, Any]:
    """In a case process: what the probe says about the machine."""
    return probe(device, label)


class _SignalScope:
    """SIGINT and SIGTERM set the stop flag while a sweep runs (main thread only)."""

    def __init__(self, stop: StopFlag) -> None:
        self.stop = stop
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalScope:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, lambda signum, frame: self.stop.set(signum))
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _failure(outcome: ChildOutcome, timeout_s: float) -> tuple[str, str]:
    """Status and error text for an attempt that gave no record (without C++ stack traces)."""
    tail = without_native_stack(outcome.output_tail)
    tail_text = f"\n--- last lines of the case's output ---\n{tail}" if tail else ""
    if outcome.timed_out:
        # One line: stopping a case makes its processes print what they were doing when the
        # signal came (a multi-device case's agent and workers: tracebacks), which is not the cause.
        # What it printed before those tracebacks follows the first line, as for other failures
        # (for a hang, the only clue to where it stopped).
        last = last_output_line(tail)
        before = output_before_traceback(tail)
        return "timeout", (f"the case ran past its time limit of {timeout_s:g} s and was stopped"
                           + (f" (last output: {clip(last, 200)})" if last else "")
                           + (f"\n--- last lines of the case's output ---\n{before}" if before else ""))
    if outcome.exception is not None:
        kind = str(outcome.exception.get("type") or "Exception")
        message = clip(without_native_stack(str(outcome.exception.get("message") or "")))
        text = f"{kind}: {message}"
        status = "oom" if is_out_of_memory_text(text) else "error"
        return status, f"{kind}: {message}{tail_text}"
    if outcome.signal is not None:
        name = signal_name(outcome.signal)
        if outcome.signal == signal.SIGKILL:
            return "oom", (f"the case process was killed by {name} from outside cnnbench "
                           f"(usually the kernel's out-of-memory killer){tail_text}")
        return "error", f"the case process was killed by {name}{tail_text}"
    if outcome.exit_code:
        return "error", f"the case process exited with status {outcome.exit_code}{tail_text}"
    return "error", f"the case process ended without a record{tail_text}"


def output_before_traceback(tail: str) -> str:
    """What a case printed before any traceback (trailing blank lines and a rank's traceback
    prefix dropped)."""
    before = tail.split("Traceback (most recent call last):", 1)[0]
    lines = before.rstrip().splitlines()
    if lines and lines[-1].strip().startswith("[rank") and lines[-1].rstrip().endswith(":"):
        lines.pop()
    return "\n".join(lines).rstrip()


def last_output_line(tail: str) -> str:
    """The last line a case printed before any traceback, whitespace collapsed ("" if none)."""
    lines = [" ".join(line.split()) for line in output_before_traceback(tail).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _why(outcome: ChildOutcome) -> str:
    return _failure(outcome, PROBE_TIMEOUT_S)[1].splitlines()[0]


def run_suite(
    suite: Suite,
    options: SweepOptions | None = None,
    *,
    worker: Worker | None = None,
    probe: Probe | None = None,
    reporter: Reporter | None = None,
) -> SweepResult:
    """Run ``suite`` (see :class:`SweepRunner`)."""
    return SweepRunner(suite, options or SweepOptions(), worker=worker, probe=probe, reporter=reporter).run()
