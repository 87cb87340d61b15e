"""What machine and software a run used: the record's ``environment``, and what
``cnnbench sysinfo`` shows (the same capture).

CPU model from /proc/cpuinfo (py-cpuinfo as a fallback: it is slow to start, so its answer
is kept for the life of the process), core counts from psutil (the machine's) and from the
CPU affinity (``available_cpus``: the cores this run could use, after ``--host-cpus``), GPU
names and library versions from torch, and the rest from :mod:`cnnbench.machine.sysinfo`: OS
and kernel, sockets, NUMA nodes, frequency and governor, memory, load, environment variables,
and each NVIDIA GPU's memory, compute capability, PCIe link and NVLink/P2P topology from NVML
(nvidia-ml-py; nulls where there is no NVIDIA driver). Imports torch lazily.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import socket
from typing import TYPE_CHECKING, Any

from cnnbench.machine.affinity import cpu_count_available

if TYPE_CHECKING:
    from cnnbench.machine.cuda_device import CudaDevice

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


def derive_machine_label(cpu: str, gpu_model: str | None, gpu_count: int) -> str:
    """``AMD EPYC 7B13`` or ``2x NVIDIA H100 80GB HBM3`` style labels."""
    short_cpu = " ".join(w for w in cpu.replace("(R)", "").replace("(TM)", "").split() if w not in ("CPU", "Processor"))
    if gpu_model:
        return f"{gpu_count}x {gpu_model}"
    return short_cpu.split(" @ ")[0].strip()


def expected_machine_label(device: str, machine_label: str | None = None, gpu_index: int = 0) -> str | None:
    """The ``environment.machine`` that a run on ``device`` (``cpu``, ``cuda``, ``auto``) will
    record, told before it runs, so that the store's file of that label can be checked first:
    ``machine_label`` when given, else derived as :func:`capture_environment` derives it (from
    CUDA device ``gpu_index``, the run's first, on a CUDA run). None when it cannot be told here
    (the run's own checks then say why). A CPU run needs no torch; a CUDA run asks what the
    run itself asks first (the device's name and count)."""
    if machine_label:
        return machine_label
    cpu = cpu_model()
    if str(device).split(":", 1)[0] == "cpu":
        return derive_machine_label(cpu, None, 0)
    try:
        from cnnbench.machine.devices import cuda_available, resolve_device_kind

        if resolve_device_kind(str(device).split(":", 1)[0]) != "cuda" or not cuda_available():
            return derive_machine_label(cpu, None, 0)
        import torch

        return derive_machine_label(cpu, str(torch.cuda.get_device_name(gpu_index)), torch.cuda.device_count())
    except Exception as exc:  # no such GPU, a broken driver: the run's own checks name it
        log.debug("machine label not known before the run: %s", exc)
        return None


def capture_environment(device: Any, machine_label: str | None = None, *,
                        gpus: bool | None = None) -> dict[str, Any]:
    """The record's ``environment`` for a run on ``device`` (``"cpu"``, ``"cuda"``, or the
    run's ``torch.device``).

    ``gpu_model`` is the name of the run's own CUDA device (``cuda:k``; the current device
    when ``device`` names no index), with its SM count (``gpu_sm_count``) and, on a MIG
    slice, its profile (``gpu_mig_profile``); ``gpu_count`` counts the CUDA devices the
    process sees (none for a CPU run, so its machine label comes from the CPU). ``gpus``
    lists every NVIDIA GPU NVML sees; by default only for ``cuda`` runs (``gpus=True``:
    always, as ``cnnbench sysinfo`` does).
    """
    import psutil
    import torch
    import torchvision

    from cnnbench.machine.sysinfo import gpu_facts, host_facts

    device_type = str(device).split(":", 1)[0]
    uses_cuda = device_type == "cuda" and torch.cuda.is_available()
    own, gpu_count, cudnn, nccl, uuids = _cuda_facts(device) if uses_cuda else (None, 0, None, None, [])
    gpu_model = own.name if own else None
    gpu = gpu_facts(uuids) if (uses_cuda if gpus is None else gpus) else {
        "gpus": [], "gpu_topology": None, "gpu_driver": None, "cuda_driver_version": None}
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
        "gpu_sm_count": own.sm_count if own else None,
        "gpu_mig_profile": own.mig_profile if own else None,
        "gpu_driver": gpu["gpu_driver"],
        "cuda_version": torch.version.cuda,
        "cudnn_version": cudnn,
        "nccl_version": nccl,
        "torch_version": torch.__version__,
        "torchvision_version": torchvision.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        **host_facts(),
        "cuda_driver_version": gpu["cuda_driver_version"],
        "gpus": gpu["gpus"],
        "gpu_topology": gpu["gpu_topology"],
    }


def _cuda_facts(device: Any) -> tuple[CudaDevice, int, int | None, str | None, list[str]]:
    """The run's own CUDA device, how many the process sees, the cuDNN and NCCL versions and
    every device's UUID."""
    import torch

    from cnnbench.machine.cuda_device import describe_cuda_device

    gpu_count = torch.cuda.device_count()
    own = describe_cuda_device(device)
    cudnn = torch.backends.cudnn.version()
    try:
        nccl: str | None = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        nccl = None
    return own, gpu_count, cudnn, nccl, [_cuda_uuid(i) for i in range(gpu_count)]


def _cuda_uuid(index: int) -> str:
    import torch

    try:
        return str(torch.cuda.get_device_properties(index).uuid)
    except Exception as exc:  # an old torch without device UUIDs
        log.debug("no UUID for cuda:%d: %s", index, exc)
        return ""
