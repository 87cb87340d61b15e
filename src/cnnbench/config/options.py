"""Declaring configuration fields once: default, help text, allowed values.

A field declared with :func:`option` carries its help text and its choices in the
dataclass metadata; the CLI (:mod:`cnnbench.config.cli_args`) and suite files read
them from there, so nothing is spelled twice.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from typing import Any


def option(
    default: Any,
    help: str,
    *,
    choices: Sequence[Any] | None = None,
    recorded: bool = True,
    identity: bool = True,
    unnamed: Sequence[Any] = (),
    depends_on: Sequence[str] = (),
    metavar: str | None = None,
    minimum: int | float | None = None,
    maximum: int | float | None = None,
) -> Any:
    """A dataclass field with CLI metadata.

    ``recorded=False`` keeps a field out of the record's ``config`` (it says where
    output goes, not what was measured). ``identity=False`` marks a recorded field that
    does not change what is measured (how many steps, which random draw): results that
    differ only in such fields are repeats of one measurement. ``unnamed``: values a
    configuration's name leaves out (the value a run uses when the option is left unset),
    besides ``None`` and ``False``. ``depends_on``: the fields whose values decide whether
    this option applies at all (the DDP knobs apply with ``variable_update`` replicated), or what
    it is when left unset (loader processes: the cores per device): a comparison of two values of
    such a field pairs runs whatever this option says, and an option that takes one value for
    each combination of them never splits a table.
    ``minimum`` / ``maximum``: the sane range of a number (both ends included), checked
    before any work wherever a value comes from (flags, suite files, imported tables).
    """
    return dataclasses.field(
        default=default,
        metadata={
            "help": help,
            "choices": tuple(choices) if choices is not None else None,
            "recorded": recorded,
            "identity": identity and recorded,
            "unnamed": tuple(unnamed),
            "depends_on": tuple(depends_on),
            "metavar": metavar,
            "minimum": minimum,
            "maximum": maximum,
        },
    )


def field_help(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


def field_choices(f: dataclasses.Field) -> tuple[Any, ...] | None:
    return f.metadata.get("choices")


def field_bounds(f: dataclasses.Field) -> tuple[int | float | None, int | float | None]:
    """The declared ``(minimum, maximum)`` of a number field (None where unbounded)."""
    return f.metadata.get("minimum"), f.metadata.get("maximum")


_FIELD_TYPES: dict[type, dict[str, tuple[type, bool]]] = {}


def field_types(cls: type) -> dict[str, tuple[type, bool]]:
    """Each field's base type and whether it may be ``None``, from the resolved annotations.

    ``int | None`` gives ``(int, True)``; ``str`` gives ``(str, False)``; a ``Literal`` of
    names (:mod:`cnnbench.config.choices`) gives ``str``.
    """
    if cls not in _FIELD_TYPES:
        out: dict[str, tuple[type, bool]] = {}
        for name, hint in typing.get_type_hints(cls).items():
            args = () if typing.get_origin(hint) is typing.Literal else typing.get_args(hint)
            optional = type(None) in args
            bases = [_literal_base(a) for a in args if a is not type(None)] if args else [_literal_base(hint)]
            out[name] = (bases[0] if len(bases) == 1 else object, optional)
        _FIELD_TYPES[cls] = out
    return _FIELD_TYPES[cls]


def _literal_base(hint: Any) -> Any:
    """``Literal["a", "b"]`` -> ``str`` (the type of its values); any other type as it is."""
    if typing.get_origin(hint) is typing.Literal:
        return type(typing.get_args(hint)[0])
    return hint
