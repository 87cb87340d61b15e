"""The options of a report (the ``cnnbench report`` flags) and how its layout resolves.

``rows`` and ``columns`` (``--rows``, ``--columns``) name the fields of the throughput
tables' rows and columns; ``observations`` (``--observations``) the kinds of observation made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.repeat_stats import REPEAT_NOISE
from cnnbench.report.layout import Layout, split_fields


class ReportError(ValueError):
    """A report that cannot be made as asked (one line, for the user)."""


class NoMatchingRecords(ReportError):
    """Nothing left to report after ``--where``."""


if TYPE_CHECKING:
    OBSERVATION_KINDS: tuple[str, ...]
    """The kinds of observation a report makes (``--observations``), as the kinds of table declare
    them (:func:`cnnbench.report.kinds.observation_kinds`): scaling efficiency, one-factor
    effects, the fastest column value per row, implementations side by side, changes over time
    (series of 8 or more runs), failed cells."""


def __getattr__(name: str) -> Any:
    """:data:`OBSERVATION_KINDS`, read from the kinds of table when asked (loading
    them loads the table modules, and some import this module; :mod:`cnnbench.report.kinds` does not)."""
    if name == "OBSERVATION_KINDS":
        from cnnbench.report.kinds import observation_kinds

        return observation_kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class ReportOptions:
    """What to report and how (the ``cnnbench report`` flags).

    ``rows`` and ``columns`` name the fields of the throughput tables' rows and columns
    (aliases or dotted names; a string is split on commas: ``"machine,num_devices"``)."""

    rows: tuple[str, ...] = ("model",)
    columns: tuple[str, ...] | None = None
    """Default: machine, or model where the rows hold the machine (``--rows machine,num_devices``)."""
    observations: tuple[str, ...] | None = None
    """The kinds of observation to make (of :func:`cnnbench.report.kinds.observation_kinds`); ``None``: every kind."""
    effects: Sequence[str] | None = None
    """Fields to show effects of; ``None``: every field with exactly two values."""
    baselines: Mapping[str, str] = field(default_factory=dict)
    """``{field: value}``: the value others are compared with in effect tables."""
    where: Sequence[str] = ()
    title: str = "cnnbench report"
    noise: float = 0.03
    """The smallest relative difference called significant (the test's minimum effect)."""
    repeat_noise: float = REPEAT_NOISE
    """A cell shows the relative stdev of its repeats (``±x%``) when it exceeds this: the
    threshold above which the sweep warns that repeats disagree (``cnnbench sweep --noise``)."""
    ignore: Sequence[str] = ()
    """Fields results may differ in and still pair in effect tables (``--ignore``)."""
    include_warned: bool = False
    """Let cells whose runs recorded warnings (or were throttled) into the observations."""
    max_plots: int = 8
    predict: bool = False
    """Scaling tables show ``cnnbench predict``'s prediction beside the measured figures, and the
    observations say where measured scaling falls short of it (``--predict``)."""
    problems: Sequence[str] = ()
    """Lines the store could not read, listed at the end."""

    def __post_init__(self) -> None:
        self.rows = _field_names("--rows", self.rows)
        if self.columns is None:
            self.columns = ("model",) if {"machine", F.MACHINE} & set(self.rows) else ("machine",)
        self.columns = _field_names("--columns", self.columns)
        if self.observations is not None:
            from cnnbench.report.kinds import observation_kinds

            known = observation_kinds()
            kinds = split_fields(self.observations)
            unknown = [k for k in kinds if k not in known]
            if unknown or not kinds:
                raise ReportError(f"--observations: unknown kind {', '.join(map(repr, unknown)) or repr('')}; "
                                  f"choose from {', '.join(known)}")
            self.observations = tuple(dict.fromkeys(kinds))


def _field_names(flag: str, value: str | Sequence[str]) -> tuple[str, ...]:
    names = split_fields(value)
    if not all(names):
        raise ReportError(f"{flag}: expected FIELD[,FIELD...], got {','.join(names)!r}")
    return names


def resolve_layout(opts: ReportOptions, selected: list[Mapping[str, Any]]) -> Layout:
    """The rows and columns the flags name (a :class:`~cnnbench.analysis.fields.FieldError` for an
    unknown field, a field named twice, or one that is both a row and a column)."""
    rows = tuple(F.resolve_field(r, selected) for r in opts.rows)
    columns = tuple(F.resolve_field(c, selected) for c in opts.columns or ())
    for flag, names in (("--rows", rows), ("--columns", columns)):
        twice = sorted({F.short_name(f) for f in names if names.count(f) > 1})
        if twice:
            raise F.FieldError(f"{flag}: {', '.join(twice)} named twice")
    both = [f for f in columns if f in rows]
    if both == [F.MODEL] and rows == (F.MODEL,):
        raise F.FieldError("--columns model: the rows are the models already; choose another field "
                           "(machine, gpu, cpu, num_devices, precision, ...) or other rows (--rows)")
    if both:
        raise F.FieldError(f"{', '.join(map(F.short_name, both))}: both a row (--rows) and a column (--columns) "
                           f"field; a field can be one or the other")
    return Layout(rows, columns)
