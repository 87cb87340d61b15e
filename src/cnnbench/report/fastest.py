"""The fastest column value (machine by default) per model, said only where it is significantly
faster than every other cell of its row (the test of :mod:`cnnbench.analysis.significance`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from cnnbench.analysis import fields as F
from cnnbench.analysis.marks import warnings_behind
from cnnbench.analysis.points import Measure
from cnnbench.analysis.significance import DEFAULT_NOISE, compare_runs
from cnnbench.report.layout import Layout
from cnnbench.report.numbers import significant
from cnnbench.report.observations import Observation, Ref, usable
from cnnbench.report.section import Section
from cnnbench.report.table import Cell
from cnnbench.words import plural

MAX_MODELS_LISTED = 12


def _clear_winner(s: Section, label: str, cells: list[tuple[str, Cell]], noise: float) -> bool:
    """Is the fastest of a row's cells significantly faster than each of the others (the test of
    :mod:`cnnbench.analysis.significance`)? Not when a cell's measure is unknown."""
    col, _ = max(cells, key=lambda c: c[1].value)
    best = s.measures.get((label, col))
    others = [s.measures.get((label, c)) for c, _ in cells if c != col]
    if best is None or any(m is None for m in others):
        return False
    return all(compare_runs(m.samples, best.samples, noise, interval=False, p_value=False).significant
               for m in others if m is not None)


@dataclass
class _Contests:
    """Per model, the row contests of the throughput tables and the columns that won them significantly."""

    wins: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    compared: Counter = field(default_factory=Counter)
    refs: dict[str, list[Ref]] = field(default_factory=lambda: defaultdict(list))
    best_text: dict[str, str] = field(default_factory=dict)
    undecided: list[Ref] = field(default_factory=list)
    """The fastest cell of each contest whose winner is not significantly ahead."""
    model_of: dict[str, str] = field(default_factory=dict)
    """The model each row measures: a batch sweep gives a model a row per batch size (a series)."""
    measures: list[Measure | None] = field(default_factory=list)
    """The measures of every cell in a contest."""

    def rows_compared(self, default_rows: bool) -> str:
        """What the contests were held over: ``6 models``; ``2 models, 4 model × batch series``."""
        if not default_rows:
            return plural(len(self.wins), "row")
        models = len(set(self.model_of[r] for r in self.wins))
        series = f", {len(self.wins)} model × batch series" if models < len(self.wins) else ""
        return plural(models, "model") + series


def _record_models(s: Section) -> dict[int, str]:
    """The model of each record of a section, by the record's identity (a measure keeps its records)."""
    return {id(r): F.text(p.values.get(F.MODEL)) for p in s.points for r in p.records}


def _row_model(s: Section, label: str, cells: list[tuple[str, Cell]], models: dict[int, str]) -> str:
    """The model behind a row's cells (``resnet50, batch 64`` measures resnet50)."""
    for col, _ in cells:
        m = s.measures.get((label, col))
        for r in m.runs if m is not None else []:
            if id(r) in models:
                return models[id(r)]
    return label


def _contests(sections: Sequence[Section], include_warned: bool, noise: float) -> _Contests:
    found = _Contests()
    for s in sections:
        t = s.table
        data = range(t.label_columns, len(t.columns))
        models = _record_models(s)
        for k, row in enumerate(t.rows):
            cells = [(t.columns[i], row[i]) for i in data if usable(row[i], include_warned)]
            if len(cells) < 2:
                continue
            col, cell = max(cells, key=lambda c: c[1].value)
            model = s.row_label(k)
            found.compared[model] += 1
            found.model_of[model] = _row_model(s, model, cells, models)
            found.measures += [s.measures.get((model, c)) for c, _ in cells]
            if not _clear_winner(s, model, cells, noise):
                found.undecided.append(Ref(t.id, model, col))
                continue
            found.wins[model][col] += 1
            found.refs[model].append(Ref(t.id, model, col))
            best = s.measures.get((model, col))
            figure = best.median if best is not None and best.median is not None else cell.value
            found.best_text[model] = f"{significant(figure)} {F.field(F.IPS).label} in {t.title}"
    return found


def _winners(c: _Contests) -> dict[str, list[str]]:
    """Per column, the rows it wins (each with its figure or how many configurations), said once per column."""
    winners: dict[str, list[str]] = defaultdict(list)
    for model in c.wins:
        col, k = c.wins[model].most_common(1)[0]
        if c.compared[model] == 1:
            winners[col].append(f"{model} ({c.best_text[model]})")
        elif k == c.compared[model]:
            winners[col].append(f"{model} (all {c.compared[model]} configurations)")
        else:
            winners[col].append(f"{model} ({k} of {c.compared[model]} configurations)")
    return winners


def _undecided_text(c: _Contests) -> str:
    total = sum(c.compared.values())
    return f" No significant winner in {len(c.undecided)} of {plural(total, 'comparison')}." if c.undecided else ""


def fastest_observations(sections: Sequence[Section], layout: Layout | str, include_warned: bool = False,
                         noise: float = DEFAULT_NOISE) -> list[Observation]:
    """The column value (machine by default) with the highest images/sec for each model (each row
    of the layout), counted only where it is significantly faster than every other cell of its
    row (``noise``: the minimum effect); warned cells are not in the contest. With no significant
    winner anywhere, one sentence says so and names no column value."""
    if isinstance(layout, str):
        layout = Layout(columns=(layout,))
    if F.DEVICES in layout.columns or F.MODEL in layout.columns:
        return []  # more devices, or another model, is not a faster choice of the same work
    c = _contests(sections, include_warned, noise)
    series = layout.is_default and len(set(c.model_of.values())) < len(c.model_of)
    row = ("model and batch" if series else "model") if layout.is_default else layout.row_name
    name = layout.column_name
    if not c.compared:
        return []
    behind = warnings_behind(c.measures)
    if not c.wins:
        return [Observation(f"No {name} is significantly faster than the others for any {row} "
                            f"({plural(sum(c.compared.values()), 'comparison')}).", c.undecided, behind)]
    winners = _winners(c)
    all_refs = [r for model in c.wins for r in c.refs[model]] + c.undecided
    unanimous = all(c.wins[m].most_common(1)[0][1] == c.compared[m] for m in c.wins) and not c.undecided
    if len(winners) == 1 and unanimous and len(c.wins) > 1:
        [col] = winners
        total = sum(c.compared.values())
        return [Observation(f"Fastest {name}: {col}, for every {row} ({c.rows_compared(layout.is_default)}, "
                            f"{plural(total, 'comparison')}).", all_refs, behind)]
    parts = []
    for col, models in sorted(winners.items(), key=lambda kv: -len(kv[1])):
        shown = models[:MAX_MODELS_LISTED]
        more = f" and {len(models) - len(shown)} more" if len(models) > len(shown) else ""
        parts.append(f"{col} for {', '.join(shown)}{more}")
    return [Observation(f"Fastest {name} per {row}: " + "; ".join(parts) + "." + _undecided_text(c), all_refs,
                        behind)]
