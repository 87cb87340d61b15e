"""SQL over a results store: its runs as the views ``runs`` and ``steps`` of an embedded DuckDB,
read-only and sandboxed (``cnnbench results query``, :func:`cnnbench.query`).

- ``runs``: one row per run, the columns the dotted record names ``results export`` writes
  (``"config.model"``, ``"metrics.total_images_per_sec"``: quote them in SQL, they hold dots),
  but for the step times, which are ``steps``; each column of the type DuckDB finds for all of
  its values (``BIGINT``, ``DOUBLE``, ``VARCHAR``, ``BOOLEAN``, ``VARCHAR[]``, a ``STRUCT`` list),
  ``JSON`` for a column of several kinds (numbers and text).
- ``steps``: ``run_id``, ``step`` (1 for the first timed step) and ``seconds``: every timed step
  of every run.

The records are the store's checked records (:func:`~cnnbench.results.reader.read_records`): a
malformed or torn line is a problem named ``file:line: why`` and the other records are read, older
schema versions are upgraded, the record contract holds. Once the views are made the connection
is locked (DuckDB's own settings, not a list of forbidden words): no file can be read or
written (``enable_external_access``), no extension installed or loaded, no setting changed
(``lock_configuration``), nothing spilled to disk; and only a query runs (a ``SELECT``, by
DuckDB's own parse of the statement). A refused statement is one line, and leaves nothing.

DuckDB is imported here only when a query runs (``import cnnbench`` and ``--help`` load none).
"""

from __future__ import annotations

import contextlib
import math
import os
import string
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from cnnbench.results import fields as R
from cnnbench.results.fields import STEP_TIMES
from cnnbench.results.flatten import flatten_records, ordered_columns, plain_cells, records_frame
from cnnbench.results.reader import read_records

if TYPE_CHECKING:
    import pandas as pd

RUNS = "runs"
STEPS = "steps"

_SANDBOX = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET lock_configuration = true",
)
"""Set in this order once the views are made: the last one keeps every other as it is."""


class QueryError(ValueError):
    """A query that cannot run: refused by the sandbox, or wrong (DuckDB's reason, in one line)."""


@dataclass(frozen=True)
class QueryResult:
    """What a query returned: its column names and rows, and the store's lines that could not be read."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    types: list[str] = field(default_factory=list)
    """DuckDB's type of each column (``BIGINT``, ``VARCHAR``...)."""
    problems: list[str] = field(default_factory=list)


