"""``--where FIELD=VALUE`` selection of records.

``FIELD=V1,V2`` keeps records whose field equals any of the values; ``FIELD!=V`` drops
them; several conditions must all hold. Values compare as text, numbers as numbers
(``4`` matches ``4.0``) and booleans as ``true``/``false`` (also ``yes``/``no``/``1``/``0``),
all case-insensitively.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.report.fields import FieldError, get_value, resolve_field

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


@dataclass(frozen=True)
class Condition:
    """One ``--where`` condition on a resolved dotted field."""

    field: str
    values: tuple[str, ...]
    negate: bool = False
    text: str = ""

    def holds(self, record: Mapping[str, Any]) -> bool:
        value = get_value(record, self.field)
        hit = any(value_matches(value, wanted) for wanted in self.values)
        return hit != self.negate


def value_matches(value: Any, wanted: str) -> bool:
    """Does a record value equal the text ``wanted`` (see the module docstring)?"""
    w = wanted.strip().lower()
    if value is None:
        return w in ("", "none", "null", "—")
    if isinstance(value, bool):
        return (value and w in _TRUE) or (not value and w in _FALSE)
    if isinstance(value, (int, float)):
        try:
            return float(w) == float(value)
        except ValueError:
            return False
    return str(value).lower() == w


def parse_where(expressions: Sequence[str], records: list[Mapping[str, Any]]) -> list[Condition]:
    """Parse ``FIELD=VALUE`` / ``FIELD!=VALUE`` expressions; raises :class:`FieldError`."""
    conditions = []
    for expr in expressions:
        if "!=" in expr:
            name, _, rhs = expr.partition("!=")
            negate = True
        elif "=" in expr:
            name, _, rhs = expr.partition("=")
            negate = False
        else:
            raise FieldError(f"--where {expr!r}: expected FIELD=VALUE or FIELD!=VALUE")
        field = resolve_field(name, records)
        values = tuple(v for v in rhs.split(",")) or ("",)
        conditions.append(Condition(field, values, negate, expr))
    return conditions


def select(records: Iterable[Mapping[str, Any]], conditions: Sequence[Condition]) -> list[Mapping[str, Any]]:
    """The records for which every condition holds."""
    if not conditions:
        return list(records)
    return [r for r in records if all(c.holds(r) for c in conditions)]
