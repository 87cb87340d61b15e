"""The ``local`` executor: a sweep's cases run here, one after another, each in its own process.

The default of ``--executor``; what it runs is :func:`cnnbench.cli.sweep_cmd.run_here` (a suite) and
:func:`cnnbench.cli.study_cmd.run_here` (a study, then its report).
"""

from __future__ import annotations

import argparse
from typing import Any

from cnnbench.cli.executors import register


class LocalExecutor:
    name = "local"
    summary = "run the cases here, one after another (default)"
    flags_title: str | None = None

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        pass

    def chosen_by(self, args: argparse.Namespace) -> bool:
        return False

    def sweep(self, args: argparse.Namespace) -> int:
        from cnnbench.cli.sweep_cmd import run_here

        return run_here(args)

    def study(self, args: argparse.Namespace, request: Any) -> int:
        from cnnbench.cli.study_cmd import run_here

        return run_here(args, request)


register(LocalExecutor())
