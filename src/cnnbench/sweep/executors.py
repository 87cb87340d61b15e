"""Executors: where a suite's cases run (``--executor`` of ``sweep`` and ``study``), one registry keyed by name.

An executor is an object that :func:`register` makes one of ``--executor``'s choices. The shipped
ones: ``local`` runs the cases here (:mod:`cnnbench.sweep.local`), ``slurm`` submits them to a
Slurm cluster (:mod:`cnnbench.sweep.slurm.executor`). Each one:

- owns keys of a suite's ``executor:`` block and checks them (:func:`checked_block`, which
  :mod:`cnnbench.sweep.suite` calls when it reads a suite: a key no executor owns is refused);
- adds its own command-line flags and reads them itself (the commands pass the parsed flags along);
- runs a command's :class:`Work`: here (:meth:`Work.run_here`), or elsewhere, from the suite and
  results folder the command makes ready for it (:meth:`Work.elsewhere`); it knows no command.

A new executor is one package (or module) that calls :func:`register`, named in :data:`BUILTIN`
when it ships with cnnbench. No torch here, and nothing of the command line but ``argparse``.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cnnbench.words import quoted

if TYPE_CHECKING:
    from cnnbench.sweep.suite import Suite

BUILTIN = ("cnnbench.sweep.local", "cnnbench.sweep.slurm.executor")
"""The modules of the shipped executors, imported on first use; ``--executor`` lists them in this order."""
DEFAULT = "local"

_REGISTRY: dict[str, Executor] = {}


class ExecutorError(Exception):
    """Something the user can fix (exit code 2) or the machine cannot do (1); the command prints it as one line."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Work(Protocol):
    """What a command (``sweep``, ``study``) hands its executor."""

    command: str
    """The command line that names it (``cnnbench sweep SUITE``), for a line that says how to follow it."""

    def run_here(self) -> int:
        """Run its cases here, one after another, and what the command does after (a study's report); the
        exit status."""

    def elsewhere(self, *, writing: bool) -> tuple[Suite | str, Path]:
        """Its suite (or suite file) and results folder, made ready for cases that run elsewhere: ``writing``,
        they will be recorded there (a study's data set is made); else the folder is only read (to follow the
        cases or cancel them). Raises what the command prints as one line."""


class Executor(Protocol):
    """What ``sweep`` and ``study`` ask of an executor."""

    name: str
    summary: str
    """What it does, for ``--executor``'s help (``local: ...; slurm: ...``)."""
    flags_title: str | None
    """The title of its flags' group in ``--help`` (None: it has none)."""
    block_keys: tuple[str, ...]
    """The keys of a suite's ``executor:`` block that are its own (none: it reads no block), no other's; it reads
    only these."""

    def check_block(self, block: Mapping[str, Any]) -> None:
        """Check its part of a suite's ``executor:`` block (only its keys, at least one); raise ``ValueError``
        with a message that names the key (``executor.time_min: ...``)."""

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        """Its own flags (with default values that mean "not given")."""

    def chosen_by(self, args: argparse.Namespace) -> bool:
        """Whether flags of its own choose it when ``--executor`` is left at its default."""

    def execute(self, args: argparse.Namespace, work: Work) -> int:
        """Run (or submit, follow, cancel, ...) ``work``'s cases as ``args`` say; the exit status. Raises
        :class:`ExecutorError` for what the command prints as one line."""


def register(executor: Executor) -> Executor:
    """Make ``executor`` one of ``--executor``'s choices (a name taken again replaces the first). A key of the
    ``executor:`` block that another executor owns is refused (``ValueError``, naming both): one owner a key."""
    for other in _REGISTRY.values():
        shared = [key for key in executor.block_keys if key in other.block_keys]
        if other.name != executor.name and shared:
            raise ValueError(f"executor {quoted(executor.name)} claims the executor: block's "
                             f"{'key' if len(shared) == 1 else 'keys'} {', '.join(map(quoted, shared))}, "
                             f"which executor {quoted(other.name)} owns (one executor a key)")
    _REGISTRY[executor.name] = executor
    return executor


def executors() -> list[Executor]:
    """Every registered executor, the shipped ones first."""
    for module in BUILTIN:
        importlib.import_module(module)
    found = list(_REGISTRY.values())  # the shipped ones in BUILTIN's order, whichever was imported first

    def place(e: Executor) -> tuple[int, int]:
        module = type(e).__module__
        return (BUILTIN.index(module) if module in BUILTIN else len(BUILTIN), found.index(e))

    return sorted(found, key=place)


def names() -> list[str]:
    return [e.name for e in executors()]


def chosen(args: argparse.Namespace) -> Executor:
    """The executor ``args.executor`` names; at the default, one whose own flags were given (``--status``)."""
    known = {e.name: e for e in executors()}
    if args.executor == DEFAULT:
        return next((e for e in known.values() if e.name != DEFAULT and e.chosen_by(args)), known[DEFAULT])
    return known[args.executor]


def add_flags(p: argparse.ArgumentParser) -> None:
    """``--executor`` and every executor's own flags, for ``sweep`` and ``study``."""
    found = executors()
    g = p.add_argument_group("; ".join(e.flags_title for e in found if e.flags_title) or "executor")
    g.add_argument("--executor", choices=[e.name for e in found], default=DEFAULT,
                   help="; ".join(f"{e.name}: {e.summary}" for e in found) + ".")
    for e in found:
        e.add_flags(g)


def checked_block(value: Any, fail: Callable[[str], Exception]) -> dict[str, Any]:
    """A suite's ``executor:`` block, each key checked by the executor that owns it (``fail(message)`` is
    raised), kept as written."""
    if value is None:
        return {}
    found = executors()
    owners = {key: e for e in found for key in e.block_keys}
    if not isinstance(value, Mapping):
        raise fail(f"executor: must be a mapping of executor options ({', '.join(owners)})")
    for key in value:
        if key not in owners:
            raise fail(f"executor: unknown key {quoted(key)} (known: {', '.join(owners)})")
    for e in found:
        own = {key: v for key, v in value.items() if owners[key] is e}
        if own:
            try:
                e.check_block(own)
            except ValueError as exc:
                raise fail(str(exc)) from None
    return dict(value)
