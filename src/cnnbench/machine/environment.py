"""What machine and software a run used (the record's ``environment``).

CPU model from /proc/cpuinfo (py-cpuinfo as a fallback: it is slow to start), core
counts from psutil (the machine's) and from the CPU affinity (``available_cpus``: the cores
this run could use, after ``--host-cpus``), GPU names from torch and the driver version from
NVML (nvidia-ml-py) when present. Imports torch lazily: call only from the engine.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import socket
from typing import Any

from cnnbench.machine.affinity import cpu_count_available

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        import cpuinfo

        return str(cpuinfo.get_cpu_info().get("brand_raw") or platform.processor() or "unknown CPU")
    except Exception:  # pragma: no cover - exotic platforms
        return platform.processor() or "unknown CPU"


def _nvml_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # no NVIDIA driver here
        log.debug("NVML unavailable: %s", exc)
        return None


def derive_machine_label(cpu: str, gpu_model: str | None, gpu_count: int) -> str:
    """``AMD EPYC 7B13`` or ``2x NVIDIA H100 80GB HBM3`` style labels."""
    short_cpu = " ".join(w for w in cpu.replace("(R)", "").replace("(TM)", "").split() if w not in ("CPU", "Processor"))
    if gpu_model:
        return f"{gpu_count}x {gpu_model}"
    return short_cpu.split(" @ ")[0].strip()


def capture_environment(device_type: str, machine_label: str | None = None) -> dict[str, Any]:
    import psutil
    import torch
    import torchvision

    gpu_model = None
    gpu_count = 0
    cudnn = nccl = driver = None
    if device_type == "cuda" and torch.cuda.is_available():
        gpu_count = torch.cuda.device_count()
        gpu_model = torch.cuda.get_device_name(0)
        cudnn = torch.backends.cudnn.version()
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            nccl = None
        driver = _nvml_driver()
    cpu = cpu_model()
    return {
        "machine": machine_label or derive_machine_label(cpu, gpu_model, gpu_count),
        "hostname": socket.gethostname(),
        "cpu_model": cpu,
        "cpu_cores": psutil.cpu_count(logical=False) or os.cpu_count(),
        "cpu_threads": os.cpu_count(),
        "available_cpus": cpu_count_available(),  # what this run could use (--host-cpus, taskset, cgroups)
        "memory_bytes": int(psutil.virtual_memory().total),
        "gpu_model": gpu_model,
        "gpu_count": gpu_count,
        "gpu_driver": driver,
        "cuda_version": torch.version.cuda,
        "cudnn_version": cudnn,
        "nccl_version": nccl,
        "torch_version": torch.__version__,
        "torchvision_version": torchvision.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
    }
