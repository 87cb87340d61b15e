"""Command-line flags derived from :class:`RunConfig` fields.

Each field ``batch_size`` becomes ``--batch-size`` (and, for tf_cnn_benchmarks habits,
a hidden ``--batch_size`` alias); booleans become switches; help and choices come from
the field metadata. Nothing here knows the individual fields.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.config.errors import flag_for
from cnnbench.config.options import field_choices, field_help, field_types
from cnnbench.config.run_config import SECTIONS, RunConfig, section_fields


def add_config_arguments(parser: argparse.ArgumentParser, cls: type = RunConfig,
                         sections: Sequence[type] = SECTIONS, exclude: Collection[str] = (),
                         overrides: Mapping[str, FlagOverride] | None = None) -> None:
    """Add one flag per field of the dataclass ``cls``, grouped by its configuration ``sections``
    (fields in ``exclude`` get no flag: they keep their defaults). ``overrides``: per field, the
    help text and choices another command shows instead of ``cnnbench run``'s (a field shared
    with ``run`` whose meaning is narrower there)."""
    types = field_types(cls)
    for section in sections:
        title = (section.__doc__ or section.__name__).strip().splitlines()[0]
        group = parser.add_argument_group(f"{title} options")
        for f in section_fields(section, cls):
            if f.name not in exclude:
                _add_field(group, f, types[f.name][0], f.default, (overrides or {}).get(f.name))


@dataclass(frozen=True)
class FlagOverride:
    """What one command says about a shared field instead of its declaration."""

    help: str
    choices: tuple[Any, ...] | None = None


def _add_field(group: Any, f: dataclasses.Field, base: type, default: Any,
               override: FlagOverride | None = None) -> None:
    flag = flag_for(f.name)
    alias = "--" + f.name
    help_text = override.help if override is not None else field_help(f)
    if base is bool:  # a switch: --name turns on what is off by default, --no-name turns off what is on
        action = "store_false" if default is True else "store_true"
        if default is True:
            flag, alias = "--no-" + flag[2:], "--no_" + f.name
        group.add_argument(flag, dest=f.name, action=action, default=default, help=help_text)
        if alias != flag:
            group.add_argument(alias, dest=f.name, action=action, default=argparse.SUPPRESS,
                               help=argparse.SUPPRESS)
        return
    kwargs: dict[str, Any] = {"dest": f.name, "type": base if base in (int, float) else str}
    choices = override.choices if override is not None and override.choices is not None else field_choices(f)
    if choices is not None:
        kwargs["choices"] = choices
    if f.metadata.get("metavar"):
        kwargs["metavar"] = f.metadata["metavar"]
    if default is not None:
        help_text = f"{help_text} [default: {default}]"
    group.add_argument(flag, default=default, help=help_text, **kwargs)
    if alias != flag:
        group.add_argument(alias, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


def config_from_args(args: argparse.Namespace, cls: type = RunConfig) -> Any:
    """Build the dataclass from parsed arguments (raises ConfigError on invalid values)."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)})
