"""Resuming a sweep: which cases this machine has already recorded ``ok`` (same suite, same
settings, same repeat), read from the store first and again, for what other sweeps have
added meanwhile, just before each case; and the images/sec of each, for the repeats' check.
Each line of the store that cannot be read is logged once, as ``file:line: why``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cnnbench.results.record import RUN_KIND, record_kind
from cnnbench.results.store import StoreReader

log = logging.getLogger("cnnbench.sweep.runner")  # the name its messages have always had


class DoneCases:
    """The (case key, machine) of the ``ok`` records of one suite in a store, and their figures."""

    def __init__(self, suite_name: str, results_dir: Path, *, rerun: bool) -> None:
        self.suite_name = suite_name
        self.results_dir = results_dir
        self.rerun = rerun
        self.store = StoreReader(results_dir, step_times=False, below=False)
        self.keys: set[tuple[str, str]] = set()
        self.figures: dict[tuple[str, str], float] = {}
        """images/sec of every ``ok`` case of this suite, by case key and machine."""

    def read(self, *, initial: bool) -> None:
        """Take in what the store gained since it was last read (the first read: everything)."""
        self.keys |= self._done_keys(initial=initial)

    def is_done(self, key: str, machine: str) -> bool:
        return not self.rerun and (key, machine) in self.keys

    def note(self, key: str, machine: str, record: Mapping[str, Any]) -> None:
        """Keep the figure of a record this sweep has just appended."""
        figure = _ok_figure(record)
        if figure is not None:
            self.figures[(key, machine)] = figure

    def _done_keys(self, *, initial: bool) -> set[tuple[str, str]]:
        """(case key, machine) of the ``ok`` records of this suite that the store gained since
        it was last read; each unreadable line is logged once, by the first read."""
        if self.rerun and not initial:
            return set()
        if not Path(self.results_dir).is_dir():
            return set()
        records, problems = self.store.read()
        for problem in problems:
            if initial:
                log.warning("skipped %s", problem)
        ours = [r for r in records if r.get("status") == "ok" and r.get("suite_name") == self.suite_name
                and record_kind(r) == RUN_KIND]
        for r in ours:
            figure = _ok_figure(r)
            if figure is not None:
                self.figures[(str(r.get("case_key")), _machine(r))] = figure
        return {(str(r.get("case_key")), _machine(r)) for r in ours if r.get("case_key")}


def _ok_figure(record: Mapping[str, Any]) -> float | None:
    """The images/sec of an ``ok`` record, if it has one."""
    ips = (record.get("metrics") or {}).get("total_images_per_sec")
    if record.get("status") == "ok" and isinstance(ips, (int, float)):
        return float(ips)
    return None


def _machine(record: Mapping[str, Any]) -> str:
    return str((record.get("environment") or {}).get("machine") or "unknown")
