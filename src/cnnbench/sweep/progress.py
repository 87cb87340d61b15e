"""Showing a sweep: a rich progress bar on a terminal, one line per case elsewhere, a summary.

The bar shows done and failed counts, elapsed time and an ETA, and under it the case in
flight with its latest output line (its tf_cnn_benchmarks-style progress). Each finished
case leaves one line above the bar (the same line the plain view prints), so the cases
stay on the screen after the bar ends. It is refreshed from the sweep's own wait loop,
which wakes at least four times a second (no background thread).
These are the CLI's views; the runner itself only logs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import IO, Any

from cnnbench.analysis.repeat_stats import SPREAD_NAME
from cnnbench.sweep.outcomes import CaseResult, SweepResult
from cnnbench.sweep.suite import Case, Suite
from cnnbench.words import plural

REFRESH_S = 0.5


def _figure(result: CaseResult) -> str:
    value = (result.record.get("metrics") or {}).get("total_images_per_sec")
    return f"{value:.1f} images/sec" if isinstance(value, (int, float)) else ""


def _first_line(text: Any) -> str:
    return str(text or "").strip().splitlines()[0] if str(text or "").strip() else ""


def case_line(done: int, total: int, result: CaseResult) -> str:
    """The line a finished case leaves: ``[3/8] ok      <case>  12.3 s  456.7 images/sec``."""
    detail = _figure(result) if result.status == "ok" else _first_line(result.record.get("error"))
    return f"[{done}/{total}] {result.status:<7} {result.case.label}  {result.seconds:.1f} s  {detail}".rstrip()


class RichReporter:
    """A live progress bar (rich) for terminals."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        from cnnbench.terminal import rich_environ

        class _Progress(Progress):
            case = ""
            last_line = ""

            def get_renderables(self) -> Iterable[Any]:
                yield self.make_tasks_table(self.tasks)
                if self.case:
                    line = Text("  ▶ " + self.case, style="bold", no_wrap=True, overflow="ellipsis")
                    if self.last_line:
                        line.append("  " + self.last_line, style="dim")
                    yield line

        self.console = Console(file=stream or sys.stderr, emoji=False, _environ=rich_environ())  # ":name:" stays text
        self.progress = _Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", style="bold", markup=False),  # the suite's name as it is
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[green]ok {task.fields[ok]}[/] [red]failed {task.fields[failed]}[/]"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task: Any = None
        self._last_refresh = 0.0
        self._ok = 0
        self._failed = 0
        self._done = 0
        self._total = 0

    def sweep_started(self, suite: Suite, to_run: list[Case], skipped: list[Case]) -> None:
        if skipped:
            total = len(to_run) + len(skipped)
            self.console.print(f"{len(skipped)} of {plural(total, 'case')} already recorded ok; skipping them")
        self._total = len(to_run)
        self.progress.start()
        self.task = self.progress.add_task(suite.name, total=len(to_run), ok=0, failed=0)
        self._refresh(force=True)

    def case_started(self, case: Case, batch_size: int | None, attempt: int) -> None:
        self.progress.case = case.label + (f" (retry at batch {batch_size})" if attempt > 1 else "")
        self.progress.last_line = ""
        self._refresh(force=True)

    def case_output(self, line: str) -> None:
        if line.strip():
            self.progress.last_line = line.strip().replace("\t", "  ")
        self._refresh()

    def case_finished(self, result: CaseResult) -> None:
        from rich.text import Text

        self._done += 1
        if result.status == "ok":
            self._ok += 1
        else:
            self._failed += 1
        style = "green" if result.status == "ok" else "red"
        text_line = Text(case_line(self._done, self._total, result))
        text_line.stylize(style, 0, len(f"[{self._done}/{self._total}] {result.status}"))
        self.progress.console.print(text_line)  # above the bar: it stays when the bar ends
        for text in result.warnings:  # a warning's text is text, never rich's markup
            self.progress.console.print(Text.assemble(("warning", "yellow"), ": ", text), highlight=False)
        self.progress.update(self.task, advance=1, ok=self._ok, failed=self._failed)
        self._refresh(force=True)

    def case_skipped(self, case: Case, reason: str) -> None:
        self._done += 1
        from rich.text import Text

        # a suite's text is text, never rich's markup
        self.progress.console.print(Text.assemble(f"[{self._done}/{self._total}] ", ("skipped", "dim"),
                                                  f" {case.label}  ({reason})"), highlight=False)
        self.progress.update(self.task, advance=1)
        self._refresh(force=True)

    def tick(self) -> None:
        self._refresh()

    def sweep_finished(self, result: SweepResult) -> None:
        if self.task is not None:
            self.progress.case = ""
            self._refresh(force=True)
        self.progress.stop()

    def _refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_refresh >= REFRESH_S:
            self._last_refresh = now
            self.progress.refresh()


