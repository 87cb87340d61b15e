"""One line of the results store read: parsed (orjson, and the standard library's parser for
what orjson refuses), upgraded (:mod:`cnnbench.results.migrate`) and checked against the record
contract; or why it cannot be used, as a :class:`StoreProblem` (``file:line: why``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import orjson

from cnnbench.results.cleaning import MAX_FIGURE, drop_unusable_figures
from cnnbench.results.migrate import migrate
from cnnbench.results.record import MAX_DEPTH, RecordError, check_record


class StoreProblem(str):
    """A line that could not be read: ``"<file>:<line>: <reason>"``."""


class StoreNotice(StoreProblem):
    """A line whose record was read, but with figures no reader can compute with (NaN,
    infinite, beyond :data:`~cnnbench.results.cleaning.MAX_FIGURE`) shown as not available:
    ``"<file>:<line>: metrics.total_images_per_sec is NaN: shown as not available"``; or with
    text that is not Unicode (a lone surrogate, ``\\ud800`` in the line) shown as U+FFFD."""


def problem_text(problem: str) -> str:
    """How a reader names a problem line to the user: ``skipped <problem>``, or, for a
    :class:`StoreNotice`, the notice alone (the record was kept)."""
    return str(problem) if isinstance(problem, StoreNotice) else f"skipped {problem}"


def problem(text: str, *, kept: bool) -> StoreProblem:
    return StoreNotice(text) if kept else StoreProblem(text)


MAX_LINE = 1 << 30
"""Longest line read (1 GiB: a run with tens of millions of step times; DuckDB's read takes no
longer one either). A longer line is named and skipped unparsed: parsing one of 2 GB of junk took
the checked reader minutes and several times its size in memory."""


def too_long(size: int) -> str | None:
    """Why a line of ``size`` bytes is not read, when it is longer than :data:`MAX_LINE` (asked
    before the line is copied out of its file's bytes, or gathered from its pieces)."""
    if size <= MAX_LINE:
        return None
    return f"a line of {size:,} bytes, longer than the {MAX_LINE:,} a line may hold: not read"


def parse_line(raw: bytes, parse: Any, *, truncated: bool) -> tuple[dict[str, Any] | None, str | None]:
    """A valid, current record from one line, or why there is none; or both: a record whose
    unusable figures were replaced by null, and what they were."""
    fallbacks = _FALLBACKS[0]
    try:
        rec = parse(raw)
    except RecursionError:
        return None, "nested too deeply to read"
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {raw[exc.start:exc.start + 1]!r} at column {exc.start + 1})"
    except ValueError as exc:
        if truncated:
            return None, "truncated line (no newline at the end of the file)"
        return None, f"malformed line ({exc})"
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    replaced: list[str] | None = None
    if _FALLBACKS[0] != fallbacks:  # only the standard library's parser lets a lone surrogate through
        replaced = []
        rec = _without_lone_surrogates(rec, replaced)  # first: a reason below may quote the text
    try:
        rec = migrate(rec)
        # fewer brackets in the text than the depth allowed: no need to walk the record for it
        check_record(rec, shallow=_brackets_at_most(raw, MAX_DEPTH))
    except RecordError as exc:
        return None, str(exc)
    notice = None
    if _FALLBACKS[0] != fallbacks or not _metrics_in_range(rec.get("metrics")):
        dropped = drop_unusable_figures(rec)
        if dropped:
            notice = "; ".join(dropped) + ": shown as not available"
    if replaced:
        text = "; ".join(dict.fromkeys(replaced)) + " not Unicode (a lone surrogate): shown as \ufffd"
        notice = f"{notice}; {text}" if notice else text
    return rec, notice


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate code point in a string from :func:`json.loads`: an escaped pair (``\\ud83d\\ude00``)
is read as the character it encodes, so any left is lone: text that is not Unicode, which no
UTF-8 file or terminal can take."""


def as_unicode(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, as a store's records are read (a value
    given on the command line, to compare with them)."""
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


def _without_lone_surrogates(record: dict[str, Any], replaced: list[str]) -> dict[str, Any]:
    """``record`` with each lone surrogate of its strings and keys replaced by U+FFFD, in place; the
    path of each replaced text is added to ``replaced``, in the record's order. A walk with a stack
    of its own, not a call per level (the standard library's parser, from 3.12, reads lines nested
    deeper than Python can recurse), no deeper than :data:`MAX_DEPTH` + 1 levels: a record nested
    deeper is refused for that (its depth is checked after this), and its reason quotes no text."""
    stack: list[tuple[Iterator[tuple[Any, str]], dict[str, Any] | list[Any]]] = []

    def enter(container: dict[str, Any] | list[Any], path: str) -> None:
        if len(stack) > MAX_DEPTH:
            return
        if isinstance(container, dict):
            if any(_LONE_SURROGATE.search(key) for key in container):  # keys from JSON: strings
                renamed: dict[str, Any] = {}
                for key, item in container.items():
                    name = as_unicode(key)
                    if name != key:
                        replaced.append(f"{path}.{name}" if path else name)
                    renamed.setdefault(name, item)  # two keys that read alike: the first kept
                container.clear()
                container.update(renamed)
            entries: Iterator[tuple[Any, str]] = ((key, f"{path}.{key}" if path else key) for key in list(container))
        else:
            entries = ((index, path) for index in range(len(container)))
        stack.append((entries, container))

    enter(record, "")
    while stack:
        entries, container = stack[-1]
        step = next(entries, None)
        if step is None:
            stack.pop()
            continue
        at, where = step
        item = container[at]
        if isinstance(item, str):
            text = as_unicode(item)
            if text is not item:
                replaced.append(where or "the record")
                container[at] = text
        elif isinstance(item, (dict, list)):
            enter(item, where)
    return record


