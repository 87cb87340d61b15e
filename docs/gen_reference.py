"""The flag reference of the docs, generated at build time from the parser ``--help`` prints.

One source: every ``cnnbench run`` flag comes from a :class:`~cnnbench.config.RunConfig` field's
``option(...)`` metadata (help, choices, default), which :mod:`cnnbench.config.cli_args` turns
into argparse arguments; the other commands declare theirs in their ``cli/*_cmd.py``. This
module walks :func:`cnnbench.cli.build_parser` and writes markdown tables from it; nothing
is copied by hand, and nothing is written to ``docs/``, so no generated page can go stale.

A page asks for a command's flags with a line ``<!-- cnnbench-flags: run -->`` (``results
list``, ``make-dataset``, ...) and for tf_cnn_benchmarks' flags with ``<!-- cnnbench-tf-flags
-->``. MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``): a marker that names no
command, or a command whose flags no page shows, fails the build. ``tests/test_docs.py`` uses
the same functions.
"""

from __future__ import annotations

import argparse
import html
import re
from typing import Any

FLAGS_MARKER = re.compile(r"^<!-- cnnbench-flags: ([a-z -]+?) -->$", re.MULTILINE)
TF_MARKER = "<!-- cnnbench-tf-flags -->"
API_MARKER = "<!-- cnnbench-api -->"


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its name as typed: ``run``, ``results list``, ``make-dataset``, ..."""
    from cnnbench.cli import build_parser

    out: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out[f"{prefix}{name}"] = sub
                    walk(sub, f"{prefix}{name} ")

    walk(build_parser(), "")
    # a command with sub-commands (``results``) is documented by its sub-commands
    return {name: p for name, p in out.items() if not any(k.startswith(name + " ") for k in out)}


def _cell(text: Any) -> str:
    """Text safe in a markdown table cell: no HTML read into it, no emphasis, no column break
    (code spans, between backticks, are left as they are)."""
    pieces = " ".join(str(text).split()).split("`")
    for i in range(0, len(pieces), 2):  # outside code spans
        pieces[i] = html.escape(pieces[i], quote=False).replace("*", "\\*")
    return "`".join(pieces).replace("|", "\\|")


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "switch"
    if action.choices is not None:
        return " ".join(_code(str(c)) for c in action.choices)
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    more = " ..." if action.nargs in ("+", "*") else ""
    return _code(f"{metavar}{more}")


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(
        action, (argparse._HelpAction, argparse._SubParsersAction))


def flag_table(parser: argparse.ArgumentParser) -> str:
    """The parser's arguments as markdown: one table per argument group, as ``--help`` groups them."""
    parts: list[str] = []
    for group in parser._action_groups:
        rows = [a for a in group._group_actions if _shown(a)]
        if not rows:
            continue
        title = group.title or "options"
        parts.append(f"**{title[0].upper()}{title[1:]}**\n")
        parts.append("| Flag | Value | What it does |\n| --- | --- | --- |")
        for a in rows:
            names = ", ".join(_code(s) for s in a.option_strings) or _code(a.metavar or a.dest)
            parts.append(f"| {names} | {_value(a)} | {_cell(_help(a))} |")
        parts.append("")
    if any(a.help == argparse.SUPPRESS and a.option_strings and "_" in a.option_strings[0]
           for a in parser._actions):
        parts.append("Every flag also takes its tf_cnn_benchmarks spelling with underscores "
                     "(`--batch_size`, `--no_cudnn_benchmark`).\n")
    return "\n".join(parts)


def command_reference(command: str) -> str:
    """The markdown of one command's flags: its description and its tables."""
    parsers = command_parsers()
    if command not in parsers:
        raise KeyError(f"no command {command!r}; the commands are: {', '.join(parsers)}")
    parser = parsers[command]
    head = f"*Generated from `cnnbench {command} --help`.*"
    if parser.description:
        head += f" {_cell(parser.description)}"
    return f"{head}\n\n{flag_table(parser)}"


_DEFAULT = "nothing (the default)"
_FIXED = "nothing (cnnbench's fixed value; any other is refused)"
_SAMPLE_VALUES = ("VALUE", "replicated", "nccl", "1", "0.9", "1.0")


def _said(args: list[str], empty: str) -> str:
    return _code(" ".join(args)) if args else empty


