"""Import a flat table (CSV) whose column names are dotted record field names.

``config.model,config.batch_size,environment.machine,metrics.total_images_per_sec`` and
so on, one run per row: the inverse of ``cnnbench results export --format csv``. Cells
are typed by the field they fill: configuration fields by their declared type, the
environment's fields and the record's ids, names and times stay text (``11.1`` is a
version, not a number); other cells are read as numbers, true/false, or JSON when they
hold a list or object (step times), else text. A cell that an export wrote with a quote
before it (``'=...``: :mod:`cnnbench.results.csv_out`) is read without it. Empty
cells are left out, but for an empty ``started_at``, which is refused (without the column,
a row takes the file's modification time). A row without a ``status`` is ``ok`` when it has a
``metrics.total_images_per_sec`` above zero and ``error`` otherwise, never a 0 figure.

Values are checked as ``cnnbench run`` checks its options (the configuration's own
per-field rules: types, choices, ranges; records imported earlier from another tool keep
that tool's words), figures must be finite, not negative and ones readers show, a failed
row carries no throughput, and each record, ``--set`` applied, must meet the record
contract, with a model, a schema version this cnnbench reads, an ISO 8601 ``started_at``
and a machine label a results file can be named after
(:func:`~cnnbench.results.importers.check_imported`); a row that does not is reported as
``file:line: why`` and skipped. A table none of whose columns is a record field name (a
vendor's own results table), or with a column named twice, is refused whole, as is a file
that cannot be read as UTF-8 CSV, or read through by a strict CSV reader (a quote never
closed: a lenient one would take the rest of the file into one cell), naming the line.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import difflib
import hashlib
import io
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cnnbench.config.errors import ConfigError
from cnnbench.config.options import field_types
from cnnbench.config.run_config import RunConfig, check_config_values
from cnnbench.results import fields as F
from cnnbench.results.csv_out import plain_text
from cnnbench.results.files import FileProblem
from cnnbench.results.flatten import unflatten_record
from cnnbench.results.importers import (
    NATIVE_SOURCES,
    ImportOptions,
    ImportResult,
    check_imported,
    finalize_record,
    read_input,
    register_importer,
)
from cnnbench.results.record import (
    ENVIRONMENT_FIELDS,
    METRIC_FIELDS,
    SCHEMA_VERSION,
    STARTED_AT_FILLED_IN,
    STATUSES,
    RecordError,
    check_figures,
    check_record,
)
from cnnbench.version import __version__

SOURCE = "csv"

_CONFIG_TYPES = {name: base for name, (base, _) in field_types(RunConfig).items()}
_INT_FIELDS = {
    "schema_version",
    F.CPU_CORES,
    F.CPU_THREADS,
    F.GPU_COUNT,
    F.MEMORY_BYTES,
    F.TORCH_NUM_THREADS,
    F.CUDNN_VERSION,
    "source_iteration",
    "source_line",
    "repeat",
    "source_global_batch_size",
}
_SECTIONS = ("config", "environment", "metrics")
_TEXT_SECTIONS = ("environment", "source_header")
_TEXT_FIELDS = {
    "run_id", "started_at", "status", "error", "tool_version", "case_name", "suite_name", "case_key",
    "source", "source_path", "source_config", "session_id", "started_at_source",
}
_INT = re.compile(r"^[+-]?\d+$")
_RECORD_FIELDS = {"schema_version", "tool_version", "run_id", "started_at", "status", "error"}


def _cell(column: str, text: str) -> Any:
    """The typed value of one non-empty cell."""
    if column in _INT_FIELDS:
        return int(text)
    section, _, name = column.partition(".")
    if section == "config" and name in _CONFIG_TYPES:
        kind = _CONFIG_TYPES[name]
        if kind is bool:
            return _bool(text)
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        return text
    if section in _TEXT_SECTIONS or column in _TEXT_FIELDS:
        return text  # names, versions, ids, times: text
    return _guess(text)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _guess(text: str) -> Any:
    t = text.strip()
    if t[:1] in "[{":
        try:
            return json.loads(t)
        except ValueError:
            return text
    lowered = t.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INT.match(t):
        return int(t)
    try:
        return float(t)
    except ValueError:
        return text


def _columns_problem(columns: Sequence[str]) -> str | None:
    """Why a table's columns are not record field names, or None when they are."""
    bare = {f.name: "config" for f in dataclasses.fields(RunConfig)}
    bare.update({m: "metrics" for m in METRIC_FIELDS})
    bare.update({e: "environment" for e in ENVIRONMENT_FIELDS})
    for column in columns:
        if "." not in column and column in bare:
            return f"column {column!r} is not a record field name (did you mean {bare[column]}.{column}?)"
        section, _, name = column.partition(".")
        if section == "config" and name not in _CONFIG_TYPES:
            close = difflib.get_close_matches(name, sorted(_CONFIG_TYPES), n=1)
            hint = f" (did you mean config.{close[0]}?)" if close else ""
            return f"column {column!r} is not a `cnnbench run` option{hint}"
    known = [c for c in columns if c in _RECORD_FIELDS or c in _TEXT_FIELDS or c in _INT_FIELDS
             or c.partition(".")[0] in _SECTIONS]
    if not known:
        shown = ", ".join(list(columns)[:5]) + (", ..." if len(columns) > 5 else "")
        return (f"no column is a record field name (it has {shown or 'no columns'}); the columns of a table to "
                "import are dotted record names such as config.model and metrics.total_images_per_sec, as "
                "`cnnbench results export --format csv` writes them")
    return None