def _brackets_at_most(raw: bytes, limit: int) -> bool:
    """Whether ``raw`` holds at most ``limit`` opening brackets (``{`` and ``[``, in strings too):
    then what it holds cannot nest deeper. Found one by one (``find``: ``memchr``), stopping past
    the limit: several times quicker than ``count`` (a byte at a time) for a record's few."""
    if limit < 0:
        return False
    found = 0
    for bracket in (b"{", b"["):
        at = raw.find(bracket)
        while at >= 0:
            found += 1
            if found > limit:
                return False
            at = raw.find(bracket, at + 1)
    return True


def loads(raw: bytes) -> Any:
    """A JSON value from a line: orjson (several times faster), and the standard library's
    parser for what orjson refuses (NaN, integers beyond 64 bits, lone surrogates, a byte order
    mark) or cannot read, so that a line reads, and fails with the same reason, as it always did.

    A line is UTF-8 text (JSON Lines; what ``grep`` and DuckDB read). Given bytes, the standard
    library's parser guesses UTF-16 or UTF-32 from NUL bytes and reads such a line, which no other
    reader of the store can; the bytes are decoded as UTF-8 here instead, a UTF-8 byte order mark
    at a line's start read as before."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        _FALLBACKS[0] += 1
        text = raw.decode("utf-8", "surrogatepass")  # surrogates as json.loads(bytes) let them in
        return json.loads(text[1:] if text.startswith("\ufeff") else text)


_FALLBACKS = [0]
"""How many lines :func:`loads` gave to the standard library's parser: a line read by orjson
holds no NaN, no infinity and no integer beyond 64 bits (orjson refuses them), so of the
figures :func:`~cnnbench.results.cleaning.drop_unusable_figures` replaces it can hold only a
metric over :data:`~cnnbench.results.cleaning.MAX_FIGURE`; any other line is walked whole."""


def _metrics_in_range(value: Any) -> bool:
    """True when no number in ``metrics`` (of a line orjson read) is larger in size than
    :data:`~cnnbench.results.cleaning.MAX_FIGURE`; False when one may be (the walk decides).
    A list of numbers (step times) is bounded by its ``min`` and ``max``, in C."""
    kind = type(value)
    if kind is float or kind is int:
        return -MAX_FIGURE <= value <= MAX_FIGURE
    if kind is dict:
        for item in value.values():  # a loop, not a call per figure: this runs for every line read
            kind = type(item)
            if kind is float or kind is int:
                if not -MAX_FIGURE <= item <= MAX_FIGURE:
                    return False
            elif (kind is dict or kind is list) and not _metrics_in_range(item):
                return False
        return True
    if kind is list and value:
        try:
            return min(value) >= -MAX_FIGURE and max(value) <= MAX_FIGURE
        except TypeError:  # not all numbers (objects, text, null): item by item
            return all(map(_metrics_in_range, value))
    return True


_STEP_NAME = b'"step_times_s"'
_STEP_KEY = _STEP_NAME + b":["
_KEY_BEFORE = (ord("{"), ord(","), ord(" "))


def loads_without_step_times(raw: bytes) -> Any:
    """:func:`loads` of a record line, leaving ``metrics.step_times_s`` out.

    The array of the compact form written by :func:`append_record` is cut out of the
    bytes before parsing, where its name is met once in the line, its list holds no list, object or
    text, and what is left parses with ``metrics.step_times_s`` in it; anything else (the key in
    another object too, a nested list, a spaced separator) takes the ordinary full parse.
    """
    i = raw.find(_STEP_KEY)
    once = i > 0 and raw.rfind(_STEP_NAME, 0, i) < 0 and raw.find(_STEP_NAME, i + 1) < 0  # the name anywhere
    if once and raw[i - 1] in _KEY_BEFORE:
        start = i + len(_STEP_KEY)
        j = raw.find(b"]", start)
        if j > 0 and raw.find(b'"', start, j) < 0 and raw.find(b"[", start, j) < 0 and raw.find(b"{", start, j) < 0:
            try:
                rec = loads(raw[:i] + b'"step_times_s":null' + raw[j + 1 :])
            except ValueError:  # what the cut left is no JSON: the line as it is decides
                rec = None
            metrics = rec.get("metrics") if isinstance(rec, dict) else None
            if isinstance(metrics, dict) and "step_times_s" in metrics and metrics["step_times_s"] is None:
                del metrics["step_times_s"]
                return rec
    rec = loads(raw)
    if isinstance(rec, dict) and isinstance(rec.get("metrics"), dict):
        rec["metrics"].pop("step_times_s", None)
    return rec
