"""cnnbench: measure how fast convolutional networks train and infer.

The package is laid out along the path of the data:
``config`` -> ``models`` / ``data`` -> ``distributed`` -> ``engine`` -> ``results`` -> ``report``.
Importing ``cnnbench`` itself is cheap and does not import torch.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
