"""A failure as a record's ``error`` text: ``"Type: message"``, without the C++ stack traces torch
appends to its errors, cut to :data:`ERROR_LIMIT` characters. No torch here."""

from __future__ import annotations

import re

ERROR_LIMIT = 2000
"""Most characters a record's ``error`` keeps (the start of the text, which names the cause)."""

_NATIVE_STACK = re.compile(
    r"^\s*(Exception raised from |frame #\d+|C\+\+ CapturedTraceback:|#\d+ \S.*\bfrom\b|"
    r"\[ ?frame \d+ ?\]|0x[0-9a-f]+ in |-+ C\+\+ Traceback)"
)


def without_native_stack(text: str) -> str:
    """``text`` without the C++ stack traces torch appends to its errors (``Exception raised
    from ...`` and ``frame #0: ...`` lines, ``C++ CapturedTraceback:`` blocks); the Python
    lines around them stay."""
    kept: list[str] = []
    in_stack = False
    for line in text.splitlines():
        if _NATIVE_STACK.match(line):
            in_stack = True
            continue
        if in_stack and (line.startswith((" ", "\t")) or not line.strip()):
            continue  # the indented continuation of a frame
        in_stack = False
        kept.append(line)
    return "\n".join(kept).strip()


def clip(text: str, limit: int = ERROR_LIMIT) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis marks the cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_text(exc: BaseException, limit: int = ERROR_LIMIT) -> str:
    """``"Type: message"`` for a record's ``error``: the message without the C++ stack that
    some torch errors append (``Exception raised from ...``, ``frame #0``), cut to ``limit``."""
    message = without_native_stack(str(exc).strip())
    text = f"{type(exc).__name__}: {message}".strip().rstrip(":")
    return clip(text, limit)
