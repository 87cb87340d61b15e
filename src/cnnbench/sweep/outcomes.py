"""What a sweep is asked (:class:`SweepOptions`), what it gives (:class:`CaseResult`,
:class:`SweepResult`), and who hears of its progress (:class:`Reporter`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cnnbench.analysis.repeat_stats import REPEAT_NOISE
from cnnbench.sweep.suite import Case, Suite

log = logging.getLogger("cnnbench.sweep.runner")  # the name its messages have always had


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
    :data:`cnnbench.analysis.repeat_stats.REPEAT_NOISE` for how its default was derived)."""
    record_extra: Mapping[str, Any] = field(default_factory=dict)
    """Top-level fields every record of the sweep carries (a Slurm job's ``slurm`` section)."""


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
