"""Peak memory: the device allocator's high-water mark, and the process's peak resident set.

(Whether a failure ran out of memory: :mod:`cnnbench.oom`.)"""

from __future__ import annotations

import resource
import sys

import torch


def reset_device_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_device_memory(device: torch.device) -> dict[str, int | None]:
    """Peak bytes held by tensors (allocated) and by the caching allocator (reserved)."""
    if device.type != "cuda":
        return {"peak_device_memory_bytes": None, "peak_device_reserved_bytes": None}
    return {
        "peak_device_memory_bytes": int(torch.cuda.max_memory_allocated(device)),
        "peak_device_reserved_bytes": int(torch.cuda.max_memory_reserved(device)),
    }


def peak_host_memory() -> int:
    """Peak resident set size of this process, in bytes."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)
