"""Which device kind a run uses: the one place that says what ``--device auto`` means."""

from __future__ import annotations

DEVICE_KINDS = ("cpu", "cuda")


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def resolve_device_kind(kind: str) -> str:
    """``auto`` -> ``cuda`` when a CUDA device is present, else ``cpu``; other kinds unchanged."""
    if kind == "auto":
        return "cuda" if cuda_available() else "cpu"
    return kind
