"""The report's first paragraphs: what was run (results, models, configurations, devices,
machines), what all results share, and what the tables are by."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import common_fields
from cnnbench.analysis.points import PointSet
from cnnbench.report.layout import Layout
from cnnbench.words import plural


def _listed(values: list[Any], most: int = 6) -> str:
    shown = ", ".join(F.text(v) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def facts(records: Sequence[Any], selected: Sequence[Mapping[str, Any]], where: Sequence[str], layout: Layout,
          points: PointSet) -> list[str]:
    """What was run: results, machines, models, configurations, device counts (``selected`` of
    ``records`` with ``--where`` ``where``), and what the tables are by."""
    lines = [_what_was_run(selected, points)]
    if where:
        lines.append(f"Selected with --where {' '.join(where)}: {len(selected):,} of {len(records):,} results.")
    constant = common_fields(points)
    if constant:
        lines.append("Common to all results: " + ", ".join(_common_label(f, points.distinct(f)[0]) for f in constant)
                     + ".")
    by = (layout.column_name if layout.is_default
          else f"{layout.row_name} (rows) and {layout.column_name} (columns)")
    lines.append(f"Tables by {by}; images/sec are medians of repeats over all devices.")
    return lines


def _what_was_run(selected: Sequence[Mapping[str, Any]], points: PointSet) -> str:
    statuses = Counter(str(r.get("status") or "ok") for r in selected)
    failed = ", ".join(f"{n} {s}" for s, n in statuses.most_common() if s != "ok")
    machines = sorted(points.distinct(F.MACHINE), key=F.sort_key)
    what = f"{plural(len(selected), 'result')} ({statuses.get('ok', 0):,} ok{', ' + failed if failed else ''})"
    if not points.points:  # cnnbench data or comm records alone: their machines
        machines = sorted({F.hashable(F.get_value(r, F.MACHINE)) for r in selected}, key=F.sort_key)
        return what + f", on {plural(len(machines), 'machine')}: {_listed(machines)}."
    models = sorted((m for m in points.distinct(F.MODEL) if m is not None), key=F.sort_key)
    config_fields = [f for f in points.key_fields if f not in (F.MODEL, F.BATCH, F.MACHINE, F.DEVICES)]
    n_configs = len(points.group_by(config_fields))
    devices = sorted({int(d) for d in points.distinct(F.DEVICES) if isinstance(d, (int, float))})
    return what + (f" of {plural(len(models), 'model')} in {plural(n_configs, 'configuration')}"
                   + (f" at {_device_range(devices)}" if devices else "")
                   + f", on {plural(len(machines), 'machine')}: {_listed(machines)}.")


def _device_range(devices: list[int]) -> str:
    if len(devices) == 1:
        return plural(devices[0], "device")
    return f"{', '.join(map(str, devices[:-1]))} and {devices[-1]} devices"


def _common_label(field: str, value: Any) -> str:
    if field in (F.MACHINE, F.SOURCE):
        return f"{F.short_name(field)} {value}"
    return F.label(field, value)
