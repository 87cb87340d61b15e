"""Running one case of a sweep: each attempt in its own process, its record made and appended.

A case that raises, crashes or is killed gives a record the sweep makes itself
(:mod:`cnnbench.sweep.failure`); with ``auto_batch`` a case out of memory is tried again
with half the batch until one fits, and the record says which batches were tried. The
record is appended by the parent only, after the case has ended. A record made here carries
the configuration as the worker's own record would (with the engine: data set named, loader
processes counted, every default filled), resolved in a process of the fork server, so a
failure is filed beside the successes of its configuration. A case's profiler traces move
to the results folder.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cnnbench.config.run_config import RunConfig
from cnnbench.results import files
from cnnbench.results.naming import case_name
from cnnbench.results.record import Record
from cnnbench.results.sessions import session_id
from cnnbench.results.store import append_record
from cnnbench.sweep.defaults import PROBE_TIMEOUT_S, Resolver, Worker
from cnnbench.sweep.failure import failure_of, why
from cnnbench.sweep.isolation import ChildOutcome, Send, StopFlag, run_in_child
from cnnbench.sweep.machines import Machines
from cnnbench.sweep.outcomes import CaseResult, Reporter, SweepOptions
from cnnbench.sweep.suite import Case, Suite

log = logging.getLogger("cnnbench.sweep.runner")  # the name its messages have always had


class CaseRunner:
    """Runs the cases of one suite, one at a time (see the module documentation)."""

    def __init__(self, suite: Suite, options: SweepOptions, *, auto_batch: bool, worker: Worker,
                 reporter: Reporter, stop: StopFlag, machines: Machines, resolver: Resolver | None = None) -> None:
        self.suite = suite
        self.resolver = resolver
        self.options = options
        self.auto_batch = auto_batch
        self.worker = worker
        self.reporter = reporter
        self.stop = stop
        self.machines = machines

    def run(self, case: Case) -> CaseResult | None:
        """Run ``case`` and append its record; None when the sweep was stopped mid-case (nothing recorded)."""
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
            if smaller is None or self.stop:
                break
            log.info("case %s: out of memory at batch %s; retrying with %d", case.label, batch, smaller)
            config = config.replace(batch_size=smaller)
        if self.auto_batch and len(tried) > 1:
            record["auto_batch"] = _batches_tried(record, tried)
        append_record(self.options.results_dir, record)
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
        extra = {"session_id": session_id(), **self.options.record_extra, "suite_name": self.suite.name,
                 "case_name": case_name(config.recorded()), "case_key": case.key, "repeat": case.repeat}
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
                stop=self.stop,
                on_message=on_message,
                on_tick=self.reporter.tick,
                grace_s=self.options.grace_s,
            )
        finally:
            _keep_traces(tmp / "results", Path(self.options.results_dir))
            shutil.rmtree(tmp, ignore_errors=True)

    def _record(self, case: Case, config: RunConfig, outcome: ChildOutcome) -> dict[str, Any]:
        """The record of an attempt: the worker's own, or one made here for a failure."""
        extra = {"session_id": session_id(), **self.options.record_extra, "suite_name": self.suite.name,
                 "case_key": case.key, "repeat": case.repeat}
        returned = outcome.result.get("record") if isinstance(outcome.result, dict) else None
        if isinstance(returned, dict) and outcome.exit_code == 0:
            record = dict(returned)
            record.update(extra)
            record["case_name"] = case_name(record.get("config") or config.recorded())
            return record
        status, error = failure_of(outcome, self.suite.timeout_s)
        env = dict(self.machines.environment(config.device, config.machine_label)["environment"])
        recorded, unresolved = self.resolved_config(config)
        return Record(
            config=recorded,
            environment=env,
            metrics={},
            status=status,
            error=with_unresolved(error, unresolved),
            extra={**extra, "case_name": case_name(recorded)},
        ).to_dict()

    def resolved_config(self, config: RunConfig) -> tuple[dict[str, Any], str | None]:
        """The ``config`` section of a failed attempt, as the worker's own record would have it:
        resolved by the resolver, in a process of the fork server (the engine's rules there, where
        torch is loaded; never in the sweep's process). When it cannot be resolved, the
        configuration as the suite gave it, and a line that says why."""
        if self.resolver is None:
            return config.recorded(), None
        with tempfile.TemporaryDirectory(prefix="cnnbench-resolve-") as tmp:
            outcome = run_in_child(_resolve_main, (self.resolver, config), timeout_s=PROBE_TIMEOUT_S,
                                   log_path=Path(tmp) / "output.log", stop=self.stop, grace_s=self.options.grace_s)
        if isinstance(outcome.result, dict) and isinstance(outcome.result.get("config"), dict):
            return outcome.result["config"], None
        reason = "the sweep was stopped" if outcome.stopped else why(outcome, PROBE_TIMEOUT_S)
        log.warning("could not resolve the case's configuration (%s); a record of its failure keeps it as given",
                    reason)
        return config.recorded(), f"(its configuration is recorded as the suite gave it, unresolved: {reason})"


def with_unresolved(error: str, unresolved: str | None) -> str:
    """``error`` with the line that says its record's configuration is unresolved, after its first line."""
    if not unresolved:
        return error
    first, _, rest = error.partition("\n")
    return "\n".join(part for part in (first, unresolved, rest) if part)


def _batches_tried(record: Mapping[str, Any], tried: list[int | None]) -> dict[str, Any]:
    """The record's ``auto_batch`` section: the batch asked for, every one tried, the one that fitted."""
    return {
        "requested_batch_size": tried[0],
        "tried": tried,
        "fitted_batch_size": tried[-1] if record.get("status") == "ok" else None,
    }


def _keep_traces(case_results: Path, results_dir: Path) -> None:
    """Move a case's profiler traces from its own results folder into the sweep's."""
    traces = case_results / "traces"
    if not traces.is_dir():
        return
    try:
        target = files.real_folder_inside(results_dir, "traces")  # never a link out of the store
    except OSError as exc:
        log.warning("could not keep the profiler traces: %s", exc)
        return
    for path in traces.iterdir():
        try:  # copied in as a new file renamed over its name: never written through a link there
            with files.open_regular(path) as src, files.replacing(target / path.name, results_dir) as out:
                shutil.copyfileobj(src, out, files.WRITE_PIECE)
        except OSError as exc:
            log.warning("could not keep the profiler trace %s: %s", path, exc)


def _resolve_main(send: Send, resolver: Resolver, config: RunConfig) -> dict[str, Any]:
    """In a case process: the configuration as the resolver resolves it."""
    return {"config": dict(resolver(config))}


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
