"""Marks on table cells whose figures deserve less trust, and the legend lines that explain them.

- ``†`` (wide spread): a run of the cell has step times whose relative stdev (sample
  standard deviation / mean, :func:`cnnbench.analysis.repeat_stats.relative_stdev`, as for repeats) is
  over 10%; for imported logs without step times, tf_cnn_benchmarks' own ``+/-`` gives it.
- ``⚠`` (warned): a run of the cell recorded warnings (``metrics.warnings``: ``busy CPU``,
  ``busy GPU``, ``CPU frequency``, ``unstable``, ...) or was throttled (``metrics.throttled``).
  Such cells stay in the tables but are left out of the observations unless asked
  (``--include-warned``).
- ``n.s.`` / ``no samples`` on ratios: the difference is not significant, or there was
  nothing to test it with (see :mod:`cnnbench.analysis.significance`).

No torch here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis.points import Measure
from cnnbench.analysis.repeat_stats import SPREAD_NAME
from cnnbench.analysis.samples import WIDE_CV
from cnnbench.words import plural

WIDE = "†"
WARNED = "⚠"
NOT_SIGNIFICANT = "n.s."
NO_SAMPLES = "no samples"


def run_warnings(record: Mapping[str, Any]) -> list[str]:
    """The warnings a record carries: ``metrics.warnings`` (short texts), plus ``throttled``
    when ``metrics.throttled`` is true."""
    metrics = record.get("metrics")
    if not isinstance(metrics, Mapping):
        return []
    raw = metrics.get("warnings")
    out = [str(w).strip() for w in raw if str(w).strip()] if isinstance(raw, list) else []
    if isinstance(raw, str) and raw.strip():
        out.append(raw.strip())
    if metrics.get("throttled") is True and not any(w.lower().startswith("throttl") for w in out):
        out.append("throttled")
    return out


@dataclass
class Marks:
    """The marks of one cell (or of several cells, added up for a legend)."""

    wide: int = 0
    """Runs whose step times vary by more than 10%."""
    reasons: Counter = field(default_factory=Counter)
    """Warning text -> runs that recorded it."""
    warned: int = 0
    """Runs with at least one warning."""

    @property
    def symbols(self) -> str:
        return (WIDE if self.wide else "") + (WARNED if self.warned else "")

    def add(self, other: Marks) -> None:
        self.wide += other.wide
        if other.warned:
            self.warned += other.warned
            self.reasons.update(other.reasons)


def measure_marks(measure: Measure | None) -> Marks:
    """The marks of a cell's runs (computed once per measure)."""
    if measure is None:
        return Marks()
    if measure.marks is None:
        marks = Marks()
        for run, sample in zip(measure.runs, measure.run_samples, strict=False):
            if sample is not None and sample.cv is not None and sample.cv > WIDE_CV:
                marks.wide += 1
            warnings = run_warnings(run)
            if warnings:
                marks.warned += 1
                marks.reasons.update(dict.fromkeys(warnings, 1))
        measure.marks = marks
    return measure.marks


def symbols_of(*measures: Measure | None) -> str:
    """The marks of several measures together, as symbols (``†``, ``⚠``, ``†⚠`` or empty)."""
    wide = warned = False
    for m in measures:
        marks = measure_marks(m)
        wide = wide or marks.wide > 0
        warned = warned or marks.warned > 0
    return (WIDE if wide else "") + (WARNED if warned else "")


def combined(measures: Iterable[Measure | None]) -> Marks:
    """The marks of several measures together."""
    total = Marks()
    for m in measures:
        total.add(measure_marks(m))
    return total


def is_warned(text_marks: str) -> bool:
    """Does a cell's marks string say that a run of it was warned?"""
    return WARNED in text_marks


def warning_kind(text: str) -> str:
    """What a warning is about: its text before the first colon (``busy CPU: other processes
    used 1.20 of the 2 cores ...`` -> ``busy CPU``; ``busy GPU``, ``CPU frequency``, ``unstable``)."""
    return text.split(":", 1)[0].strip() or text


def by_kind(reasons: Counter) -> Counter:
    """Warning texts counted by kind."""
    kinds: Counter = Counter()
    for text, n in reasons.items():
        kinds[warning_kind(text)] += n
    return kinds


MARKS_HEADING = "Marks"


def legend(marks: Marks) -> list[str]:
    """Short lines under a table naming the marks present and how many runs carry them; the
    full explanation is said once, in the report's Marks section (:func:`marks_section`)."""
    lines = []
    if marks.wide:
        lines.append(f"{WIDE} a run's step times vary widely ({plural(marks.wide, 'run')}); see {MARKS_HEADING}.")
    if marks.warned:
        kinds = ", ".join(f"{k} ({plural(n, 'run')})" for k, n in by_kind(marks.reasons).most_common())
        lines.append(f"{WARNED} a run recorded warnings: {kinds}; see {MARKS_HEADING}.")
    return lines


def marks_section(marks: Marks, include_warned: bool = False) -> list[str]:
    """The report's one explanation of the marks present (empty when none is);
    ``include_warned``: warned cells were let into the observations (``--include-warned``)."""
    lines = []
    if marks.wide:
        lines.append(f"{WIDE} a run's step times vary widely: {SPREAD_NAME} over {WIDE_CV * 100:g}% "
                     f"({plural(marks.wide, 'run')} in all); its figure is less certain than others.")
    if marks.warned:
        groups: dict[str, list[tuple[str, int]]] = {}
        for text, n in marks.reasons.most_common():
            groups.setdefault(warning_kind(text), []).append((text, n))
        parts = []
        for kind, n in by_kind(marks.reasons).most_common():
            texts = [t for t, _ in groups[kind] if t != kind]
            example = f"; e.g. {texts[0]!r}" + (f" and {len(texts) - 1} more" if len(texts) > 1 else "") \
                if texts else ""
            parts.append(f"{kind} ({plural(n, 'run')}{example})")
        lines.append(f"{WARNED} a run recorded warnings ({plural(marks.warned, 'run')} in all), by kind: "
                     + "; ".join(parts) + ". Such cells stay in the tables, marked, and "
                     + ("count in the observations, as --include-warned asks." if include_warned else
                        "are left out of the observations (--include-warned keeps them)."))
    return lines


def legend_for(measures: Sequence[Measure | None]) -> list[str]:
    """The legend of the marks of ``measures`` (empty when none is marked)."""
    return legend(combined(measures))
