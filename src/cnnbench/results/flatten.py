"""Records as flat rows: nested sections become dotted column names.

``{"config": {"model": "resnet50"}, "metrics": {"total_images_per_sec": 123.4}}`` becomes
``{"config.model": "resnet50", "metrics.total_images_per_sec": 123.4}``. Lists (step
times) stay lists. :func:`unflatten_record` goes back, for tables whose columns are
record field names (``cnnbench import csv``). Used by ``cnnbench results`` and the
report; no torch here, pandas only inside :func:`records_frame`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cnnbench.results import fields as R

if TYPE_CHECKING:
    import pandas as pd

SEP = "."

# Columns first in tables and exports, in this order, when present.
LEADING_COLUMNS = (
    "started_at",
    R.MACHINE,
    "suite_name",
    "case_name",
    R.MODEL,
    R.BATCH,
    R.PRECISION,
    R.DATA_FORMAT,
    R.STATUS,
    R.IPS,
)


def flatten_record(record: Mapping[str, Any], sep: str = SEP) -> dict[str, Any]:
    """One flat row: nested mappings joined with ``sep``; other values as they are."""
    planned = _flatten_planned(record, sep) if type(record) is dict else None
    if planned is not None:
        return planned
    out: dict[str, Any] = {}
    _flatten_into(out, "", record, sep)
    return out


_LEAVES = frozenset({str, int, float, bool, type(None), list})
"""Types of JSON values that are no mapping: told apart without an abstract-class check
(a store of 100,000 records has millions of values)."""


_TEXT = frozenset({str})

_NAMES: dict[tuple[Any, ...], tuple[str, ...]] = {}
"""Flat names per shape (a prefix or separator, and keys), joined once: the records of one store
share a handful of shapes, so their names are not joined once per record."""


def flatten_records(records: Iterable[Mapping[str, Any]], sep: str = SEP) -> list[dict[str, Any]]:
    """:func:`flatten_record` of each record; in a list (or another sequence) of records, a
    ``config`` or ``environment`` dict that records share (a lazy or shared read's:
    :func:`~cnnbench.results.reader.read_records`) is taken apart once. (Records made one after
    another, from a generator, may reuse one dict and change it in between: each is taken
    apart.)"""
    seen: _Seen | None = {} if isinstance(records, Sequence) else None
    out = []
    for record in records:
        planned = _flatten_planned(record, sep, seen) if type(record) is dict else None
        if planned is None:  # not planned twice: walked
            planned = {}
            _flatten_into(planned, "", record, sep)
        out.append(planned)
    return out


_SHARED = frozenset({"config", "environment"})
"""The sections a lazy read shares among records."""


def _flatten_planned(record: dict[str, Any], sep: str,
                     seen: _Seen | None = None) -> dict[str, Any] | None:
    """:func:`flatten_record` of a record whose keys are text (every record read from JSON), made
    at once from its shape's names; ``None`` for any other record.
    ``seen``: the keys and values of the shared sections met so far, by ``id``."""
    if not _TEXT.issuperset(map(type, record)):
        return None  # keys other than text (not from JSON): the walk names them
    shape: list[tuple[Any, ...] | None] = []
    values: list[Any] = []
    for top, item in record.items():
        kind = type(item)
        if kind is dict:
            known = _taken_apart(item, seen if seen is not None and top in _SHARED else None, sep)
            if known is None:
                return None
            shape.append(known[0])
            values.extend(known[1])
        elif kind in _LEAVES:
            shape.append(None)
            values.append(item)
        else:
            return None
    key = (sep, tuple(record), tuple(shape))
    names = _NAMES.get(key)
    if names is None:
        joined: list[str] = []
        for top, subs in zip(record, shape, strict=True):
            joined.extend([top] if subs is None else [f"{top}{sep}{sub}" for sub in subs])
        names = _remember(key, tuple(joined))
    return dict(zip(names, values, strict=True))


_Parts = tuple[tuple[str, ...], Iterable[Any]]
_Seen = dict[int, tuple[dict[str, Any], _Parts | None]]
"""Sections met, by ``id``, each kept alive with its keys and values once met twice."""


def _taken_apart(section: dict[str, Any], seen: _Seen | None, sep: str = SEP) -> _Parts | None:
    """The flat names (below the section) and values of a dict under text keys (None for another
    dict): a dict of leaves as it is, one with dicts in it walked. With ``seen``, kept from the
    second time the same dict is met (a section a read shares), so that one not shared costs a
    note of it only."""
    met = seen.get(id(section)) if seen is not None else None
    if met is not None and met[0] is section and met[1] is not None:
        return met[1]
    if not _TEXT.issuperset(map(type, section)):
        return None
    if _LEAVES.issuperset(map(type, section.values())):
        parts: _Parts = (tuple(section), section.values())
    else:  # dicts below (environment's variables, a metric's parts): walked once per dict
        flat: dict[str, Any] = {}
        _flatten_into(flat, "", section, sep)
        parts = (tuple(flat), flat.values())
    if seen is None:
        return parts
    if met is None or met[0] is not section:
        seen[id(section)] = (section, None)  # met once (and kept: its id is not another's later)
        return parts
    parts = (parts[0], tuple(parts[1]))
    seen[id(section)] = (section, parts)
    return parts


def _remember(key: tuple[Any, ...], names: tuple[str, ...]) -> tuple[str, ...]:
    if len(_NAMES) > 4096:
        _NAMES.clear()
    _NAMES[key] = names
    return names


def _flatten_into(out: dict[str, Any], prefix: str, value: Mapping[str, Any], sep: str) -> None:
    if type(value) is dict and _LEAVES.issuperset(map(type, value.values())):  # leaves only: names at once
        keys = tuple(value)
        names = _NAMES.get((prefix, keys))
        if names is None:
            names = _remember((prefix, keys), tuple(f"{prefix}{key}" for key in keys))
        out.update(zip(names, value.values(), strict=True))
        return
    for key, item in value.items():
        kind = type(item)
        if kind is dict or (kind not in _LEAVES and isinstance(item, Mapping)):  # an empty one adds no column
            _flatten_into(out, f"{prefix}{key}{sep}", item, sep)
        else:
            out[f"{prefix}{key}"] = item


def unflatten_record(row: Mapping[str, Any], sep: str = SEP) -> dict[str, Any]:
    """Nested record from a flat row; raises ``ValueError`` when a name is both a value and a section."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        parts = name.split(sep)
        node = out
        for depth, part in enumerate(parts[:-1], 1):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"column {name!r} conflicts with column {sep.join(parts[:depth])!r}")
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise ValueError(f"column {name!r} conflicts with the columns under it")
        node[parts[-1]] = value
    return out


