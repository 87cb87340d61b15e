"""Folding stores into one, each run once: ``cnnbench results merge SRC... --into DIR``.

Where a cluster has no shared file system, each node's jobs write to node-local storage and
their stores are copied back; several of them may hold files of the same machine label, which
copying files together (SPEC C9) would overwrite. Merging reads every record of the sources
(each unreadable line reported, never fatal) and appends to ``DIR`` those whose ``run_id`` it
does not hold yet, under the store's lock (:func:`~cnnbench.results.store.append_new_records`):
a run present in several sources, or already in ``DIR``, is written once. Sources are never
modified; a merge run twice adds nothing the second time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.results.lines import StoreProblem
from cnnbench.results.outputs import OutputError, check_results_dir
from cnnbench.results.reader import StoreReader
from cnnbench.results.store import _machine_of, append_new_records


class MergeError(ValueError):
    """Sources or target that cannot be merged; the message names them."""


@dataclass
class MergeResult:
    written: list[dict[str, Any]] = field(default_factory=list)
    already: int = 0
    """Runs of the sources ``DIR`` held already (or that appeared twice among the sources)."""
    problems: list[StoreProblem] = field(default_factory=list)
    """Lines of the sources that could not be read (skipped)."""


def merge_stores(sources: Sequence[str | os.PathLike[str]], into: str | os.PathLike[str], *,
                 write: bool = True) -> MergeResult:
    """Append the runs of ``sources`` that ``into`` lacks, each once (``write=False``: only count).

    ``into`` is checked as every results folder is before any work (a FIFO, a symlink loop,
    ``/proc/self``, a folder that cannot be written in), and its files for the machines of the
    records before any is written (a symlink out of the folder); an ``OSError`` while writing
    is raised as it is (a full disk: :class:`~cnnbench.results.space.NoSpace`, one line)."""
    try:
        check_results_dir(into, flag="--into")
    except OutputError as exc:
        raise MergeError(str(exc)) from None
    for source in sources:
        if not Path(source).exists():
            raise MergeError(f"{source}: no such results folder or file")
    reader = StoreReader(list(sources), step_times=True)
    records, problems = reader.read()
    if write:
        try:
            check_results_dir(into, {_machine_of(r) for r in records}, flag="--into",
                              label_flag="a record's environment.machine")
        except OutputError as exc:
            raise MergeError(str(exc)) from None
    appended = append_new_records(into, records, write=write)  # each run id once, under the store's lock
    already = len(records) - len(appended.written) + reader.repeated  # a run in two sources is one run
    return MergeResult(written=appended.written, already=already, problems=problems)
