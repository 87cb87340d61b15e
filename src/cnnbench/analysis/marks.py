"""Marks on table cells whose figures deserve less trust, and the legend lines that explain them.

- ``†`` (wide spread): a run of the cell has step times whose relative stdev (sample
  standard deviation / mean, :func:`cnnbench.analysis.repeat_stats.relative_stdev`, as for repeats) is
  over 10%; for imported logs without step times, tf_cnn_benchmarks' own ``+/-`` gives it.
- ``⚠`` (warned): a run of the cell recorded warnings (``metrics.warnings``: ``busy CPU``,
  ``busy GPU``, ``CPU frequency``, ``unstable``, ...) or was throttled (``metrics.throttled``).
  Such cells stay in the tables but are left out of the observations unless asked
  (``--include-warned``) or every figure is warned; an observation that rests on them begins
  with why it cannot be trusted (:func:`untrusted`).
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
from cnnbench.words import plural, shortened

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
    kinds: Counter = field(default_factory=Counter)
    """Warning kind (:func:`warning_kind`) -> runs that recorded one of that kind (a run with two
    texts of one kind, a busy GPU of each of its GPUs, counts once)."""
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


def measure_warnings(measure: Measure) -> list[tuple[str, ...]]:
    """The warnings of each run of a cell (:func:`run_warnings`; read once per measure: the marks
    and every observation resting on the cell take them from here)."""
    if measure.warnings is None or len(measure.warnings) != len(measure.runs):  # runs added since: again
        measure.warnings = [tuple(run_warnings(run)) for run in measure.runs]
    return measure.warnings


def measure_marks(measure: Measure | None) -> Marks:
    """The marks of a cell's runs (computed once per measure)."""
    if measure is None:
        return Marks()
    if measure.marks is None:
        marks = Marks()
        for warnings, sample in zip(measure_warnings(measure), measure.run_samples, strict=False):
            if sample is not None and sample.cv is not None and sample.cv > WIDE_CV:
                marks.wide += 1
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


ALL_WARNED_COUNT = ("count in the observations all the same, though --include-warned was not given: every "
                    "figure of the throughput tables is warned, and leaving them out would leave no observation; "
                    f"each observation that rests on figures begins with {WARNED} and the warnings of its runs.")
"""How warned cells are used when every figure is (the report's fallback, without ``--include-warned``)."""


def marks_section(marks: Marks, include_warned: bool = False, all_warned: bool = False, *,
                  observations: bool = True) -> list[str]:
    """The report's one explanation of the marks present (empty when none is);
    ``include_warned``: warned cells were let into the observations (``--include-warned``);
    ``all_warned``: they were let in without it, because every figure of the throughput tables is warned;
    ``observations``: the output has observations (``compare``'s has none: no word of them)."""
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
                     + "; ".join(parts) + ". Such cells stay in the tables, marked"
                     + ("." if not observations else
                         ", and count in the observations, as --include-warned asks." if include_warned else
                         ", and " + ALL_WARNED_COUNT if all_warned else
                         ", and are left out of the observations (--include-warned keeps them)."))
    return lines


@dataclass
class RunWarnings:
    """The warnings of the runs behind a figure or an observation (each run counted once)."""

    runs: int = 0
    """The runs behind it."""
    warned: int = 0
    """Of them, the runs that recorded a warning (or were throttled)."""
    reasons: Counter = field(default_factory=Counter)
    """Warning text -> runs that recorded it."""
    kinds: Counter = field(default_factory=Counter)
    """Warning kind (:func:`warning_kind`) -> runs that recorded one of that kind (a run with two
    texts of one kind, a busy GPU of each of its GPUs, counts once)."""


def warnings_behind(measures: Iterable[Measure | None]) -> RunWarnings:
    """The warnings of the runs of ``measures``; a run in several of them (a base run, a run in a
    combined measure) is counted once."""
    out = RunWarnings()
    seen: set[int] = set()
    alike: Counter = Counter()  # each run's warnings -> the runs that recorded just those (most runs share them)
    for m in measures:
        if m is None:
            continue
        for run, texts in zip(m.runs, measure_warnings(m), strict=True):
            if id(run) in seen:
                continue
            seen.add(id(run))
            out.runs += 1
            if texts:
                alike[texts] += 1
    for texts, runs in alike.items():  # in the order first met: the reasons' order as run by run
        out.warned += runs
        for text in dict.fromkeys(texts):
            out.reasons[text] += runs
        for kind in {warning_kind(text) for text in texts}:
            out.kinds[kind] += runs
    return out


EXAMPLE_LIMIT = 200
"""At most this many characters of a warning's text are quoted as an example (a record's text may
be of any length)."""


def untrusted(w: RunWarnings) -> str:
    """The words an observation resting on warned runs begins with, before what it says: why it
    cannot be trusted, from the warnings its runs recorded, by kind, each with one text as recorded
    (``⚠ Untrusted — all 4 runs behind it recorded warnings: busy CPU (4 runs, e.g. 'other processes used ...').
    Taken at face value:``). Empty when no run behind it was warned."""
    if not w.warned:
        return ""
    if w.runs == 1:
        who = "the run behind it"
    elif w.warned == w.runs:
        who = f"all {w.runs:,} runs behind it"
    else:
        who = f"{w.warned:,} of the {w.runs:,} runs behind it"
    examples: dict[str, str] = {}  # kind -> the most common text of that kind, after the kind
    for text, _ in w.reasons.most_common():
        said = text.split(":", 1)[1].strip() if ":" in text else ""
        if said:
            examples.setdefault(warning_kind(text), said)
    parts = [f"{kind} ({plural(n, 'run')}"
             + (f", e.g. {shortened(examples[kind], EXAMPLE_LIMIT)!r})" if kind in examples else ")")
             for kind, n in w.kinds.most_common()]
    return f"{WARNED} Untrusted — {who} recorded warnings: {'; '.join(parts)}. Taken at face value: "


def legend_for(measures: Sequence[Measure | None]) -> list[str]:
    """The legend of the marks of ``measures`` (empty when none is marked)."""
    return legend(combined(measures))