class Store:
    """A results store opened for SQL: the ``runs`` and ``steps`` views of its records, locked.

    >>> with Store(["results/"]) as store:
    ...     store.query('SELECT "config.model", max("metrics.total_images_per_sec") FROM runs GROUP BY 1')
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], *,
                 views: Iterable[str] | None = None) -> None:
        """Read the stores at ``paths`` and make the ``views`` (default both; a query that reads
        one is quicker with that one alone: :func:`views_of`)."""
        import duckdb

        views = frozenset((RUNS, STEPS) if views is None else views)
        made = _engine_views(paths, views)
        if made is not None:
            self._con, self.problems = made
        else:
            records, problems = read_records(paths, step_times="lazy" if STEPS in views else False, shared=True)
            self.problems = list(problems)
            from cnnbench.results.engine import connect

            self._con = connect()  # nothing spills to disk: a query's memory is this process's
        try:
            if made is None:
                _make_views(self._con, records, views)
            for statement in _SANDBOX:
                self._con.execute(statement)
        except duckdb.Error as exc:  # the store's records as the engine cannot take them: one line
            self._con.close()
            raise QueryError(f"cannot make the views of the store: {_one_line(exc)}") from None
        except BaseException:
            self._con.close()
            raise

    def _checked(self, sql: str) -> Any:
        return check_sql(sql, self._con)

    def query(self, sql: str) -> QueryResult:
        """The rows of a ``SELECT`` over ``runs`` and ``steps``; :class:`QueryError` in one line otherwise."""
        import duckdb

        statement = self._checked(sql)
        try:
            cursor, rows = _interruptible(self._con, lambda: _fetched(self._con.execute(statement)))
        except duckdb.Error as exc:
            raise QueryError(_one_line(exc)) from None
        except MemoryError:
            raise QueryError("the query's result does not fit in memory: add a LIMIT, or aggregate") from None
        description = cursor.description or []
        kinds = [d[1] for d in description]
        decoders = [(i, kind) for i, kind in enumerate(kinds) if _holds_json(kind)]
        if decoders:  # DuckDB gives a JSON value as its text, in a list or struct too: the value it holds
            rows = [_decoded(row, decoders) for row in rows]
        return QueryResult([d[0] for d in description], rows, [str(k) for k in kinds], self.problems)

    def frame(self, sql: str) -> pd.DataFrame:
        """The rows of a ``SELECT`` as a pandas DataFrame (DuckDB's types: nullable where a column has nulls)."""
        import duckdb

        statement = self._checked(sql)
        try:
            frame = _interruptible(self._con, lambda: _frame(self._con.execute(statement)))
        except duckdb.Error as exc:
            raise QueryError(_one_line(exc)) from None
        except MemoryError:
            raise QueryError("the query's result does not fit in memory: add a LIMIT, or aggregate") from None
        frame.attrs["problems"] = self.problems
        return frame

    def close(self) -> None:
        import duckdb

        with contextlib.suppress(duckdb.Error):  # a statement a ^C interrupted may hold it still as the process ends
            self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fetched(cursor: Any) -> tuple[Any, list[tuple[Any, ...]]]:
    return cursor, cursor.fetchall()


_T = TypeVar("_T")


def _interruptible(con: Any, run: Callable[[], _T]) -> _T:
    """``run()`` (a statement on ``con`` and its fetch) in a thread of its own, this one waiting on
    it: ^C stops the statement at once (:meth:`interrupt`) and raises ``KeyboardInterrupt`` here.
    DuckDB looks for Python's signals only now and then as it works: a cross join of ``steps`` ran
    on for 90 s after a ^C, and ended, when it did, in a traceback. A result it gave is returned, an
    error it raised raised here."""
    done: dict[str, Any] = {}
    ended = threading.Event()

    def work() -> None:
        try:
            done["value"] = run()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            done["error"] = exc
        finally:
            ended.set()

    threading.Thread(target=work, name="cnnbench-query", daemon=True).start()
    try:
        ended.wait()  # a ^C interrupts the wait (an event's: a join interrupted so may think the thread ended)
    except KeyboardInterrupt:
        deadline = 0.0
        while True:  # the statement ends at once, the connection free to close; a second ^C (people press it
            try:  # twice), wherever it lands, waits on with the first
                deadline = deadline or time.monotonic() + 60
                con.interrupt()
                if ended.wait(max(0.0, deadline - time.monotonic())) or time.monotonic() >= deadline:
                    break
            except KeyboardInterrupt:
                continue
        raise
    if "error" in done:
        raise done["error"]
    return done["value"]


def _frame(cursor: Any) -> pd.DataFrame:
    """The rows of an executed query as a DataFrame of DuckDB's types, each JSON text in them read
    into the value it holds (as the CLI gives them; a null is None)."""
    kinds = [d[1] for d in cursor.description or []]
    frame = cursor.df()
    for index, kind in enumerate(kinds):
        if _holds_json(kind):
            column = frame.iloc[:, index]
            held = column.notna()
            if held.any():
                column = column.astype(object)
                column[held] = column[held].map(lambda v, k=kind: _decode(v, k))
                frame.isetitem(index, column)
    return frame


def check_sql(sql: str, con: Any = None) -> Any:
    """The one statement of ``sql``, parsed by DuckDB (on ``con``, or on a connection of its own:
    before any store is read), if it is a query; else :class:`QueryError`."""
    import duckdb

    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:  # a byte of another encoding on the command line (a lone surrogate)
        raise QueryError(f"the query is not UTF-8 text ({exc.reason} at character {exc.start + 1})") from None
    try:
        statements = (con or duckdb.connect(":memory:")).extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from None
    if len(statements) != 1:
        raise QueryError(f"give one SQL statement, not {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryError(f"only a query (SELECT) can run on a results store, not a {kind.name} statement: "
                         "the store is read-only")
    return statements[0]


def views_of(sql: str) -> frozenset[str]:
    """The views (``runs``, ``steps``) a query reads, by DuckDB's parse of it (a table the
    query names itself, ``WITH steps AS (...)``, is not one); both where it names neither, or the
    parse cannot tell (it binds a join's ``USING`` columns, which only the views have)."""
    import duckdb

    try:
        names = duckdb.connect(":memory:").get_table_names(sql)
    except duckdb.Error:
        return frozenset((RUNS, STEPS))
    views = frozenset(name.lower() for name in names) & {RUNS, STEPS}
    return views or frozenset((RUNS, STEPS))  # none named: the catalog (SHOW TABLES) shows both


def run_query(sql: str, paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]) -> QueryResult:
    """The rows of ``sql`` (one ``SELECT``) over the ``runs`` and ``steps`` of the stores at ``paths``.
    Raises :class:`QueryError` (one line) and ``FileNotFoundError`` for a path that is not there;
    a statement that is no query is refused before the store is read."""
    check_sql(sql)
    with Store(paths, views=views_of(sql)) as store:
        return store.query(sql)


