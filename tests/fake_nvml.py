"""A scripted stand-in for nvidia-ml-py's ``pynvml`` module, for tests on machines without GPUs.

    fake = FakeNvml([FakeGpu(power_mw=[100_000, 300_000], reasons=[0, 0x4])])
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)

Each live reading takes the next value of its script and repeats the last one when the
script runs out; a reading whose script is ``None`` raises NVML's "not supported" error, as
a GPU without that sensor does.
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass, field
from typing import Any


class NVMLError(Exception):
    def __init__(self, value: int = 3) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeGpu:
    name: str = "NVIDIA Fake H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: str = "00000000:18:00.0"
    memory_bytes: int = 80 * 2**30
    compute_capability: tuple[int, int] = (9, 0)
    pcie: tuple[int, int, int, int] = (5, 16, 5, 16)
    """Current generation, current width, maximum generation, maximum width."""
    power_limit_mw: int = 700_000
    nvlink_peers: list[str] = field(default_factory=list)
    """Bus ids at the other end of each active NVLink to another GPU."""
    nvswitch_links: int = 0
    """Active NVLinks (after those to GPUs) that end at an NVSwitch."""
    peer_access: bool = True
    """False: nvmlDeviceGetP2PStatus (read) says "not supported" for every pair with this GPU, as on
    GeForce cards, whose drivers leave peer access over PCIe off."""
    remote_type_supported: bool = True
    """False: nvmlDeviceGetNvLinkRemoteDeviceType is not supported (an old driver)."""
    power_mw: list[int] | None = field(default_factory=lambda: [100_000])
    sm_clock_mhz: list[int] | None = field(default_factory=lambda: [1980])
    sm_clock_limit_mhz: int = 1980
    memory_clock_mhz: list[int] | None = field(default_factory=lambda: [2619])
    temperature_c: list[int] | None = field(default_factory=lambda: [40])
    utilization_pct: list[int] | None = field(default_factory=lambda: [0])
    reasons: list[int] | None = field(default_factory=lambda: [0])
    energy_mj: list[int] | None = None
    memory_used_bytes: list[int] | None = field(default_factory=lambda: [0])
    processes: list[tuple[int, int]] = field(default_factory=list)
    """(pid, used memory in bytes) of compute processes."""
    process_sm_pct: dict[int, int] | None = None
    block: threading.Event | None = None
    """When set: every power reading waits for this event (a hung driver)."""
    calls: dict[str, int] = field(default_factory=dict)

    def next(self, name: str) -> Any:
        self.calls[name] = self.calls.get(name, 0) + 1
        script = getattr(self, name)
        if script is None:
            raise NVMLError(3)
        value = script[0]
        if len(script) > 1:
            script.pop(0)
        return value


class FakeNvml:
    """The fake module and what it was asked."""

    def __init__(self, gpus: list[FakeGpu], *, driver: str = "550.54.15", cuda: int = 12040,
                 init_error: bool = False) -> None:
        self.gpus = gpus
        self.inits = 0
        self.shutdowns = 0
        m = types.ModuleType("pynvml")
        m.NVMLError = NVMLError  # type: ignore[attr-defined]
        consts = {"NVML_CLOCK_SM": 1, "NVML_CLOCK_MEM": 2, "NVML_TEMPERATURE_GPU": 0, "NVML_FEATURE_ENABLED": 1,
                  "NVML_NVLINK_MAX_LINKS": 18, "NVML_P2P_CAPS_INDEX_READ": 0,
                  "NVML_NVLINK_DEVICE_TYPE_GPU": 0, "NVML_NVLINK_DEVICE_TYPE_SWITCH": 2}
        for k, v in consts.items():
            setattr(m, k, v)

        def init() -> None:
            if init_error:
                raise NVMLError(12)  # library not found
            self.inits += 1

        def shutdown() -> None:
            self.shutdowns += 1

        def gpu(handle: Any) -> FakeGpu:
            return handle

        def power(h: Any) -> int:
            if h.block is not None:
                h.block.wait()
            return h.next("power_mw")

        def clock(h: Any, kind: int) -> int:
            return h.next("sm_clock_mhz" if kind == 1 else "memory_clock_mhz")

        def utilization(h: Any) -> Any:
            return types.SimpleNamespace(gpu=h.next("utilization_pct"), memory=0)

        def nvlink_state(h: Any, link: int) -> int:
            if not h.nvlink_peers and not h.nvswitch_links:
                raise NVMLError(3)
            return 1 if link < len(h.nvlink_peers) + h.nvswitch_links else 0

        def remote_pci(h: Any, link: int) -> Any:
            if link < len(h.nvlink_peers):
                return types.SimpleNamespace(busId=h.nvlink_peers[link])
            return types.SimpleNamespace(busId=f"00000000:{0xC0 + link % 4:02X}:00.0")  # an NVSwitch

        def remote_type(h: Any, link: int) -> int:
            if not h.remote_type_supported:
                raise NVMLError(3)
            return 0 if link < len(h.nvlink_peers) else 2

        def common_ancestor(a: Any, b: Any) -> int:
            return 30  # a PCIe host bridge

        def processes(h: Any) -> list[Any]:
            return [types.SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in h.processes]

        def process_utilization(h: Any, since: int) -> list[Any]:
            if h.process_sm_pct is None:
                raise NVMLError(3)
            return [types.SimpleNamespace(pid=pid, smUtil=u, memUtil=0) for pid, u in h.process_sm_pct.items()]

        functions = {
            "nvmlInit": init,
            "nvmlShutdown": shutdown,
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlDeviceGetHandleByIndex": lambda i: self.gpus[i],
            "nvmlSystemGetDriverVersion": lambda: driver,
            "nvmlSystemGetCudaDriverVersion_v2": lambda: cuda,
            "nvmlDeviceGetName": lambda h: gpu(h).name,
            "nvmlDeviceGetUUID": lambda h: gpu(h).uuid,
            "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=gpu(h).bus_id),
            "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=gpu(h).memory_bytes,
                                                                        used=gpu(h).next("memory_used_bytes")),
            "nvmlDeviceGetCudaComputeCapability": lambda h: gpu(h).compute_capability,
            "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: gpu(h).pcie[0],
            "nvmlDeviceGetCurrPcieLinkWidth": lambda h: gpu(h).pcie[1],
            "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: gpu(h).pcie[2],
            "nvmlDeviceGetMaxPcieLinkWidth": lambda h: gpu(h).pcie[3],
            "nvmlDeviceGetEnforcedPowerLimit": lambda h: gpu(h).power_limit_mw,
            "nvmlDeviceGetMaxClockInfo": lambda h, kind: h.sm_clock_limit_mhz if kind == 1 else 2619,
            "nvmlDeviceGetNvLinkState": nvlink_state,
            "nvmlDeviceGetNvLinkRemotePciInfo": remote_pci,
            "nvmlDeviceGetNvLinkRemoteDeviceType": remote_type,
            "nvmlDeviceGetTopologyCommonAncestor": common_ancestor,
            "nvmlDeviceGetP2PStatus": lambda a, b, kind: 0 if a.peer_access and b.peer_access else 2,
            "nvmlDeviceGetPowerUsage": power,
            "nvmlDeviceGetClockInfo": clock,
            "nvmlDeviceGetTemperature": lambda h, sensor: h.next("temperature_c"),
            "nvmlDeviceGetUtilizationRates": utilization,
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: h.next("reasons"),
            "nvmlDeviceGetTotalEnergyConsumption": lambda h: h.next("energy_mj"),
            "nvmlDeviceGetComputeRunningProcesses": processes,
            "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [],
            "nvmlDeviceGetProcessUtilization": process_utilization,
        }
        for name, fn in functions.items():
            setattr(m, name, fn)
        self.module = m
