"""Python's cycle collector paused where cnnbench makes many objects and no cycles: reading a
store, flattening it for an export, building a report.

A report of 10,000 records allocates a few hundred thousand small containers (points,
measures, pairs, cells) and frees almost none of them before it is done; none of them form
reference cycles that must be freed early. With the collector running, CPython traces that
growing heap again and again as it grows (about half of ``build_report``'s CPU time at 10,000
records, profiled for issue 22). Reference counting still frees everything as usual; the
collector resumes, as it was, when the block ends. Reading and exporting 100,000 records are
alike (millions of dicts, lists and floats kept to the end).

When the block ends, what it made joins the oldest generation (``gc.freeze()`` then
``gc.unfreeze()``, as documented: frozen, then put back into the oldest generation). Else the
first allocation after it would owe a young collection that traces every object the block made
(0.14 s of a 1 s warm read of 100,000 engine records), and they would be traced again a few
collections later on their way to the oldest generation. There they are traced only by a full
collection, as long-lived objects are; a cycle among them is still found and freed then (or by
``gc.collect()``). Not done where the caller has frozen objects of its own (``gc.freeze()``,
as a server does before it forks): their freeze is theirs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause :mod:`gc`'s automatic collection for the block (left paused if it already was);
    what the block made then joins the oldest generation (see the module's text)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
