"""NVIDIA's management library (NVML, through nvidia-ml-py), guarded: no driver, no error.

:func:`open_nvml` gives an :class:`Nvml` session, or ``None`` where there is no NVIDIA
driver (or no nvidia-ml-py); every reading of a session returns ``None`` when the GPU does
not support it. Nothing here raises for a machine without NVIDIA GPUs, and nothing imports
torch. ``pynvml`` is imported when a session opens, so tests can put a fake module in
``sys.modules``.

    nv = open_nvml()
    if nv is not None:
        with nv:
            print([nv.device_info(i)["name"] for i in range(nv.device_count())])

Indices here are NVML's (as ``nvidia-smi`` numbers the GPUs), which need not be CUDA's:
:func:`nvml_index_of_uuid` maps a CUDA device (by its UUID) to its NVML index.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

# nvidia-smi's words for how two GPUs are connected when no NVLink joins them
# (NVML_TOPOLOGY_* levels, nearest first).
TOPOLOGY_WORDS = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
"""PIX: one PCIe switch; PXB: several switches; PHB: a PCIe host bridge (the CPU);
NODE: host bridges of one NUMA node; SYS: across NUMA nodes (SMP interconnect)."""

# Clock event ("throttle") reasons: the bits of nvmlDeviceGetCurrentClocksEventReasons.
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
POWER_CAP = 0x4
"""The software power cap: clocks lowered to stay within the power limit. Normal under boost
on any heavy load, so reported apart (``power_capped``) and not warned about."""
THROTTLE_MASK = 0x8 | 0x20 | 0x40 | 0x80
"""The reasons that mean the GPU was held back abnormally: heat (software and hardware
thermal slowdown), a hardware slowdown, or the external power brake."""
GPU_IDLE = 0x1

# nvmlDeviceGetNvLinkRemoteDeviceType: what is at the other end of an NVLink.
NVLINK_REMOTE_GPU = 0x0
NVLINK_REMOTE_SWITCH = 0x2
"""An NVSwitch (HGX/DGX boards): the GPUs on switches all reach each other through them."""


def reason_names(mask: int) -> list[str]:
    """The names of the bits set in a clock event reasons mask."""
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class GpuProcess:
    """A process that holds memory on a GPU (NVML's process list)."""

    pid: int
    memory_bytes: int | None


class Nvml:
    """An open NVML session (``nvmlInit`` done; :meth:`close` shuts it down)."""

    def __init__(self, module: ModuleType) -> None:
        self.nv = module
        self._handles: dict[int, Any] = {}
        self._open = True

    # -- session ---------------------------------------------------------------------
    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                self.nv.nvmlShutdown()
            except Exception as exc:
                log.debug("nvmlShutdown: %s", exc)

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def call(self, name: str, *args: Any) -> Any:
        """``pynvml.<name>(*args)``, or ``None`` when it is missing, unsupported or fails."""
        fn = getattr(self.nv, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception as exc:  # NVMLError_NotSupported and friends
            log.debug("%s: %s", name, exc)
            return None

    # -- devices ---------------------------------------------------------------------
    def device_count(self) -> int:
        return int(self.call("nvmlDeviceGetCount") or 0)

    def handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self.call("nvmlDeviceGetHandleByIndex", index)
        return self._handles[index]

    def driver_version(self) -> str | None:
        version = self.call("nvmlSystemGetDriverVersion")
        return _text(version) if version is not None else None

    def cuda_driver_version(self) -> str | None:
        """The CUDA version the driver supports (``"12.4"``)."""
        version = self.call("nvmlSystemGetCudaDriverVersion_v2")
        if version is None:
            version = self.call("nvmlSystemGetCudaDriverVersion")
        if not isinstance(version, int) or version <= 0:
            return None
        return f"{version // 1000}.{version % 1000 // 10}"

    def uuid(self, index: int) -> str | None:
        h = self.handle(index)
        value = self.call("nvmlDeviceGetUUID", h) if h is not None else None
        return _text(value) if value is not None else None

    def pci_bus_id(self, index: int) -> str | None:
        h = self.handle(index)
        info = self.call("nvmlDeviceGetPciInfo", h) if h is not None else None
        bus = getattr(info, "busId", None)
        return _text(bus) if bus is not None else None

    def device_info(self, index: int) -> dict[str, Any]:
        """What does not change while a machine runs: name, memory, compute capability,
        PCIe link (generation and width: current and maximum), power limit, maximum clocks,
        active NVLinks."""
        h = self.handle(index)
        call = self.call
        name = call("nvmlDeviceGetName", h)
        memory = call("nvmlDeviceGetMemoryInfo", h)
        cc = call("nvmlDeviceGetCudaComputeCapability", h)
        limit_mw = call("nvmlDeviceGetEnforcedPowerLimit", h)
        if limit_mw is None:
            limit_mw = call("nvmlDeviceGetPowerManagementLimit", h)
        sm_max = call("nvmlDeviceGetMaxClockInfo", h, getattr(self.nv, "NVML_CLOCK_SM", 1))
        mem_max = call("nvmlDeviceGetMaxClockInfo", h, getattr(self.nv, "NVML_CLOCK_MEM", 2))
        return {
            "index": index,
            "name": _text(name) if name is not None else None,
            "uuid": self.uuid(index),
            "pci_bus_id": self.pci_bus_id(index),
            "memory_bytes": int(memory.total) if memory is not None else None,
            "compute_capability": f"{cc[0]}.{cc[1]}" if cc is not None else None,
            "pcie_generation": call("nvmlDeviceGetCurrPcieLinkGeneration", h),
            "pcie_generation_max": call("nvmlDeviceGetMaxPcieLinkGeneration", h),
            "pcie_width": call("nvmlDeviceGetCurrPcieLinkWidth", h),
            "pcie_width_max": call("nvmlDeviceGetMaxPcieLinkWidth", h),
            "power_limit_w": limit_mw / 1000.0 if limit_mw is not None else None,
            "sm_clock_max_mhz": sm_max,
            "memory_clock_max_mhz": mem_max,
            "nvlinks": len(self.active_nvlinks(index)) if h is not None else None,
            "nvswitch_links": self.nvlink_ends(index)[1] if h is not None else None,
        }

    def active_nvlinks(self, index: int) -> list[int]:
        """The NVLinks of a GPU that are up."""
        h = self.handle(index)
        enabled = getattr(self.nv, "NVML_FEATURE_ENABLED", 1)
        links = []
        for link in range(int(getattr(self.nv, "NVML_NVLINK_MAX_LINKS", 18))):
            state = self.call("nvmlDeviceGetNvLinkState", h, link)
            if state is None:
                if link == 0:
                    break  # no NVLink on this GPU
                continue
            if state == enabled:
                links.append(link)
        return links

    def nvlink_ends(self, index: int) -> tuple[list[str], int]:
        """Where a GPU's active NVLinks go: the PCI bus ids of the GPUs its direct links reach,
        and how many links end at an NVSwitch (whose bus id is no GPU's)."""
        h = self.handle(index)
        switch = int(getattr(self.nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", NVLINK_REMOTE_SWITCH))
        peers: list[str] = []
        switch_links = 0
        for link in self.active_nvlinks(index):
            if nvlink_remote_is_switch(self.call("nvmlDeviceGetNvLinkRemoteDeviceType", h, link), switch):
                switch_links += 1
                continue
            remote = self.call("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
            bus = getattr(remote, "busId", None)
            if bus is not None:
                peers.append(_text(bus).lower())
        return peers, switch_links

    def topology(self, indices: Sequence[int]) -> dict[str, Any] | None:
        """How every pair of GPUs is connected, as ``nvidia-smi topo -m`` says it: ``NV<n>``
        (n NVLinks between them, or for two GPUs on NVSwitches the fewer of their switch
        links), else the nearest common PCIe ancestor (``PIX``, ``PXB``, ``PHB``, ``NODE``,
        ``SYS``); whether peer-to-peer reads work (``OK``) or not; and each GPU's NVLinks
        to NVSwitches (``nvswitch_links``). ``None`` with fewer than two GPUs."""
        if len(indices) < 2:
            return None
        buses = {i: (self.pci_bus_id(i) or "").lower() for i in indices}
        ends = {i: self.nvlink_ends(i) for i in indices}
        nvlink_peers = {i: ends[i][0] for i in indices}
        switch_links = {i: ends[i][1] for i in indices}
        p2p_read = getattr(self.nv, "NVML_P2P_CAPS_INDEX_READ", 0)
        if isinstance(p2p_read, tuple):  # pynvml spells it ``= 0,``
            p2p_read = p2p_read[0]
        links: list[list[str]] = []
        p2p: list[list[str]] = []
        for i in indices:
            link_row, p2p_row = [], []
            for j in indices:
                if i == j:
                    link_row.append("X")
                    p2p_row.append("X")
                    continue
                n = sum(1 for bus in nvlink_peers[i] if _same_bus(bus, buses[j]))
                n = n or min(switch_links[i], switch_links[j])  # both on NVSwitches: all-to-all
                if n:
                    link_row.append(f"NV{n}")
                else:
                    level = self.call("nvmlDeviceGetTopologyCommonAncestor", self.handle(i), self.handle(j))
                    link_row.append(TOPOLOGY_WORDS.get(int(level), str(level)) if level is not None else "?")
                status = self.call("nvmlDeviceGetP2PStatus", self.handle(i), self.handle(j), p2p_read)
                p2p_row.append("?" if status is None else ("OK" if status == 0 else "no"))
            links.append(link_row)
            p2p.append(p2p_row)
        return {"gpus": list(indices), "link": links, "p2p_read": p2p,
                "nvswitch_links": [switch_links[i] for i in indices]}

    # -- live readings ---------------------------------------------------------------
    def processes(self, index: int) -> list[GpuProcess] | None:
        """Processes holding memory on a GPU (compute and graphics), or None if unknown."""
        h = self.handle(index)
        if h is None:
            return None
        found: dict[int, GpuProcess] = {}
        known = False
        for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            procs = self.call(name, h)
            if procs is None:
                continue
            known = True
            for p in procs:
                mem = getattr(p, "usedGpuMemory", None)
                found.setdefault(int(p.pid), GpuProcess(int(p.pid), int(mem) if mem is not None else None))
        return list(found.values()) if known else None

    def process_utilization(self, index: int, since_us: int) -> dict[int, int] | None:
        """Highest SM utilisation (%) of each process on a GPU since ``since_us`` (NVML's
        clock, microseconds), or None where the GPU does not sample it."""
        h = self.handle(index)
        samples = self.call("nvmlDeviceGetProcessUtilization", h, since_us) if h is not None else None
        if samples is None:
            return None
        out: dict[int, int] = {}
        for s in samples:
            out[int(s.pid)] = max(out.get(int(s.pid), 0), int(s.smUtil))
        return out


def nvlink_remote_is_switch(remote_type: Any, switch: int = NVLINK_REMOTE_SWITCH) -> bool:
    """Whether ``nvmlDeviceGetNvLinkRemoteDeviceType``'s answer is an NVSwitch (None, from a
    driver or nvidia-ml-py without the call, is not)."""
    return remote_type is not None and int(remote_type) == switch


def _same_bus(a: str, b: str) -> bool:
    """PCI bus ids match whatever width their domain is written with."""
    return bool(a) and bool(b) and a.split(":", 1)[-1] == b.split(":", 1)[-1]


def open_nvml() -> Nvml | None:
    """An NVML session, or ``None`` where there is no NVIDIA driver or no nvidia-ml-py."""
    try:
        import pynvml
    except ImportError:
        log.debug("nvidia-ml-py is not installed: no GPU telemetry")
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        log.debug("NVML unavailable: %s", exc)
        return None
    return Nvml(pynvml)


def nvml_index_of_uuid(nv: Nvml, uuid: str) -> int | None:
    """The NVML index of the GPU with this UUID (with or without NVML's ``GPU-`` prefix)."""
    want = uuid.lower().removeprefix("gpu-")
    for i in range(nv.device_count()):
        have = (nv.uuid(i) or "").lower().removeprefix("gpu-")
        if have and have == want:
            return i
    return None
