"""How counts and names read: plurals (``1 run``, ``2 runs``), natural order (``resnet18``
before ``resnet101``) and text of records shown as it is in markdown (:func:`escape_markdown`,
for the report and ``cnnbench compare``), and a value an error message quotes, cut short
(:func:`quoted`), a measured time (:func:`duration`: ``12.1 ms``, ``3.03 s``) and a message
size (:func:`size_text`: ``64 MiB``). The one place for each; no torch here."""

from __future__ import annotations

import functools
import logging
import math
import re
import reprlib
from typing import Any


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 run``, ``2 runs``, ``1,200 runs`` (``words``: the plural when it is not ``word + "s"``,
    as in ``plural(n, "class", "classes")``)."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(n_bytes: int | float) -> str:
    """A size in the unit that shows it, three significant digits: ``512 bytes``, ``48.0 KiB``,
    ``3.27 GiB``."""
    value, unit = float(n_bytes), 0
    while abs(value) >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    if unit == 0:
        return plural(int(n_bytes), "byte")
    return f"{value:.{max(0, 2 - int(math.log10(max(abs(value), 1))))}f} {_UNITS[unit]}"


def sizes(*n_bytes: int | float) -> list[str]:
    """:func:`size` of each, or each exact number of bytes where two would read the same
    (``needs 1.00 GiB, only 1.00 GiB free`` says nothing)."""
    shown = [size(n) for n in n_bytes]
    if len(set(shown)) < len(shown):
        return [plural(int(n), "byte") for n in n_bytes]
    return shown


def size_text(n: int) -> str:
    """``512 bytes``, ``1 KiB``, ``64 MiB``, ``1 GiB`` for the powers of two nccl-tests' sizes
    are; other sizes as :func:`size` shows them."""
    for unit, word in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit:,} {word}"
    return size(n)


def duration(seconds: float) -> str:
    """A measured time in milliseconds under a second, else in seconds, three significant digits
    in fixed decimals (from 1,000 s, whole seconds), never e-notation: ``0.512 ms``, ``12.1 ms``,
    ``999 ms``, ``3.03 s``, ``123,457 s``. (A countdown reads as a clock instead:
    ``cnnbench.engine.log_format.duration``.)"""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    milliseconds = _three_digits(seconds * 1e3)
    if abs(milliseconds) < 1000:
        return f"{_fixed(milliseconds)} ms"
    if abs(seconds) >= 999.5:  # whole seconds: a long time keeps all its digits
        return f"{seconds:,.0f} s"
    return f"{_fixed(_three_digits(seconds))} s"


def _three_digits(value: float) -> float:
    """``value`` rounded to three significant digits (``999.6`` -> ``1000.0``)."""
    return 0.0 if value == 0 else round(value, 2 - math.floor(math.log10(abs(value))))


def _fixed(value: float) -> str:
    """A value :func:`_three_digits` rounded, in fixed decimals that show its three digits."""
    decimals = 0 if value == 0 else max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


_DIGITS = re.compile(r"([0-9]+)")
"""A run of ASCII digits: what a text holds as a number (``²`` and ``①`` are digits to
:meth:`str.isdigit`, and no number to :class:`int`)."""


def digits_key(digits: str) -> tuple[int, str]:
    """A run of ASCII digits as a key that orders by its value without making the number (a run of
    5,000 digits is past what :class:`int` reads from text)."""
    bare = digits.lstrip("0")
    return (len(bare), bare)


def natural_key(value: Any) -> tuple[Any, ...]:
    """A sort key that orders values as people do: booleans (False first), then numbers
    ascending, then text with its embedded numbers in numeric order, case-insensitively
    (``resnet18`` < ``resnet50`` < ``resnet101``, ``2gpus`` < ``10gpus``); ``None`` last.
    Values of different kinds never compare with each other, so any mix sorts."""
    if value is None:
        return (3,)
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, (int, float)):
        return (1, float(value))
    return _kept_text_key(value) if type(value) is str else _text_key(str(value))


def _text_key(text: str) -> tuple[Any, ...]:
    parts = _DIGITS.split(text.lower())
    return (2, tuple((0, digits_key(p)) if i % 2 else (1, p) for i, p in enumerate(parts) if p))


_kept_text_key = functools.lru_cache(maxsize=4096)(_text_key)
""":func:`_text_key` of a text, kept: the texts sorted (model names, machines) repeat across the
records of a store (listing 100,000 runs keyed each one's model anew). Other values (lists,
objects) are keyed each time, never kept."""


