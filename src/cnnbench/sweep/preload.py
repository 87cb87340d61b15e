"""Imported once by the sweep's fork server, so that every case process starts warm.

Imports torch, torchvision, the engine, environment capture and the model registry's
sources; initialises nothing on a device (CUDA stays untouched, so forked cases can use
it). A failure here only makes cases slower to start (they import what they need), so
it is logged, never raised: the fork server must come up regardless. First, the server asks
to be killed when the sweep's process dies (the pid comes in its environment), so that a sweep
killed with SIGKILL takes the server, its case and the case's workers with it at once.
"""

from __future__ import annotations

import logging
import os

from cnnbench.lifetime import die_with_parent

log = logging.getLogger(__name__)

_parent = os.environ.pop("CNNBENCH_FORK_SERVER_PARENT", None)  # isolation.SERVER_PARENT_ENV
if _parent and _parent.isdigit():  # imported by the sweep's fork server: it dies with the sweep
    die_with_parent(int(_parent))

try:
    import psutil  # noqa: F401  (environment capture)
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    import cnnbench.engine.benchmark
    import cnnbench.machine.environment
    import cnnbench.sweep.runner  # noqa: F401  (the default worker)
    from cnnbench.models.registry import _load_sources

    _load_sources()
except Exception as exc:  # pragma: no cover - a broken install shows up in the cases themselves
    log.warning("the sweep's fork server could not preload the engine: %s", exc)