def tf_flags_reference() -> str:
    """tf_cnn_benchmarks' flags: what each becomes here, from :mod:`cnnbench.config.tf_flags`."""
    from cnnbench.config.tf_flags import NOT_BUILT, TENSORFLOW_TUNING, TF_FLAGS, TfFlagError

    rows = ["| tf_cnn_benchmarks | cnnbench |", "| --- | --- |"]
    for name, flag in TF_FLAGS.items():
        if flag.boolean:
            for typed, value in (("--" + name, "true"), ("--no" + name, "false")):
                rows.append(f"| {_code(typed)} | {_said(flag.translate(value), _DEFAULT)} |")
            continue
        refusal = ""
        for value in _SAMPLE_VALUES:  # the first value it takes shows where it goes
            try:
                args = flag.translate(value)
            except TfFlagError as exc:
                refusal = refusal or str(exc)
                continue
            except ValueError:
                continue
            rows.append(f"| {_code(f'--{name}={value}')} | {_said(args, _FIXED)} |")
            break
        else:
            rows.append(f"| {_code(f'--{name}')} | refused: {_cell(refusal)} |")
    tuning = ", ".join(_code(n) for n in sorted(TENSORFLOW_TUNING))
    unbuilt = ", ".join(_code(n) for n in sorted(NOT_BUILT))
    return ("*Generated from `cnnbench/config/tf_flags.py`.*\n\n" + "\n".join(rows)
            + f"\n\n**Left out, with a note** (they tune TensorFlow itself): {tuning}.\n\n"
            + f"**Refused in one line** (not built here): {unbuilt}.\n")


def _markdown_docstring(doc: str) -> str:
    """A reST-flavoured docstring as markdown: ``code`` and :role:`~a.b.name` as code spans,
    doctest lines as a code block."""
    doc = re.sub(r":\w+:`~?([\w.]+)`", lambda m: "`" + m.group(1).rsplit(".", 1)[-1] + "`", doc)
    doc = doc.replace("``", "`")
    out: list[str] = []
    in_code = False
    for line in doc.splitlines():
        code = line.startswith(">>>") or (in_code and line.strip() and not line.startswith(" "))
        if code and not in_code:
            out.append("```python")
        elif not code and in_code:
            out.append("```")
        in_code = code
        out.append(line)
    if in_code:
        out.append("```")
    return "\n".join(out)


def _signature(sig: Any) -> str:
    """``(a: Results, *, noise: float = 0.03) -> pd.DataFrame``: the annotations as written."""
    import inspect

    params: list[str] = []
    star = False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        text = ("**" if p.kind is p.VAR_KEYWORD else "*" if p.kind is p.VAR_POSITIONAL else "") + p.name
        star = star or p.kind is p.VAR_POSITIONAL
        if p.annotation is not inspect.Parameter.empty:
            text += f": {p.annotation}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}"
        params.append(text)
    returns = f" -> {sig.return_annotation}" if sig.return_annotation is not inspect.Signature.empty else ""
    return f"({', '.join(params)}){returns}"


def api_reference() -> str:
    """The functions of :mod:`cnnbench.api` (its ``__all__``): signature and docstring."""
    import inspect

    from cnnbench import api

    parts: list[str] = []
    for name in api.__all__:
        func = getattr(api, name)
        signature = _signature(inspect.signature(func))
        parts.append(f"### `cnnbench.api.{name}`\n\n```python\n{name}{signature}\n```\n\n"
                     + _markdown_docstring(inspect.getdoc(func) or "") + "\n")
    return "\n".join(parts)


# --- the MkDocs hook ---------------------------------------------------------------------------
_shown_commands: set[str] = set()


def on_pre_build(config: Any) -> None:
    _shown_commands.clear()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from mkdocs.exceptions import PluginError

    def flags(match: re.Match[str]) -> str:
        try:
            text = command_reference(match.group(1))
        except KeyError as exc:
            raise PluginError(f"{page.file.src_uri}: {exc.args[0]}") from None
        _shown_commands.add(match.group(1))
        return text

    markdown = FLAGS_MARKER.sub(flags, markdown)
    if TF_MARKER in markdown:
        markdown = markdown.replace(TF_MARKER, tf_flags_reference())
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_reference())
    return markdown


def on_post_build(config: Any) -> None:
    from mkdocs.exceptions import PluginError

    missing = sorted(set(command_parsers()) - _shown_commands)
    if missing:
        raise PluginError(f"no page shows the flags of: {', '.join(missing)} "
                          "(add '<!-- cnnbench-flags: NAME -->' to its page)")


def _help(action: argparse.Action) -> str:
    """An option's help as ``--help`` prints it (argparse's own expansion: ``%(kinds)s`` filled in,
    ``%%`` read as ``%``)."""
    text = action.help or ""
    if "%" not in text:
        return text
    return argparse.HelpFormatter(prog="cnnbench")._expand_help(action)
