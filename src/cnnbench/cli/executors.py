"""Executors: where ``cnnbench sweep`` and ``cnnbench study`` run a suite's cases, one registry keyed by name.

An executor registers itself (:func:`register`) under the name ``--executor`` gives: ``local`` runs
the cases here (:mod:`cnnbench.cli.sweep_local`), ``slurm`` submits them to a Slurm cluster
(:mod:`cnnbench.cli.sweep_slurm`). Each adds its own flags and reads them itself: the commands pass
the parsed flags along without looking into them. A new executor is one module that registers
itself, named in :data:`BUILTIN`.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any, Protocol

BUILTIN = ("cnnbench.cli.sweep_local", "cnnbench.cli.sweep_slurm")
"""The modules of the shipped executors, imported on first use; ``--executor`` lists them in this order."""
DEFAULT = "local"

_REGISTRY: dict[str, Executor] = {}


class Executor(Protocol):
    """What ``sweep`` and ``study`` ask of an executor."""

    name: str
    summary: str
    """What it does, for ``--executor``'s help (``local: ...; slurm: ...``)."""
    flags_title: str | None
    """The title of its flags' group in ``--help`` (None: it has none)."""

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        """Its own flags (with default values that mean "not given")."""

    def chosen_by(self, args: argparse.Namespace) -> bool:
        """Whether flags of its own choose it when ``--executor`` is left at its default."""

    def sweep(self, args: argparse.Namespace) -> int:
        """``cnnbench sweep``: run (or submit, follow, ...) the suite ``args.suite``; the exit status."""

    def study(self, args: argparse.Namespace, request: Any) -> int:
        """``cnnbench study``: run the study of ``request`` (a :class:`cnnbench.study.StudyRequest`)."""


def register(executor: Executor) -> Executor:
    """Make ``executor`` one of ``--executor``'s choices (a name taken again replaces the first)."""
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
