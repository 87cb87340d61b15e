"""A run's step times summed up once: count, mean, variance, smallest, and the sums of its
blocks of consecutive steps (the batch means the significance test takes its samples from).

These are facts of one record, so they live here, in ``results``: the parsed-record cache
(:mod:`cnnbench.results.cache`) keeps them beside the step times, and a lazy cached read
(``step_times="lazy"``) hands each record's ``metrics.step_times_s`` out as a :class:`StepTimes`
view of the column of every run's step times that carries its summary. :func:`step_summary`
gives the summary of any list (computed) or view (read). The analysis layer
(``cnnbench.analysis.samples``) reads them; nothing here imports it. Every figure is computed
exactly as the analysis always did (``math.fsum`` for the mean, then the squares of the
deviations added in order; block sums added in order), so a summary from the cache equals one
computed from the list, to the bit.
"""

from __future__ import annotations

import functools
import math
import operator
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

MIN_BLOCKS = 10
"""Fewest blocks a run's steps are cut into (when it has that many steps)."""


def block_size(n: int) -> int:
    """Steps per block for ``n`` steps: about ∛n, keeping at least :data:`MIN_BLOCKS` blocks
    (10 steps: blocks of 1; 100 steps: 20 blocks of 5; 10,000 steps: 454 blocks of 22)."""
    return max(1, min(round(n ** (1.0 / 3.0)), n // MIN_BLOCKS)) if n > 0 else 1


def block_count(n: int) -> int:
    return n // block_size(n) if n > 0 else 0


@dataclass(frozen=True, slots=True)
class StepSummary:
    """What the reports need from a run's step times, without the step times."""

    count: int
    mean: float
    """``math.fsum`` of the steps over their number."""
    variance: float | None
    """Sample variance (``n - 1``) around :attr:`mean`; ``None`` for fewer than two steps."""
    minimum: float
    block_sums: tuple[float, ...]
    """Sums of consecutive blocks of :func:`block_size` steps, the leading steps that do not
    fill a block left out (they are the ones nearest to the warm-up)."""

    @property
    def relative_stdev(self) -> float | None:
        """Standard deviation over mean, as :func:`cnnbench.analysis.repeat_stats.relative_stdev`
        computes it from the steps (``None`` for fewer than two steps or a mean not above 0)."""
        if self.variance is None or not self.mean > 0:
            return None
        return math.sqrt(self.variance) / self.mean


def summarize(times: Sequence[Any]) -> StepSummary | None:
    """The summary of a non-empty list of numbers (``None`` for anything else)."""
    n = len(times)
    if n == 0:
        return None
    try:
        smallest = min(times)
        mean = math.fsum(times) / n
    except (TypeError, ValueError, OverflowError):
        return None
    variance = None
    if n >= 2:
        dev = [x - mean for x in times]
        variance = sum(map(operator.mul, dev, dev)) / (n - 1)
    size = block_size(n)
    count = n // size
    start = n - count * size
    sums = tuple(sum(times[start + i * size: start + (i + 1) * size]) for i in range(count))
    return StepSummary(n, mean, variance, smallest, sums)


# --- the cache's column: per run with step times, mean, variance, smallest, then its block sums


@functools.lru_cache(maxsize=256)
def column_width(n: int) -> int:
    """How many float64s the summary of ``n`` step times takes in the cache's column."""
    return 3 + block_count(n)


def summary_column(steps: array, start: int, counts: Sequence[int], means: Sequence[float]) -> array:
    """The column of the summaries of consecutive runs: ``counts`` step times each (all of them
    floats, one after another in ``steps`` from index ``start``), whose means (``math.fsum``
    over the count) are ``means``. Computed over arrays (numpy), adding in the order
    :func:`summarize` adds, so every figure equals its one to the bit."""
    import numpy as np  # only where a cache is written

    flat = np.frombuffer(steps, dtype=np.float64)
    out = array("d")
    at = start
    i = 0
    while i < len(counts):  # runs of consecutive records with the same number of steps, as arrays
        n = counts[i]
        j = i
        while j < len(counts) and counts[j] == n:
            j += 1
        block = np.empty((j - i, column_width(n)))
        block[:, :3] = np.nan
        if n > 0:
            x = flat[at:at + (j - i) * n].reshape(j - i, n)
            mean = np.asarray(means[i:j], dtype=np.float64)
            block[:, 0] = mean
            if n >= 2:
                dev = x - mean[:, None]
                np.multiply(dev, dev, out=dev)
                block[:, 1] = _in_order(dev, np) / (n - 1)
            block[:, 2] = x.min(axis=1)
            size, nblocks = block_size(n), block_count(n)
            tail = x[:, n - nblocks * size:].reshape((j - i) * nblocks, size)
            block[:, 3:] = _in_order(tail, np).reshape(j - i, nblocks)
        out.frombytes(block.tobytes())
        at += (j - i) * n
        i = j
    return out


def _in_order(x: Any, np: Any) -> Any:
    """Each row of ``x`` summed left to right, as Python's ``sum`` adds (numpy's ``sum`` adds
    pairwise, which rounds differently): column after column when there are many rows, else
    by ``add.accumulate`` (which writes every partial sum)."""
    if x.shape[0] < 64:
        return np.add.accumulate(x, axis=1)[:, -1]
    total = x[:, 0].copy()
    for k in range(1, x.shape[1]):
        total += x[:, k]
    return total


def from_column(column: Sequence[float], at: int, n: int) -> StepSummary | None:
    """The summary of ``n`` step times at position ``at`` of a column."""
    if n <= 0:
        return None
    variance = column[at + 1]
    return StepSummary(n, column[at], None if n < 2 else variance, column[at + 2],
                       tuple(column[at + 3:at + column_width(n)]))


class StepTimes(Sequence[float]):
    """A run's step times as a read-only view of the cache's column of float64s, made without a
    Python float per step (a lazy read of 100,000 runs of 100 steps would make ten million),
    knowing its :class:`StepSummary` (read from the cache, where :func:`from_column` finds it).

    A :class:`~collections.abc.Sequence` of floats, not a list: ``len``, indexing, iteration,
    ``==`` with a list, ``numpy.asarray`` and :meth:`tolist` work; it cannot be changed.
    ``read_records(step_times="lazy")`` hands these out (the report, compare, predict and study
    read so); records read with ``step_times=True`` hold plain lists, for writing anywhere."""

    __slots__ = ("_steps", "_start", "_n", "_column", "_at", "_summary")

    def __init__(self, steps: array, start: int, n: int, column: Sequence[float], at: int) -> None:
        self._steps, self._start, self._n = steps, start, n
        self._column: Sequence[float] | None = column
        self._at = at
        self._summary: StepSummary | None = None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.tolist()[index]
        i = operator.index(index)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("step index out of range")
        return self._steps[self._start + i]

    def _array(self) -> array:
        return self._steps[self._start:self._start + self._n]

    def __iter__(self) -> Iterator[float]:
        return iter(self._array())

    def tolist(self) -> list[float]:
        """The step times as a new list."""
        return self._array().tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        """A read-only numpy view of the column (numpy 2's protocol: a copy when ``copy`` is
        true or another ``dtype`` is asked for, which ``copy=False`` refuses)."""
        import numpy as np

        view = np.frombuffer(self._steps, dtype=np.float64, count=self._n, offset=self._start * 8)
        view.flags.writeable = False  # the store's column, shared by every run's view
        if copy or (dtype is not None and np.dtype(dtype) != view.dtype):
            if copy is False:
                raise ValueError("StepTimes: this dtype needs a copy")
            return view.astype(dtype or np.float64)
        return view

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (self.tolist(),))  # pickled (to another process) as the list it shows, not the column

    def __copy__(self) -> StepTimes:
        return self  # it cannot be changed

    def __deepcopy__(self, memo: Any) -> StepTimes:
        return self

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StepTimes):
            return self._array() == other._array()
        return self.tolist() == other if isinstance(other, list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StepTimes({self.tolist()!r})"

    def __str__(self) -> str:
        return str(self.tolist())  # as a label or a cell shows it: the list's text

    @property
    def summary(self) -> StepSummary | None:
        if self._summary is None and self._column is not None:
            self._summary = from_column(self._column, self._at, self._n)
            self._column = None
        return self._summary


def plain(value: Any) -> Any:
    """``value``, but a :class:`StepTimes` view as the list it shows (for JSON text)."""
    return value.tolist() if type(value) is StepTimes else value


def step_summary(times: Any) -> StepSummary | None:
    """The summary of ``metrics.step_times_s``: a :class:`StepTimes`' own (read from the cache),
    else computed from the list. ``None`` when it is no non-empty list of numbers."""
    if type(times) is StepTimes:
        return times.summary
    if not isinstance(times, list):
        return None
    return summarize(times)