def cell_value(value: Any, *, text: bool = False) -> Any:
    """A query's cell as JSON gives it (numbers, text, true/false, null, lists and objects;
    a date, time or decimal as text); with ``text``, lists and objects as JSON text, for a CSV
    or table cell. A JSON column's cell (text from DuckDB) is read back into its value."""
    if type(value) is bool and text:  # as JSON and results export spell it
        return "true" if value else "false"
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple, dict)):
        plain = [cell_value(v) for v in value] if not isinstance(value, dict) else \
            {str(k): cell_value(v) for k, v in value.items()}
        return _json(plain) if text else plain
    return str(value)


def unique_names(names: Sequence[str]) -> list[str]:
    """Column names made distinct as DuckDB makes a subquery's and :func:`cnnbench.query`'s
    DataFrame's (``a``, ``a_1``, ``A_2``: names alike but for the case of ASCII letters are alike):
    the keys of a JSON row, where a name given twice kept one value only."""
    seen: set[str] = set()
    out = []
    for name in names:
        unique, k = name, 0
        while _fold(unique) in seen:
            k += 1
            unique = f"{name}_{k}"
        seen.add(_fold(unique))
        out.append(unique)
    return out


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _fold(name: str) -> str:
    """``name`` as DuckDB compares names: its ASCII letters' case aside, no other's (``é`` and ``É``
    are two names; Python's ``lower`` made them one)."""
    return name.translate(_ASCII_LOWER)


def _holds_json(kind: Any) -> bool:
    """Whether a DuckDB type is JSON or holds JSON (in a list, struct or map)."""
    return str(kind) == "JSON" or (str(kind) != "JSON" and "JSON" in str(kind) and
                                   getattr(kind, "id", "") in ("list", "array", "struct", "map", "union"))


def _decode(value: Any, kind: Any) -> Any:
    """``value`` of DuckDB type ``kind`` with each JSON text in it read into its value."""
    if value is None:
        return None
    if str(kind) == "JSON":
        return _json_value(value) if isinstance(value, str) else value
    if not _holds_json(kind):
        return value
    if kind.id in ("list", "array"):
        return _decode_list(value, kind)
    if kind.id == "struct" and isinstance(value, dict):
        types = dict(kind.children)
        return {k: _decode(v, types.get(k)) if k in types else v for k, v in value.items()}
    if kind.id == "map" and isinstance(value, dict):
        return _decode_map(value, kind)
    return value


def _decode_list(value: Any, kind: Any) -> Any:
    """A list's (or array's) cell with JSON in its items: each item decoded."""
    if hasattr(value, "tolist"):  # a DataFrame's cell: a numpy array
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_decode(v, kind.children[0][1]) for v in value]
    return value


def _decode_map(value: dict[Any, Any], kind: Any) -> dict[Any, Any]:
    """A map's cell with JSON in its keys or values, each part decoded: a ``{"key": [...],
    "value": [...]}`` cell part by part, any other dict value by value."""
    key_type, value_type = kind.children[0][1], kind.children[1][1]
    if isinstance(value.get("key"), list) and isinstance(value.get("value"), list):
        return {"key": [_decode(v, key_type) for v in value["key"]],
                "value": [_decode(v, value_type) for v in value["value"]]}
    return {k: _decode(v, value_type) for k, v in value.items()}


