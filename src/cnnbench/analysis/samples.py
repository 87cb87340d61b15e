"""What the significance test reads from one run (:class:`RunSample`): its images/sec, the
relative stdev of its step times and their block means (from the summary of
``metrics.step_times_s``, :mod:`cnnbench.results.step_summary`, which a lazy cached read of the
store, ``step_times="lazy"``, brings computed, and which is computed from a list otherwise; or from
the progress lines of an imported tf_cnn_benchmarks log). No torch, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from cnnbench.results.step_summary import MIN_BLOCKS, StepSummary, block_size, step_summary, summarize

WIDE_CV = 0.10
"""A run whose step times vary more than this (std / mean) is marked as noisy (the threshold of
the run's own ``unstable`` warning, :data:`cnnbench.engine.stability.MAX_CV`)."""
__all__ = ["MIN_BLOCKS", "WIDE_CV", "RunSample", "blocks_from_series", "blocks_from_step_times", "run_sample"]


def blocks_from_step_times(step_times: Sequence[float], images_per_step: float) -> tuple[float, ...]:
    """Seconds per image, averaged over blocks of consecutive steps.

    ``n`` steps make blocks of about ∛n steps, keeping at least 10 blocks (10 steps: blocks
    of 1; 100 steps: 20 blocks of 5; 10,000 steps: 454 blocks of 22). Leading steps that do
    not fill a block are left out (they are the ones nearest to the warm-up).
    """
    summary = summarize(step_times)
    return _blocks(summary, images_per_step) if summary is not None else ()


def _blocks(summary: StepSummary, images_per_step: float) -> tuple[float, ...]:
    if images_per_step <= 0:
        return ()
    scale = 1.0 / (block_size(summary.count) * images_per_step)
    return tuple(s * scale for s in summary.block_sums)


def blocks_from_series(steps: Sequence[Any], rates: Sequence[Any]) -> tuple[float, ...]:
    """Seconds per image of each block between progress lines, from tf_cnn_benchmarks'
    cumulative images/sec (``images / mean step time`` of the steps so far) at those steps.

    The time of the first ``k`` steps per image is ``k / rate_k``; a block's is the
    difference of two such sums over its steps. Only the lines at multiples of the most
    common spacing are used (tf prints step 1, then 10, 20, ...); ``()`` when the lines do not
    allow it (too few, unordered, or a block that rounding makes non-positive).
    """
    pairs = [(int(s), float(r)) for s, r in zip(steps, rates, strict=False)
             if isinstance(s, (int, float)) and isinstance(r, (int, float)) and r > 0]
    if len(pairs) < 3:
        return ()
    gaps = [b[0] - a[0] for a, b in zip(pairs, pairs[1:], strict=False)]
    spacing = max(set(gaps), key=gaps.count)
    if spacing <= 0:
        return ()
    chosen = [(s, r) for s, r in pairs if s % spacing == 0]
    blocks = []
    prev_steps, prev_time = 0, 0.0
    for s, r in chosen:
        if s <= prev_steps:
            return ()
        total = s / r
        block = (total - prev_time) / (s - prev_steps)
        if block <= 0:
            return ()
        blocks.append(block)
        prev_steps, prev_time = s, total
    return tuple(blocks) if len(blocks) >= 2 else ()


def _number(value: Any) -> float | None:
    return float(value) if value.__class__ in (int, float) else None


class RunSample:
    """What the test needs from one ``ok`` run: its images/sec, the coefficient of variation
    of its step times, and (computed when first asked for) its block means."""

    __slots__ = ("rate", "cv", "_blocks", "_summary", "_images")

    def __init__(self, rate: float, blocks: Sequence[float] = (), cv: float | None = None, *,
                 step_times: Sequence[float] | None = None, images_per_step: float = 0.0,
                 summary: StepSummary | None = None) -> None:
        self.rate = rate
        """images/sec (``metrics.total_images_per_sec``)."""
        self.cv = cv
        """Coefficient of variation of the step times (std / mean), ``None`` when unknown."""
        if summary is None and step_times is not None:
            summary = summarize(step_times)
        self._summary = summary
        self._blocks: tuple[float, ...] | None = None if summary is not None else tuple(blocks)
        self._images = images_per_step

    @property
    def blocks(self) -> tuple[float, ...]:
        """Seconds per image of each block of consecutive steps (empty: no step samples)."""
        if self._blocks is None:
            self._blocks = _blocks(self._summary, self._images) if self._summary is not None else ()
        return self._blocks

    @property
    def has_blocks(self) -> bool:
        """Are there two or more blocks (without computing them)?"""
        if self._blocks is None and self._summary is not None:
            return self._summary.count >= 2 and self._images > 0  # no batch size: no blocks
        return len(self.blocks) >= 2

    @property
    def wide(self) -> bool:
        """Do its step times vary by more than :data:`WIDE_CV`?"""
        return self.cv is not None and self.cv > WIDE_CV

    def __repr__(self) -> str:
        return f"RunSample(rate={self.rate!r}, cv={self.cv!r}, blocks={len(self.blocks)})"


def _step_summary(value: Any) -> StepSummary | None:
    """The summary of ``metrics.step_times_s`` when it is a non-empty list of positive numbers."""
    summary = step_summary(value)
    return summary if summary is not None and summary.minimum > 0 else None


def run_sample(record: Mapping[str, Any]) -> RunSample | None:
    """The sample of an ``ok`` record with a throughput (``None`` for others).

    Its coefficient of variation is the relative stdev of the step times (as
    :func:`cnnbench.analysis.repeat_stats.relative_stdev` defines it for repeats, and as the
    run's own ``unstable`` check computes it, :func:`cnnbench.engine.stability.coefficient_of_variation`,
    pyperf's), so that the ``†`` mark and that warning agree."""
    if str(record.get("status") or "ok") != "ok":
        return None
    metrics = record.get("metrics")
    if not isinstance(metrics, Mapping):
        return None
    rate = _number(metrics.get("total_images_per_sec"))
    if rate is None or rate <= 0:
        return None
    summary = _step_summary(metrics.get("step_times_s"))
    if summary is not None:
        config = record.get("config") or {}
        batch = _number(config.get("batch_size")) if isinstance(config, Mapping) else None
        devices = _number(config.get("num_devices")) if isinstance(config, Mapping) else None
        images = batch * (devices or 1) if batch else 0.0
        return RunSample(rate, cv=summary.relative_stdev, summary=summary, images_per_step=images)
    series = metrics.get("step_series")
    blocks: tuple[float, ...] = ()
    if isinstance(series, Mapping):
        blocks = blocks_from_series(series.get("step") or [], series.get("images_per_sec") or [])
    return RunSample(rate, blocks, _cv_from_stderr(metrics, record.get("config")))


def _cv_from_stderr(metrics: Mapping[str, Any], config: Any) -> float | None:
    """For a log without step times: tf_cnn_benchmarks' ``+/-`` (std of per-step images/sec
    over √steps) times √steps, over the mean."""
    stderr = _number(metrics.get("images_per_sec_stderr"))
    mean = _number(metrics.get("images_per_sec_mean"))
    steps = _number(config.get("num_batches")) if isinstance(config, Mapping) else None
    if stderr is None or not mean or not steps:
        return None
    return stderr * math.sqrt(steps) / mean