def record_from_row(row: dict[str, str], path: Path, line: int) -> dict[str, Any]:
    """One record from one table row (raises ``ValueError`` naming the column at fault)."""
    flat: dict[str, Any] = {}
    for column, text in row.items():
        if column == "started_at" and (text is None or text.strip() == ""):
            raise ValueError("column 'started_at' is empty: say when the run started (ISO 8601, such as "
                             "2024-01-31T12:00:00+00:00), or leave the column out to take the file's time")
        if column is None or text is None or text.strip() == "":
            continue
        try:
            flat[column] = _cell(column, plain_text(text))  # without the quote an export puts before "=..."
        except ValueError as exc:
            raise ValueError(f"column {column!r}: {exc}") from None
    record = unflatten_record(flat)
    for section in _SECTIONS:
        record.setdefault(section, {})
    if isinstance(record["config"], dict) and isinstance(record["metrics"], dict):
        _check_values(record)
    total = record["metrics"].get("total_images_per_sec")
    if "status" not in record:
        if isinstance(total, (int, float)) and total > 0:
            record["status"] = "ok"
        else:
            record["status"] = "error"
            record.setdefault("error", "the row has no metrics.total_images_per_sec above 0")
            record["metrics"].pop("total_images_per_sec", None)
    elif record["status"] not in STATUSES:
        raise ValueError(f"column 'status': {record['status']!r} is not one of {', '.join(STATUSES)}")
    record.setdefault("error", None)
    record.setdefault("schema_version", SCHEMA_VERSION)
    record.setdefault("tool_version", __version__)
    canonical = json.dumps(flat, sort_keys=True, default=str)
    record.setdefault("run_id", hashlib.sha1(canonical.encode()).hexdigest()[:16])
    if "started_at" not in record:
        mtime = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
        record["started_at"] = mtime.isoformat(timespec="seconds")
        record["started_at_source"] = STARTED_AT_FILLED_IN  # no real start time: history leaves it out
    record.setdefault("source", SOURCE)
    record.setdefault("source_path", str(path.resolve()))
    record.setdefault("source_line", line)
    check_record(record)
    return record


def _check_values(record: dict[str, Any]) -> None:
    """Options as ``cnnbench run`` checks them, figures as measured figures (``ValueError``)."""
    try:
        check_config_values(record["config"], choices=record.get("source") in NATIVE_SOURCES)
    except ConfigError as exc:
        raise ValueError(f"column 'config.{exc.field}': {exc.reason}") from None
    check_figures(record["metrics"])


