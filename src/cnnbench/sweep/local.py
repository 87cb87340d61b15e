"""The ``local`` executor: a suite's cases run here, one after another, each in its own process.

The default of ``--executor``: it runs the command's work here (:meth:`cnnbench.sweep.executors.Work.run_here`:
for ``sweep``, :func:`cnnbench.sweep.session.run_sweep`; for ``study``, the sweep and then the report).
It owns no key of a suite's ``executor:`` block and has no flags.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from cnnbench.sweep.executors import Work, register


class LocalExecutor:
    name = "local"
    summary = "run the cases here, one after another (default)"
    flags_title: str | None = None
    block_keys: tuple[str, ...] = ()

    def check_block(self, block: Mapping[str, Any]) -> None:
        pass

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        pass

    def chosen_by(self, args: argparse.Namespace) -> bool:
        return False

    def execute(self, args: argparse.Namespace, work: Work) -> int:
        return work.run_here()


register(LocalExecutor())
