"""Importing other tools' output into a results store, as ``cnnbench import`` does (:func:`import_into`).

The importer of that kind makes records from the inputs (:mod:`cnnbench.results.importers`);
each record is checked as ``cnnbench run``'s own are
(:func:`~cnnbench.results.importers.check_imported`) and one that fails is left out with a
warning; then the records whose ``run_id`` the store does not hold yet are appended, each
once, under the store's lock (:func:`~cnnbench.results.store.append_new_records`). A dry run
takes the same path with writing turned off: it says what would be written and writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench.results.importers import ImportOptions, check_imported, get_importer

Warn = Callable[[str], None]


@dataclass
class ImportOutcome:
    """What :func:`import_into` did (or, for a dry run, would do)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    """Every usable record the inputs gave (the same run twice included)."""
    written: list[dict[str, Any]] = field(default_factory=list)
    """The records added to the store (dry run: that would be added)."""
    already: dict[str, str] = field(default_factory=dict)
    """``run_id`` -> the machine it is stored under, for each record not written again."""
    dry_run: bool = False

    def statuses(self) -> dict[str, int]:
        """How many records written of each status."""
        out: dict[str, int] = {}
        for r in self.written:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out

    @property
    def not_written(self) -> int:
        """Records not added: already in the store, or the same run twice in the inputs."""
        return len(self.records) - len(self.written)

    def stored_elsewhere(self, machine_label: str | None) -> list[str]:
        """The machines, other than ``machine_label``, that runs already there are stored under."""
        return sorted({m for m in self.already.values() if machine_label and m != machine_label})


class ImportProblem(ValueError):
    """Nothing could be imported: one line, and the exit status ``cnnbench import`` gives it."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def import_into(results_dir: str | os.PathLike[str], kind: str, paths: Sequence[str | os.PathLike[str]],
                options: ImportOptions | None = None, *, dry_run: bool = False,
                warn: Warn | None = None) -> ImportOutcome:
    """Import ``paths`` with the importer ``kind`` into the store ``results_dir``.

    ``warn`` is called with each line about an input or a record left out, and each line of
    the store that could not be read (``skipped <file:line: why>``), as they come. Raises
    :class:`ImportProblem` when nothing can be imported, and ``OutputError`` for a results folder
    that cannot take the records (before anything is read, and, for the file of each record's
    machine, before anything is written); with ``dry_run`` the folder
    is not checked, and nothing is made or written.
    """
    from cnnbench.results.outputs import check_results_dir
    from cnnbench.results.store import _machine_of, append_new_records, problem_text

    options = options or ImportOptions()
    try:
        importer = get_importer(kind)
    except KeyError as exc:
        raise ImportProblem(str(exc.args[0])) from None
    if not dry_run:
        check_results_dir(results_dir, [options.machine_label])
    try:
        result = importer.run([Path(p) for p in paths], options)
    except (FileNotFoundError, ValueError) as exc:
        raise ImportProblem(str(exc)) from None
    say = warn or (lambda line: None)
    for problem in result.problems:
        say(problem_text(problem))
    records = _checked(result.records, say)
    _check_run_id(options.overrides, records)
    if not records:
        # every input refused as the wrong kind (a vendor's table, a folder): a usage error
        usage = bool(result.refused) and len(result.refused) == len(result.problems)
        inputs = ", ".join(os.fspath(p) for p in paths)
        raise ImportProblem(f"nothing to import from {inputs}", exit_code=2 if usage else 1)
    if not dry_run:  # each record's file, before any is written (a link planted at one of them)
        check_results_dir(results_dir, {_machine_of(r) for r in records}, label_flag="a record's environment.machine")
    appended = append_new_records(results_dir, records, write=not dry_run)
    for problem in appended.problems:
        say(problem_text(problem))
    return ImportOutcome(records, appended.written, appended.already, dry_run)


def _checked(records: list[dict[str, Any]], warn: Warn) -> list[dict[str, Any]]:
    """The records every check of ``cnnbench run`` and the record contract passes, whatever
    importer made them (:func:`~cnnbench.results.importers.check_imported`); each other one is
    reported as ``skipped file:line: why`` and left out."""
    kept = []
    for record in records:
        try:
            check_imported(record)
        except ValueError as exc:
            line = record.get("source_line")
            where = f"{record.get('source_path') or 'input'}{f':{line}' if line else ''}"
            warn(f"skipped {where}: {exc}")
            continue
        kept.append(record)
    return kept


def _check_run_id(overrides: Mapping[str, Any], records: list[dict[str, Any]]) -> None:
    """A ``run_id`` set on every record names one run: refused for more than one record."""
    if "run_id" in overrides and len(records) > 1:
        raise ImportProblem(f"--set run_id={overrides['run_id']}: would give {len(records)} records one run_id, "
                            "which names one run (the store would keep one and call the others already there); "
                            "nothing imported")