@register_importer("csv", "a flat CSV table whose columns are dotted record field names")
def import_csv(paths: Sequence[Path], options: ImportOptions) -> ImportResult:
    """Records for every row of every CSV file in ``paths``."""
    result = ImportResult()
    for path in paths:
        if path.is_dir():
            result.refuse(f"{path}: is a directory; name the CSV files in it")
            continue
        if not path.exists():
            result.refuse(f"{path}: no such file")
            continue
        try:
            _import_file(path, options, result)
        except FileProblem as exc:  # a FIFO, a device, a table too big to read
            result.refuse(str(exc))
        except UnicodeDecodeError as exc:
            result.refuse(f"{path}: not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at "
                          f"offset {exc.start}); nothing imported from it")
        except csv.Error as exc:
            result.refuse(f"{path}: not a readable CSV table ({exc}); nothing imported from it")
        except OSError as exc:
            result.problems.append(f"{path}: cannot read ({exc.strerror or exc})")
    return result


class _Lines:
    """The lines of a text as the CSV reader takes them, counted: the line a row starts on
    (its first line that is not blank) and the last one read."""

    def __init__(self, text: str) -> None:
        self._lines = io.StringIO(text, newline="")
        self.read = 0
        self.start = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.read += 1
        if not self.start and line.strip("\r\n"):
            self.start = self.read
        return line


class _Unreadable(ValueError):
    """A table the CSV reader cannot read on: one line naming the line."""


def _rows(text: str, path: Path) -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """The columns of the table ``text`` and its rows, each with its last line (as
    ``csv.DictReader.line_num`` gives it). Read strictly: a quote opened and never closed, or
    text after a closing quote, raises :class:`_Unreadable` naming the line the row starts on
    (a lenient reader takes the rest of the file into one cell)."""
    lines = _Lines(text)
    reader = csv.DictReader(lines, strict=True)

    def unreadable(exc: csv.Error) -> _Unreadable:
        why = ("a quote opened in the row that starts here is never closed" if str(exc) == "unexpected end of data"
               else f"not a readable CSV table ({exc})")
        return _Unreadable(f"{path}:{lines.start or lines.read}: {why}; nothing imported from it")

    try:
        columns = [plain_text(c) for c in reader.fieldnames or []]  # as an export named them, like its cells
    except csv.Error as exc:
        raise unreadable(exc) from None
    reader.fieldnames = columns

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        while True:
            lines.start = 0
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise unreadable(exc) from None
            yield lines.read, row

    return list(columns), rows()


def _import_file(path: Path, options: ImportOptions, result: ImportResult) -> None:
    """The rows of one table; the file is read whole first, so an undecodable file adds nothing,
    and a table the CSV reader cannot read through adds nothing."""
    text = read_input(path).decode("utf-8").removeprefix("\ufeff")  # an error's offset counts the BOM's bytes
    try:
        _import_rows(path, text, options, result)
    except _Unreadable as exc:
        result.refuse(str(exc))


def _first_repeated(columns: list[str]) -> str | None:
    """The first column named a second time, in one pass (a search of those before each one took
    12 s for 40,000 columns)."""
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            return name
        seen.add(name)
    return None


def _import_rows(path: Path, text: str, options: ImportOptions, result: ImportResult) -> None:
    columns, rows = _rows(text, path)
    problem = _columns_problem(columns)
    twice = _first_repeated(columns)
    if twice is not None and not problem:
        problem = (f"column {twice!r} appears {columns.count(twice)} times (a row would keep one of its values); "
                   "nothing imported from it")
    if problem:
        result.refuse(f"{path}: {problem}")
        return
    records, problems = [], []
    for line, row in rows:  # every row read and checked before the table gives anything
        try:
            record = finalize_record(record_from_row(row, path, line), options)
            check_imported(record)  # the whole record, --set included, as `run` would have written it
            records.append(record)
        except (ValueError, RecordError) as exc:
            problems.append(f"{path}:{line}: {exc}")
    result.problems.extend(problems)
    result.records.extend(records)


__all__ = ["import_csv", "record_from_row"]