def ordered_columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """All column names of ``rows``: the leading ones first, then the rest sorted."""
    seen: set[str] = set()
    for row in rows:
        seen.update(row)
    lead = [c for c in LEADING_COLUMNS if c in seen]
    return lead + sorted(seen.difference(lead))


def records_frame(records: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A pandas DataFrame with one row per record and dotted column names (cells as
    :func:`plain_cells` makes them)."""
    import pandas as pd

    rows = flatten_records(records)
    cols = list(columns) if columns is not None else ordered_columns(rows)
    return plain_cells(pd.DataFrame.from_records(rows, columns=cols))


def plain_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (changed in place) with Python values in its cells, one way whatever made it: a list
    is a list (not a NumPy array); a column of whole numbers or of true and false with cells
    missing is what pandas makes of the Python values (floats with NaN; objects), not a nullable
    type; a missing cell is NaN in a column of numbers and None in any other (a field not there
    and a null alike), and a column with no value at all holds None."""
    import numpy as np
    import pandas as pd

    for index in range(frame.shape[1]):
        column = frame.iloc[:, index]
        held = column.notna()
        extension = isinstance(column.dtype, pd.api.extensions.ExtensionDtype)
        if held.all() and column.dtype != object and not extension:
            continue
        if extension:
            column = pd.Series(column.astype(object).where(held, None).tolist(), index=column.index, dtype=object)
            column = column.infer_objects() if held.any() else column
        if column.dtype == object or not held.any():
            column = column.astype(object).where(held, None)
            if any(isinstance(v, np.ndarray) for v in column[held]):
                column = column.map(lambda v: v.tolist() if isinstance(v, np.ndarray) else v)
        frame.isetitem(index, column)
    return frame
