"""Facts about the machine beyond its CPU model: OS and kernel, sockets, NUMA nodes, CPU
frequency and its scaling, memory, load, every NVIDIA GPU (NVML) with its PCIe link and
NVLink/P2P topology, and the environment variables that change how a run behaves.

These are the pieces of :func:`cnnbench.machine.environment.capture_environment`, which
puts them in every record's ``environment`` and which ``cnnbench sysinfo`` shows. What
cannot change while a process runs (OS, sockets, NUMA layout, frequency range) is read
once per process. No torch here: CUDA devices are matched to NVML's by their UUIDs, which
the caller passes in.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
from collections.abc import Mapping, Sequence
from typing import Any

import psutil

from cnnbench.machine import host
from cnnbench.machine.nvml import nvml_index_of_uuid, open_nvml

log = logging.getLogger(__name__)

# Environment variables that change what a run does (threads, visible devices, NCCL).
ENV_NAMES = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES",
    "KMP_AFFINITY", "KMP_BLOCKTIME", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING", "CUBLAS_WORKSPACE_CONFIG", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_CUDNN_V8_API_ENABLED",
    "TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_MAX_AUTOTUNE", "LD_PRELOAD",
)
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")


def relevant_environment_variables(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The set variables among :data:`ENV_NAMES` and those starting with :data:`ENV_PREFIXES`."""
    env = os.environ if env is None else env
    return {k: env[k] for k in sorted(env) if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}


def _os_name() -> str | None:
    try:
        release = platform.freedesktop_os_release()
    except (OSError, AttributeError):
        return f"{platform.system()} {platform.release()}".strip() or None
    return release.get("PRETTY_NAME") or release.get("NAME")


@functools.lru_cache(maxsize=1)
def static_host_facts() -> dict[str, Any]:
    """What cannot change while this process runs (read once)."""
    freq = host.frequency_range_mhz(host.usable_cpus())
    return {
        "os": _os_name(),
        "kernel": platform.release() or None,
        "cpu_sockets": host.cpu_sockets(),
        "cpu_frequency_min_mhz": freq["min"],
        "cpu_frequency_base_mhz": freq["base"],
        "cpu_frequency_max_mhz": freq["max"],
        "numa_nodes": host.numa_nodes(),
    }


def host_facts() -> dict[str, Any]:
    """The host: static facts, plus the cores this process may use, their governor and
    current frequency, free memory and the load average now."""
    cpus = host.usable_cpus()
    governors = host.governors(cpus)
    freqs = host.core_frequencies_mhz(cpus)
    return {
        **static_host_facts(),
        "cpu_usable_cores": len(cpus),
        "cpu_governor": ",".join(sorted(governors)) if governors else None,
        "cpu_frequency_mhz": round(sum(freqs) / len(freqs), 1) if freqs else None,
        "memory_available_bytes": int(psutil.virtual_memory().available),
        "load_average": host.load_average(),
        "env_vars": relevant_environment_variables(),
    }


def gpu_facts(cuda_uuids: Sequence[str] = ()) -> dict[str, Any]:
    """Every NVIDIA GPU NVML sees (``cuda_index``: its index in this process's CUDA
    numbering, from ``cuda_uuids``, or null when CUDA does not see it), the topology
    between them, the driver and the CUDA version it supports. Nulls without a driver."""
    empty: dict[str, Any] = {"gpus": [], "gpu_topology": None, "gpu_driver": None, "cuda_driver_version": None}
    nv = open_nvml()
    if nv is None:
        return empty
    with nv:
        count = nv.device_count()
        cuda_of: dict[int, int] = {}
        for cuda_index, uuid in enumerate(cuda_uuids):
            idx = nvml_index_of_uuid(nv, uuid) if uuid else None
            if idx is not None:
                cuda_of[idx] = cuda_index
        gpus = []
        for i in range(count):
            info = nv.device_info(i)
            info["cuda_index"] = cuda_of.get(i)
            gpus.append(info)
        return {
            "gpus": gpus,
            "gpu_topology": nv.topology(list(range(count))),
            "gpu_driver": nv.driver_version(),
            "cuda_driver_version": nv.cuda_driver_version(),
        }