def _json_value(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # an integer beyond 64 bits: the standard library reads it
        import json

        return json.loads(text)


def _decoded(row: tuple[Any, ...], decoders: list[tuple[int, Any]]) -> tuple[Any, ...]:
    cells = list(row)
    for i, kind in decoders:
        cells[i] = _decode(cells[i], kind)
    return tuple(cells)


def _one_line(exc: BaseException) -> str:
    """DuckDB's message without the caret lines under the query that follow it."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- the views ------------------------------------------------------------------------------
def _make_views(con: Any, records: Sequence[Mapping[str, Any]], views: frozenset[str]) -> None:
    """``runs`` and ``steps`` of ``records`` (those of ``views`` the query reads), as in-memory
    tables: the engine reads our checked records, never the store's files, and each column gets
    the type DuckDB finds for all of its values (a column of several kinds is ``JSON``)."""
    if RUNS in views:
        _make_runs(con, records)
    if STEPS in views:
        _make_steps(con, records)


def _make_runs(con: Any, records: Sequence[Mapping[str, Any]]) -> None:
    rows = flatten_records(records)
    for row in rows:
        row.pop(STEP_TIMES, None)  # in steps
    names = ordered_columns(rows)
    # DuckDB reads each column under its name, or, where a record's key is empty or differs from
    # another only in case (which SQL names cannot tell apart), every column under a key of ours
    folded = {name.lower() for name in names}
    # each line copied into an object of its own size (orjson's keeps the buffer it grew: 3.5 times)
    if len(folded) == len(names) and "" not in folded:
        keys = {name: name for name in names}
        lines = [bytes(memoryview(orjson.dumps(row, option=orjson.OPT_NON_STR_KEYS))) for row in rows]
    else:
        keys = {name: f"c{index}" for index, name in enumerate(names)}
        lines = [bytes(memoryview(orjson.dumps({keys[k]: v for k, v in row.items() if k in keys},
                                               option=orjson.OPT_NON_STR_KEYS))) for row in rows]
    if not lines:
        contract = _contract_types()
        con.execute(f"CREATE TABLE {RUNS} ({', '.join(f'{_quoted(n)} {t}' for n, t in contract.items())})")
        return
    with _scratch(b"\n".join(lines)) as source:
        scan = (f"read_json('{source}', format = 'newline_delimited', records = true, sample_size = -1, "
                f"maximum_object_size = {max(map(len, lines)) + 1024}, "
                "timestampformat = 'text%Y', dateformat = 'text%Y')")
        con.execute(f"CREATE TEMP TABLE _read AS SELECT * FROM {scan}")  # read once: its types, then its rows
    found = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE _read)").fetchall())
    columns = _runs_columns([(name, found[keys[name]], keys[name]) for name in names if keys[name] in found])
    con.execute(f"CREATE TABLE {RUNS} AS SELECT {columns} FROM _read")
    con.execute("DROP TABLE _read")


def _contract_types() -> dict[str, str]:
    """The type of each column of the record contract: ``runs`` has these columns in every store,
    with this type where no record has a value (a query written for one store runs on another)."""
    from cnnbench.results.record import ENVIRONMENT_FIELDS, METRIC_FIELDS

    types = {"schema_version": "BIGINT", "tool_version": "VARCHAR", "run_id": "VARCHAR", "started_at": "VARCHAR",
             "status": "VARCHAR", "error": "VARCHAR", "kind": "VARCHAR", "source": "VARCHAR",
             "suite_name": "VARCHAR", "case_name": "VARCHAR"}
    types.update({f"environment.{name}": "BIGINT" if name in ("cpu_cores", "gpu_count") else "VARCHAR"
                  for name in ENVIRONMENT_FIELDS})
    types.update({f"metrics.{name}": "DOUBLE[]" if name == "per_device_images_per_sec" else "DOUBLE"
                  for name in METRIC_FIELDS if f"metrics.{name}" != STEP_TIMES})
    types.update({R.MODEL: "VARCHAR", R.BATCH: "BIGINT", R.DEVICES: "BIGINT", R.PRECISION: "VARCHAR",
                  R.DATA_FORMAT: "VARCHAR", R.FORWARD_ONLY: "BOOLEAN", R.DEVICE: "VARCHAR",
                  R.VARIABLE_UPDATE: "VARCHAR", R.ENERGY: "DOUBLE", R.IMAGES_PER_JOULE: "DOUBLE"})
    return types


_TEXT_FOUND = frozenset({"UUID", "TIME", "TIME WITH TIME ZONE", "DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE"})


def _runs_columns(found: list[tuple[str, str, str]]) -> str:
    """The select list of ``runs`` from DuckDB's columns (name, type, key), in export's order: a
    name that only case (or nothing) tells from an earlier one gets ``_1``, ``_2``... as DuckDB
    names them; the contract's absent columns are added as nulls; a column of nulls alone gets
    the contract's type, or JSON."""
    contract = _contract_types()
    taken: set[str] = set()
    select = []
    for name, kind, key in found:
        shown = name or "_"
        suffix = 0
        while _fold(shown) in taken:
            suffix += 1
            shown = f"{name or '_'}_{suffix}"
        taken.add(_fold(shown))
        if kind == '"NULL"':
            select.append(f"CAST({_quoted(key)} AS {contract.get(name, 'JSON')}) AS {_quoted(shown)}")
        elif kind in _TEXT_FOUND:  # what DuckDB reads in text all the same
            select.append(f"CAST({_quoted(key)} AS VARCHAR) AS {_quoted(shown)}")
        else:
            select.append(f"{_quoted(key)} AS {_quoted(shown)}")
    select += [f"CAST(NULL AS {kind}) AS {_quoted(name)}" for name, kind in contract.items()
               if name.lower() not in taken]
    return ", ".join(select)


def _make_steps(con: Any, records: Sequence[Mapping[str, Any]]) -> None:
    """Every timed step of every run: ``run_id``, ``step`` (from 1), ``seconds``."""
    import numpy as np
    import pandas as pd

    run_ids: list[str | None] = []
    counts: list[int] = []
    parts: list[Any] = []
    for record in records:
        metrics = record.get("metrics")
        times = metrics.get(STEP_TIMES.split(".")[1]) if isinstance(metrics, Mapping) else None
        if not isinstance(times, Sequence) or isinstance(times, str) or not times:
            continue
        try:
            values = np.asarray(times, dtype=np.float64)
        except (TypeError, ValueError):  # not all numbers: a hand-written line's
            continue
        run_id = record.get("run_id")
        run_ids.append(run_id if isinstance(run_id, str) else None)
        counts.append(len(values))
        parts.append(values)
    total = sum(counts)
    starts = np.repeat(np.cumsum([0, *counts])[:-1], counts)
    frame = pd.DataFrame({
        "run_id": pd.array(np.repeat(np.array(run_ids, dtype=object), counts), dtype="string"),
        "step": np.arange(1, total + 1, dtype=np.int64) - starts,
        "seconds": np.concatenate(parts) if parts else np.zeros(0),
    })
    con.register("_steps_frame", frame)
    con.execute(f"CREATE TABLE {STEPS} AS SELECT run_id, step, seconds FROM _steps_frame")
    con.unregister("_steps_frame")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


@contextlib.contextmanager
def _scratch(data: bytes) -> Iterator[str]:
    """A path DuckDB reads ``data`` from: a file in memory (Linux), else a temporary file, gone after."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("cnnbench-query")
        try:
            os.write(fd, data) if len(data) < 1 << 30 else _write_all(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        f.write(data)
        f.flush()
        yield f.name


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# --- the views, from the engine's read ------------------------------------------------------------
def _engine_views(paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
                  views: frozenset[str]) -> tuple[Any, list[str]] | None:
    """A connection holding ``runs`` and ``steps`` (those of ``views``) of the stores at ``paths``,
    read by the engine (:func:`cnnbench.results.engine.scan`: each file checked and handed over by
    its descriptor, the record contract checked in SQL, a file it cannot vouch for read by the
    checked reader), and the lines that could not be read; None where the checked reader reads
    the store (a small store; names the engine cannot tell apart)."""
    from cnnbench.results import engine

    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not engine.worth_the_engine(given, engine.WIDE_STORE if RUNS in views else None):
        return None
    try:  # runs: every field (but the step times for runs alone); steps alone: a run's id and step times
        if RUNS in views:
            store = engine.scan(given, None, leave_out=() if STEPS in views else (STEP_TIMES,))
        else:
            store = engine.scan(given, [STEP_TIMES])
    except engine.EngineCannot:
        return None
    import duckdb

    try:
        if STEPS in views:
            _engine_steps(store)
            if RUNS in views and STEP_TIMES in store.columns:  # in steps now: not held twice
                store.con.execute(f"ALTER TABLE {engine.SCANNED} DROP COLUMN {store.column(STEP_TIMES)}")
        if RUNS in views:
            _engine_runs(store)  # a view of the engine's table: a query types only the rows and columns it reads
        else:
            store.con.execute("DROP TABLE scanned")
        store.con.execute("SET search_path = 'main'")  # the engine's table is no table of the store's
    # the view's casts run when a query reads it, not here: each column's is chosen from the kinds of
    # all its values (_kind_flag, json_group_structure), which is why none fails then
    except duckdb.Error:  # values it cannot type (names alike but for case in a list's objects): the checked path's
        store.close()
        return None
    except BaseException:
        store.close()
        raise
    return store.con, list(store.problems)


def _kind_flag(c: str) -> str:
    """SQL: what JSON value ``c`` is, as a bit: 1 text, 2 a list, 8 true or false, 16 a whole number
    a ``BIGINT`` holds, 64 one of 64 bits it does not (2**63 to 2**64 - 1: the checked reader's
    Python ints, which its view types ``HUGEINT``), 32 another number (a whole one beyond 64 bits
    too: orjson reads it as a float); 0 for null and for an empty object (a flat run has no such field: only an
    empty one is left in a field read)."""
    x = f"{c}::VARCHAR"
    return (f"""CASE WHEN {c} IS NULL OR starts_with({x}, '{{') THEN 0 WHEN starts_with({x}, '"') THEN 1 """
            f"WHEN starts_with({x}, '[') THEN 2 WHEN {x} IN ('true', 'false') THEN 8 "
            f"WHEN contains({x}, '.') OR contains({x}, 'e') OR contains({x}, 'E') THEN 32 "
            f"WHEN TRY_CAST({x} AS BIGINT) IS NOT NULL THEN 16 "
            f"WHEN TRY_CAST({x} AS UBIGINT) IS NOT NULL THEN 64 ELSE 32 END")


def _list_shapes(store: Any, lists: Sequence[str]) -> dict[str, str]:
    """The type of each column of lists of ``lists`` that DuckDB can give one (``json_group_structure``
    of its values), as ``json_transform`` takes it; a column left out is JSON."""
    shapes: dict[str, str] = {}
    if lists:
        found = store.con.execute("SELECT " + ", ".join(
            f"json_group_structure({c}), bool_or(regexp_matches({c}::VARCHAR, '[0-9]{{19}}'))"
            for c in map(store.column, lists)) + " FROM scanned").fetchone()
        for i, name in enumerate(lists):
            shape, long_whole = found[2 * i], found[2 * i + 1]
            if shape == '["NULL"]':  # lists of nothing but nulls (empty ones): of JSON
                shapes[name] = '["JSON"]'
            elif '"NULL"' not in shape:  # objects in lists with a field only ever null: JSON
                shapes[name] = shape if long_whole else shape.replace('"UBIGINT"', '"BIGINT"')
    return shapes


def _engine_runs(store: Any, leave_out: Iterable[str] = (STEP_TIMES,), as_json: Iterable[str] = ()) -> None:
    """``runs`` from the engine's read (but the fields ``leave_out``): each column of the one type all
    its values have (text ``VARCHAR``, whole numbers ``BIGINT``, numbers ``DOUBLE``, ``BOOLEAN``, a
    list typed as DuckDB types its values: ``DOUBLE[]``, a ``STRUCT`` list...), ``JSON`` where they
    are of several kinds, or where named in ``as_json`` (not looked into: typing a column of step
    times took 3 s of 100,000 runs); a column of nulls alone of the contract's type, or ``JSON``; in
    the store's order. A view of the engine's table: a query types only what it reads (making the
    table of every typed column took 1.6 s of a warm query's 4.6 s on 100,000 runs)."""
    from cnnbench.results import engine

    names = [name for name in store.columns if name not in set(leave_out)]
    contract = _contract_types()
    flags = store.con.execute("SELECT " + ", ".join(f"bit_or({_kind_flag(store.column(n))})" for n in names)
                              + " FROM scanned").fetchone() if names else ()
    untyped = set(as_json)
    shapes = _list_shapes(store, [n for n, flag in zip(names, flags, strict=True) if flag == 2 and n not in untyped])
    select = []
    for name, flag in zip(names, flags, strict=True):
        c = f"(CASE WHEN NOT starts_with({store.column(name)}::VARCHAR, '{{') THEN {store.column(name)} END)"
        if name in untyped:
            value = c
        elif flag == 0:
            value = f"CAST(NULL AS {contract.get(name, 'JSON')})"
        elif flag in _SCALARS:
            value = _SCALARS[flag].format(c=c)
        elif name in shapes:
            value = f"json_transform({c}, {engine.literal(shapes[name])})"
        else:
            value = c
        select.append(f"{value} AS {_quoted(name)}")
    taken = {name.lower() for name in names}
    select += [f"CAST(NULL AS {kind}) AS {_quoted(name)}" for name, kind in contract.items()
               if name.lower() not in taken]
    store.con.execute(f"CREATE VIEW {RUNS} AS SELECT {', '.join(select)} FROM {engine.SCANNED} ORDER BY _file, rowid")


def runs_frame(paths: Sequence[str | os.PathLike[str]], *, where: Sequence[str] = (),
               step_times: bool = True) -> tuple[pd.DataFrame, list[str]] | None:
    """:func:`cnnbench.read_results` by the engine: the runs of the stores at ``paths`` that meet
    ``where``, as ``results export`` gives them (its rows, in the store's order, and its columns:
    those of the runs kept), each column typed as in ``runs``, its cells as the checked reader's frame
    has them (:func:`~cnnbench.results.flatten.plain_cells`); and the lines that could not be read.
    Below :data:`~cnnbench.results.engine.FRAME_STORE` bytes, and otherwise None where the checked
    reader reads the store: a small store, a ``--where`` name the engine does not resolve, names it
    cannot tell apart or values it cannot type (see :func:`_engine_views`)."""
    import duckdb

    from cnnbench.results import engine

    if not engine.worth_the_engine(paths, engine.FRAME_STORE):
        return None
    try:
        plan = engine.plan_where(where)
        store = engine.scan(paths, None, leave_out=() if step_times else (STEP_TIMES,))
    except engine.EngineCannot:
        return None
    with store:
        try:
            if not set(plan.fields) <= set(store.fields):
                return None
            keep = engine.where_sql(store, plan)
            columns = engine.kept_columns(store, keep)
            store.con.execute(f"DELETE FROM scanned WHERE ({keep}) IS NOT TRUE")
            if not store.con.execute("SELECT count(*) FROM scanned").fetchall()[0][0]:
                return records_frame([]), list(store.problems)
            _engine_runs(store, leave_out=(), as_json=(STEP_TIMES,))  # read here, as lists
            frame = _with_huge_numbers(store.con, columns)
        except (engine.EngineCannot, duckdb.Error):
            return None
        return plain_cells(frame), list(store.problems)


def _with_huge_numbers(con: Any, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of ``runs`` as a frame; a ``HUGEINT`` column (pandas would be given floats) as
    pandas makes the checked reader's Python ints: each value exact, typed by pandas (``uint64``,
    ``int64``, objects, or floats where one is missing, as in the checked reader's frame)."""
    import pandas as pd

    kinds = con.execute(f"SELECT {', '.join(map(_quoted, columns))} FROM {RUNS} LIMIT 0").description
    huge = {name for name, kind, *_ in kinds if str(kind) == "HUGEINT"}
    frame = _frame(con.execute("SELECT " + ", ".join(
        f"{_quoted(c)}::VARCHAR AS {_quoted(c)}" if c in huge else _quoted(c) for c in columns) + f" FROM {RUNS}"))
    for index, name in enumerate(columns):
        if name in huge:
            values = [int(v) if isinstance(v, str) else math.nan for v in frame.iloc[:, index]]  # as from_records
            frame.isetitem(index, pd.Series(values, index=frame.index) if values else frame.iloc[:, index])
    return frame


_SCALARS = {1: "({c}->>'$')", 8: "{c}::BOOLEAN", 16: "{c}::BIGINT", 64: "{c}::HUGEINT", 80: "{c}::HUGEINT",
            **dict.fromkeys((32, 48, 96, 112), "{c}::DOUBLE")}
"""The SQL of a column of one kind of scalar (by :func:`_kind_flag`'s bits), as its type."""


def _engine_steps(store: Any) -> None:
    """``steps`` from the engine's read: each run's step times that are all numbers (or null: a
    figure no reader computes with, shown as not available)."""
    run_id = store.column("run_id")
    times = store.column(STEP_TIMES)
    store.con.execute(
        f"CREATE TABLE {STEPS} AS SELECT run_id, generate_subscripts(s, 1)::BIGINT AS step, unnest(s) AS seconds "
        f"""FROM (SELECT CASE WHEN starts_with({run_id}::VARCHAR, '"') THEN {run_id}->>'$' END AS run_id, """
        f"TRY_CAST({times} AS DOUBLE[]) AS s, list_count(TRY_CAST({times} AS JSON[])) AS given "
        "FROM scanned ORDER BY _file, rowid) WHERE len(s) > 0 AND list_count(s) = given")
