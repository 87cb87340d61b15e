"""The one classifier of out-of-memory failures, for an exception or for the text of one.

A run that ran out of memory is recorded as ``oom`` (not ``error``), and ``auto_batch``
retries it with a smaller batch; so every place that sees a failure (the engine on one
device, the launcher of a multi-device run, a sweep reading a case's exception) asks here.
Besides torch's ``OutOfMemoryError`` and the host allocator's words, CUDA libraries report
their own allocation failures: cuBLAS (``CUBLAS_STATUS_ALLOC_FAILED``), cuDNN
(``CUDNN_STATUS_ALLOC_FAILED``, ``CUDNN_STATUS_NOT_ENOUGH_WORKSPACE``), cuSOLVER/cuSPARSE/
cuFFT (``*_STATUS_ALLOC_FAILED``), NCCL (``ncclSystemError`` … ``Cuda failure 'out of
memory'``) and the driver (``CUDA_ERROR_OUT_OF_MEMORY``, ``cudaErrorMemoryAllocation``).
No torch here: a sweep's process classifies its cases without importing it.
"""

from __future__ import annotations

OOM_MARKERS = (
    "out of memory",
    "outofmemoryerror",
    "memoryerror",
    "cannot allocate memory",
    "can't allocate memory",
    "defaultcpuallocator",
    "_status_alloc_failed",  # CUBLAS_, CUDNN_, CUSOLVER_, CUSPARSE_, CUFFT_
    "cudnn_status_not_enough_workspace",
    "cuda_error_out_of_memory",
    "cudaerrormemoryallocation",
)
"""Lower-case words whose presence in an error's text means it ran out of memory."""


def is_out_of_memory_text(text: str) -> bool:
    """Whether an error's text (``Type: message``, or a worker's one-line cause) says it ran
    out of memory."""
    lowered = text.lower()
    return any(marker in lowered for marker in OOM_MARKERS)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory failure (its type, or the text of its message)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, (RuntimeError, OSError)) and is_out_of_memory_text(f"{type(exc).__name__}: {exc}")
