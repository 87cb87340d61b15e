"""The fastest column value (machine by default) per model, said only where it is significantly
faster than every other cell of its row (the test of :mod:`cnnbench.analysis.significance`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from cnnbench.analysis import fields as F
from cnnbench.analysis.significance import DEFAULT_NOISE, compare_runs
from cnnbench.report.observations import Observation, Ref, usable
from cnnbench.report.table import Cell
from cnnbench.report.tables.throughput import Section
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
    return all(compare_runs(m.samples, best.samples, noise, interval=False).significant
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


def _contests(sections: Sequence[Section], include_warned: bool, noise: float) -> _Contests:
    found = _Contests()
    for s in sections:
        t = s.table
        data = range(t.label_columns, len(t.columns))
        for row in t.rows:
            cells = [(t.columns[i], row[i]) for i in data if usable(row[i], include_warned)]
            if len(cells) < 2:
                continue
            col, cell = max(cells, key=lambda c: c[1].value)
            model = row[0].text
            found.compared[model] += 1
            if not _clear_winner(s, model, cells, noise):
                found.undecided.append(Ref(t.id, model, col))
                continue
            found.wins[model][col] += 1
            found.refs[model].append(Ref(t.id, model, col))
            found.best_text[model] = f"{cell.text.split(' ')[0]} images/sec in {t.title}"
    return found


def _undecided_text(c: _Contests) -> str:
    total = sum(c.compared.values())
    return f" No significant winner in {len(c.undecided)} of {plural(total, 'comparison')}." if c.undecided else ""


def fastest_observations(sections: Sequence[Section], column_field: str, include_warned: bool = False,
                         noise: float = DEFAULT_NOISE) -> list[Observation]:
    """The column value (machine by default) with the highest images/sec for each model, counted
    only where it is significantly faster than every other cell of its row (``noise``: the
    minimum effect); warned cells are not in the contest. With no significant winner anywhere,
    one sentence says so and names no column value."""
    if column_field == F.DEVICES:
        return []
    c = _contests(sections, include_warned, noise)
    name = F.short_name(column_field)
    if not c.compared:
        return []
    if not c.wins:
        return [Observation(f"No {name} is significantly faster than the others for any model "
                            f"({plural(sum(c.compared.values()), 'comparison')}).", c.undecided)]
    winners: dict[str, list[str]] = defaultdict(list)  # column -> models it wins, said once per column
    for model in c.wins:
        col, k = c.wins[model].most_common(1)[0]
        if c.compared[model] == 1:
            winners[col].append(f"{model} ({c.best_text[model]})")
        elif k == c.compared[model]:
            winners[col].append(f"{model} (all {c.compared[model]} configurations)")
        else:
            winners[col].append(f"{model} ({k} of {c.compared[model]} configurations)")
    all_refs = [r for model in c.wins for r in c.refs[model]] + c.undecided
    unanimous = all(c.wins[m].most_common(1)[0][1] == c.compared[m] for m in c.wins) and not c.undecided
    if len(winners) == 1 and unanimous and len(c.wins) > 1:
        [col] = winners
        total = sum(c.compared.values())
        return [Observation(f"Fastest {name}: {col}, for every model ({plural(len(c.wins), 'model')}, "
                            f"{plural(total, 'comparison')}).", all_refs)]
    parts = []
    for col, models in sorted(winners.items(), key=lambda kv: -len(kv[1])):
        shown = models[:MAX_MODELS_LISTED]
        more = f" and {len(models) - len(shown)} more" if len(models) > len(shown) else ""
        parts.append(f"{col} for {', '.join(shown)}{more}")
    return [Observation(f"Fastest {name} per model: " + "; ".join(parts) + "." + _undecided_text(c), all_refs)]
