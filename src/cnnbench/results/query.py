"""``--where`` conditions on records: the one parser and matcher for ``results`` and ``report``.

``FIELD=VALUE`` keeps records whose field has the value, ``FIELD=V1,V2`` any of the values,
``FIELD!=VALUE`` drops them; several conditions must all hold. Text compares with shell
wildcards (``model=resnet*``), case-insensitively; numbers compare as numbers (``4``
matches ``4.0``); booleans as ``true``/``false`` (also ``yes``/``no``/``1``/``0``); ``null``
(or nothing) matches a missing value. Fields are dotted record names (``config.model``);
the caller's ``resolve`` turns what the user wrote (an alias, a bare name) into one. No torch here.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.results.fields import MACHINE as MACHINE
from cnnbench.results.fields import SOURCE as SOURCE
from cnnbench.results.lines import as_unicode
from cnnbench.results.step_summary import plain

_TRUE = ("true", "yes", "1", "on")
_FALSE = ("false", "no", "0", "off")
_NULL = ("", "null", "none", "—")



def get_value(record: Mapping[str, Any], field: str) -> Any:
    """The value of a dotted field in a record (``None`` when absent).

    ``source`` defaults to ``cnnbench`` and ``environment.machine`` to the host name.
    """
    if field == SOURCE:
        return record.get("source") or "cnnbench"
    if field == MACHINE:
        env = record.get("environment") or {}
        return env.get("machine") or env.get("hostname") or "unknown"
    node: Any = record
    for part in field.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
        if node is None:
            return None
    return node


@dataclass(frozen=True)
class Condition:
    """One ``--where`` condition on a dotted field."""

    field: str
    values: tuple[str, ...]
    negate: bool = False
    text: str = ""
    """What the user wrote."""

    def holds(self, record: Mapping[str, Any]) -> bool:
        value = get_value(record, self.field)
        return any(value_matches(value, wanted) for wanted in self.values) != self.negate


def parse_where(expressions: Sequence[str], resolve: Callable[[str], str] = lambda name: name) -> list[Condition]:
    """Parse ``FIELD=VALUE`` / ``FIELD=V1,V2`` / ``FIELD!=VALUE``; ``ValueError`` for a malformed
    expression (``resolve`` raises its own error for an unknown field)."""
    conditions = []
    for expr in expressions:
        negate = "!=" in expr
        name, sep, rhs = expr.partition("!=" if negate else "=")
        if not sep or not name.strip():
            raise ValueError(f"expected FIELD=VALUE or FIELD!=VALUE, got {expr!r}")
        values = tuple(as_unicode(v.strip()) for v in rhs.split(","))  # as the store's records read
        conditions.append(Condition(resolve(name.strip()), values, negate, expr))
    return conditions


def nearest_fields(name: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The ``n`` known field names nearest to an unknown ``name``, best first.

    A bare name (``cpu_cors``) is also held against the last part of each dotted name
    (``environment.cpu_cores``), which a plain comparison of the whole texts misses; a
    dotted name is left out when its last part (an alias) is as near.
    """
    wanted = name.strip().lower()
    bare = "." not in wanted
    scores: dict[str, float] = {}
    for field in known:
        matcher = difflib.SequenceMatcher(None, wanted, field.lower())
        score = matcher.ratio()
        if bare and "." in field:
            matcher.set_seq2(field.rsplit(".", 1)[-1].lower())
            score = max(score, matcher.ratio())
        if score >= cutoff:
            scores[field] = score
    ranked = sorted(scores, key=lambda f: (-scores[f], f))
    return [f for f in ranked if scores.get(f.rsplit(".", 1)[-1], -1.0) < scores[f] or "." not in f][:n]


def value_matches(actual: Any, wanted: str) -> bool:
    """Whether a record's value equals the text of a condition (see the module documentation)."""
    w = wanted.strip().lower()
    if actual is None:
        return w in _NULL
    if isinstance(actual, bool):
        return (w in _TRUE) if actual else (w in _FALSE)
    if isinstance(actual, (int, float)):
        try:
            return float(w) == float(actual)
        except ValueError:
            return False
    if isinstance(actual, str):
        return fnmatch.fnmatchcase(actual.lower(), w)
    return json.dumps(plain(actual), separators=(",", ":")).lower() == w


def select(records: Iterable[Mapping[str, Any]], conditions: Sequence[Condition]) -> list[Mapping[str, Any]]:
    """The records for which every condition holds."""
    if not conditions:
        return list(records)
    return [r for r in records if all(c.holds(r) for c in conditions)]
