"""Cleaning records of numbers no reader can compute with: NaN, infinities, numbers beyond a
float's range, and metrics larger in size than :data:`MAX_FIGURE`, each replaced by null.

A record is cleaned when written (:func:`finite_numbers`: JSON has no NaN) and when read
(:func:`drop_unusable_figures`, which names what it replaced); an import asks first
(:func:`unusable_figure`). No torch here.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

MAX_FIGURE = 1e18
"""Largest size of a stored metric a reader computes with. No measured rate, time, count or
byte total comes near it (a loss that large has diverged); a figure beyond it (``1e300``,
``10**400``: another tool's, or a hand-edited line) is shown as not available."""
_MAX_FLOAT = sys.float_info.max
_CONTAINERS = (dict, list)
_WALKED = (dict, list, float, int)


def finite_numbers(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with every NaN or infinite number replaced by null (JSON has no such numbers),
    and, when any was, a ``metrics.warnings`` entry naming the fields. A copy; ``record`` is
    not changed."""
    replaced: list[str] = []
    out = _finite_copy(record, "", replaced)
    if replaced:
        metrics = out.get("metrics")
        if not isinstance(metrics, dict):
            metrics = out["metrics"] = {}
        warnings = metrics.get("warnings")
        warnings = list(warnings) if isinstance(warnings, list) else []
        warnings.append("non-finite numbers (NaN or infinity) stored as null: " + ", ".join(dict.fromkeys(replaced)))
        metrics["warnings"] = warnings
    return out


def finite_values(value: Any) -> Any:
    """``value`` with each float that is not finite (in it, its lists and its dicts) as None: what a
    command writes as JSON stays JSON (``Infinity`` and ``NaN`` are not)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_values(v) for v in value]
    return value


def _finite_copy(value: Any, path: str, replaced: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        replaced.append(path or "(value)")
        return None
    if isinstance(value, Mapping):
        return {k: _finite_copy(v, f"{path}.{k}" if path else str(k), replaced) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_copy(v, path, replaced) for v in value]
    return value


def drop_unusable_figures(record: dict[str, Any]) -> list[str]:
    """Replace by null, in ``record`` itself, every number a reader cannot compute with: a NaN
    or infinity anywhere, a number beyond a float's range anywhere, and a metric (or an
    element of one) larger in size than :data:`MAX_FIGURE`. Returns one description per
    replaced field (``"metrics.total_images_per_sec is NaN"``), empty when none was."""
    found: list[str] = []
    for key, value in record.items():
        limit = MAX_FIGURE if key == "metrics" else _MAX_FLOAT
        if type(value) in _CONTAINERS or _unusable(value, limit):
            record[key] = _usable(value, key, limit, found)
    return list(dict.fromkeys(found))


def unusable_figure(record: Mapping[str, Any]) -> str | None:
    """The description of a number in ``record`` that :func:`drop_unusable_figures` would
    replace (``"metrics.total_images_per_sec is 1e+19"``), or None when there is none: the
    same test, without changing or copying the record (an import checks every record so). A
    list of numbers is bounded by its sum, ``min`` and ``max``, in C."""
    for key, value in record.items():
        limit = MAX_FIGURE if key == "metrics" else _MAX_FLOAT
        stack: list[tuple[Any, str]] = [(value, str(key))]
        while stack:
            node, path = stack.pop()
            kind = type(node)
            if kind is dict:
                stack.extend((item, f"{path}.{name}") for name, item in node.items() if type(item) in _WALKED)
            elif kind is list:
                if not _numbers_in_range(node, limit):
                    stack.extend((item, path) for item in node if type(item) in _WALKED)
            elif _unusable(node, limit):
                return f"{path} is {figure_text(node)}"
    return None


def figure_text(value: float | int) -> str:
    """How a message names a number: ``NaN``, ``Infinity``, ``an integer of 400 digits``, ``1e+19``."""
    if type(value) is int and abs(value) > _MAX_FLOAT:
        return f"an integer of {math.floor(math.log10(abs(value))) + 1} digits"
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "-Infinity" if value < 0 else "Infinity"
    return f"{value:g}"


def _numbers_in_range(values: list[Any], limit: float) -> bool:
    """True when ``values`` are all numbers, none NaN, infinite or larger in size than ``limit``;
    False when that may not be so (the caller looks at each)."""
    try:
        total = sum(values)
        return total == total and -_MAX_FLOAT <= total <= _MAX_FLOAT and -limit <= min(values, default=0) \
            and max(values, default=0) <= limit
    except (TypeError, OverflowError):  # not all numbers (objects, text, null), or ints beyond a float
        return False


def _unusable(value: Any, limit: float) -> bool:
    if type(value) is float:
        return not -limit <= value <= limit  # NaN too
    if type(value) is int:
        return not -limit <= value <= limit
    return False


def _usable(value: Any, path: str, limit: float, found: list[str]) -> Any:
    if type(value) is dict:
        for key, item in value.items():
            if type(item) in _CONTAINERS or _unusable(item, limit):
                value[key] = _usable(item, f"{path}.{key}", limit, found)
        return value
    if type(value) is list:
        for index, item in enumerate(value):
            if type(item) in _CONTAINERS or _unusable(item, limit):
                value[index] = _usable(item, path, limit, found)
        return value
    if _unusable(value, limit):
        found.append(f"{path} is {figure_text(value)}")
        return None
    return value
