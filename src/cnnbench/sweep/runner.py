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
  :func:`cnnbench.analysis.repeat_stats.relative_stdev`) above the noise threshold becomes a one-line
  warning on the case's result (:attr:`CaseResult.warnings`), as ``cnnbench report`` shows
  the same figure as the cell's ``±x%``. A case's profiler traces (``--profile-steps``)
  move to the results folder.
* Cases are forked from a fork server that has imported torch and the engine once
  (:mod:`cnnbench.sweep.isolation`); the sweep's own process needs neither. ``device:
  auto`` and the machine's environment are resolved in a probe process, so parent-made
  records (time-outs, crashes) carry the same machine label and device as the engine's; their
  configuration is resolved by the engine's own rules (:func:`~cnnbench.sweep.defaults.engine_resolver`,
  a resolver of the default worker) in a process of the fork server, so they carry the same
  data set name, loader processes and defaults as the engine's records of the same case.
* Workers, probes and resolvers are sent to the case processes by name: module-level functions
  (or ``functools.partial`` of them). As with :mod:`multiprocessing`, a script that calls
  :func:`run_suite` must guard its top level with ``if __name__ == "__main__":``.

This module runs the suite; the parts live beside it: one case
(:mod:`~cnnbench.sweep.case`), why a case failed (:mod:`~cnnbench.sweep.failure`), the
machine it runs on (:mod:`~cnnbench.sweep.machines`), resuming
(:mod:`~cnnbench.sweep.resume`), the repeats' check (:mod:`~cnnbench.sweep.noise`), the
checks before any runs (:mod:`~cnnbench.sweep.preflight`), the engine as the default
worker (:mod:`~cnnbench.sweep.defaults`) and the results (:mod:`~cnnbench.sweep.outcomes`).
"""

from __future__ import annotations

import signal
import time

from cnnbench.results.store import machine_file_name
from cnnbench.sweep import defaults
from cnnbench.sweep.case import CaseRunner
from cnnbench.sweep.claims import CaseClaims
from cnnbench.sweep.defaults import (
    PROBE_TIMEOUT_S,
    Emit,
    Probe,
    Resolver,
    Worker,
    engine_probe,
    engine_resolver,
    engine_worker,
    preload_engine,
)
from cnnbench.sweep.failure import failure_of as _failure  # noqa: F401  (its old name, still imported)
from cnnbench.sweep.isolation import StopFlag, check_picklable
from cnnbench.sweep.machines import Machines
from cnnbench.sweep.noise import repeat_warnings
from cnnbench.sweep.outcomes import CaseResult, NullReporter, Reporter, SweepOptions, SweepResult
from cnnbench.sweep.preflight import InvalidCase, check_cases
from cnnbench.sweep.resume import DoneCases
from cnnbench.sweep.stopping import SignalScope
from cnnbench.sweep.suite import Case, Suite

__all__ = [
    "PROBE_TIMEOUT_S", "CaseResult", "Emit", "InvalidCase", "NullReporter", "Probe", "Reporter", "Resolver",
    "SweepOptions", "SweepResult", "SweepRunner", "Worker", "check_cases", "engine_probe", "engine_resolver",
    "engine_worker", "preload_engine", "run_suite",
]


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
        resolver: Resolver | None = None,
    ) -> None:
        self.suite = suite
        self.options = options
        self.worker: Worker = worker or engine_worker
        self.probe: Probe = probe or engine_probe
        # The engine's rules resolve what the engine records; another worker's records are its own.
        self.resolver = resolver or (engine_resolver if self.worker is defaults.engine_worker else None)
        check_picklable(self.worker, "worker")
        check_picklable(self.probe, "probe")
        if self.resolver is not None:
            check_picklable(self.resolver, "resolver")
        self.reporter: Reporter = reporter or NullReporter()
        self.auto_batch = suite.auto_batch if options.auto_batch is None else options.auto_batch
        self._stop = StopFlag()
        self.machines = Machines(self.probe, self._stop, options.grace_s)
        self.cases = CaseRunner(suite, options, auto_batch=self.auto_batch, worker=self.worker,
                                reporter=self.reporter, stop=self._stop, machines=self.machines,
                                resolver=self.resolver)
        self.done = DoneCases(suite.name, options.results_dir, rerun=options.rerun)

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

    def request_stop(self, signum: int = signal.SIGINT) -> None:
        """Stop the case in flight and the sweep, as Ctrl-C does."""
        self._stop.set(signum)

    # -- the sweep ----------------------------------------------------------------------
    def _run(self, result: SweepResult) -> None:
        with SignalScope(self._stop):
            cases = [self.machines.concrete(c) for c in self.suite.cases]
            self.done.read(initial=True)
            to_run: list[Case] = []
            for case in cases:
                (result.skipped if self._is_done(case) else to_run).append(case)
            self.reporter.sweep_started(self.suite, to_run, result.skipped)
            claims = CaseClaims(self.options.results_dir)
            for i, case in enumerate(to_run):
                if self._stop or not self._claim_and_run(claims, case, cases, to_run[i + 1:], result):
                    result.not_run = to_run[i:]
                    break
            claims.tidy()
            result.interrupted_by = self._stop.signum

    def _claim_and_run(self, claims: CaseClaims, case: Case, cases: list[Case], rest: list[Case],
                       result: SweepResult) -> bool:
        """Run ``case`` unless another sweep holds or has recorded it; False when stopped mid-case."""
        claim = claims.try_claim(f"{case.key}-{machine_file_name(self.machines.machine(case))[:-6]}")
        if claim is None:
            result.elsewhere.append(case)
            self.reporter.case_skipped(case, "another sweep on this store is running it")
            return True
        with claim:
            self.done.read(initial=False)  # what other sweeps recorded meanwhile
            if self._is_done(case):
                result.skipped.append(case)
                self.reporter.case_skipped(case, "recorded ok meanwhile by another sweep")
                return True
            case_result = self.cases.run(case)
        if case_result is None:  # stopped mid-case: nothing recorded
            return False
        self.done.note(case.key, self.machines.machine(case), case_result.record)
        if not any(c.index == case.index for c in rest):
            case_result.warnings += repeat_warnings(case, cases, self.done.figures, self.machines.machine,
                                                    self.options.noise)
        result.results.append(case_result)
        self.reporter.case_finished(case_result)
        return True

    def _is_done(self, case: Case) -> bool:
        return self.done.is_done(case.key, self.machines.machine(case))


def run_suite(
    suite: Suite,
    options: SweepOptions | None = None,
    *,
    worker: Worker | None = None,
    probe: Probe | None = None,
    reporter: Reporter | None = None,
    resolver: Resolver | None = None,
) -> SweepResult:
    """Run ``suite`` (see :class:`SweepRunner`)."""
    return SweepRunner(suite, options or SweepOptions(), worker=worker, probe=probe, reporter=reporter,
                       resolver=resolver).run()
