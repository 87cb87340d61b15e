"""The store read by DuckDB: the fields a command asks for, of every record the contract accepts,
as a table of the engine's, without a Python object made per record.

Each results file is found and opened as the checked reader does (:func:`~cnnbench.results.reader.
iter_store_files`, :func:`~cnnbench.results.files.open_regular`: a FIFO, a device or a symlink loop
is a problem, never waited on) and handed to DuckDB as ``/proc/self/fd/N``, the descriptor checked,
so a file swapped in after the check is never read. ``read_json`` reads each line's fields as JSON
values (what the line said: text stays text, a fraction a fraction), and the record contract
(:func:`~cnnbench.results.record.check_record`) is checked in the same query: ``status`` one of
the four, ``schema_version`` the current one, each text, whole-number, number and list field of
the contract of its kind, ``config``, ``environment`` and ``metrics`` objects that hold some of
them, every number read finite (and a metric within :data:`~cnnbench.results.cleaning.MAX_FIGURE`).
A line the engine cannot read (malformed to its parser, torn, not UTF-8, a lone surrogate, not an
object) is a row of nulls, which fails the check.

A file with a line that fails it is read again by the checked reader
(:func:`~cnnbench.results.reader.read_lines`), whole and line by line: its problems are named
``file:line: why`` as everywhere, an older record is upgraded, a figure no reader can use is shown
as not available, and its records replace the engine's rows of that file. The engine never
decides alone that a line is bad; it only vouches for lines it fully checked.

What the engine does not see, and the checked reader would: a key given twice (DuckDB takes the
first, Python's parsers the last); JSON that DuckDB's parser allows and Python's refuses (a comma
before a closing bracket, ``nan`` or ``inf`` spelled so) in a field the read does not ask for (in one
it asks for, a number that is not finite is seen); and nesting deeper than
:data:`~cnnbench.results.record.MAX_DEPTH`, a NaN or an oversized figure in a field the read does
not ask for. Such a line is read here as the engine reads it. ``benchmarks/store_engines.py``
(part ``behaviours``) shows the first and the last. A field asked for that holds an object, or a
list whose text shows what could be a number no reader computes with or deep nesting
(:data:`_LIST_DOUBT`), has its file read by the checked reader.

A scan of every field (``results export``, ``results query``) finds each file's fields first:
from its sidecar while the file is as it was, else by DuckDB reading it whole (``DESCRIBE``);
names it cannot read as they are (a dot in a key, keys alike but for case) leave the store to
the checked reader.

A run met twice (the same ``run_id``) is kept once, where it was first met, as the checked reader
keeps it: a file that holds a run twice is read by the checked reader (the engine keeps no order of
lines), and of copies in several files the first file's is kept. Nothing here writes anywhere: the
engine's database is in memory and spills nowhere.
DuckDB is imported only when a store is read (``import cnnbench`` and ``--help`` load none).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import functools
import json
import logging
import operator
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from cnnbench.results import fields as R
from cnnbench.results import files
from cnnbench.results import record as contract
from cnnbench.results.cache import ROW_GROUP, chunks, content_hashes, meta_hash, on_every_core
from cnnbench.results.cleaning import MAX_FIGURE
from cnnbench.results.lines import MAX_LINE, StoreProblem
from cnnbench.results.reader import iter_store_files, read_lines, read_records

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger(__name__)

RUN_ID = "run_id"
SCANNED = "_engine.scanned"
"""The table a scan fills (``scanned`` while the search path holds its schema)."""
MAX_OBJECT = MAX_LINE
"""Longest line the engine reads (DuckDB's default is 16 MiB): a run with tens of millions of step
times, as the checked reader (:data:`~cnnbench.results.lines.MAX_LINE`)."""
FAST_OBJECT = 64 << 20
"""Longest line a first read of a store's files takes (a run with about three million step times;
DuckDB took lines of up to about twice this). DuckDB reads a file in parts of about this size, a
part a core, so that with :data:`MAX_OBJECT` a file of up to a gigabyte is one part, read on one
core (a store of one big file, one machine's: 2.9 s against 1.45 s for 100,000 runs on 2 cores).
A read that meets a longer line fails whole and is made again with :data:`MAX_OBJECT`
(:func:`_longest`)."""

_LEAF = "leaf"


class EngineCannot(Exception):
    """What the engine read cannot answer alone (a field no record holds: the checked reader names
    the nearest ones); the caller reads the store the checked way."""


def _contract() -> dict[str, str]:
    """Each field of the record contract and the kind of value it must hold when present."""
    kinds = {"status": "status", "schema_version": "version"}
    kinds.update((name, "text") for name in contract._TEXT_FIELDS)
    for base, names in contract._config_groups():
        kinds.update((f"config.{name}", "int" if base is int else "float") for name in names)
    for name in contract.METRIC_FIELDS:
        kinds[f"metrics.{name}"] = "list" if name in contract._LIST_METRICS else "metric"
    kinds["metrics.warnings"] = "list"
    kinds[R.MACHINE] = "text"
    return kinds


def ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


class _Layout:
    """How ``read_json`` is asked for a set of dotted fields: the sections as structs of JSON
    leaves, and the SQL expression that gives each field (a field below a leaf taken out of it)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.tree: dict[str, Any] = {}
        for path in paths:
            node = self.tree
            parts = path.split(".")
            for i, part in enumerate(parts):
                if node.get(part) == _LEAF:
                    break
                if i == len(parts) - 1:
                    node[part] = _LEAF  # whatever was asked below it is taken out of its JSON
                else:
                    child = node.setdefault(part, {})
                    node = child

    def columns(self) -> str:
        """The ``columns`` argument of ``read_json``."""
        def kind(node: Any) -> str:
            if node == _LEAF:
                return "JSON"
            return "STRUCT(" + ", ".join(f"{ident(k)} {kind(v)}" for k, v in node.items()) + ")"

        return "{" + ", ".join(f"{literal(k)}: {literal(kind(v))}" for k, v in self.tree.items()) + "}"

    def expr(self, path: str) -> str:
        """The SQL expression of a dotted field (a JSON value, NULL where absent or null)."""
        parts = path.split(".")
        node: Any = self.tree
        out = ""
        for i, part in enumerate(parts):
            out = ident(part) if not out else f"{out}.{ident(part)}"
            node = node[part]
            if node == _LEAF:
                rest = parts[i + 1:]
                if rest:
                    inner = ".".join('"' + p.replace("\\", "\\\\").replace('"', '\\"') + '"' for p in rest)
                    out = f"json_extract({out}, {literal('$.' + inner)})"
                return out
        raise KeyError(path)

    def section_leaves(self, section: str) -> list[str]:
        node = self.tree.get(section)
        if not isinstance(node, dict):
            return []
        found: list[str] = []

        def walk(n: dict[str, Any], prefix: str) -> None:
            for k, v in n.items():
                if v == _LEAF:
                    found.append(f"{prefix}.{k}")
                else:
                    walk(v, f"{prefix}.{k}")

        walk(node, section)
        return found


def _check(kind: str, e: str) -> str:
    """SQL that is true when the JSON value ``e`` is what a contract field of ``kind`` may hold.

    Told from its JSON text (DuckDB's, of the value read), not by parsing it again: text starts
    with a quote, a list with a bracket, a whole number is digits (and a minus) alone, and a number
    is what reads as a finite one (``NaN``, ``Infinity``, ``1e400`` are not). A line the check is
    not sure of is only read again by the checked reader, so it may refuse more than the contract."""
    x = f"{e}::VARCHAR"
    if kind == "status":
        return f"coalesce({x} IN ({', '.join(literal(json.dumps(s)) for s in contract.STATUSES)}), false)"
    if kind == "version":
        return f"coalesce({x} = {literal(str(contract.SCHEMA_VERSION))}, false)"
    if kind == "text":
        return f"({e} IS NULL OR starts_with({x}, '\"'))"
    if kind == "list":
        return f"({e} IS NULL OR starts_with({x}, '['))"
    if kind == "int":
        # up to 18 characters: a whole number of 64 bits (orjson reads a longer one as a fraction)
        return f"({e} IS NULL OR (length({x}) BETWEEN 1 AND 18 AND ltrim({x}, '-0123456789') = ''))"
    if kind == "float":
        return f"({e} IS NULL OR coalesce(isfinite(TRY_CAST({x} AS DOUBLE)), false))"
    if kind == "metric":
        return (f"({e} IS NULL OR (coalesce(abs(TRY_CAST({x} AS DOUBLE)) <= {MAX_FIGURE!r}, false) "
                f"AND NOT {_LONG_WHOLE.format(x=x)}))")
    raise ValueError(kind)


def _holds_some(layout: _Layout, section: str) -> str:
    """SQL that is true when ``section`` is an object holding a field read: read as a struct, a
    section that is no object reads as one of nulls, as an empty one does (either is read again)."""
    leaves = layout.section_leaves(section)
    if not leaves:  # the section itself was asked for: a JSON value
        return f"starts_with({layout.expr(section)}::VARCHAR, '{{')"
    return f"coalesce({', '.join(map(layout.expr, leaves))}) IS NOT NULL"


_LONG_WHOLE = "(length({x}) > 18 AND ltrim({x}, '-0123456789') = '')"
"""SQL: a whole number too long for a double to hold exactly (near the limit, it compares wrong)."""


def _usable(path: str, e: str) -> str:
    """SQL that is true unless the value of a field read is one the checked reader would change or
    refuse (its file is read that way): a number no reader computes with (shown as not available,
    with a notice), or an object, or a list whose text shows it may hold such a number or nest
    too deep (:data:`_LIST_DOUBT`)."""
    x = f"{e}::VARCHAR"
    v = f"TRY_CAST({x} AS DOUBLE)"
    limit = f" AND abs({v}) <= {MAX_FIGURE!r} AND NOT {_LONG_WHOLE.format(x=x)}" if path.startswith("metrics.") else ""
    listed = "false"
    if path.count(".") < MAX_LIST_DEPTH:
        listed = f"NOT regexp_matches({x}, {literal(_LIST_DOUBT)})"
    return (f"(CASE WHEN {e} IS NULL THEN true WHEN starts_with({x}, '{{') THEN false "
            f"WHEN starts_with({x}, '[') THEN {listed} ELSE coalesce(isfinite({v}){limit}, true) END)")


MAX_LIST_DEPTH = contract.MAX_DEPTH - 4
"""A list is read by the engine only in a field this shallow: with at most 3 levels nested in
it (:data:`_LIST_DOUBT`), the record stays within :data:`~cnnbench.results.record.MAX_DEPTH`."""

_LIST_DOUBT = (r"(?i)nan|inf|e\+?[0-9]{2}|(?:^|[^.0-9])[0-9]{19}"
               r"|[\[{][^\]}]*[\[{][^\]}]*[\[{][^\]}]*[\[{]")
"""What in a list's JSON text (DuckDB's) sends its file to the checked reader: what could be a
NaN or an infinity, a number of 1e10 or more written with an exponent or a whole part of 19
digits or more (a figure a reader may not compute with, :data:`~cnnbench.results.cleaning.MAX_FIGURE`;
fractions of 19 digits, ``0.0016978024783322835``, are any step time's), or
four brackets opened with none closed between them. Text in the list that looks so is only
read the slower way."""


@dataclass
class StoreScan:
    """The fields asked for of a store's runs, in the engine's table ``scanned`` (a column per dotted
    field, each a JSON value or NULL, named by :meth:`column`; ``_file``: the file each was read
from, in the order of :func:`~cnnbench.results.reader.iter_store_files`; the rows of a file in no
order), and
    the lines that could not be used."""

    con: duckdb.DuckDBPyConnection
    fields: tuple[str, ...]
    files: list[Path]
    problems: list[StoreProblem] = field(default_factory=list)
    repeated: int = 0
    """Records of a run already read (the same ``run_id``), left out."""
    columns: list[str] = field(default_factory=list)
    """Of a scan of every field: the fields some run read holds, in the order ``results export``
    writes them (:func:`~cnnbench.results.flatten.ordered_columns`)."""

    def column(self, name: str) -> str:
        """The column of ``scanned`` that holds field ``name`` (one of :attr:`fields`)."""
        return f"c{self.fields.index(name)}"

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> StoreScan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def present(self, name: str) -> bool:
        """Whether some run holds a value for ``name`` that is not an object (one of the fields
        a flat run has: :func:`~cnnbench.analysis.fields.known_fields`)."""
        c = self.column(name)
        row = self.con.execute(f"SELECT count(*) FILTER (WHERE NOT starts_with({c}::VARCHAR, '{{')) "
                               "FROM scanned").fetchone()
        return bool(row and row[0])

    def rows(self, sql_tail: str = "", columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Runs as flat dicts of Python values (``{"config.model": "resnet50", ...}``), a missing
        or null field left out, and one that holds an object (a flat run has its fields instead:
        :func:`~cnnbench.results.flatten.flatten_record`); ``sql_tail``: what follows ``FROM scanned``."""
        names = list(self.fields if columns is None else columns)
        picked = ", ".join(map(self.column, names))
        out = []
        for values in self.con.execute(f"SELECT {picked} FROM scanned {sql_tail}").fetchall():
            row = {n: _value(v) for n, v in zip(names, values, strict=True) if v is not None}
            out.append({n: v for n, v in row.items() if type(v) is not dict})
        return out


def _value(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # an integer beyond 64 bits
        return json.loads(text)


def _get(record: Mapping[str, Any], path: str) -> Any:
    node: Any = record
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(value, separators=(",", ":"))


BATCH = 128
"""Files read by one query (and open at once)."""


def scan(paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], fields: Iterable[str] | None, *,
         below: bool = True, leave_out: Iterable[str] = ()) -> StoreScan:
    """The runs of the stores at ``paths`` with the dotted ``fields`` (``run_id`` always), each
    record checked (see the module's text); ``fields`` None: every field the runs hold but those
    in ``leave_out`` (:attr:`StoreScan.columns`), rows kept in the store's order (its files',
    then each file's lines': ``ORDER BY _file, rowid``). Raises ``FileNotFoundError`` for a path
    that is not there, as :func:`~cnnbench.results.reader.read_records` does;
    :class:`EngineCannot` for fields the engine cannot tell apart (two names that differ in case
    only: its names ignore case; a name with a dot in it) or a file changed between finding its
    fields and reading them."""

    found = iter_store_files(paths, below=below)
    every = None
    if fields is None:
        every = _discover(found)
        every.steps = R.STEP_TIMES not in set(leave_out)
        fields = sorted(frozenset().union(*every.leaves.values()).difference(leave_out))
    wanted = tuple(dict.fromkeys((RUN_ID, *fields)))
    kinds = _contract()
    _distinct_names([*kinds, *wanted])
    problems: dict[int, list[StoreProblem]] = {}
    con = connect()
    try:
        query = _query([*kinds, *wanted], kinds, wanted)
        columns = ", ".join(f"c{i} JSON" for i in range(len(wanted)))
        if every is None:  # order kept costs a third more; only an every-field scan (an export) keeps it
            con.execute("SET preserve_insertion_order = false")
        # in a schema of its own, found by name while the search path holds it (a view over it names
        # it whole: SCANNED), and not listed by SHOW TABLES once the path is main's alone
        con.execute("CREATE SCHEMA _engine")
        con.execute("SET search_path = 'main,_engine'")
        con.execute(f"CREATE TABLE {SCANNED} (_file INTEGER, _ok BOOLEAN, {columns})")
        batch = _batch()
        for start in range(0, len(found), batch):
            opened: list[tuple[int, Path, BinaryIO]] = []
            try:
                for index in range(start, min(start + batch, len(found))):
                    f = _open(found[index], problems.setdefault(index, []))
                    if f is not None:
                        opened.append((index, found[index], f))
                        if every is not None and every.seen.get(index) != _identity(os.fstat(f.fileno())):
                            raise EngineCannot(f"{found[index]}: changed as it was read")
                _read_batch(con, query, start, opened, wanted, problems, every)
            finally:
                for _, _, f in opened:
                    f.close()
        repeated = _drop_repeats(con)
        held = every.held(con, leave_out, wanted) if every is not None else []
    except BaseException:
        con.close()
        raise
    return StoreScan(con, wanted, found, [p for i in sorted(problems) for p in problems[i]], repeated, held)


@dataclass
class _Every:
    """An every-field scan's account of each file's fields: its dotted leaves as its records hold
    them (a field that holds an object has the fields in it instead, as in a flat run), found
    before the read (from its sidecar, else by ``DESCRIBE``) and, for a file the checked reader
    reads, from the records it gives."""

    leaves: dict[int, frozenset[str]] = field(default_factory=dict)
    seen: dict[int, str] = field(default_factory=dict)
    """Each file's identity (:func:`_identity`) when its fields were found."""
    steps: bool = True
    """Whether the step times are read: a file the checked reader reads is read without them
    otherwise, as the checked reader reads a store for a read without them (a line whose step
    times break the contract is kept)."""

    def held(self, con: duckdb.DuckDBPyConnection, leave_out: Iterable[str], wanted: Sequence[str]) -> list[str]:
        """The fields of the files that gave runs, in export's order; :class:`EngineCannot` when
        one was not read (a field only the checked reader's records hold: an upgraded record's)."""
        from cnnbench.results.flatten import ordered_columns

        files = [row[0] for row in con.execute("SELECT DISTINCT _file FROM scanned").fetchall()]
        names = frozenset().union(*(self.leaves.get(i, frozenset()) for i in files)).difference(leave_out)
        if not names <= set(wanted):
            raise EngineCannot(", ".join(sorted(names.difference(wanted))[:3]))
        return ordered_columns([dict.fromkeys(names)])


def connect() -> duckdb.DuckDBPyConnection:
    """A DuckDB database of this process's memory: nothing spills to disk, and no progress bar is
    printed (DuckDB draws one on standard output for a statement of 2 s or more: into a CSV or JSON a
    command writes there, or a notebook's output)."""
    import duckdb

    con = duckdb.connect(":memory:", config={"temp_directory": ""})
    con.execute("SET enable_progress_bar = false")
    return con


DISCOVER_AT_ONCE = 4
"""Files whose fields are found at once, at most (one core each): each holds what DuckDB reads of a
whole file, or, where the checked reader reads it, the file and its records."""


def _discover(found: Sequence[Path]) -> _Every:
    """The fields of each file of ``found`` that opens (those that do not are named by the read),
    found for several files at once (DuckDB's reading of one file for its fields keeps one core busy:
    10 files of 64 MB, 4.8 s one after the other, 2.3 s two at a time on 2 cores), one a core and
    :data:`DISCOVER_AT_ONCE` at most."""
    every = _Every()
    con = connect()
    try:
        found_now = on_every_core(lambda index, path: _fields_of(con.cursor(), path), list(enumerate(found)),
                                DISCOVER_AT_ONCE)
    finally:
        con.close()
    for index, got in enumerate(found_now):
        if got is not None:
            every.seen[index], every.leaves[index] = got
    return every


def _fields_of(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[str, frozenset[str]] | None:
    """The identity (:func:`_identity`) and fields of the file at ``path`` (None when it does not
    open): from its sidecar while the file is as it was, else as DuckDB finds them reading it whole,
    else as the checked reader reads its records (:class:`EngineCannot` for a line longer than the
    engine ever reads: the whole store is the checked reader's, as its read would fail)."""
    try:
        f = _open(path, [])
        if f is None:
            return None
        with f:
            st = os.fstat(f.fileno())
            leaves = _sidecar_leaves(con, path, st)
            if leaves is None:
                leaves = _described(con, f.fileno())
            if leaves is None:  # a line it cannot read, names alike but for case: the checked reader's
                records: list[dict[str, Any]] = []
                read_lines(path, f.read(), records, [], step_times=True)
                leaves = _keys(records)
            return _identity(st), leaves
    finally:
        con.close()


def _sidecar_leaves(con: duckdb.DuckDBPyConnection, path: Path, st: os.stat_result) -> frozenset[str] | None:
    """The fields of ``path``'s records as its sidecar lists them, when the file is as it was then."""
    car = Sidecar.of(path)
    fd = car.open()
    if fd is None:
        return None
    try:
        meta = _read_meta(con, fd, car.code)
    finally:
        os.close(fd)
    return meta["leaves"] if meta is not None and meta["stat"] == _identity(st) else None


def _described(con: duckdb.DuckDBPyConnection, fd: int) -> frozenset[str] | None:
    """The dotted leaves of the records of the file open as ``fd``, as DuckDB finds them reading
    it whole (a key with only ``{}`` or values of several kinds is a leaf; a list is one); None
    when it cannot (a line it cannot read, names alike but for case); :class:`EngineCannot` for a
    line longer than it ever reads (the store is the checked reader's)."""
    import duckdb

    try:
        rel = _longest(lambda most: con.sql(
            f"SELECT * FROM read_json('/proc/self/fd/{int(fd)}', format='newline_delimited', records=true, "
            f"sample_size=-1, map_inference_threshold=-1, maximum_object_size={most})"))
        tops = list(zip(rel.columns, rel.types, strict=True))
    except duckdb.Error:
        return None
    out: set[str] = set()
    _plain_names([name for name, _ in tops])
    stack: list[tuple[str, Any]] = list(tops)
    while stack:
        path, kind = stack.pop()
        if kind.id == "struct" and kind.children:
            _plain_names([name for name, _ in kind.children])
            stack.extend((f"{path}.{name}", child) for name, child in kind.children)
        else:
            out.add(path)
    return frozenset(out)


def _plain_names(names: Sequence[str]) -> None:
    """:class:`EngineCannot` for keys of one object the engine's columns cannot name as they are: a
    name with a dot (a dotted path would read it as nested), or one DuckDB renamed (``tag_1`` beside
    ``Tag``: names alike but for case in different records)."""
    lowered = {name.lower() for name in names}
    for name in names:
        base, _, number = name.rpartition("_")
        if "." in name or not name or (base and number.isdigit() and base.lower() in lowered):
            raise EngineCannot(name)


def _keys(records: Iterable[Mapping[str, Any]], unread: bytes = b"") -> frozenset[str]:
    """The columns of these records flat (:func:`~cnnbench.results.flatten.flatten_record`);
    :class:`EngineCannot` for a key with a dot in it (or none at all), which a dotted path would
    read as nested. ``unread``: the text they were read from without their step times, which count
    among the columns where it names them (it may: a sidecar then never claims a file holds none)."""
    from cnnbench.results.flatten import flatten_record

    out: set[str] = set()
    for rec in records:
        stack: list[Mapping[str, Any]] = [rec]
        while stack:
            node = stack.pop()
            _plain_names(list(node))
            stack.extend(v for v in node.values() if isinstance(v, Mapping))
        out.update(flatten_record(rec))
    if b'"step_times_s"' in unread:
        out.add(R.STEP_TIMES)
    return frozenset(out)


def _query(paths: Sequence[str], kinds: Mapping[str, str], wanted: Sequence[str]) -> tuple[str, str, str]:
    """What each row of a batch's ``read_json`` is: whether the contract holds (SQL), the fields
    read (SQL, as ``c0, c1...``), and ``read_json``'s ``columns`` argument."""
    layout = _Layout(paths)
    ok = [_check(kind, layout.expr(path)) for path, kind in kinds.items()]
    # a list read is looked into, one the contract allows (step times) too
    ok += [_usable(path, layout.expr(path)) for path in wanted if path not in kinds or kinds[path] == "list"]
    ok += [_holds_some(layout, section) for section in ("config", "environment", "metrics")]
    picked = ", ".join(f"{layout.expr(p)} AS c{i}" for i, p in enumerate(wanted))
    return " AND ".join(ok), picked, layout.columns()


def _read_batch(con: duckdb.DuckDBPyConnection, query: tuple[str, str, str], start: int,
                opened: Sequence[tuple[int, Path, BinaryIO]], wanted: Sequence[str],
                problems: dict[int, list[StoreProblem]], every: _Every | None = None) -> None:
    """The runs of a batch of open files into ``scanned``: from their sidecars where those serve, else
    by one ``read_json`` of them all, and a file the engine cannot vouch for by the checked reader."""
    if not opened:
        return
    cars = {index: Sidecar.of(path) for index, path, _ in opened}
    served = _load_all(con, [(index, path, f, cars[index]) for index, path, f in opened], wanted, problems, every)
    scanned = [(index, path, f) for index, path, f in opened if index not in served]
    if not scanned:
        return
    ok, picked, columns = query
    before = {index: _identity(os.fstat(f.fileno())) for index, _, f in scanned}
    names = {f"/proc/self/fd/{f.fileno()}": index for index, _, f in scanned}
    which = "CASE filename " + " ".join(f"WHEN {literal(n)} THEN {i}" for n, i in names.items()) + " END"
    _longest(lambda most: con.execute(
        f"INSERT INTO scanned SELECT {which}, {ok}, {picked} "
        f"FROM read_json([{', '.join(map(literal, names))}], format='newline_delimited', records=true, "
        f"ignore_errors=true, maximum_object_size={most}, filename=true, columns={columns})"))
    # a file with a line the engine cannot vouch for, or with a run twice (its first line is the
    # one kept, and the engine keeps no order): read by the checked reader
    flagged = {row[0] for row in con.execute(
        f"SELECT DISTINCT _file FROM scanned WHERE _file >= {start} AND _ok IS NOT TRUE UNION "
        f"SELECT _file FROM scanned WHERE _file >= {start} AND {_RUN_KEY} IS NOT NULL "
        f"GROUP BY _file, {_RUN_KEY} HAVING count(*) > 1").fetchall()}
    for index, path, f in scanned:
        if index in flagged:
            f.seek(0)
            _read_checked(con, index, path, f.read(), wanted, problems[index], every=every)
    _save_all(con, [(index, f, cars[index], before[index], every.leaves.get(index) if every is not None else None)
                    for index, _, f in scanned if index not in flagged], wanted)


def _longest(read: Callable[[int], Any]) -> Any:
    """``read(most)`` with lines of up to :data:`FAST_OBJECT` bytes, or, where one is longer (DuckDB
    then fails the statement whole, ``ignore_errors`` or not), again with :data:`MAX_OBJECT`;
    :class:`EngineCannot` where a line is longer still (the checked reader reads the store)."""
    import duckdb

    for most in (FAST_OBJECT, MAX_OBJECT):
        try:
            return read(most)
        except duckdb.InvalidInputException as exc:
            if "maximum_object_size" not in str(exc):
                raise
    raise EngineCannot(f"a line longer than {MAX_OBJECT} bytes")


def _batch() -> int:
    """How many files one query reads: :data:`BATCH`, fewer when this process may open only a few
    more files (each is open here, and again by DuckDB, by its ``/proc/self/fd`` name)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return BATCH
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        used = 64
    return max(1, min(BATCH, (soft - used - 32) // 2))


def _distinct_names(paths: Iterable[str]) -> None:
    """:class:`EngineCannot` for a name with an empty part, or two names of one object that differ in
    case only (DuckDB's names ignore case: it would read one for both)."""
    seen: dict[tuple[str, str], str] = {}
    for path in paths:
        parts = path.split(".")
        if not all(parts):
            raise EngineCannot(path)
        for i, part in enumerate(parts):
            parent = ".".join(parts[:i])
            if seen.setdefault((parent, part.lower()), part) != part:
                raise EngineCannot(path)


_RUN_KEY = "nullif(CASE WHEN starts_with(c0::VARCHAR, '\"') THEN c0->>'$' END, '')"
"""SQL: the ``run_id`` of a run (column ``c0``), NULL where it has none (or an empty one)."""


def _drop_repeats(con: duckdb.DuckDBPyConnection) -> int:
    """Drop each run met in an earlier file (the same ``run_id``; a file holds each run once by
    now); how many were dropped. A store without repeats is only counted."""
    row = con.execute(f"SELECT count({_RUN_KEY}) - count(DISTINCT {_RUN_KEY}) FROM scanned").fetchone()
    if not row or not row[0]:
        return 0
    before = con.execute("SELECT count(*) FROM scanned").fetchone()
    con.execute(f"DELETE FROM scanned WHERE rowid IN (SELECT rowid FROM scanned WHERE {_RUN_KEY} IS NOT NULL "
                f"QUALIFY row_number() OVER (PARTITION BY {_RUN_KEY} ORDER BY _file) > 1)")
    after = con.execute("SELECT count(*) FROM scanned").fetchone()
    return int(before[0]) - int(after[0]) if before and after else 0


def _open(path: Path, problems: list[StoreProblem]) -> BinaryIO | None:
    """``path`` opened as the checked reader opens it, or None with why in ``problems`` (an empty
    file: None, nothing to say)."""
    try:
        f = files.open_regular(path)
    except IsADirectoryError:
        problems.append(StoreProblem(f"{path}: is a directory, not a results file"))
        return None
    except files.FileProblem as exc:
        problems.append(StoreProblem(str(exc)))
        return None
    except OSError as exc:
        problems.append(StoreProblem(f"{path}: cannot read ({exc.strerror or exc})"))
        return None
    if os.fstat(f.fileno()).st_size == 0:
        f.close()
        return None
    return f


def _read_checked(con: duckdb.DuckDBPyConnection, index: int, path: Path, data: bytes, wanted: Sequence[str],
                  problems: list[StoreProblem], *, first_line: int = 1, seen: set[str] | None = None,
                  every: _Every | None = None) -> None:
    """The runs of one file's ``data`` (its bytes, from the descriptor the engine read) as the
    checked reader reads them, in place of the engine's rows of that file; or, with ``seen`` (the
    runs already there: lines appended after them, from line ``first_line``), added to them.
    ``every``: the file's fields are its records' (step times read, so that they are whole, unless
    the read leaves them out)."""
    records: list[dict[str, Any]] = []
    steps = _steps(wanted) or every is not None and every.steps
    read_lines(path, data, records, problems, step_times=steps, first_line=first_line)
    if every is not None:
        every.leaves[index] = _keys(records)
    if seen is None:
        con.execute("DELETE FROM scanned WHERE _file = ?", [index])
    _add(con, index, records, wanted, seen or set())


def _steps(wanted: Sequence[str]) -> bool:
    return any(p == R.STEP_TIMES or p.startswith(R.STEP_TIMES + ".") for p in wanted)


def _add(con: duckdb.DuckDBPyConnection, index: int, records: list[dict[str, Any]], wanted: Sequence[str],
         seen: set[str]) -> None:
    """Add ``records`` to ``scanned`` as file ``index``'s, each run once (its first line, as the checked
    reader keeps it; none of the runs ``seen`` there already)."""
    known = set(seen)
    first = []
    for rec in records:
        run_id = rec.get(RUN_ID)
        if isinstance(run_id, str) and run_id:
            if run_id in known:
                continue
            known.add(run_id)
        first.append(rec)
    if first:
        _insert(con, index, [[_get(rec, p) for p in wanted] for rec in first])


def _insert(con: duckdb.DuckDBPyConnection, index: int, rows: list[list[Any]]) -> None:
    """Add ``rows`` (the values of the fields read, in order) to ``scanned`` as file ``index``'s:
    written as JSON lines into a file in memory that DuckDB reads (a statement per row would
    cost a millisecond each)."""
    width = len(rows[0])
    fd = os.memfd_create("cnnbench-runs", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            for row in rows:
                out.write(b"{" + b",".join(b'"c%d":%s' % (i, _dumps(v).encode())
                                           for i, v in enumerate(row) if v is not None) + b"}\n")
        columns = "{" + ", ".join(f"'c{i}': 'JSON'" for i in range(width)) + "}"
        con.execute(f"INSERT INTO scanned SELECT {int(index)}, true, {', '.join(f'c{i}' for i in range(width))} "
                    f"FROM read_json('/proc/self/fd/{fd}', format='newline_delimited', records=true, "
                    f"maximum_object_size={MAX_OBJECT}, columns={columns})")
    finally:
        os.close(fd)


# --- the sidecar --------------------------------------------------------------------------------

SIDECAR_FORMAT = 6


class Sidecar:
    """A results file's runs as the engine read them, in a Parquet file DuckDB writes, in this
    user's cache folder (:func:`~cnnbench.results.cache.cache_home`: absolute, this user's, no one
    else's to write in), named by a hash of the file's real path; never in the store.

    Its metadata: what made it (this format, the record contract's code, DuckDB's version), the
    fields, the rows and per column a sum of its values' hashes (a read checks those of the columns it
    reads: a narrow read of a wide sidecar hashes no more than it reads), and the results file's size,
    the :class:`~cnnbench.results.cache.ContentHash` of those bytes, and its device, inode, size and
    times when they were read; and a hash of all of these.
    A sidecar whose metadata or columns' types are not as written, or whose rows do not add up,
    is not used. It serves a read asking for those fields or fewer, while the file is as it was (device,
    inode, size and times unchanged: no hash) or its first ``size`` bytes hash as recorded; then
    the lines appended since are read by the checked reader (and the sidecar written again, over
    exactly the bytes read, when they are all good and the file did not move meanwhile).
    Otherwise the file is read afresh and its sidecar written again. It is opened once, without
    following a link, and read through that descriptor; only a regular file of this user's that
    no one else may read is used. It is written to a temporary file beside it and renamed, 0600."""

    def __init__(self, where: Path | None, code: str = "") -> None:
        self.where = where
        self.code = code

    @classmethod
    def of(cls, path: Path) -> Sidecar:
        import duckdb

        from cnnbench.results import cache

        try:
            if not cache.worth_it(path, os.stat(path).st_size):
                return cls(None)
            where = cache.cache_path(path, "fields")
        except (OSError, LookupError):
            return cls(None)
        return cls(where, f"{SIDECAR_FORMAT}:{cache.code_key()}:{duckdb.__version__}")

    def open(self) -> int | None:
        """The sidecar opened for reading (a descriptor), when it is a regular file of this user's
        alone; None otherwise."""
        from cnnbench.results.cache import open_own

        return None if self.where is None else open_own(self.where)


def _identity(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _hash_sums(columns: Iterable[str]) -> str:
    """SQL: ``, `` and per column a sum of its values' hashes, as text (not an exclusive or: a value
    changed in every row that holds it, an even number, would cancel out); what a sidecar records
    of its columns (:func:`_rows_check`) and a read counts again (:func:`_counted`)."""
    return "".join(f", coalesce(sum(hash({c})::HUGEINT), 0)::VARCHAR" for c in columns)


def _rows_check(con: duckdb.DuckDBPyConnection, source: str, columns: Iterable[int]) -> tuple[int, list[str]]:
    """The rows of ``source`` and, per column ``f<i>`` of ``columns``, :func:`_hash_sums`."""
    row = con.execute(f"SELECT count(*){_hash_sums(f'f{i}' for i in columns)} FROM {source}").fetchone()
    return (int(row[0]), [str(x) for x in row[1:]]) if row else (0, [])


_META = ("code", "size", "content", "stat", "rows", "hashes", "fields", "leaves", "ordered")


def _b64(value: Any) -> str:
    """``value`` as JSON in base64: a metadata value of a sidecar (text of any characters)."""
    return base64.b64encode(json.dumps(value).encode()).decode()


def _read_meta(con: duckdb.DuckDBPyConnection, fd: int, code: str) -> dict[str, Any] | None:
    """A sidecar's metadata, checked (made by this cnnbench, whole, of sound values): its fields
    list, size and row count as such; None when it cannot be used."""
    import duckdb

    try:
        meta = dict(con.execute("SELECT key::VARCHAR, value::VARCHAR FROM parquet_kv_metadata(?)",
                                [f"/proc/self/fd/{fd}"]).fetchall())
        if meta.get("code") != code or meta.get("metahash") != meta_hash(meta, _META):
            return None
        fields = json.loads(base64.b64decode(meta["fields"]))
        hashes = json.loads(base64.b64decode(meta["hashes"]))
        leaves = json.loads(base64.b64decode(meta["leaves"])) if meta["leaves"] else None
        size, rows = int(meta["size"]), int(meta["rows"])
        kinds = con.execute(f"DESCRIBE SELECT * FROM read_parquet('/proc/self/fd/{fd}')").fetchall()
    except (duckdb.Error, KeyError, ValueError, TypeError, UnicodeError):
        return None
    if (not isinstance(fields, list) or size <= 0 or rows < 0
            or not (isinstance(hashes, list) and len(hashes) == len(fields))
            or not (leaves is None or isinstance(leaves, list) and all(isinstance(x, str) for x in leaves))
            or [(k[0], str(k[1])) for k in kinds] != [(f"f{i}", "JSON") for i in range(len(fields))]):
        return None
    return {**meta, "fields": fields, "hashes": hashes, "size": size, "rows": rows,
            "leaves": None if leaves is None else frozenset(leaves)}


def _load_all(con: duckdb.DuckDBPyConnection, files: Sequence[tuple[int, Path, BinaryIO, Sidecar]],
              wanted: Sequence[str], problems: dict[int, list[StoreProblem]], every: _Every | None = None) -> set[int]:
    """Put into ``scanned`` the runs of each file whose sidecar serves (see :class:`Sidecar`); the
    indexes of those files. A sidecar serves a read of fields it lacks when it knows that no record
    of its file holds them (its ``leaves``): they are null; an every-field read only from one that
    knows its file's fields."""
    opened: list[_Opened] = []
    try:
        for index, path, f, car in files:
            fd = car.open()
            if fd is None:
                continue
            meta = _read_meta(con, fd, car.code)
            st = os.fstat(f.fileno())
            if meta is None or not _may_serve(meta, st, wanted, every=every is not None):
                os.close(fd)
                continue
            opened.append((index, path, f, car, fd, meta, st))
        sound = _loaded(con, _sound(opened), wanted)
        served: set[int] = set()
        for index, path, f, car, _, meta, st, digest in sound:
            served.add(index)
            leaves = meta["leaves"]
            if st.st_size > meta["size"] or digest is not None:
                steps = _steps(wanted) or every is not None and every.steps
                leaves = _tail(con, index, path, f, car, wanted, meta["size"], st, digest, problems[index], leaves,
                               steps)
            if every is not None and leaves is not None:  # it is known: an every-field read is served only so
                every.leaves[index] = leaves
        return served
    finally:
        for *_, fd, _, _ in opened:
            os.close(fd)


_Opened = tuple[int, Path, BinaryIO, Sidecar, int, dict[str, Any], os.stat_result]
"""A file whose sidecar may serve: its index, path, file, sidecar, the sidecar's descriptor and
checked metadata, and the file's ``stat``."""


def _sound(opened: Sequence[_Opened]) -> list[tuple[Any, ...]]:
    """Those of ``opened`` whose file still holds what the sidecar covers: as it was, else the bytes
    hashed as recorded (with their :class:`~cnnbench.results.cache.ContentHash`, or None when the
    file is as it was)."""
    # the files not as they were: is what the sidecar covers unchanged? (hashed on every core)
    moved = [(f.fileno(), meta["size"]) for _, _, f, _, _, meta, st in opened if meta["stat"] != _identity(st)]
    hashes = iter(content_hashes(moved))
    sound = []
    for index, path, f, car, fd, meta, st in opened:
        if meta["stat"] == _identity(st):
            digest = None
            if meta["size"] != st.st_size:
                continue
        else:
            digest = next(hashes)
            if digest is None or digest.hexdigest() != meta["content"]:
                continue
        sound.append((index, path, f, car, fd, meta, st, digest))
    return sound


def _loaded(con: duckdb.DuckDBPyConnection, sound: Sequence[tuple[Any, ...]],
            wanted: Sequence[str]) -> list[tuple[Any, ...]]:
    """Those of ``sound`` whose sidecar's rows went into ``scanned`` (as its file's, null for a field
    it lacks) and add up to its metadata (its rows, and per column it holds of ``wanted``, a sum of
    its values' hashes, counted in ``scanned``: each sidecar is read once); the rows of the others
    taken out again. In one statement: a statement of DuckDB's costs in proportion to the table it
    adds to (each sidecar added alone took three times as long); a sidecar at a time where that
    fails (a failed statement adds nothing)."""
    if not sound:
        return []
    went = list(sound) if _insert_sidecars(con, sound, wanted) else [
        one for one in sound if _insert_sidecars(con, [one], wanted)]
    if not went:
        return []
    counted = _counted(con, went, wanted)
    good: list[tuple[Any, ...]] = []
    bad: list[tuple[Any, ...]] = []
    for one in went:
        meta = one[5]
        rows, column_sums = (counted or {}).get(one[0], (0, {}))  # no rows: no group
        fits = counted is not None and rows == meta["rows"] and all(
            column_sums.get(j, "0") == meta["hashes"][meta["fields"].index(name)]
            for j, name in enumerate(wanted) if name in meta["fields"])
        (good if fits else bad).append(one)
    if bad:
        con.execute(f"DELETE FROM scanned WHERE _file IN ({', '.join(str(int(one[0])) for one in bad)})")
    return good


def _insert_sidecars(con: duckdb.DuckDBPyConnection, part: Sequence[tuple[Any, ...]], wanted: Sequence[str]) -> bool:
    """Put the rows of the sidecars of ``part`` into ``scanned`` in one statement; whether they went in."""
    import duckdb

    selects = []
    for index, _, _, _, fd, meta, _, _ in part:
        fields = meta["fields"]
        columns = [f"f{fields.index(name)}" if name in fields else "NULL" for name in wanted]
        selects.append(f"SELECT {int(index)}, true, {', '.join(columns)} FROM read_parquet('/proc/self/fd/{fd}')")
    try:
        con.execute("INSERT INTO scanned " + " UNION ALL ".join(selects))
    except (duckdb.Error, ValueError, UnicodeError):
        return False
    return True


def _counted(con: duckdb.DuckDBPyConnection, went: Sequence[tuple[Any, ...]],
             wanted: Sequence[str]) -> dict[int, tuple[int, dict[int, str]]] | None:
    """Per file of ``went``, its rows in ``scanned`` and, per column some sidecar of them holds (the
    others are null), a sum of its values' hashes; None when they cannot be counted. Over this
    batch's files alone: the first index bounds the table's older rows out, by DuckDB's zone maps."""
    import duckdb

    held = sorted({j for one in went for j, name in enumerate(wanted) if name in one[5]["fields"]})
    sums = _hash_sums(f"c{j}" for j in held)
    indexes = [int(one[0]) for one in went]
    try:
        rows = con.execute(f"SELECT _file, count(*){sums} FROM scanned WHERE _file >= {min(indexes)} "
                           f"AND _file IN ({', '.join(map(str, indexes))}) GROUP BY _file").fetchall()
    except (duckdb.Error, ValueError):
        return None
    return {int(row[0]): (int(row[1]), dict(zip(held, map(str, row[2:]), strict=True))) for row in rows}


def _may_serve(meta: Mapping[str, Any], st: os.stat_result, wanted: Sequence[str], *, every: bool) -> bool:
    """Whether a sidecar (its checked metadata) may serve a read of ``wanted`` of a file now as
    ``st``: it covers no more than the file holds, and it holds each field wanted or knows that no
    record of its file holds it; an every-field read needs its file's fields known, and its rows in
    line order (an export writes them so)."""
    if meta["size"] > st.st_size or (every and (meta["leaves"] is None or meta.get("ordered") != "1")):
        return False
    missing = set(wanted).difference(meta["fields"])
    return not missing or meta["leaves"] is not None and missing.isdisjoint(meta["leaves"])


def _tail(con: duckdb.DuckDBPyConnection, index: int, path: Path, f: BinaryIO, car: Sidecar, wanted: Sequence[str],
          size: int, st: os.stat_result, digest: Any, problems: list[StoreProblem],
          leaves: frozenset[str] | None, steps: bool) -> frozenset[str] | None:
    """After a sidecar's rows: the lines appended since, read once by the checked reader (with their
    step times where the read reads them, ``steps``: else as the checked reader reads a store without
    them), and the sidecar written again over exactly the bytes read (when they are all good and the
    file did not move as they were read). The file's fields now: ``leaves`` (the sidecar's) and the
    appended records' (the step times among them wherever their text names them; None when the
    sidecar's are not known)."""
    data = os.pread(f.fileno(), st.st_size - size, size) if st.st_size > size else b""
    seen = {row[0] for row in con.execute(f"SELECT {_RUN_KEY} FROM scanned WHERE _file = ?", [index]).fetchall()}
    tail: list[StoreProblem] = []
    records: list[dict[str, Any]] = []
    read_lines(path, data, records, tail, step_times=steps)
    if tail:  # named by their lines: the lines before them counted (only now), and read again so
        tail.clear()
        records.clear()
        read_lines(path, data, records, tail, step_times=steps, first_line=_lines(f.fileno(), size) + 1)
        problems.extend(tail)
        _add(con, index, records, wanted, seen)
        return leaves | _keys(records, data if not steps else b"") if leaves is not None else None
    _add(con, index, records, wanted, seen)
    if leaves is not None:
        leaves |= _keys(records, data if not steps else b"")
    if len(data) == st.st_size - size and _identity(os.fstat(f.fileno())) == _identity(st):
        whole = digest.copy()  # never None here: a file as it was, grown by nothing, has no tail
        whole.update(data)
        _save(con, index, car, wanted, _identity(st), st.st_size, whole.hexdigest(), leaves)
    return leaves


def _lines(fd: int, size: int) -> int:
    """How many lines the first ``size`` bytes of ``fd`` hold."""
    return sum(chunk.count(b"\n") for chunk in chunks(fd, size))


_Made = tuple[int, BinaryIO, Sidecar, str, "frozenset[str] | None"]
"""A file read whole: its index, its file, its sidecar, its identity before the read, its fields."""


def _save_all(con: duckdb.DuckDBPyConnection, files: Sequence[_Made], wanted: Sequence[str]) -> None:
    """Write the sidecar of each file the engine read whole (``before``: its identity before the
    read; ``leaves``: its records' fields, where known), when the file is still as it was and ends
    in a whole line."""
    keep = [(index, f, car, before, leaves) for index, f, car, before, leaves in files
            if car.where is not None and _identity(os.fstat(f.fileno())) == before]
    sizes = [os.fstat(f.fileno()).st_size for _, f, _, _, _ in keep]
    hashes = content_hashes([(f.fileno(), size) for (_, f, _, _, _), size in zip(keep, sizes, strict=True)])
    saves = []
    for (index, f, car, before, leaves), size, digest in zip(keep, sizes, hashes, strict=True):
        last = os.pread(f.fileno(), 1, size - 1) if size else b""
        if digest is not None and last == b"\n" and _identity(os.fstat(f.fileno())) == before:
            saves.append((index, car, before, size, digest.hexdigest(), leaves))

    def save(index: int, car: Sidecar, before: str, size: int, content: str, leaves: frozenset[str] | None) -> None:
        with con.cursor() as cursor:
            _save(cursor, index, car, wanted, before, size, content, leaves)

    on_every_core(save, saves)  # one a core (ten of 10,000 runs each: 2.2 s one after the other)


def _save(con: duckdb.DuckDBPyConnection, index: int, car: Sidecar, wanted: Sequence[str], identity: str,
          size: int, content: str, leaves: frozenset[str] | None = None) -> None:
    """Write ``scanned``' rows of file ``index`` as its sidecar; nothing when it cannot be written (a
    full disk: it is only a cache). ``con`` may be a cursor of the scan's connection (one per thread),
    whose search path is not the scan's: the table is named whole (:data:`SCANNED`)."""
    import duckdb

    if car.where is None:
        return
    width = len(wanted)
    columns = ", ".join(f"c{i} AS f{i}" for i in range(width))
    try:
        rows = _rows_check(con, f"(SELECT {columns} FROM {SCANNED} WHERE _file = {int(index)})", range(width))
        # whether its rows are in line order: a read that keeps none (a sidecar's row groups, or a
        # file's parts, read on every core) may serve reads of chosen fields, not an export's
        ordered = con.execute("SELECT current_setting('preserve_insertion_order')").fetchone()
        meta = {"code": car.code, "size": str(size), "content": content, "stat": identity, "rows": str(rows[0]),
                "hashes": _b64(rows[1]), "fields": _b64(list(wanted)),
                "leaves": "" if leaves is None else _b64(sorted(leaves)),
                "ordered": "1" if ordered and ordered[0] is True else "0"}
        meta["metahash"] = meta_hash(meta, _META)
        from cnnbench.results.cache import _remove_abandoned

        _remove_abandoned(car.where)  # the temporary files of writers that died an hour ago or more
        fd, tmp = tempfile.mkstemp(prefix=f".{car.where.name}.", suffix=".tmp", dir=car.where.parent)  # 0600
        os.close(fd)
    except (OSError, duckdb.Error) as exc:
        log.debug("no sidecar for %s: %s", car.where, exc)
        return
    try:
        kv = ", ".join(f"{k}: {literal(v)}" for k, v in meta.items())
        # into the file mkstemp made, 0600 (with a temporary file of its own, DuckDB would make a new
        # one by the umask, others' to read until a chmod)
        con.execute(f"COPY (SELECT {columns} FROM {SCANNED} WHERE _file = {int(index)} ORDER BY rowid) "
                    f"TO {literal(tmp)} (FORMAT parquet, USE_TMP_FILE false, ROW_GROUP_SIZE {ROW_GROUP}, "
                    f"KV_METADATA {{{kv}}})")
        os.replace(tmp, car.where)
    except (OSError, duckdb.Error) as exc:
        log.debug("no sidecar for %s: %s", car.where, exc)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


# --- --where, in the engine ----------------------------------------------------------------------


@dataclass(frozen=True)
class Filter:
    """``--where`` conditions for a scan, each with the dotted field it names (read with the rest)."""

    conditions: tuple[Any, ...]
    names: tuple[str, ...]

    @property
    def fields(self) -> list[str]:
        from cnnbench.results.fields import MACHINE

        out: list[str] = []
        for name in self.names:
            out.append(name)
            if name == MACHINE:
                out.append(R.HOSTNAME)
        return out


def plan_where(texts: Sequence[str]) -> Filter:
    """Parse ``--where`` texts (``ValueError`` for a malformed one) and the field each names: an
    alias, a top-level field or a dotted name in ``config``, ``environment`` or ``metrics``.
    :class:`EngineCannot` for another name (a bare one, which the checked reader looks up in the
    sections in turn, or one it may not know): the checked reader resolves it."""
    from cnnbench.results.fields import ALIASES, SECTIONS, TOP_LEVEL
    from cnnbench.results.query import parse_where

    conditions = parse_where(texts)
    names = []
    for c in conditions:
        name = c.field.strip()
        if name in ALIASES:
            name = ALIASES[name]
        elif not (name in TOP_LEVEL or name.split(".", 1)[0] in SECTIONS and "." in name):
            raise EngineCannot(c.text)
        names.append(name)
    return Filter(tuple(conditions), tuple(names))


def where_sql(store: StoreScan, where: Filter) -> str:
    """SQL that keeps the runs of ``store`` that meet every condition, as
    :func:`~cnnbench.results.query.select` keeps records: each condition is decided by
    :func:`~cnnbench.results.query.value_matches` once per distinct value of its field, and the
    values that meet it are looked up in the engine. :class:`EngineCannot` for a dotted field no
    run holds a value of (the checked reader knows it, or names the nearest ones)."""
    from cnnbench.results.fields import ALIASES, MACHINE, TOP_LEVEL
    from cnnbench.results.query import get_value, value_matches

    terms = []
    for k, (condition, name) in enumerate(zip(where.conditions, where.names, strict=True)):
        if not (name in ALIASES.values() or name in TOP_LEVEL or store.present(name)):
            raise EngineCannot(condition.text)
        inputs = [name, R.HOSTNAME] if name == MACHINE else [name]
        key = f"json_array({', '.join(map(store.column, inputs))})::VARCHAR"
        matching = []
        for (text,) in store.con.execute(f"SELECT DISTINCT {key} FROM scanned").fetchall():
            record: dict[str, Any] = {}
            for path, value in zip(inputs, _value(text), strict=True):
                _put(record, path, value)
            value = get_value(record, name)
            if any(value_matches(value, wanted) for wanted in condition.values) != condition.negate:
                matching.append(text)
        table = f"_where_{k}"
        store.con.execute(f"CREATE OR REPLACE TEMP TABLE {table} (key VARCHAR)")
        if matching:
            store.con.execute(f"INSERT INTO {table} SELECT unnest(?::VARCHAR[])", [matching])
        terms.append(f"{key} IN (SELECT key FROM {table})")
    return " AND ".join(terms) if terms else "true"


def _put(record: dict[str, Any], path: str, value: Any) -> None:
    if value is None:
        return
    parts = path.split(".")
    node = record
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


# --- results list ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Newest:
    """The newest runs of a store (oldest first, flat dotted fields) and how many runs there are."""

    rows: list[dict[str, Any]]
    total: int
    problems: list[StoreProblem]


SMALL_STORE = 8 << 20
"""Stores smaller than this (in bytes, all their files) are read by the checked reader, which is the
quicker there (DuckDB's import and query cost about 0.2 s; ``benchmarks/README.md``): both give
the same runs."""


SMALL_FILES = 256 << 10
"""Stores whose files are smaller than this on average are read by the checked reader too: each
file costs the engine about 2 ms (a store of 5,000 one-line files: 10 s against 0.2 s)."""


WIDE_STORE = 64 << 20
"""Stores smaller than this are read by the checked reader for a read of every field (an export, the
``runs`` of a query): the engine finds, checks, types and writes every column, which its speed on a
varied store repays only from about 10,000 runs (2,000 runs, 13 MB: export 0.90 s against 0.35 s;
20,000 runs, 128 MB: 1.45 s against 2.49 s; ``benchmarks/README.md``)."""

FRAME_STORE = 256 << 20
"""Stores smaller than this are read by the checked reader for :func:`cnnbench.read_results`: a
DataFrame of every column costs the engine more again (20,000 runs: 2.32 s warm and 4.76 s cold
against 2.43 s and 3.73 s; 100,000 runs, 644 MB: 7.5–7.8 s against 11.2–11.8 s warm, and still
17.5–17.7 s against 15.9–16.5 s cold, the sidecars written)."""


def worth_the_engine(paths: Sequence[str | os.PathLike[str]], least: int | None = None) -> bool:
    """Whether the stores at ``paths`` are big enough for the engine: ``least`` bytes in all
    (:data:`SMALL_STORE` by default: a read of a few fields), in files of :data:`SMALL_FILES` or more
    on average."""
    least = SMALL_STORE if least is None else least
    total = count = 0
    for path in iter_store_files(paths):
        try:
            total += os.stat(path).st_size
            count += 1
        except OSError:  # named when it is read
            pass
    return total >= least and total >= count * SMALL_FILES


Resolve = Callable[[str, Sequence[Mapping[str, Any]]], str]
"""How the checked reader turns a ``--where`` name into a dotted field, given the records
(:func:`cnnbench.analysis.fields.resolve_field`: a layer above this one, so the caller's)."""


def newest_runs(paths: Sequence[str | os.PathLike[str]], fields: Sequence[str], *, resolve: Resolve,
                where: Sequence[str] = (), limit: int = 0, on_problem: Callable[[str], None] | None = None) -> Newest:
    """The newest ``limit`` runs (all with 0) of the stores at ``paths`` that meet ``where``, in
    :func:`~cnnbench.results.export.list_order`, with ``fields``: what ``results list`` shows.
    Read through the engine; a ``--where`` field no run holds is left to the checked reader,
    which names the nearest ones."""
    from cnnbench.results.export import flat_list_order

    shown = ("started_at", R.MODEL, R.BATCH, RUN_ID, *fields)
    try:
        if not worth_the_engine(paths):
            raise EngineCannot("a small store, or one of small files")
        plan = plan_where(where)
        store = scan(paths, [*shown, *plan.fields])
    except EngineCannot:
        return _newest_checked(paths, shown, where, limit, resolve, on_problem)
    with store:
        if on_problem is not None:
            for problem in store.problems:
                on_problem(problem)
        try:
            keep = where_sql(store, plan)
        except EngineCannot:
            return _newest_checked(paths, shown, where, limit, resolve)
        minute = f"substr(coalesce({store.column('started_at')}->>'$', ''), 1, 16)"
        counted = store.con.execute(f"SELECT count(*) FROM scanned WHERE {keep}").fetchone()
        total = int(counted[0]) if counted else 0
        tail = f"WHERE {keep}"
        if 0 < limit < total:  # only the runs of the newest minutes that hold `limit` runs are sorted here
            tail += (f" AND {minute} >= (SELECT min(m) FROM (SELECT {minute} AS m FROM scanned WHERE {keep} "
                     f"ORDER BY m DESC LIMIT {int(limit)}))")
        rows = store.rows(tail + " ORDER BY _file, rowid", shown)  # runs alike stay in the store's order
        problems = store.problems
    rows.sort(key=flat_list_order)
    return Newest(rows[-limit:] if limit > 0 else rows, total, problems)


def _newest_checked(paths: Sequence[str | os.PathLike[str]], fields: Sequence[str], where: Sequence[str],
                    limit: int, resolve: Resolve, on_problem: Callable[[str], None] | None = None) -> Newest:
    """:func:`newest_runs` by the checked reader."""
    from cnnbench.results.export import newest
    from cnnbench.results.flatten import flatten_record
    from cnnbench.results.query import parse_where, select

    records, problems = read_records(list(paths), step_times=False, shared=True)
    if on_problem is not None:
        for problem in problems:
            on_problem(problem)
    kept = select(records, parse_where(where, lambda name: resolve(name, records)))
    shown, total = newest(kept, limit)
    rows = [flatten_record(r) for r in shown]
    return Newest([{k: v for k, v in row.items() if k in fields and v is not None} for row in rows], total,
                  [StoreProblem(p) for p in problems])


# --- results export --------------------------------------------------------------------------------


@dataclass
class Exported:
    """The runs of a store that an export keeps, in the engine's table: the ``columns`` they hold (in
    the order ``results export`` writes them), how many ``rows``, and the lines that could not be read;
    written, in the store's order, by :meth:`csv_body`, :meth:`json_body` or :meth:`parquet_to`."""

    store: StoreScan
    keep: str
    columns: list[str]
    rows: int

    @property
    def problems(self) -> list[StoreProblem]:
        return self.store.problems

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Exported:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _select(self, cells: Iterable[str]) -> str:
        return f"SELECT {', '.join(cells)} FROM scanned WHERE {self.keep} ORDER BY _file, rowid"

    def csv_body(self) -> int:
        """A file in memory (its descriptor, at its start) holding the rows as CSV, a ``\\n`` after
        each, without the header; every text cell made safe as the one CSV writer makes it
        (:mod:`cnnbench.results.csv_out`)."""
        fd = os.memfd_create("cnnbench-export", os.MFD_CLOEXEC)
        try:
            if self.columns:
                cells = (_csv_cell(self.store.column(name)) for name in self.columns)
                self.store.con.execute(f"COPY ({self._select(cells)}) TO '/proc/self/fd/{fd}' "
                                       "(FORMAT csv, HEADER false, USE_TMP_FILE false)")
        except BaseException:
            os.close(fd)
            raise
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def json_body(self) -> int:
        """A file in memory (its descriptor, at its start) holding each row as a JSON object of its
        fields that hold a value (a field null in a run is left out of its object, as one it does not
        hold), in the columns' order, ``,\\n`` between them; without the brackets around them."""
        members = (f"CASE WHEN NOT starts_with({c}::VARCHAR, '{{') THEN {literal(json.dumps(name) + ':')} || {c} END"
                   for name, c in ((name, self.store.column(name)) for name in self.columns))
        row = f"'{{' || concat_ws(',', {', '.join(members)}) || '}}'" if self.columns else "'{}'"
        fd = os.memfd_create("cnnbench-export", os.MFD_CLOEXEC)
        try:
            result = self.store.con.execute(self._select([row]))
            first = True
            while chunk := result.fetchmany(4096):
                text = ",\n".join(r[0] for r in chunk)
                os.write(fd, ((",\n" if not first else "") + text).encode())  # memfd: written whole
                first = False
        except BaseException:
            os.close(fd)
            raise
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def parquet_to(self, fd: int) -> None:
        """Write the rows as a Parquet file to the open file ``fd``, a column per field typed by the
        values the kept rows hold there (:func:`_parquet_cell`). ``OSError`` where it cannot be
        written (a full disk as ``ENOSPC``); :class:`EngineCannot` where DuckDB cannot type the
        values (the checked reader's export writes them)."""
        import duckdb

        if not self.columns:
            raise ValueError("no column to write")
        names = [self.store.column(name) for name in self.columns]
        try:
            kinds, shapes = _kinds(self.store.con, names, self.keep)
            typed = [_parquet_cell(c, kind, shapes.get(c)) for c, kind in zip(names, kinds, strict=True)]
            if any(kind & _LONG_LISTED for kind in kinds) or None in typed:
                raise EngineCannot("a column of values of several kinds, or a list holding a long number")
            cells = (f"{cell} AS {ident(name)}" for name, cell in zip(self.columns, typed, strict=True))
            self.store.con.execute(f"COPY ({self._select(cells)}) TO '/proc/self/fd/{fd}' "
                                   "(FORMAT parquet, USE_TMP_FILE false)")
        except duckdb.IOException as exc:
            why = str(exc).splitlines()[0]
            raise OSError(errno.ENOSPC if "No space left" in why else errno.EIO, why) from None
        except duckdb.Error as exc:  # lists of objects DuckDB cannot type (keys alike but for case, an empty key)
            raise EngineCannot(f"no Parquet column for these values: {str(exc).splitlines()[0]}") from None


_TEXT, _LIST, _TRUTH, _WHOLE, _FRACTION, _OTHER, _WIDE, _LONG_LISTED = 1, 2, 4, 8, 16, 32, 64, 128
"""The kinds of value a column holds (:func:`_kinds`), or-ed together (:data:`_WIDE`: a whole number
beyond 2**53, which no double holds exactly and pyarrow puts in no column of doubles;
:data:`_LONG_LISTED`: a list holding a number of 16 digits or more: the checked export writes the file)."""

_FIRST = {ord('"'): _TEXT, ord("["): _LIST, ord("t"): _TRUTH, ord("f"): _TRUTH, ord("{"): 0,
          **{ord(c): _WHOLE for c in "-0123456789"}}
"""The kind of a JSON value told by the first character of its text (``{``: an object, which a
flat run holds as its fields instead: no value); a number is then told whole or not by its text."""

_LONG_IN_LIST = r"(^|[^.0-9eE+-])-?[0-9]{16}"
"""A number whose whole part has 16 digits or more in a list's JSON text (or such digits in its
text): one beyond 2**53, which a list of doubles would round and 64 bits may not hold."""


def _kinds(con: duckdb.DuckDBPyConnection, names: Sequence[str], keep: str) -> tuple[list[int], dict[str, str]]:
    """The kinds of value each column of ``scanned`` holds in the rows ``keep`` keeps (the or of
    :data:`_TEXT`...), and the structure of the lists a column of lists holds (:func:`_list_shapes`).
    Told by the first character of each value's text, then, in the columns of numbers only, by its
    text: not whole (a point or an exponent, as DuckDB writes every such number), beyond 64 bits
    (which the checked reader reads as a fraction), or beyond 2**53 (:data:`_WIDE`)."""
    firsts = con.execute(f"SELECT {', '.join(f'bit_or(1::HUGEINT << ascii({c}::VARCHAR))' for c in names)} "
                         f"FROM scanned WHERE {keep}").fetchone() or ()
    kinds = [functools.reduce(operator.or_, (_FIRST.get(i, _OTHER) for i in range(128) if (seen or 0) >> i & 1), 0)
             for seen in firsts]
    numbers = [c for c, kind in zip(names, kinds, strict=True) if kind == _WHOLE]
    if numbers:
        found = con.execute(f"SELECT {', '.join(map(_number_kinds, numbers))} FROM scanned WHERE {keep}").fetchone()
        extra = dict(zip(numbers, found or (), strict=True))
        kinds = [kind | (extra.get(c) or 0) for c, kind in zip(names, kinds, strict=True)]
    lists = [c for c, kind in zip(names, kinds, strict=True) if kind == _LIST]
    shapes, long = _list_shapes(con, lists, keep)
    return [kind | (_LONG_LISTED if c in long else 0) for c, kind in zip(names, kinds, strict=True)], shapes


_NUMBERS = r"\[(-?[0-9][0-9.eE+-]*(,-?[0-9][0-9.eE+-]*)*)?\]"
"""A list of numbers alone, as DuckDB writes its JSON (compact)."""


def _list_shapes(con: duckdb.DuckDBPyConnection, lists: Sequence[str], keep: str) -> tuple[dict[str, str], set[str]]:
    """The structure of the lists each column of ``lists`` holds (as DuckDB's ``json_group_structure``
    gives it, objects left out), and the columns with a list holding a number of 16 digits or more
    (:data:`_LONG_IN_LIST`). A column of lists of numbers alone (step times: ten million of them in
    100,000 runs) is told by its text; only the others are parsed for their structure."""
    if not lists:
        return {}, set()
    asked = []
    for c in lists:
        x = f"CASE WHEN NOT starts_with({c}::VARCHAR, '{{') THEN {c}::VARCHAR END"
        asked += [f"bool_and(regexp_full_match({x}, {literal(_NUMBERS)}))",
                  f"bool_or(contains({x}, '.') OR contains({x}, 'e') OR contains({x}, 'E'))",
                  f"bool_or({x} <> '[]')", f"bool_or(regexp_matches({x}, {literal(_LONG_IN_LIST)}))"]
    found = con.execute(f"SELECT {', '.join(asked)} FROM scanned WHERE {keep}").fetchone() or ()
    shapes: dict[str, str] = {}
    for i, c in enumerate(lists):
        numeric, fraction, some = found[4 * i:4 * i + 3]
        if numeric:
            shapes[c] = '["NULL"]' if not some else '["DOUBLE"]' if fraction else '["BIGINT"]'
    parsed = [c for c in lists if c not in shapes]
    if parsed:
        asked = [f"json_group_structure(CASE WHEN NOT starts_with({c}::VARCHAR, '{{') THEN {c} END)" for c in parsed]
        structures = con.execute(f"SELECT {', '.join(asked)} FROM scanned WHERE {keep}").fetchone() or ()
        shapes.update(zip(parsed, structures, strict=True))
    return shapes, {c for i, c in enumerate(lists) if found[4 * i + 3]}


def _number_kinds(c: str) -> str:
    """SQL: the or of what the numbers of column ``c`` hold besides whole numbers within 2**53:
    :data:`_FRACTION` (a point or an exponent, as DuckDB writes every number that is not whole; or
    a whole number beyond 64 bits, which the checked reader reads as one), :data:`_WIDE` (a whole
    number of 64 bits beyond 2**53), :data:`_OTHER` (one of 64 bits unsigned only: the checked export
    writes such a column, as text)."""
    x = f"{c}::VARCHAR"
    fraction = f"contains({x}, '.') OR contains({x}, 'e') OR contains({x}, 'E')"
    return (f"bit_or(CASE WHEN {c} IS NULL OR starts_with({x}, '{{') THEN 0 WHEN {fraction} THEN {_FRACTION} "
            f"WHEN length({x}) <= 15 THEN 0 WHEN TRY_CAST({x} AS BIGINT) BETWEEN {-(1 << 53)} AND {1 << 53} THEN 0 "
            f"WHEN TRY_CAST({x} AS BIGINT) IS NOT NULL THEN {_WIDE} "
            f"WHEN TRY_CAST({x} AS UBIGINT) IS NOT NULL THEN {_OTHER} ELSE {_FRACTION} END)")


def _text_of(c: str) -> str:
    """SQL: the text of the JSON string ``c`` (unescaped by a parser only where it holds an escape)."""
    x = f"{c}::VARCHAR"
    return f"(CASE WHEN contains({x}, '\\') THEN {c}->>'$' ELSE ({x})[2:-2] END)"


def _parquet_cell(c: str, kind: int, shape: str | None) -> str | None:
    """SQL: the Parquet cell of JSON value ``c`` in a column whose values are of the kinds ``kind``
    (:func:`_kinds`; for lists, ``shape``: DuckDB's ``json_group_structure`` of them), typed as
    ``pyarrow`` types a column of Python values (the checked reader's export): whole numbers as
    BIGINT, numbers as DOUBLE (a whole one beyond 64 bits too, as the checked reader reads it),
    true and false as BOOLEAN, text as VARCHAR, lists as lists of their elements' type; a column
    of no value as nulls. None for a column that mixes kinds (or whole numbers beyond 2**53 with
    fractions, or 64 bits unsigned only): the checked export writes it as text, each value that is
    not text as Python spells its JSON, which DuckDB does not (``1e-05``, ``[1, "a"]``)."""
    x = f"{c}::VARCHAR"
    simple = {0: "NULL", _TEXT: _text_of(c), _TRUTH: f"({x} = 'true')", _WHOLE: f"CAST({x} AS BIGINT)",
              _WHOLE | _WIDE: f"CAST({x} AS BIGINT)", _WHOLE | _FRACTION: f"CAST({x} AS DOUBLE)"}
    if kind in simple:
        return f"(CASE WHEN starts_with({x}, '{{') THEN NULL ELSE {simple[kind]} END)"
    if kind == _LIST and shape is not None and '"JSON"' not in shape:
        typed = shape.replace('"UBIGINT"', '"BIGINT"').replace('"HUGEINT"', '"BIGINT"')  # each fits: see _LONG_LISTED
        return f"(CASE WHEN starts_with({x}, '{{') THEN NULL ELSE from_json({c}, {literal(typed)}) END)"
    return None


def _safe_text(t: str) -> str:
    """SQL: the text ``t`` as the one CSV writer writes it (:func:`~cnnbench.results.csv_out.safe_text`):
    with a quote before it where a spreadsheet would read a formula (only text that begins with a
    quote or one of :data:`~cnnbench.results.csv_out.TRIGGERS` is looked at further)."""
    from cnnbench.results.csv_out import NUMBER_PATTERN, TRIGGERS

    spelled = {"\t": r"\t", "\r": r"\r", "-": ""}
    starts = "^'*[" + "".join(spelled.get(c, c) for c in TRIGGERS) + ("-" if "-" in TRIGGERS else "") + "]"
    first = ", ".join(str(ord(c)) for c in ("'", *TRIGGERS))
    number = f"coalesce(regexp_full_match({t}, {literal(NUMBER_PATTERN)}) AND isfinite(TRY_CAST({t} AS DOUBLE)), false)"
    return (f"(CASE WHEN ascii({t}) IN ({first}) AND regexp_matches({t}, {literal(starts)}) AND NOT {number} "
            f"THEN '''' || {t} ELSE {t} END)")


def _csv_cell(c: str) -> str:
    """SQL: the CSV cell of JSON value ``c`` (DuckDB's writer quotes it where it must): empty for
    null and for an empty object (a flat run has no such field), text as text, a number or true or
    false as written, a list as its JSON text (DuckDB's: compact)."""
    x = f"{c}::VARCHAR"
    return (f"""(CASE WHEN starts_with({x}, '"') THEN nullif({_safe_text(f"({c}->>'$')")}, '') """
            f"WHEN starts_with({x}, '{{') THEN NULL ELSE {x} END)")


def export_scan(paths: Sequence[str | os.PathLike[str]], *, where: Sequence[str] = (),
                step_times: bool = True) -> Exported:
    """The runs of the stores at ``paths`` that meet ``where``, as ``results export`` writes them:
    every field the runs hold (but the step times, without ``step_times``), in the store's order.
    :class:`EngineCannot` where the checked reader reads it (a small store; a ``--where`` field the
    engine does not resolve or no run holds; a field only an upgraded record holds; see :func:`scan`)."""
    if not worth_the_engine(paths, WIDE_STORE):
        raise EngineCannot("a small store, or one of small files")
    plan = plan_where(where)
    store = scan(paths, None, leave_out=() if step_times else (R.STEP_TIMES,))
    try:
        if not set(plan.fields) <= set(store.fields):
            raise EngineCannot("a --where field no run holds")
        keep = where_sql(store, plan)
        counted = store.con.execute(f"SELECT count(*) FROM scanned WHERE {keep}").fetchone()
        return Exported(store, keep, kept_columns(store, keep), int(counted[0]) if counted else 0)
    except BaseException:
        store.close()
        raise


def kept_columns(store: StoreScan, keep: str) -> list[str]:
    """The columns of the runs ``keep`` keeps: those with a value in one of them, and those no run
    holds a value of (a field always null: a column as a run with it gives). A field that only runs
    left out hold a value of is no column; nor is one a kept run holds as null beside others that
    hold values, which the checked export would write empty. No run kept: no column, as the checked
    export writes none."""
    if not store.columns:
        return []
    counts = ", ".join(f"count({store.column(name)}) FILTER (WHERE _kept), count({store.column(name)})"
                       for name in store.columns)
    # ``keep`` decided once a row (in each FILTER it was a join per column: 3.8 s on 3,000 runs)
    row = store.con.execute(f"SELECT count(*) FILTER (WHERE _kept), {counts} "
                            f"FROM (SELECT *, ({keep}) IS TRUE AS _kept FROM scanned)").fetchone() or (0,)
    if not row[0]:
        return []
    return [name for i, name in enumerate(store.columns) if row[1 + 2 * i] or not row[2 + 2 * i]]
