"""The report's History section: series of 8 or more runs over time, their changes and outliers.

Built with :func:`cnnbench.analysis.history.build_history` from the selected records, as
``cnnbench history`` reads them (in ``started_at`` order): a table of the changes (series,
machine, the levels before and after, the last run before and the first after with their
dates, the change with its 95% interval, its p-value, the suspects), a table of the outliers if
any, and a timeline plot per series with a change or an outlier. No section when no series has 8
runs. Each change is also an observation, in :meth:`~cnnbench.analysis.history.Change.text`'s words.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from cnnbench.analysis import fields as F
from cnnbench.analysis.history import MIN_POINTS, Change, History, Outlier, Run, Series, build_history
from cnnbench.analysis.points import build_points
from cnnbench.report.document import Figure, Heading, Paragraph, Report, TableBlock
from cnnbench.report.kinds import Inputs, Observes, TableKind, register
from cnnbench.report.observations import Observation, Ref
from cnnbench.report.table import Cell, Table, field_number, label_cell
from cnnbench.report.tables.pipeline import is_pipeline_record
from cnnbench.words import plural

log = logging.getLogger(__name__)

HEADING = "History"
CHANGE_COLUMN = "change (95% CI)"
NOTE = (f"Series: every ok run of one configuration on one machine, in start-time order; a series needs "
        f"{MIN_POINTS} runs. Changes are found as cnnbench history finds them (docs/commands/history.md): "
        "binary segmentation on the means of the jobs (runs of one session), with a noise model of the spread "
        "within a job and the drift between jobs, both estimated from the series; p adjusted for the places "
        "a change could have been. A lone run far from both sides is an outlier, not a change. Suspects: "
        "environment fields and kinds of warnings that differ between the two sides.")


@dataclass
class HistorySection:
    """The history of the report's records, its tables and a timeline per series with a change or an outlier."""

    history: History
    changes: Table | None
    outliers: Table | None
    figures: list[Figure] = field(default_factory=list)


def _series_name(label: str, machine: str) -> str:
    """The series' label without its machine (the table has a machine column)."""
    return label.removesuffix(f" on {machine}")


def _run_cell(run: Run) -> Cell:
    return Cell(f"{run.run_id} ({run.started_at[:10] or '?'})", run.run_id)


def _ips(value: float) -> str:
    """Images/sec in the registry's format for it."""
    return field_number(F.IPS, value).text


def _pct(ratio: float) -> str:
    return f"{(ratio - 1.0) * 100.0:+.1f}%"


def _change_row(c: Change) -> list[Cell]:
    return [label_cell(_series_name(c.series, c.machine)), label_cell(c.machine),
            Cell(f"{_ips(c.level_before)} → {_ips(c.level_after)}", round(c.level_after, 4)),
            _run_cell(c.before), _run_cell(c.after),
            Cell(f"{_pct(c.ratio)} ({_pct(c.low)} to {_pct(c.high)})", round(c.ratio - 1.0, 6)),
            Cell(f"{c.p:.2g}", float(f"{c.p:.3g}")),
            Cell("; ".join(s.text() for s in c.suspects) or "none", "; ".join(s.text() for s in c.suspects))]


def _outlier_row(o: Outlier) -> list[Cell]:
    return [label_cell(_series_name(o.series, o.machine)), label_cell(o.machine), _run_cell(o.run),
            field_number(F.IPS, o.run.ips), field_number(F.IPS, o.level), Cell(_pct(o.ratio), round(o.ratio - 1.0, 6))]


def history_tables(history: History) -> tuple[Table | None, Table | None]:
    """The table of the changes and that of the outliers (``None`` where there is none)."""
    changes = outliers = None
    if history.changes:
        changes = Table("history-changes", "Changes over time", "history-changes",
                        ["series", F.field(F.MACHINE).label, f"{F.field(F.IPS).label} before → after",
                         "last run before", "first run after",
                         CHANGE_COLUMN, "p", "suspects"],
                        [_change_row(c) for c in history.changes], [NOTE], label_columns=2,
                        row_names=[_change_name(c) for c in history.changes])
    if history.outliers:
        outliers = Table("history-outliers", "Outliers", "history-outliers",
                         ["series", F.field(F.MACHINE).label, "run", F.field(F.IPS).label, "level", "off the level"],
                         [_outlier_row(o) for o in history.outliers],
                         ["A run (or two) far from the runs before and after it: left out of the levels."],
                         label_columns=2, row_names=[o.series for o in history.outliers])
    return changes, outliers


