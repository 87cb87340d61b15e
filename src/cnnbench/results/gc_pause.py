"""Python's cycle collector paused where cnnbench makes many objects and no cycles: reading a
store, flattening it for an export, building a report.

A report of 10,000 records allocates a few hundred thousand small containers (points,
measures, pairs, cells) and frees almost none of them before it is done; none of them form
reference cycles that must be freed early. With the collector running, CPython traces that
growing heap again and again as it grows (about half of ``build_report``'s CPU time at 10,000
records, profiled for issue 22). Reference counting still frees everything as usual; the
collector resumes, as it was, when the block ends. Reading and exporting 100,000 records are
alike (millions of dicts, lists and floats kept to the end).

When the block ends, what it made joins the oldest generation: a young collection as it
starts (generations 0 and 1: bounded, so quick) leaves the young generations to what the block
makes, and ``gc.freeze()`` then ``gc.unfreeze()`` as it ends (as documented: frozen, then put back
into the oldest generation) moves that there and resets the young count without tracing. Else the
first allocation after the block would owe a young collection that traces every object the block
made (0.14 s of a 1 s warm read of 100,000 engine records), and they would be traced again a few
collections later on their way to the oldest generation. There they are traced only by a full
collection, as long-lived objects are (CPython counts that generation only at a full collection,
so the first one comes soon after: the commands that read a store and end keep the collector
paused throughout, ``cnnbench.cli.READING``); a cycle among them is still found and freed then (or by
``gc.collect()``), and the caller's young garbage was freed as the block started, not promoted.
Only where this is so (:data:`PROMOTES`): CPython 3.10 to 3.13 with the GIL (3.14's incremental
collector and the free-threaded builds' differ), and where nothing is frozen: not where the
caller froze objects of its own (``gc.freeze()``, as a server does before it forks), whose
freeze is theirs, nor on CPython 3.12, which keeps objects of its own frozen from the start.
Elsewhere the collector is just enabled again.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def _promotes() -> bool:
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] < (3, 14):
        return False
    if sys.version_info[:2] >= (3, 13):
        import sysconfig

        return not sysconfig.get_config_var("Py_GIL_DISABLED")
    return True


PROMOTES = _promotes()
"""Does a paused block's end move what it made into the oldest generation on this Python (when
nothing is frozen)? See the module's text."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause :mod:`gc`'s automatic collection for the block (left paused if it already was);
    what the block made then joins the oldest generation (see the module's text)."""
    was_enabled = gc.isenabled()
    promote = was_enabled and PROMOTES and not gc.get_freeze_count()
    if promote:
        gc.collect(1)  # the caller's young garbage freed now, not promoted with what the block makes
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            try:
                if promote:
                    _promote()
            finally:
                gc.enable()


def _promote() -> None:
    """Move every tracked object to the oldest generation without tracing it (``gc.freeze()``
    then ``gc.unfreeze()``), where that is so (:data:`PROMOTES`) and nothing is frozen."""
    if PROMOTES and not gc.get_freeze_count():
        try:
            gc.freeze()
        finally:  # never left frozen (a ^C)
            gc.unfreeze()


@contextmanager
def collector_running() -> Iterator[None]:
    """Within a paused block, the collector running for the block (matplotlib's figures drawn in
    this process are webs of cycles, freed only by it), its young garbage collected as it ends and
    the collector paused again; nothing changed where it runs already. What was made before the
    block is moved to the oldest generation first (where that is done, :data:`PROMOTES`), so that
    the young collections do not trace a paused read's records."""
    if gc.isenabled():
        yield
        return
    _promote()
    gc.enable()
    try:
        yield
    finally:
        try:
            gc.collect(1)
        finally:
            gc.disable()
