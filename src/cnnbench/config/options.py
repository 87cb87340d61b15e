"""Declaring configuration fields once: default, help text, allowed values.

A field declared with :func:`option` carries its help text and its choices in the
dataclass metadata; the CLI (:mod:`cnnbench.config.cli_args`) and suite files read
them from there, so nothing is spelled twice.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence


def option(
    default: Any,
    help: str,
    *,
    choices: Sequence[Any] | None = None,
    recorded: bool = True,
    metavar: str | None = None,
) -> Any:
    """A dataclass field with CLI metadata.

    ``recorded=False`` keeps a field out of the record's ``config`` (it says where
    output goes, not what was measured).
    """
    return dataclasses.field(
        default=default,
        metadata={
            "help": help,
            "choices": tuple(choices) if choices is not None else None,
            "recorded": recorded,
            "metavar": metavar,
        },
    )


def field_help(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


def field_choices(f: dataclasses.Field) -> tuple[Any, ...] | None:
    return f.metadata.get("choices")
