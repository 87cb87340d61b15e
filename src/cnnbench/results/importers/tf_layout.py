"""Where a tf_cnn_benchmarks log sits: the Lambda benchmark layout
``<machine>.logs/<config>/<model>-<batch>/throughput/<iteration>``, the words of its config
folder (``syn-replicated-fp16-2gpus-inference``), and the logs under a set of paths."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# tf_cnn_benchmarks' --use_fp16 keeps fp32 master variables, computes in fp16 and scales
# the loss: that is mixed precision, the computation cnnbench calls amp_fp16 (its fp16
# casts the weights themselves). The folder label ("fp16") is kept in source_config.
PRECISION_WORDS = {
    "fp32": "fp32",
    "fp16": "amp_fp16",
    "amp_fp16": "amp_fp16",
    "amp": "amp_fp16",
    "bf16": "amp_bf16",
    "amp_bf16": "amp_bf16",
    "tf32": "tf32",
}


@dataclass(frozen=True)
class LayoutInfo:
    """Where a log sits in ``<machine>.logs/<config>/<model>-<batch>/throughput/<iteration>``."""

    machine: str
    logs_dir: Path
    config_name: str
    model_batch: str
    iteration: int | None


def layout_of(path: Path) -> LayoutInfo | None:
    parts = path.parts
    if len(parts) < 5 or parts[-2] != "throughput" or not parts[-5].endswith(".logs"):
        return None
    iteration = int(parts[-1]) if re.fullmatch(r"[0-9]{1,9}", parts[-1]) else None  # not 1² (a digit to isdigit())
    return LayoutInfo(
        machine=parts[-5][: -len(".logs")],
        logs_dir=Path(*parts[:-4]),
        config_name=parts[-4],
        model_batch=parts[-3],
        iteration=iteration,
    )


def folder_words(config_name: str) -> dict[str, Any]:
    """Precision, distortions and mode named by a config folder (``syn-replicated-fp16-2gpus-inference``)."""
    words = config_name.lower().split("-")
    out: dict[str, Any] = {}
    for w in words:
        if w in PRECISION_WORDS:
            out["precision"] = PRECISION_WORDS[w]
            out["precision_label"] = w
    if "distortions" in words:
        out["distortions"] = True
    if "inference" in words:
        out["forward_only"] = True
    return out


def find_logs(paths: Sequence[Path]) -> Iterator[Path]:
    """Log files under ``paths``: files given by name, and in folders every file in a
    ``throughput/`` folder plus ``*.log`` / ``*.txt`` files. What is not a folder is yielded
    as it is, a FIFO or a device too, for its reader to name (never skipped in silence)."""
    for path in paths:
        if path.is_dir():
            for f in sorted(path.rglob("*")):
                if not f.is_dir() and (f.parent.name == "throughput" or f.suffix in (".log", ".txt")):
                    yield f
        elif path.exists():
            yield path
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
