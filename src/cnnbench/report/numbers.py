"""How numbers read in markdown and HTML: thousands separators and a sensible number of
significant digits. CSV and JSON keep the full values (see :mod:`cnnbench.report.render.csv_json`).
"""

from __future__ import annotations

import math


def significant(value: float, digits: int = 4) -> str:
    """``value`` with at least ``digits`` significant digits, never cutting integer digits,
    thousands separated: ``123,701``, ``7,047``, ``412.1``, ``41.23``, ``0.4123``."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}" if not math.isfinite(value) else "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def fixed(value: float, decimals: int = 2) -> str:
    """``value`` with ``decimals`` decimals and thousands separators (``1,609.32``)."""
    return f"{value:,.{decimals}f}"
