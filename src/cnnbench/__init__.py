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
    record = cnnbench.run(model="resnet50", batch_size=32)            # the Record; torch loads here
    frame = cnnbench.read_results("results/")                          # a DataFrame, dotted columns
    best = cnnbench.query('SELECT "config.model", max("metrics.total_images_per_sec") FROM runs GROUP BY 1')
    table = cnnbench.compare_results("results/a", "results/b")         # a DataFrame: ratio, interval, p, verdict
    changes = cnnbench.find_changes("results/")                        # a DataFrame: each series' lasting changes
    rep = cnnbench.make_report("results/", output="report/")           # the Report
    done = cnnbench.run_study("host-cpus", smoke=True)                 # a study's sweep and report

The seven names load :mod:`cnnbench.api` on first use (PEP 562). None of them is also a package's
name: ``cnnbench.report``, ``cnnbench.compare`` and ``cnnbench.study`` are the packages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cnnbench.version import __version__

_API = ("compare_results", "find_changes", "make_report", "query", "read_results", "run", "run_study")

__all__ = ["__version__", "compare_results", "find_changes", "make_report", "query", "read_results", "run",
           "run_study"]

if TYPE_CHECKING:
    from cnnbench.api import compare_results, find_changes, make_report, query, read_results, run, run_study


def __getattr__(name: str) -> Any:
    """The API's functions, imported on first use (``import cnnbench`` stays cheap)."""
    if name in _API:
        from cnnbench import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
