"""cnnbench: measure how fast convolutional networks train and infer.

The package is laid out in layers along the path of the data; a package imports only from the
layers below it (``tests/test_layers.py`` holds the table). From the bottom:

1. the leaf modules ``errors``, ``words``, ``terminal``, ``lifetime``, ``oom``, ``version``;
2. ``machine`` (what the host and its GPUs are), then ``config`` (what a run is asked to do);
3. ``results`` (the record and the store), ``models`` and ``data``;
4. ``distributed`` (collectives and strategies);
5. ``engine`` (a run on one device or many, ``engine.multidevice``);
6. ``analysis`` (statistics, pairing, significance: torch-free, above ``results`` only);
7. ``sweep``, ``report`` and ``compare``;
8. the Python API (:mod:`cnnbench.api`), then the CLI (:mod:`cnnbench.cli`).

Importing ``cnnbench`` itself is cheap and does not import torch.

The Python API, for notebooks (see :mod:`cnnbench.api`)::

    import cnnbench
    record = cnnbench.run(model="resnet50", batch_size=32)      # the Record; torch loads here
    frame = cnnbench.read_results("results/")                    # a DataFrame, dotted columns
    table = cnnbench.compare("results/a", "results/b")           # a DataFrame: ratio, interval, p, verdict
    rep = cnnbench.report("results/", output="report/")          # the Report
    done = cnnbench.study("host-cpus", smoke=True)               # a study's sweep and report

The five names load :mod:`cnnbench.api` on first use (PEP 562). ``cnnbench.report``,
``cnnbench.compare`` and ``cnnbench.study`` are also the packages of the report's, compare's and
studies' modules; those packages are callable, as :func:`cnnbench.api.report`,
:func:`cnnbench.api.compare` and :func:`cnnbench.api.study`.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from cnnbench.version import __version__

_API = ("compare", "read_results", "report", "run", "study")

__all__ = ["__version__", "compare", "read_results", "report", "run", "study"]

if TYPE_CHECKING:
    from cnnbench.api import compare, read_results, report, run, study


def __getattr__(name: str) -> Any:
    """The API's functions, imported on first use (``import cnnbench`` stays cheap)."""
    if name in _PACKAGES:
        import importlib

        return importlib.import_module(f"cnnbench.{name}")  # bound here, callable: _Package.__setattr__
    if name in _API:
        from cnnbench import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


class _ReportPackage(types.ModuleType):
    """The ``cnnbench.report`` package, callable: ``cnnbench.report(results, output=...)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from cnnbench.api import report

        return report(*args, **kwargs)


class _ComparePackage(types.ModuleType):
    """The ``cnnbench.compare`` package, callable: ``cnnbench.compare(a, b)``; it shows the API
    function's docstring and annotations, as ``cnnbench.compare`` did before it was a package."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from cnnbench.api import compare

        return compare(*args, **kwargs)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        from cnnbench.api import compare

        return compare.__doc__

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        from cnnbench.api import compare

        return compare.__annotations__


class _StudyPackage(types.ModuleType):
    """The ``cnnbench.study`` package, callable: ``cnnbench.study("host-cpus", smoke=True)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from cnnbench.api import study

        return study(*args, **kwargs)


_PACKAGES: dict[str, type[types.ModuleType]] = {"report": _ReportPackage, "compare": _ComparePackage,
                                                "study": _StudyPackage}


class _Package(types.ModuleType):
    """``cnnbench`` itself: the import system binds each subpackage here with ``setattr``;
    the ``report`` and ``compare`` packages are made callable as they are bound, whoever imports
    them first."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PACKAGES and type(value) is types.ModuleType:
            value.__class__ = _PACKAGES[name]
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
