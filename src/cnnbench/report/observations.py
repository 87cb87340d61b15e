"""Written observations drawn from the tables, each with references to the cells it quotes.

Every bullet is computed from the numbers of table cells and the verdicts behind them (its
:class:`Ref` list names the cells: table id, row label, column), never from their text (a bullet
may quote it), and says nothing that no number supports. Each kind of table makes its own, in its
module (scaling efficiency: :func:`cnnbench.report.tables.scaling.scaling_observations`; effects:
:func:`cnnbench.report.tables.effects.effect_observations`; implementations:
:func:`cnnbench.report.tables.implementations.implementation_observations`; the fastest machine or
other column value per model: :mod:`cnnbench.report.fastest`) with the types and helpers here;
this module imports no table module (dependencies go one way). Here too: the failures. Cells
marked as warned (a run recorded warnings or was throttled) are left out unless
``include_warned``; when every figure is warned, the observations that hold with the warnings
are given. An observation that rests on warned runs begins with why it cannot be trusted
(:func:`lead_with_warnings`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cnnbench.analysis.marks import WARNED, RunWarnings, is_warned, untrusted
from cnnbench.report.section import Section
from cnnbench.report.table import Cell
from cnnbench.words import plural

MAX_FAILURES_LISTED = 5


@dataclass(frozen=True)
class Ref:
    """A table cell an observation quotes."""

    table: str
    row: str
    column: str


@dataclass
class Observation:
    """One bullet and the cells it rests on."""

    text: str
    refs: list[Ref] = field(default_factory=list)
    warnings: RunWarnings = field(default_factory=RunWarnings)
    """The warnings of the runs behind its figures; when one of them was warned, :attr:`text` begins
    with why it cannot be trusted (:func:`lead_with_warnings`)."""


def pct(x: float) -> str:
    """``0.961`` -> ``96.1%``."""
    return f"{x * 100:.1f}%"


def usable(cell: Cell, include_warned: bool) -> bool:
    """A number cell, not warned unless ``include_warned``."""
    return cell.is_number and (include_warned or not is_warned(cell.marks))


def failure_observations(sections: Sequence[Section]) -> list[Observation]:
    """Cells where every repeat failed (by status) and cells with some failed repeats."""
    failed: Counter = Counter()
    partial = 0
    examples: list[tuple[str, Ref]] = []
    refs: list[Ref] = []
    for s in sections:
        t = s.table
        for k, row in enumerate(t.rows):
            label = s.row_label(k)
            for i in range(t.label_columns, len(t.columns)):
                c = row[i]
                ref = Ref(t.id, label, t.columns[i])
                if c.status:
                    failed[c.status] += 1
                    refs.append(ref)
                    if len(examples) < MAX_FAILURES_LISTED:
                        examples.append((f"{label} on {t.columns[i]} in {t.title} ({c.status})", ref))
                elif c.is_number and c.failed_repeats:
                    partial += 1
                    refs.append(ref)
    if not failed and not partial:
        return []
    counts = ", ".join(f"{k} {w}" for w, k in failed.most_common())
    total = sum(failed.values())
    text = f"Failures: {plural(total, 'cell')} where every repeat failed"
    text += f" ({counts})" if counts else ""
    if examples:
        text += ": " + "; ".join(e for e, _ in examples)
        if total > len(examples):
            text += f"; {total - len(examples)} more in the tables"
    if partial:
        text += f". {plural(partial, 'more cell', 'more cells')} had some repeats fail (shown as k/n)"
    return [Observation(text + ".", refs)]


ALL_WARNED = (f"Every figure in this report rests on runs that recorded warnings ({WARNED}; see Marks), so "
              f"the observations below hold only with those warnings, and each that rests on figures "
              f"begins with {WARNED} and the warnings of its runs.")


def all_warned(sections: Sequence[Section]) -> bool:
    """Is every figure of the throughput tables warned (and there is one)?"""
    cells = [c for s in sections for row in s.table.rows for c in row[s.table.label_columns:] if c.is_number]
    return bool(cells) and all(is_warned(c.marks) for c in cells)


def lead_with_warnings(observations: Sequence[Observation]) -> list[Observation]:
    """The observations, each that rests on warned runs beginning with why it cannot be trusted
    (:func:`cnnbench.analysis.marks.untrusted`: the warnings its runs recorded), so that it does not
    read as a finding."""
    return [Observation(untrusted(o.warnings) + o.text, o.refs, o.warnings) if o.warnings.warned else o
            for o in observations]
