"""Selecting records by ``FIELD=VALUE`` conditions on their flat (dotted) form.

``config.model=resnet*`` (shell wildcards for text), ``config.batch_size=32`` (numbers
compare as numbers), ``config.forward_only=true``, ``error=null``. A field may be
written without its section when only one column ends with it (``model=resnet50``).
No torch here.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_TRUE = ("true", "yes", "1", "on")
_FALSE = ("false", "no", "0", "off")
_NULL = ("", "null", "none")


@dataclass(frozen=True)
class Condition:
    """One ``FIELD=VALUE`` condition."""

    field: str
    value: str

    def matches(self, row: Mapping[str, Any]) -> bool:
        return value_matches(row.get(self.field), self.value)


def parse_condition(text: str) -> Condition:
    """``"config.model=resnet50"`` -> ``Condition("config.model", "resnet50")``; ``ValueError`` without ``=``."""
    field, sep, value = text.partition("=")
    if not sep or not field.strip():
        raise ValueError(f"expected FIELD=VALUE, got {text!r}")
    return Condition(field.strip(), value.strip())


def resolve_fields(conditions: Sequence[Condition], columns: Iterable[str]) -> list[Condition]:
    """Conditions with each field spelled as a known column; ``ValueError`` naming an unknown one."""
    known = set(columns)
    out: list[Condition] = []
    for cond in conditions:
        if cond.field in known:
            out.append(cond)
            continue
        candidates = sorted(c for c in known if c.endswith("." + cond.field))
        if len(candidates) == 1:
            out.append(Condition(candidates[0], cond.value))
        elif candidates:
            raise ValueError(f"field {cond.field!r} is ambiguous: {', '.join(candidates)}")
        else:
            close = difflib.get_close_matches(cond.field, sorted(known), n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"no record has a field {cond.field!r}{hint}")
    return out


def value_matches(actual: Any, wanted: str) -> bool:
    """Whether a record's value equals the text of a condition (see the module doc)."""
    if actual is None:
        return wanted.lower() in _NULL
    if isinstance(actual, bool):
        lowered = wanted.lower()
        return (lowered in _TRUE) if actual else (lowered in _FALSE)
    if isinstance(actual, (int, float)):
        try:
            return float(wanted) == float(actual)
        except ValueError:
            return False
    if isinstance(actual, str):
        return fnmatch.fnmatchcase(actual, wanted)
    return json.dumps(actual, separators=(",", ":")) == wanted


def filter_rows(rows: Iterable[Mapping[str, Any]], conditions: Sequence[Condition]) -> list[Mapping[str, Any]]:
    """The rows that meet every condition."""
    return [row for row in rows if all(c.matches(row) for c in conditions)]