class PlainReporter:
    """One line per finished case, for logs and pipes."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = 0
        self.done = 0

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def sweep_started(self, suite: Suite, to_run: list[Case], skipped: list[Case]) -> None:
        self.total = len(to_run)
        extra = f" ({len(skipped)} already recorded ok, skipped)" if skipped else ""
        self._say(f"suite {suite.name}: {plural(len(to_run), 'case')} to run{extra}")

    def case_started(self, case: Case, batch_size: int | None, attempt: int) -> None:
        if attempt > 1:
            self._say(f"  retrying {case.label} at batch {batch_size}")

    def case_output(self, line: str) -> None:
        pass

    def case_finished(self, result: CaseResult) -> None:
        self.done += 1
        self._say(case_line(self.done, self.total, result))
        for text in result.warnings:
            self._say(f"  warning: {text}")

    def case_skipped(self, case: Case, reason: str) -> None:
        self.done += 1
        self._say(f"[{self.done}/{self.total}] skipped {case.label}  ({reason})")

    def tick(self) -> None:
        pass

    def sweep_finished(self, result: SweepResult) -> None:
        pass


def summary_lines(result: SweepResult, results_dir: str) -> list[str]:
    """The end-of-sweep summary: statuses, failures, what was skipped or left."""
    counts = result.counts()
    ran = len(result.results)
    parts = [f"{n} {status}" for status, n in sorted(counts.items())] or ["none"]
    lines = [f"suite {result.suite.name}: {plural(ran, 'case')} ran in {result.seconds:.1f} s: {', '.join(parts)}"]
    if result.skipped:
        them = "it" if len(result.skipped) == 1 else "them"
        lines.append(f"  {plural(len(result.skipped), 'case')} skipped "
                     f"(already recorded ok; --rerun runs {them} again)")
    if result.elsewhere:
        lines.append(f"  {plural(len(result.elsewhere), 'case')} left to another sweep on the same store, "
                     "which was running them")
    for r in result.results:
        if r.status != "ok":
            lines.append(f"  {r.status}: {r.case.label} ({r.case_name}): {_first_line(r.record.get('error'))}")
    disagree = sum(1 for r in result.results if r.warnings)
    if disagree:
        lines.append(f"  {plural(disagree, 'configuration')} whose repeats disagree: {SPREAD_NAME} over the noise "
                     "threshold")
    warned = sum(1 for r in result.results if (r.record.get("metrics") or {}).get("warnings"))
    if warned:
        lines.append(f"  {plural(warned, 'case')} recorded warnings (a busy machine, unstable step times, throttling): "
                     "see metrics.warnings in their records")
    if result.interrupted_by is not None:
        from cnnbench.sweep.isolation import signal_name

        lines.append(
            f"  interrupted by {signal_name(result.interrupted_by)}: {plural(len(result.not_run), 'case')} not run "
            "(the one in flight recorded nothing); run the same command again to continue"
        )
    lines.append(f"  results in {results_dir}")
    return lines
