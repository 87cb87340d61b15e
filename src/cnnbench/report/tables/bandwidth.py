"""Bandwidth tables and plots: records of ``cnnbench comm`` (``kind: comm``), no model.

One table per collective and setting (devices, nodes, back end, device, dtype): rows the
message sizes (nccl-tests' size: the whole buffer), columns the machines, cells the bus
bandwidth in GB/s (nccl-tests' busbw): the median over the records of that size (repeated
``cnnbench comm`` runs), ``±`` their relative stdev, or, for one record, that of its timed
iterations; failed sizes say so. A plot per table: busbw against size (log scale), a line per
machine. No torch here.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.repeat_stats import relative_stdev, spread_percent
from cnnbench.report.document import Block, Figure, Heading, Paragraph, Report, TableBlock
from cnnbench.report.kinds import TableKind, register
from cnnbench.report.numbers import significant
from cnnbench.report.table import Cell, Table, failed, label_cell, missing
from cnnbench.results.record import record_kind
from cnnbench.words import plural, size_text

KIND = "comm"
HEADING = "Collective bandwidth (cnnbench comm)"
THROUGHPUT = "Throughput by configuration"
_SETTING = ("num_devices", "num_nodes", "backend", "device", "dtype")
_ORDER = ("all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all")
"""The collectives in ``cnnbench comm``'s order (:data:`cnnbench.engine.comm.spec.COLLECTIVES`)."""
NOTE = ("bus bandwidth (busbw, GB/s = 10^9 bytes/s) as nccl-tests defines it: size / time x 2(n-1)/n for "
        "all_reduce, x (n-1)/n for all_gather, reduce_scatter and all_to_all, x 1 for broadcast and reduce; "
        "size: the whole buffer; median over records, ± their relative stdev (one record: that of its iterations)")


def is_comm_record(record: Mapping[str, Any]) -> bool:
    return record_kind(record) == KIND


@dataclass
class Bandwidth:
    """The table of one collective in one setting, and its plot's lines (machine -> (bytes, busbw))."""

    table: Table
    lines: dict[str, list[tuple[int, float]]]


def _setting(config: Mapping[str, Any]) -> tuple[Any, ...]:
    return (str(config.get("collective")), *(F.hashable(config.get(k)) for k in _SETTING))


def _title(key: tuple[Any, ...]) -> str:
    collective, devices, nodes, backend, device, dtype = key
    where = plural(devices, "rank") if isinstance(devices, int) else f"{F.text(devices)} ranks"
    if isinstance(nodes, int) and nodes > 1:
        where += f" on {plural(nodes, 'node')}"
    return f"{F.field(F.BUSBW).label}: {collective}, {where}, {F.text(backend)} on {F.text(device)}, {F.text(dtype)}"


def _cell(records: list[Mapping[str, Any]], noise: float) -> tuple[Cell, float | None]:
    ok = [float(r["metrics"]["busbw_gbps"]) for r in records if r.get("status") == "ok"
          and isinstance((r.get("metrics") or {}).get("busbw_gbps"), (int, float))]
    if not ok:
        return (failed(str(records[0].get("status") or "error")) if records else missing()), None
    med = statistics.median(ok)
    spread = relative_stdev(ok) if len(ok) > 1 else (records[0].get("metrics") or {}).get("spread")
    text = significant(med, 3)
    if isinstance(spread, (int, float)) and spread > noise:
        text += f" ±{spread_percent(spread)}"
    if len(ok) < len(records):
        text += f" ({len(records) - len(ok)}/{len(records)} failed)"
    return Cell(text, round(med, 4), len(records) - len(ok), "", "", spread), med


def bandwidth_tables(records: Sequence[Mapping[str, Any]], noise: float) -> list[Bandwidth]:
    """The tables (and plot lines) of the comm records among ``records``."""
    groups: dict[tuple[Any, ...], dict[tuple[int, str], list[Mapping[str, Any]]]] = defaultdict(
        lambda: defaultdict(list))
    for r in records:
        config = r.get("config")
        if is_comm_record(r) and isinstance(config, Mapping) and isinstance(config.get("bytes"), int):
            groups[_setting(config)][(config["bytes"], F.text(F.get_value(r, F.MACHINE)))].append(r)
    out = []
    for key in sorted(groups, key=_order):
        cells = groups[key]
        machines = sorted({m for _, m in cells}, key=F.sort_key)
        sizes = sorted({s for s, _ in cells})
        # the collective is a record's text: a name (slugged, as every table's), never a path
        table = Table(f"bandwidth-{F.slug(key[0])}-{F.slug(F.text(key[1]))}", _title(key), "bandwidth",
                      ["size", *machines])
        lines: dict[str, list[tuple[int, float]]] = {m: [] for m in machines}
        for s in sizes:
            row = [label_cell(size_text(s))]
            for m in machines:
                cell, med = _cell(cells.get((s, m), []), noise)
                row.append(cell)
                if med is not None:
                    lines[m].append((s, med))
            table.rows.append(row)
        out.append(Bandwidth(table, lines))
    return out


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    rank = _ORDER.index(key[0]) if key[0] in _ORDER else len(_ORDER)
    return (rank, *(F.sort_key(v) for v in key))


def bandwidth_figure(b: Bandwidth) -> Figure:
    return Figure("bandwidth", b.table.id, b.table.title.replace(f"{F.field(F.BUSBW).label}: ", "Bus bandwidth: ", 1),
                  {"lines": b.lines})


def add_bandwidth_blocks(report: Report, found: Sequence[Bandwidth]) -> list[Table]:
    """The bandwidth tables and plots under their heading, before the model cost and the
    unreadable results if any; returns the tables (added to ``report.tables``)."""
    if not found:
        return []
    blocks: list[Block] = [Heading(HEADING), Paragraph(NOTE[0].upper() + NOTE[1:] + ".")]
    taken = {t.id for t in report.tables}
    for b in found:
        while b.table.id in taken:
            b.table.id += "-2"
        taken.add(b.table.id)
        fig = bandwidth_figure(b)
        blocks += [Heading(b.table.title.split(": ", 1)[-1], 3), TableBlock(b.table), fig]
        report.tables.append(b.table)
        report.figures.append(fig)
    later = ("Model cost", "Results that could not be read")
    at = next((i for i, blk in enumerate(report.blocks) if isinstance(blk, Heading) and blk.level == 2
               and blk.text in later), len(report.blocks))
    report.blocks[at:at] = blocks
    _drop_empty_throughput(report)
    return [b.table for b in found]


def _drop_empty_throughput(report: Report) -> None:
    """A store of bandwidth records alone has no throughput table: its heading goes."""
    b = report.blocks
    for i, blk in enumerate(b):
        if isinstance(blk, Heading) and blk.level == 2 and blk.text.startswith(THROUGHPUT):
            if i + 1 >= len(b) or (isinstance(b[i + 1], Heading) and b[i + 1].level <= 2):  # type: ignore[union-attr]
                del b[i]
            return


register(TableKind("bandwidth", 110,  # cnnbench comm: busbw against size
                   lambda inputs: bandwidth_tables(inputs.records, inputs.options.repeat_noise),
                   lambda report, found, inputs: add_bandwidth_blocks(report, found), tables=lambda found: [],
                   plot_order=3, draw="cnnbench.report.render.plot_bandwidth:_bandwidth"))
# last in order, it places itself before the model cost and the unreadable results, and adds its
# tables to the report's (their ids made unique among those: add_bandwidth_blocks)
