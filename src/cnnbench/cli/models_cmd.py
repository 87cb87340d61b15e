"""``cnnbench models``: list the model registry (``--list [PATTERN]``, wildcards allowed)."""

from __future__ import annotations

import argparse

from cnnbench.cli.common import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="List models, or show what they cost.",
        description="List registry names matching a wildcard pattern (torchvision models, "
        "tf_cnn_benchmarks aliases, timm/<name> when timm is installed, trivial).",
    )
    p.add_argument("pattern", nargs="?", default="*", help="Shell-style wildcard, e.g. 'resnet*' or 'timm/efficient*'.")
    p.add_argument("--list", action="store_true", help="Only list matching names, one per line.")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cnnbench.models import list_models

    names = list_models(args.pattern)
    if not names:
        raise UserError(f"no model matches {args.pattern!r} (try `cnnbench models --list`)")
    print("\n".join(names))
    return 0
