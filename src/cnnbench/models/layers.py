"""Kinds of layer that the engine and the strategies treat apart."""

from __future__ import annotations

from torch import nn

NORMALIZATION = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm, nn.LocalResponseNorm)
"""Normalisation layers: kept in fp32 under fp16/bf16, and FSDP units of their own under amp."""
