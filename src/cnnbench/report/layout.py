"""What a report's throughput tables put in rows and in columns (``--rows``, ``--columns``).

Any record field can be a row or a column dimension; several fields make combined labels
(rows of machine × device count, as vendor tables print GPU × count). A row has one label
column per row field; a column header reads the field's value alone for one column field,
``loader · tf_cnn_benchmarks`` or ``m-a · num_devices=2`` for several (numbers, switches and
unset values say their field).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.analysis import fields as F

GPU = F.GPU
NOT_RECORDED = "no GPU recorded"


def _on_cpu(get: Callable[[str], Any]) -> bool:
    return get(F.DEVICE) == "cpu"


def shown_value(field: str, get: Callable[[str], Any]) -> Any:
    """A field's value as a row or column shows it (``get``: a field's value in a point or a
    record): the value itself, but for the ``gpu`` of a run that used none the device it ran on.
    A run on the CPU records no GPU: it reads ``CPU: <its CPU model>`` (runs on two CPUs stay
    apart, as runs on two GPUs do); a run on a GPU whose record names none (an imported log)
    reads ``<machine>: no GPU recorded``. So no row or column of ``--columns gpu`` is a bare ``—``."""
    value = get(field)
    if field != GPU or value is not None:
        return value
    machine = F.text(get(F.MACHINE))
    if _on_cpu(get):
        cpu = get(F.CPU)
        return f"CPU: {cpu}" if cpu else f"CPU of {machine}"
    return f"{machine}: {NOT_RECORDED}"


def gpu_notes(layout: Layout, values: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines under a table that say what a ``gpu`` row or column of a run without a GPU
    reads (:func:`shown_value`; ``values``: the table's points' values); none when the table
    shows no ``gpu`` or every run named its GPU."""
    if GPU not in layout.shown:
        return []
    without = [v for v in values if v.get(GPU) is None]
    on_cpu = sum(1 for v in without if _on_cpu(v.get))
    notes = []
    if on_cpu:
        who = "no run here used a GPU: each" if on_cpu == len(values) else "a run on the CPU used no GPU: it"
        notes.append(f"gpu: {who} is named by the CPU it ran on (CPU: …).")
    if on_cpu < len(without):
        notes.append(f"gpu: … {NOT_RECORDED}: a run whose record names no GPU, named by its machine.")
    return notes


def header(field: str, value: Any) -> str:
    """A column header of one field: its value (:func:`shown_value`), or the field named for an unset
    value (``all_reduce=none``), never a bare ``—``."""
    return F.text(value) if value is not None else f"{F.short_name(field)}=none"


def _part(field: str, value: Any) -> str:
    """A value in a combined label: text as it is (``loader``, ``m-a``), numbers, switches and
    unset values named (``num_devices=2``, ``compile=True``, ``synthetic_location=none``)."""
    return value if isinstance(value, str) else F.label(field, value)


def split_fields(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"machine,num_devices"`` or ``("machine", "num_devices")`` -> ``("machine", "num_devices")``
    (names stripped; a comma inside an item splits it too)."""
    items = [value] if isinstance(value, str) else list(value)
    return tuple(part.strip() for item in items for part in str(item).split(","))


@dataclass(frozen=True)
class Layout:
    """Resolved (dotted) row and column fields of the throughput tables."""

    rows: tuple[str, ...] = (F.MODEL,)
    columns: tuple[str, ...] = (F.MACHINE,)

    @property
    def shown(self) -> frozenset[str]:
        """The fields a table shows in its rows and columns (they leave the configuration)."""
        return frozenset(self.rows + self.columns)

    @property
    def is_default(self) -> bool:
        return self.rows == (F.MODEL,)

    @property
    def row_headers(self) -> list[str]:
        """The row label columns' headers (``model``; ``machine``, ``num_devices``)."""
        return [F.short_name(f) for f in self.rows]

    @property
    def row_name(self) -> str:
        """What one row is, in a sentence: ``model``, ``machine × num_devices``."""
        return " × ".join(self.row_headers)

    @property
    def column_name(self) -> str:
        """What the columns are, in a sentence: ``machine``, ``synthetic_location × source``."""
        return " × ".join(F.short_name(f) for f in self.columns)

    def row_key(self, values: Mapping[str, Any]) -> tuple:
        return tuple(shown_value(f, values.get) for f in self.rows)

    def column_key(self, values: Mapping[str, Any]) -> tuple:
        return tuple(shown_value(f, values.get) for f in self.columns)

    def row_label(self, key: Sequence[Any]) -> str:
        """A row in a sentence: ``resnet50``; ``num_devices=2``; ``m-a · num_devices=2``."""
        if self.is_default:
            return F.text(key[0])
        return " · ".join(_part(f, v) for f, v in zip(self.rows, key, strict=True))

    def column_label(self, key: Sequence[Any]) -> str:
        """A column header: the value for one column field (an unset one named: ``all_reduce=none``,
        never a bare ``—``), the joined labels for several."""
        if len(self.columns) == 1:
            return header(self.columns[0], key[0])
        return " · ".join(_part(f, v) for f, v in zip(self.columns, key, strict=True))

    def order(self, keys: Sequence[tuple], ranks: Sequence[Sequence[Any]]) -> list[tuple]:
        """``keys`` sorted field by field, each field's values in the order of ``ranks`` (one list per field)."""
        index = [{v: i for i, v in enumerate(r)} for r in ranks]
        return sorted(keys, key=lambda k: tuple(ix.get(v, len(ix)) for ix, v in zip(index, k, strict=True)))
