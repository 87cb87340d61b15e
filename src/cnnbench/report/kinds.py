"""Table kinds of a report: each declares itself once, in its module, and the report places every one in order.

A kind (:class:`TableKind`) is one module-level declaration (``register(TableKind(...))``) in
its module under ``cnnbench/report/tables/``: its id, its place among the report's sections
(``order``), what it is built from (:class:`Inputs`: what the analysis layer gives, and the
kinds built before it), its tables, its section (headings, tables, notes, figures), the
plots known as soon as it is built, its figures' place in the plot budget (``plot_order``) and
what draws them (``draw``: a function of a module under ``cnnbench/report/render/``, imported
only when a figure is drawn), and the observations it makes (:class:`Observes`, each a kind of
``--observations``). :func:`cnnbench.report.build.build_report` builds every registered kind and
adds their sections and observations in order: a new kind is its module (and its plot module),
and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cnnbench.analysis.points import PointSet
from cnnbench.report.document import Figure, Heading, Report, TableBlock
from cnnbench.report.layout import Layout
from cnnbench.report.table import Table

if TYPE_CHECKING:
    from cnnbench.report.observations import Observation


class KindOptions(Protocol):
    """What the kinds (and the report around them) read of the report's flags:
    :class:`cnnbench.report.options.ReportOptions` is one. Declared here, not imported, so that the
    dependency goes one way: the options read the kinds' names of observation (``--observations``)."""

    title: str
    where: Sequence[str]
    observations: tuple[str, ...] | None
    noise: float
    repeat_noise: float
    include_warned: bool
    max_plots: int
    predict: bool
    problems: Sequence[str]


@dataclass
class Inputs:
    """What a kind is built from: the selected records, their points, the resolved flags, and
    the results of the kinds built before it (:attr:`built`, by kind id)."""

    records: list[Mapping[str, Any]]
    points: PointSet
    layout: Layout
    options: KindOptions
    effect_fields: list[str] | None = None
    baselines: dict[str, str] = field(default_factory=dict)
    ignore: list[str] = field(default_factory=list)
    built: dict[str, Any] = field(default_factory=dict)


def _tables_of(result: Any) -> list[Table]:
    """The default: a result that is a table, ``None`` or a list of tables."""
    if result is None:
        return []
    return [result] if isinstance(result, Table) else list(result)


@dataclass(frozen=True)
class Observes:
    """A kind of observation a table kind makes (``--observations NAME``) from its result."""

    name: str
    order: int
    """Its place among the report's observations (smaller first)."""
    make: Callable[[Any, Inputs, bool], list[Observation]]
    """Its observations, from the kind's result, :class:`Inputs` and whether warned cells count."""
    lead_with_warnings: bool = True
    """Each that rests on warned runs begins with their warnings (else: as made)."""


@dataclass(frozen=True)
class TableKind:
    """One kind of table: how it is built, what its tables are, and its section of the report."""

    id: str
    order: int
    """Its place among the report's sections (smaller first)."""
    build: Callable[[Inputs], Any]
    """Its result, from :class:`Inputs` (what :attr:`section`, :attr:`tables` and :attr:`plot` take)."""
    section: Callable[[Report, Any, Inputs], object]
    """Adds its heading, tables, notes and figures to the report (appended, in :attr:`order`)."""
    tables: Callable[[Any], list[Table]] = _tables_of
    """Its tables, in the report's list of tables (their ids made unique, their files written)."""
    plot: Callable[[Any], list[Figure]] | None = None
    """Its figures, known as soon as it is built (drawn ahead; the figure kind is the kind's id)."""
    plot_order: int | None = None
    """The place of its figures (of the kind's id) in a plot budget (``--max-plots``; smaller first)."""
    draw: str | None = None
    """What draws its figures: ``"module:function"``, the function taking a
    :class:`~cnnbench.report.document.Figure` and returning a matplotlib figure."""
    observes: tuple[Observes, ...] = ()
    """The observations it makes."""


KINDS: dict[str, TableKind] = {}
"""Every registered kind, by id."""


def register(kind: TableKind) -> TableKind:
    """Declare ``kind`` (a second kind of the same id replaces the first)."""
    KINDS[kind.id] = kind
    return kind


def registered() -> list[TableKind]:
    """Every kind, in the report's order (the modules of :mod:`cnnbench.report.tables` imported
    first: each registers its own)."""
    from cnnbench.report import tables

    for module in pkgutil.iter_modules(tables.__path__):
        importlib.import_module(f"{tables.__name__}.{module.name}")
    return sorted(KINDS.values(), key=lambda k: k.order)


def plot_orders() -> dict[str, int]:
    """Each kind of figure's place in a plot budget (any other: after them)."""
    return {k.id: k.plot_order for k in registered() if k.plot_order is not None}


def drawer(figure_kind: str) -> Callable[[Figure], Any]:
    """The function that draws figures of ``figure_kind`` (its module imported now; a
    :class:`KeyError` when no registered kind draws them)."""
    registered()
    kind = KINDS.get(figure_kind)
    if kind is None or kind.draw is None:
        raise KeyError(f"no kind draws figures of kind {figure_kind!r}")
    module, _, name = kind.draw.partition(":")
    return getattr(importlib.import_module(module), name)


def drawing_modules() -> list[str]:
    """The modules that draw the registered kinds' figures, in the plot budget's order."""
    kinds = sorted((k for k in registered() if k.draw), key=lambda k: (k.plot_order is None, k.plot_order or 0))
    return list(dict.fromkeys(str(k.draw).partition(":")[0] for k in kinds))


def observers() -> list[tuple[TableKind, Observes]]:
    """Every kind of observation with its table kind, in the report's order of observations."""
    return sorted(((k, o) for k in registered() for o in k.observes), key=lambda ko: ko[1].order)


def observation_kinds() -> tuple[str, ...]:
    """The kinds of observation (``--observations``), in the report's order."""
    return tuple(dict.fromkeys(o.name for _, o in observers()))


def table_section(heading: str, caption: bool = False) -> Callable[[Report, Any, Inputs], None]:
    """A section of the kind's tables under ``heading`` (none when it has no table)."""

    def section(report: Report, result: Any, inputs: Inputs) -> None:
        found = _tables_of(result)
        if found:
            report.blocks += [Heading(heading), *(TableBlock(t, caption=caption) for t in found)]

    return section
