"""cnnbench's version: a leaf every package may read it from (never the package root, which would
close an import cycle through :mod:`cnnbench.api`). ``pyproject.toml`` carries the same string."""

from __future__ import annotations

__version__ = "0.1.0"
