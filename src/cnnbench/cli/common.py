"""Shared CLI pieces: a parser whose errors are one line, and the user-error type."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from cnnbench.config.errors import ConfigError
from cnnbench.words import message_line


class UserError(Exception):
    """Something the user can fix; printed as one line, exit code 2 by default."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    @classmethod
    def from_config(cls, exc: ConfigError, command: str = "run") -> UserError:
        """An invalid option, pointing to the command's help (unless it points somewhere already:
        an unknown model to ``cnnbench models --list``)."""
        text = str(exc)
        return cls(text if text.endswith("`)") else f"{text} (see cnnbench {command} --help)")


def check_output(results_dir: str, machine_labels: Iterable[str | None] = (), *, traces: bool = False) -> None:
    """Before any work: the results folder (and each labelled machine's file in it) can be
    written, or one line and exit 2. ``run``, ``sweep`` and ``import`` call this; ``traces``: the
    command keeps profiler traces in the store (its ``traces/`` is checked too)."""
    from cnnbench.results.outputs import TRACES, OutputError, check_results_dir

    try:
        check_results_dir(results_dir, machine_labels, uses=[TRACES] if traces else ())
    except OutputError as exc:
        raise UserError(str(exc)) from None


def print_warnings(record: Any, command: str) -> None:
    """A record's ``metrics.warnings`` (a busy machine, unstable times, throttling), one line
    each on stderr, after the result (a figure to distrust)."""
    sys.stdout.flush()  # after the result, also when both go to one pipe
    for text in (record.metrics or {}).get("warnings") or []:
        print(f"cnnbench {command}: warning: {message_line(str(text))}", file=sys.stderr, flush=True)


class CliParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the flag, then exit 2; an unknown flag is
    named by the command it was given to (``cnnbench run: error: ...``), with the nearest of its
    flags (``--batchsize``: did you mean ``--batch-size``?)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message_line(message)} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._innermost(parsed)
            words = list(sys.argv[1:] if args is None else args)
            command_at = next((i for i, w in enumerate(words) if not w.startswith("-")), len(words))
            flag = extras[0].split("=", 1)[0]
            if parser is not self and not self._knows(extras[0]) and extras[0] in words[:command_at]:
                # cnnbench --quiet run: the top's to say, and where the flag belongs
                path = parser.prog.removeprefix(self.prog + " ")
                near = parser._nearest_flag([flag])
                where = "" if near is None else (
                    f" ({flag} is an option of {parser.prog}: give it after {path})" if near == flag else
                    f" (did you mean {near}, an option of {parser.prog}? give it after {path})")
                self.error(f"unrecognized arguments: {' '.join(extras)}{where}")
            hint = parser._nearest_flag(extras)
            parser.error(f"unrecognized arguments: {' '.join(extras)}" + (f" (did you mean {hint}?)" if hint else ""))
        return parsed

    def _knows(self, word: str) -> bool:
        """Whether this parser takes ``word`` as one of its options, as argparse reads it: whole, a
        unique beginning (``--verb``), or short ones run together (``-vv``)."""
        try:
            found = self._parse_optional(word)
        except (argparse.ArgumentError, TypeError, ValueError):  # ambiguous, or another Python's shape
            return False
        tuples = found if isinstance(found, list) else [found] if found is not None else []  # 3.12+: a list
        return any(isinstance(t, tuple) and t and t[0] is not None for t in tuples)

    def _innermost(self, parsed: argparse.Namespace) -> CliParser:
        """The parser of the (sub-)command ``parsed`` holds: ``cnnbench results list``'s, for one."""
        parser: CliParser = self
        while True:
            chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            name = getattr(parsed, chooser.dest, None) if chooser is not None else None
            chosen = chooser.choices.get(name) if chooser is not None and isinstance(name, str) else None
            if not isinstance(chosen, CliParser):
                return parser
            parser = chosen

    def _nearest_flag(self, extras: Sequence[str]) -> str | None:
        """The flag of this parser nearest to the first unknown one of ``extras``, if one is near."""
        import difflib

        flags = [o for a in self._actions for o in a.option_strings if o.startswith("--") and "_" not in o]
        for word in extras:
            if word.startswith("--"):
                near = difflib.get_close_matches(word.split("=", 1)[0].replace("_", "-"), flags, n=1, cutoff=0.75)
                return near[0] if near else None
        return None
