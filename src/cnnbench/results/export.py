"""Flattening runs into one table and writing it as CSV, JSON or Parquet (``cnnbench results
export``), and choosing the runs ``results list`` shows. Columns are dotted record field names
(``config.model``, ``metrics.total_images_per_sec``); lists and objects become JSON text in CSV
and Parquet. No torch here.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from cnnbench.results import files
from cnnbench.results.csv_out import CsvWriter, csv_text
from cnnbench.results.fields import BATCH, MODEL
from cnnbench.results.flatten import flatten_records, ordered_columns
from cnnbench.results.gc_pause import collector_paused
from cnnbench.words import natural_key

if TYPE_CHECKING:
    from cnnbench.results.engine import Exported

ExportFormat = Literal["csv", "json", "parquet"]

LINE_END = "\n"
"""What ends each line of a CSV export (as DuckDB writes it, and the report's tables)."""


class ExportError(RuntimeError):
    """The table cannot be written in this format here (Parquet without pyarrow)."""


@dataclass(frozen=True)
class FlatTable:
    """Runs as rows of dotted columns, the columns in their usual order."""

    rows: list[dict[str, Any]]
    columns: list[str]


def flat_table(records: Sequence[Mapping[str, Any]]) -> FlatTable:
    with collector_paused():  # a dict per record, kept to the end: nothing for the collector to find
        rows = flatten_records(records)
    return FlatTable(rows, ordered_columns(rows))


def write_table(table: FlatTable, fmt: ExportFormat, output: str | None) -> None:
    """Write ``table`` to the file ``output``, or to standard output. The file is written whole
    to a new file in its folder, then renamed over ``output`` (:func:`files.replacing`): a
    symlink there is replaced, never written through, and an export that fails part-way
    leaves the file written before as it was. Raises :class:`ExportError`, or ``OSError``
    when the file cannot be written."""
    if fmt == "parquet":
        if output is None:
            raise ExportError("--format parquet needs -o FILE")
        _write_parquet(table, output)
        return
    write = _write_csv if fmt == "csv" else _write_json
    if not output:
        write(table, sys.stdout)
        return
    with _open_output(output, newline="" if fmt == "csv" else None) as out:
        write(table, out)


def write_exported(rows: Exported, fmt: ExportFormat, output: str | None) -> None:
    """Write the runs the engine kept (:func:`cnnbench.results.engine.export_scan`) as
    :func:`write_table` writes a table: to the file ``output`` (a new file renamed over it), or
    to standard output (but Parquet)."""
    if fmt == "parquet":
        if output is None:
            raise ExportError("--format parquet needs -o FILE")
        with files.replacing(Path(output)) as f:
            rows.parquet_to(f.fileno())
        return
    head, body, tail = ((csv_text(rows.columns, []), rows.csv_body, "") if fmt == "csv"
                        else ("[\n", rows.json_body, "\n]\n" if rows.rows else "]\n"))
    fd = body()
    try:
        if not output:
            sys.stdout.write(head)
            sys.stdout.flush()
            _copy(fd, sys.stdout.buffer)
            sys.stdout.buffer.flush()
            sys.stdout.write(tail)
            sys.stdout.flush()
            return
        with _open_output(output, newline="") as out:
            out.write(head)
            out.flush()
            _copy(fd, out.buffer)
            out.write(tail)
    finally:
        os.close(fd)


def _copy(fd: int, out: Any) -> None:
    while chunk := os.read(fd, 1 << 20):
        out.write(chunk)


def list_order(record: Mapping[str, Any]) -> tuple[Any, ...]:
    """Oldest first; runs of the same minute (a sweep, an import) by model in natural order, then
    batch, then the time they started, then ``run_id`` (so runs alike in all of these have an order
    that does not depend on where they stand in their file)."""
    started = str(record.get("started_at") or "")
    config = record.get("config") or {}
    return (started[:16], natural_key(config.get("model")), natural_key(config.get("batch_size")), started,
            str(record.get("run_id") or ""))


def flat_list_order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """:func:`list_order` of a flat run (``{"config.model": ...}``, :mod:`cnnbench.results.engine`)."""
    started = str(row.get("started_at") or "")
    return (started[:16], natural_key(row.get(MODEL)), natural_key(row.get(BATCH)), started,
            str(row.get("run_id") or ""))


def newest(records: Sequence[Mapping[str, Any]], limit: int) -> tuple[list[Mapping[str, Any]], int]:
    """The newest ``limit`` runs (all with 0), oldest first, and how many there are in all.

    With a limit, only the runs of the newest minutes that hold ``limit`` runs are keyed in full
    and sorted (the minute comes first in :func:`list_order`, and a stable sort of those keeps
    their order among equals): the same runs as sorting them all, without a natural-order key
    per run (0.17 s in ``results list`` of 100,000 runs). The collector is paused: a key per
    record after a read of 100,000 made it trace every record again (0.32 against 0.14 s)."""
    with collector_paused():
        if 0 < limit < len(records):
            minutes = [str(r.get("started_at") or "")[:16] for r in records]
            last = heapq.nlargest(limit, minutes)[-1]  # the oldest minute the newest runs can be of
            records = [r for r, minute in zip(records, minutes, strict=True) if minute >= last]
            total = len(minutes)
        else:
            total = len(records)
        ordered = sorted(records, key=list_order)
    return (ordered[-limit:] if limit > 0 else ordered), total


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return value


@contextlib.contextmanager
def _open_output(output: str, newline: str | None = None) -> Iterator[TextIO]:
    """A new file beside ``-o``, open for writing as text, renamed over ``-o`` when the block
    ends without an error (removed otherwise; see :func:`files.replacing`)."""
    with files.replacing(Path(output)) as raw:
        out = io.TextIOWrapper(raw, encoding="utf-8", newline=newline)
        yield out
        out.flush()
        out.detach()  # the file itself is closed (and renamed) by files.replacing


_AS_IS = frozenset({str, int, float, type(None)})
"""Cell types the CSV writer writes as they are (None as an empty cell, a float as its repr)."""


def _write_csv(table: FlatTable, out: TextIO) -> None:
    """Rows in C where it can: each row's values fetched at once, and only the cells that need
    it (true/false, lists and objects as JSON) converted, found by the row's types, which the
    rows of one store share. Text a spreadsheet would run is made safe (:mod:`cnnbench.results.csv_out`)."""
    writer = CsvWriter(out, lineterminator=LINE_END)
    writer.writerow(table.columns)
    converted: dict[tuple[type, ...], tuple[list[int], tuple[type, ...]]] = {}
    for row in table.rows:
        cells = list(map(row.get, table.columns))
        kinds = tuple(map(type, cells))
        known = converted.get(kinds)
        if known is None:
            if len(converted) > 4096:
                converted.clear()
            where = [i for i, kind in enumerate(kinds) if kind not in _AS_IS]
            written = tuple(type(_cell(cells[i])) if i in where else kind for i, kind in enumerate(kinds))
            known = converted[kinds] = (where, written)  # the cells' classes once converted
        where, written = known
        for i in where:
            cells[i] = _cell(cells[i])
        writer.writerow(cells, written)


def _write_json(table: FlatTable, out: TextIO) -> None:
    out.write("[\n")
    for i, row in enumerate(table.rows):
        ordered = {c: row[c] for c in table.columns if c in row}
        out.write(json.dumps(ordered, separators=(",", ":"), default=str))
        out.write(",\n" if i < len(table.rows) - 1 else "\n")
    out.write("]\n")


def _parquet_can_hold(kind: Any) -> bool:
    """Whether Parquet can hold a column of pyarrow type ``kind``: no object of no field in it."""
    import pyarrow as pa

    if pa.types.is_struct(kind):
        return kind.num_fields > 0 and all(_parquet_can_hold(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _parquet_can_hold(kind.value_type)
    return True


def _write_parquet(table: FlatTable, output: str) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError("parquet export needs pyarrow (pip install 'cnnbench[parquet]')") from None
    arrays = []
    for col in table.columns:
        values = [row.get(col) for row in table.rows]
        try:
            array = pa.array(values)
            if not _parquet_can_hold(array.type):
                raise pa.ArrowNotImplementedError("an object of no field")
            arrays.append(array)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            # mixed types, a whole number beyond 64 bits, lists of empty objects: keep them as JSON text
            arrays.append(pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v, default=str))
                                    for v in values], type=pa.string()))
    with files.replacing(Path(output)) as f:  # a new file renamed over -o: never through a link, never torn
        pq.write_table(pa.Table.from_arrays(arrays, names=table.columns), f)
