"""Checks that the parts of a loaded parsed-record cache (:mod:`cnnbench.results.cache`) fit
together before anything uses them: a cache is data from disk, from anyone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnnbench.results import step_summary as summary

if TYPE_CHECKING:
    from cnnbench.results.cache import CachedRecords


def check_shape(cached: CachedRecords, kinds: int) -> None:
    """Raise an error unless the loaded parts fit together (a cache is data from disk)."""
    n = len(cached.rows)
    fits = _parts_fit(cached) and _refs_fit(cached, n, kinds) and _counts_fit(cached, n) and _problems_fit(cached, n)
    with_steps = [row.get("metrics") for row, count in zip(cached.rows, cached.step_counts, strict=True)
                  if count >= 0]
    if not fits or not {dict}.issuperset(map(type, with_steps)):
        raise ValueError("parts of the cache do not fit together")


def _parts_fit(cached: CachedRecords) -> bool:
    return (type(cached.end) is int and type(cached.next_line) is int
            and {dict}.issuperset(map(type, cached.rows)) and {dict}.issuperset(map(type, cached.sections)))


def _refs_fit(cached: CachedRecords, n: int, kinds: int) -> bool:
    """A list of section indexes per section kind, one per row, each -1 or a section."""
    return len(cached.refs) == kinds and all(
        type(r) is list and len(r) == n and {int}.issuperset(map(type, r))
        and (not r or min(r) >= -1 and max(r) < len(cached.sections)) for r in cached.refs)


def _counts_fit(cached: CachedRecords, n: int) -> bool:
    return (type(cached.step_counts) is list and len(cached.step_counts) == n
            and {int}.issuperset(map(type, cached.step_counts)))


def _problems_fit(cached: CachedRecords, n: int) -> bool:
    return all(type(p.position) is int and 0 <= p.position <= n and type(p.line) is int
               and type(p.raw) is bytes for p in cached.problems)


def check_columns(cached: CachedRecords) -> None:
    """Raise an error unless the step-time column holds every record's step times, and the
    summaries column the summaries of all of them but the last ``len(cached.means)``."""
    with_steps = [n for n in cached.step_counts if n >= 0]
    summed = with_steps[:len(with_steps) - len(cached.means)]
    if (len(cached.means) > len(with_steps) or len(cached.steps or ()) != sum(with_steps)
            or len(cached.summaries or ()) != sum(map(summary.column_width, summed))):
        raise ValueError("the step times or their summaries do not fit the records")
