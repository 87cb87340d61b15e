"""The ``cnnbench`` command: one module per sub-command, each thin (parse, call one library function, print).
The top layer: may import every package below it, the Python API (``cnnbench.api``) included.

Every command module defines ``register(subparsers)`` and imports heavy libraries
(torch) only inside its handler, so ``cnnbench report --help`` stays fast and the
report path never imports torch. Errors the user can fix print one line and exit 2;
library code logs, the CLI prints.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
from collections.abc import Iterator, Sequence

from cnnbench.cli.common import CliParser, UserError
from cnnbench.config.tf_flags import TfFlagError, translate_with_notes
from cnnbench.results.gc_pause import collector_paused
from cnnbench.terminal import output_dropped_once_its_reader_goes
from cnnbench.version import __version__
from cnnbench.words import OneLineFormatter, message_line

# Sub-commands, in the order --help lists them. Each module cnnbench.cli.<name>_cmd: register(subparsers).
COMMANDS = ("run", "data", "comm", "make_dataset", "models", "sweep", "study", "results", "import", "report",
            "compare", "history", "predict", "sysinfo")

__all__ = ["main"]

READING = frozenset({"results", "report", "compare", "history", "predict"})
"""Commands that read a store, work on its records and end: the cycle collector stays paused
throughout (:func:`~cnnbench.results.gc_pause.collector_paused`). The records a read makes join the
oldest generation, but CPython counts that generation only at a full collection, so the first full
collection came soon after a read and traced every record again: 1.2 s of ``history``'s 6 s on
100,000 records. A program that keeps them (a notebook) pays that once."""


def build_parser() -> CliParser:
    parser = CliParser(
        prog="cnnbench",
        description="Measure how fast convolutional networks train and infer, and report it.",
    )
    parser.add_argument("--version", action="version", version=f"cnnbench {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="More log output (-vv for debug).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CliParser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"cnnbench.cli.{name}_cmd").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with escaping_what_utf8_cannot_hold(), output_dropped_once_its_reader_goes():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        words = _tf_cnn_benchmarks_flags(words)
    except TfFlagError as exc:
        print(f"cnnbench run: error: {message_line(str(exc))} (see cnnbench run --help)", file=sys.stderr)
        return 2
    args = parser.parse_args(words)
    if not logging.getLogger().handlers:  # a program that calls main has its own
        handler = logging.StreamHandler()
        handler.setFormatter(OneLineFormatter("%(levelname)s %(name)s: %(message)s"))
        logging.basicConfig(level=(logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)],
                            handlers=[handler])
    try:
        with collector_paused() if args.command in READING else contextlib.nullcontext():
            return int(args.handler(args) or 0)
    except UserError as exc:
        print(f"cnnbench {args.command}: error: {message_line(str(exc))}", file=sys.stderr)  # one line, if long
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"cnnbench {args.command}: interrupted", file=sys.stderr)
        return 130


@contextlib.contextmanager
def escaping_what_utf8_cannot_hold() -> Iterator[None]:
    """Within the block, standard output and error in strict UTF-8 write a lone surrogate (a byte
    of another encoding in a file's name, as Python keeps it) as its escape, ``\\udcff``, as
    Python's own standard error does, rather than ending the command with an error after its work
    is done; strict again after it (a caller's own streams are left as they were). Streams with
    another encoding or error handler (``surrogateescape`` under a C locale writes the name's own
    bytes; a Latin-1 terminal's errors stay errors) are not touched."""
    changed = []
    for stream in (sys.stdout, sys.stderr):
        encoding = str(getattr(stream, "encoding", "") or "").lower().replace("_", "-")
        if hasattr(stream, "reconfigure") and getattr(stream, "errors", None) == "strict" and encoding in ("utf-8",
                                                                                                           "utf8"):
            with contextlib.suppress(ValueError, OSError):  # a stream already closed or detached: left as it is
                stream.reconfigure(errors="backslashreplace")
                changed.append(stream)
    try:
        yield
    finally:
        for stream in changed:
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="strict")


def _tf_cnn_benchmarks_flags(words: list[str]) -> list[str]:
    """``cnnbench run`` also takes tf_cnn_benchmarks' flags, in their own spelling and forms."""
    command = next((i for i, w in enumerate(words) if not w.startswith("-")), None)
    if command is None or words[command] != "run":
        return words
    result = translate_with_notes(words[command + 1:])
    result.check_machine()
    for note in result.notes:
        print(f"cnnbench run: note: {note}", file=sys.stderr)
    return words[: command + 1] + result.args
