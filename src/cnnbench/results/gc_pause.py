"""Python's cycle collector paused where cnnbench makes many objects and no cycles: reading a
store, flattening it for an export, building a report.

A report of 10,000 records allocates a few hundred thousand small containers (points,
measures, pairs, cells) and frees almost none of them before it is done; none of them form
reference cycles that must be freed early. With the collector running, CPython traces that
growing heap again and again as it grows (about half of ``build_report``'s CPU time at 10,000
records, profiled for issue 22). Reference counting still frees everything as usual; the
collector resumes, as it was, when the block ends. Reading and exporting 100,000 records are
alike (millions of dicts, lists and floats kept to the end).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause :mod:`gc`'s automatic collection for the block (left paused if it already was)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
