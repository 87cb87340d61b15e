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
    """The set variables among :data:`ENV_NAMES` and those starting with :data:`ENV_PREFIXES`;
    ``TORCHINDUCTOR_CACHE_DIR`` only where it is not torch's own default, which torch sets in the
    environment itself once its compiler's cache is first asked for (torchvision's import does)."""
    env = os.environ if env is None else env
    out = {k: env[k] for k in sorted(env) if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    cache = out.get("TORCHINDUCTOR_CACHE_DIR", "")
    if os.path.basename(cache) == _inductor_default_cache() and os.path.dirname(cache) in _temporary_folders():
        del out["TORCHINDUCTOR_CACHE_DIR"]
    return out


def _temporary_folders() -> set[str]:
    """The folders ``tempfile`` may have taken as the temporary one when torch asked (it keeps the
    first it found; ``TMPDIR`` may have changed since): never a scratch folder a user names."""
    import tempfile

    named = (os.environ.get(k) for k in ("TMPDIR", "TEMP", "TMP"))
    return {os.path.abspath(p) for p in (tempfile.gettempdir(), *named, "/tmp", "/var/tmp", "/usr/tmp") if p}


def _inductor_default_cache() -> str:
    """The name of the folder torch's compiler caches in by default, in the temporary folder of the
    time torch asked (``torch._inductor.runtime.cache_dir_utils.default_cache_dir``, made here as
    it makes it, without importing torch)."""
    import getpass
    import re

    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)


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


# --------------------------------------------------------------------------- description


def _gib(n: Any) -> str:
    return f"{n / 2**30:.1f} GiB" if isinstance(n, (int, float)) else "—"


def _mhz(x: Any) -> str:
    return f"{x / 1000:.2f} GHz" if isinstance(x, (int, float)) and x else "—"


def _text(x: Any) -> str:
    return "—" if x is None or x == "" else str(x)


Section = tuple[str, list[tuple[str, str]]]


def describe(env: Mapping[str, Any]) -> list[Section]:
    """An environment (``capture_environment``'s dict) as titled sections of label/value
    pairs, for people: what ``cnnbench sysinfo`` shows as a table."""
    cores = (f"{_text(env.get('cpu_cores'))} physical, {_text(env.get('cpu_threads'))} logical, "
             f"{_text(env.get('available_cpus'))} usable by this process")
    freq_range = (f"{_mhz(env.get('cpu_frequency_min_mhz'))} – {_mhz(env.get('cpu_frequency_max_mhz'))}"
                  if env.get("cpu_frequency_max_mhz") else "—")
    if env.get("cpu_frequency_base_mhz"):
        freq_range += f" (base {_mhz(env.get('cpu_frequency_base_mhz'))})"
    load = env.get("load_average")
    numa = env.get("numa_nodes") or []
    sections: list[Section] = [
        ("Host", [
            ("hostname", _text(env.get("hostname"))),
            ("machine label", _text(env.get("machine"))),
            ("OS", _text(env.get("os"))),
            ("kernel", _text(env.get("kernel"))),
            ("platform", _text(env.get("platform"))),
        ]),
        ("CPU", [
            ("model", _text(env.get("cpu_model"))),
            ("sockets", _text(env.get("cpu_sockets"))),
            ("cores", cores),
            ("frequency now", _mhz(env.get("cpu_frequency_mhz"))),
            ("frequency range", freq_range),
            ("scaling governor", _text(env.get("cpu_governor"))),
            ("load average (1, 5, 15 min)", ", ".join(f"{x:.2f}" for x in load) if load else "—"),
        ]),
        ("Memory", [
            ("total", _gib(env.get("memory_bytes"))),
            ("available", _gib(env.get("memory_available_bytes"))),
            *((f"NUMA node {n['node']}", f"CPUs {_text(n.get('cpus'))}"
                                              + (f", {_gib(n['memory_bytes'])} total" if n.get("memory_bytes") else ""))
              for n in numa),
        ]),
        ("Software", [
            ("Python", _text(env.get("python_version"))),
            ("torch", _text(env.get("torch_version"))),
            ("torchvision", _text(env.get("torchvision_version"))),
            ("torch threads", _text(env.get("torch_num_threads"))),
            ("CUDA (torch build)", _text(env.get("cuda_version"))),
            ("cuDNN", _text(env.get("cudnn_version"))),
            ("NCCL", _text(env.get("nccl_version"))),
            ("NVIDIA driver", _text(env.get("gpu_driver"))),
            ("CUDA (driver supports)", _text(env.get("cuda_driver_version"))),
        ]),
        ("Environment variables",
         list((env.get("env_vars") or {}).items()) or [("(none of the relevant ones set)", "")]),
    ]
    return sections


GPU_COLUMNS = ("GPU", "CUDA", "name", "memory", "CC", "PCIe now / max", "power limit", "max SM clock", "NVLinks")
"""CC: compute capability."""


def _nvlinks(g: Mapping[str, Any]) -> str:
    """``"18 (NVSwitch)"`` when every active link ends at an NVSwitch, ``"12 (4 to NVSwitch)"``
    for some, else the count."""
    n, switch = g.get("nvlinks"), g.get("nvswitch_links")
    if not n or not switch:
        return _text(n)
    return f"{n} (NVSwitch)" if switch == n else f"{n} ({switch} to NVSwitch)"


def gpu_rows(env: Mapping[str, Any]) -> list[list[str]]:
    """One row per GPU under :data:`GPU_COLUMNS`."""
    rows = []
    for g in env.get("gpus") or []:
        link = "—"
        if g.get("pcie_generation") is not None:
            link = (f"gen{g.get('pcie_generation')} x{_text(g.get('pcie_width'))} / "
                    f"gen{_text(g.get('pcie_generation_max'))} x{_text(g.get('pcie_width_max'))}")
        power = g.get("power_limit_w")
        rows.append([
            _text(g.get("index")), _text(g.get("cuda_index")), _text(g.get("name")), _gib(g.get("memory_bytes")),
            _text(g.get("compute_capability")), link, f"{power:.0f} W" if power else "—",
            f"{g['sm_clock_max_mhz']} MHz" if g.get("sm_clock_max_mhz") else "—", _nvlinks(g),
        ])
    return rows