def timeline_figure(s: Series, name: str) -> Figure:
    """The timeline of one series: its runs in order, its levels, changes and outliers."""
    fit = s.fit
    return Figure("history", name, f"History: {s.label}", {
        "ips": [r.ips for r in s.runs],
        "days": [r.started_at[:10] for r in s.runs],
        "levels": [(lv.start, lv.stop, lv.value) for lv in fit.levels],
        "changes": [(c.index, _pct(c.ratio)) for c in fit.shifts],
        "outliers": list(fit.outliers),
    })


def _figures(history: History) -> list[Figure]:
    out: list[Figure] = []
    taken: set[str] = set()
    for s in history.series:
        if not (s.changes or s.outliers):
            continue
        name = f"history-{F.slug(s.label)}"
        while name in taken:
            name += "-2"
        taken.add(name)
        out.append(timeline_figure(s, name))
    return out


def build_history_section(inputs: Inputs) -> HistorySection | None:
    """The History section of ``inputs``' records (a model's runs: not ``cnnbench data``'s), or
    ``None`` when no series has :data:`MIN_POINTS` runs. A history that cannot be built (a record
    no other table minds: an odd field it compares) leaves the section out, logged: the report
    stands without it."""
    records = [r for r in inputs.records if not is_pipeline_record(r)]
    if len(records) < MIN_POINTS:
        return None
    # the report's own points where they are these records' alone (no field of a flag tells them apart)
    points = build_points(records) if inputs.points.extra else inputs.points
    if max((len(p.records) for p in points.points), default=0) < MIN_POINTS:
        return None  # no series long enough: nothing parsed, nothing fitted
    try:
        history = build_history(records, points=points)
    except (TypeError, ValueError, OSError) as exc:
        log.warning("report: the History section is left out: %s: %s", type(exc).__name__, exc)
        return None
    if not history.series:
        return None
    return HistorySection(history, *history_tables(history), _figures(history))


def history_observations(section: HistorySection | None) -> list[Observation]:
    """One observation per change, in plain words, naming its row of the changes table."""
    if section is None or section.changes is None:
        return []
    return [Observation(c.text(), [Ref(section.changes.id, _change_name(c), CHANGE_COLUMN)])
            for c in section.history.changes]


def _change_name(c: Change) -> str:
    """A change's row name: its series and the first run after it (a series may change twice)."""
    return f"{c.series} from {c.after.run_id or c.after.started_at}"


def _summary(history: History) -> str:
    runs = sum(len(s.runs) for s in history.series)
    text = (f"{plural(len(history.series), 'series', 'series')} of {MIN_POINTS} or more runs "
            f"({plural(runs, 'run')}): {plural(len(history.changes), 'change')}, "
            f"{plural(len(history.outliers), 'outlier')}.")
    if history.too_short:
        text += f" {plural(len(history.too_short), 'series', 'series')} with fewer runs left out."
    if history.no_start_time:
        text += f" {plural(history.no_start_time, 'imported run')} without a real start time left out."
    return text


def _section(report: Report, section: HistorySection | None, inputs: Inputs) -> None:
    if section is None:
        return
    b = report.blocks
    b += [Heading(HEADING), Paragraph(_summary(section.history))]
    if section.changes is not None:
        b.append(TableBlock(section.changes, caption=True))
    else:
        b.append(Paragraph(NOTE))
    if section.outliers is not None:
        b.append(TableBlock(section.outliers, caption=True))
    for fig in section.figures:
        b.append(fig)
        report.figures.append(fig)


def _tables(section: HistorySection | None) -> list[Table]:
    return [] if section is None else [t for t in (section.changes, section.outliers) if t is not None]


register(TableKind("history", 88, build_history_section, _section, _tables,
                   plot=lambda section: [] if section is None else section.figures,
                   plot_order=4, draw="cnnbench.report.render.plot_history:_history",
                   observes=(Observes("history", 60, lambda section, inputs, warned: history_observations(section)),)))
