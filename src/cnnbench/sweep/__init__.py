"""Sweeps: a suite file's matrix of runs, each case isolated in its own process.
May import: ``engine``, ``analysis`` and the layers below them (never ``report`` or ``compare``).

:mod:`~cnnbench.sweep.suite` reads and checks suite files (no torch),
:mod:`~cnnbench.sweep.isolation` runs one function in its own process (forked from a warm
fork server) with a time limit,
:mod:`~cnnbench.sweep.runner` runs a suite and appends the records (one case:
:mod:`~cnnbench.sweep.case`; resuming: :mod:`~cnnbench.sweep.resume`; the repeats' check:
:mod:`~cnnbench.sweep.noise`), :mod:`~cnnbench.sweep.session` runs a suite file as
``cnnbench sweep`` does, :mod:`~cnnbench.sweep.progress` shows it.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cnnbench.sweep.suite import Case, Suite, SuiteError, load_suite, parse_suite

__all__ = ["Case", "Suite", "SuiteError", "load_suite", "parse_suite"]


def __getattr__(name: str) -> Any:
    """The suite's names, imported when first asked for: every command's parser imports
    :mod:`~cnnbench.sweep.executors`, which need not read suites (with them and PyYAML,
    ``cnnbench --help`` took 0.097 s against 0.086 s)."""
    if name in __all__:
        from cnnbench.sweep import suite

        return getattr(suite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