_SPECIAL = re.compile(r"[\\`*\[\]|#~$_]|<(?=[A-Za-z/!?])|&(?=[A-Za-z0-9#])")
"""What markdown reads as more than text anywhere on a line: a backslash-escape for markdown's
marks, ``<`` where it could open an HTML tag or an autolink (``&lt;``), ``&`` where it could
start an entity (``&amp;``)."""
_BLOCK_START = re.compile(r"^(?:[-+>]|\d{1,9}[.)])")
"""What makes a line a list item or a quote when it starts the line."""
_ENTITIES = {"<": "&lt;", "&": "&amp;"}


def _escape_char(text: str, m: re.Match[str]) -> str:
    c = m.group()
    if c in _ENTITIES:
        return _ENTITIES[c]
    if c == "_" and 0 < m.start() < len(text) - 1 and text[m.start() - 1].isalnum() \
            and text[m.end()].isalnum():
        return c  # inside a word (amp_fp16, mobilenet_v2): no emphasis can start or end there
    return "\\" + c


def escape_markdown(text: str, *, line_start: bool = False) -> str:
    """``text`` as markdown that shows it as it is, on one line (line breaks become spaces, spaces
    at the ends are dropped). ``line_start``: the text begins a line (a paragraph, a list item, a
    heading), so a leading ``-``, ``+``, ``>`` or ``1.`` is escaped too. Any other control
    character is written as its escape (:func:`one_line`): someone else's label never writes to
    the terminal that shows the file."""
    text = one_line(" ".join(str(text).splitlines()).strip(), tabs=True)
    out = _SPECIAL.sub(lambda m: _escape_char(text, m), text)
    if line_start:
        m = _BLOCK_START.match(out)
        if m:
            out = out[:m.end() - 1] + "\\" + out[m.end() - 1:]
    return out


QUOTE_LIMIT = 100
"""Most characters :func:`quoted` gives."""
_QUOTE = reprlib.Repr()
_QUOTE.maxstring = _QUOTE.maxother = 60
_QUOTE.maxlong = 40
_QUOTE.maxlevel = 2
_QUOTE.maxlist = _QUOTE.maxtuple = _QUOTE.maxset = _QUOTE.maxfrozenset = _QUOTE.maxdict = 4


def quoted(value: Any) -> str:
    """``repr(value)`` as an error message quotes it: on one line and cut to a short prefix (at most
    :data:`QUOTE_LIMIT` characters, ``...`` marking a cut). A value read from someone else's file
    may be megabytes of text or a deep nest of lists; its whole ``repr`` is never made."""
    return shortened(_QUOTE.repr(value))


_TURNS = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x1f{_TURNS}]")
"""Control characters, line and paragraph separators, and the embeddings, overrides and isolates
that turn text's direction around (``\\u202e``: ``\\u202egpj.exe`` shows as ``exe.jpg``); not the
marks a right-to-left name may hold (U+200E, U+200F, U+061C), which turn nothing around."""


_CONTROL_BUT_TAB = re.compile(f"[\x00-\x08\x0a-\x1f{_TURNS}]")


def one_line(text: str, *, tabs: bool = False) -> str:
    """``text`` as one line a terminal shows as it is: each control character (a line break, an
    escape sequence's ESC, a carriage return, a mark that turns the text's direction) written as
    its escape (``\\n``, ``\\x1b``, ``\\u202e``). Text
    from someone else's file (a machine label) never breaks a message or a table's row in two, nor
    recolours or rewrites a terminal."""
    control = _CONTROL_BUT_TAB if tabs else _CONTROL  # ``tabs``: a tab kept (markdown shows it as itself)
    return control.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text) if control.search(
        text) else text


MESSAGE_LIMIT = 5000
"""The most characters :func:`message_line` keeps of a message: more than a path may hold (4,096
bytes), so a path a message names is whole."""


def message_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """An error or warning as the command line prints it: :func:`one_line`, and when longer than
    ``limit`` characters its beginning and its end, what lay between them left out and counted. A
    message quoting a value given whole (a ``--where`` of 100 KB) stays a line one can read, and
    keeps what follows the value (the nearest names, the help to see)."""
    line = one_line(text)
    if len(line) <= limit:
        return line
    head = limit * 2 // 3
    tail = limit - head
    return f"{line[:head]} ... ({len(line) - head - tail:,} characters left out) ... {line[-tail:]}"


class OneLineFormatter(logging.Formatter):
    """A log line whose message is :func:`one_line`: a name from someone else's folder or file (a
    bad image's path, a class folder's name) never breaks it in two nor rewrites a terminal. A
    traceback logged with it still follows on lines of its own."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return one_line(super().formatMessage(record))


def shortened(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` on one line (a line break becomes a space) and cut to at most ``limit`` characters,
    ``...`` marking a cut: a message that quotes a value with ``str`` (a case's fields, a YAML
    error's words)."""
    line = " ".join(text[:limit].splitlines())
    return line if len(text) <= limit else line[:limit - 3] + "..."
