"""Links between devices: what a collective's time is made of, and where each figure came from.

A :class:`Link` is a kind (how devices reach each other), a bandwidth (GB/s, 10**9 bytes) and a
latency (seconds per message step). Its figures come from, in order of preference: the
command line (``--link``, ``--bandwidth``, ``--latency``), a calibration on the selection's
multi-device records, a measured ``cnnbench comm`` record, the topology ``sysinfo`` recorded
(NVLink, or PCIe with or without peer access), and last a default for the GPU's name.
``Link.source`` says which, and the prediction prints it.

The kinds and their defaults (``docs/predict.md`` explains each):

=============  ==========  =========  ====================================================
kind           GB/s        latency    meaning
=============  ==========  =========  ====================================================
nvlink         100         5 us       GPUs joined by NVLink (a ring at the bus bandwidth);
                                      by generation where the GPU's name says it
                                      (:data:`NVLINK_BY_NAME`)
pcie           12          10 us      PCIe with peer access between GPUs (a ring)
pcie-host      12          20 us      PCIe without peer access: every byte goes through
                                      the one host root complex (time grows with devices)
loopback       1           100 us     CPU workers on one host (Gloo over local TCP)
ib             46          10 us      InfiniBand between nodes, per rail (400 Gb/s NDR);
                                      8 rails a node by default (``--inter-rails``)
ethernet       1.2         50 us      Ethernet between nodes (10 Gb/s)
=============  ==========  =========  ====================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

LinkKind = Literal["nvlink", "pcie", "pcie-host", "loopback", "ib", "ethernet"]
LINK_KINDS: tuple[str, ...] = ("nvlink", "pcie", "pcie-host", "loopback", "ib", "ethernet")
SHARED_KINDS = frozenset({"pcie-host"})
"""Kinds whose traffic all crosses one shared link (the host's root complex)."""

DEFAULTS: dict[str, tuple[float, float]] = {
    "nvlink": (100.0, 5e-6),
    "pcie": (12.0, 10e-6),
    "pcie-host": (12.0, 20e-6),
    "loopback": (1.0, 100e-6),
    "ib": (46.0, 10e-6),
    "ethernet": (1.2, 50e-6),
}
"""Per kind: (bandwidth in GB/s, latency in seconds per message step). ``ib`` is one rail: 46 GB/s
is the published busbw per 400 Gb/s NDR NIC (NVIDIA/nccl-tests#290: "46-48GB/s per NIC")."""
DEFAULT_RAILS: dict[str, int] = {"ib": 8}
"""Network rails per node by kind (``--inter-rails``; 1 where not listed): HGX/DGX-class GPU nodes
have one NIC per GPU, 8 a node."""

PCIE_CARD_FRAGMENTS: tuple[str, ...] = ("pcie", " nvl")
"""Name fragments of the PCIe cards of data-centre parts: "A100-PCIE-40GB", "A100 80GB PCIe",
"H100 PCIe", and "H100 NVL" (PCIe cards that an NVLink bridge joins in pairs only). They take
``pcie`` before any SXM fragment below is tried."""

NVLINK_BY_NAME: tuple[tuple[str, float, str], ...] = (
    ("v100", 100.0, "V100 (NVLink 2): round figure, no published nccl-tests busbw found; under NVLink 2's "
     "150 GB/s per direction per GPU"),
    ("a100", 200.0, "A100 SXM (NVLink 3): published nccl-tests all_reduce busbw ~200 GB/s on 8 GPUs "
     "(NVIDIA/nccl-tests#149)"),
    ("h100", 370.0, "H100 SXM (NVLink 4): published nccl-tests ring busbw ~370 GB/s "
     "(NVIDIA/nccl-tests#212, NVIDIA/nccl#1455)"),
    ("h200", 370.0, "H200 (NVLink 4, as H100): published nccl-tests ring busbw ~370 GB/s "
     "(NVIDIA/nccl-tests#212; 475 GB/s peak with NVLink SHARP on 8 GPUs, NVIDIA/nccl-tests#272)"),
    ("b200", 830.0, "B200 (NVLink 5): a published nccl-tests all_reduce busbw ~830 GB/s on 8 GPUs with NCCL's "
     "default algorithm, likely NVLink SHARP; no ring figure found (NVIDIA/nccl#1807)"),
)
"""Per NVLink generation, by GPU name fragment: the all-reduce bus bandwidth (GB/s) nccl-tests
reaches, and where that published figure comes from (``docs/predict.md`` cites each)."""

PEER_ACCESS_BY_NAME: tuple[tuple[str, LinkKind], ...] = (
    ("geforce", "pcie-host"), ("rtx 30", "pcie-host"), ("rtx 40", "pcie-host"), ("titan", "pcie-host"),
    ("a100", "nvlink"), ("h100", "nvlink"), ("h200", "nvlink"), ("v100", "nvlink"), ("b200", "nvlink"),
    ("a6000", "pcie"), ("a5000", "pcie"), ("a4000", "pcie"), ("rtx 6000", "pcie"), ("l40", "pcie"),
    ("a40", "pcie"), ("a10", "pcie"), ("t4", "pcie"), ("quadro", "pcie"),
)
"""A GPU name's usual link when nothing was recorded: NVIDIA's drivers leave peer access over
PCIe off on GeForce cards; workstation and data-centre PCIe cards have it; SXM data-centre
parts have NVLink. The first matching fragment wins (``rtx 30`` is GeForce's RTX 3080/3090)."""


@dataclass(frozen=True)
class Link:
    """How devices reach each other: kind, bandwidth (GB/s), latency (s), and where these came from."""

    kind: str
    bandwidth_gbps: float
    latency_s: float
    source: str
    rails: int = 1
    """Parallel links of this kind a node has (network rails between nodes): a node's traffic is
    spread over as many as it has devices to drive them, at most this many."""

    @property
    def shared(self) -> bool:
        """Whether all devices' traffic crosses one shared link (no peer access)."""
        return self.kind in SHARED_KINDS

    def with_bandwidth(self, gbps: float, source: str) -> Link:
        return replace(self, bandwidth_gbps=gbps, source=source)

    def describe(self) -> str:
        rails = f" x {self.rails} rails" if self.rails > 1 else ""
        return (f"{self.kind} {self.bandwidth_gbps:.3g} GB/s{rails}, {self.latency_s * 1e6:.3g} us "
                f"({self.source})")

    def rails_used(self, per_node: int) -> int:
        """The rails ``per_node`` devices drive: one each, at most :attr:`rails`."""
        return max(1, min(self.rails, per_node))


def default_link(kind: str, source: str = "default") -> Link:
    """The kind's default figures (:data:`DEFAULTS`)."""
    if kind not in DEFAULTS:
        raise ValueError(f"unknown link {kind!r} (one of {', '.join(LINK_KINDS)})")
    bandwidth, latency = DEFAULTS[kind]
    return Link(kind, bandwidth, latency, source)


def given_link(kind: str, bandwidth_gbps: float | None, latency_us: float | None, prefix: str = "") -> Link:
    """``--link KIND [--bandwidth GB/s] [--latency us]`` (``prefix`` ``inter-``: ``--inter-link``
    and its figures): the kind's defaults where not given."""
    link = default_link(kind, f"--{prefix}link")
    bandwidth = link.bandwidth_gbps if bandwidth_gbps is None else bandwidth_gbps
    latency = link.latency_s if latency_us is None else latency_us * 1e-6
    given = f"--{prefix}link" + (f" --{prefix}bandwidth" if bandwidth_gbps is not None else "") + (
        f" --{prefix}latency" if latency_us is not None else "")
    return Link(kind, bandwidth, latency, given)


def link_from_topology(topology: Mapping[str, Any] | None) -> LinkKind | None:
    """From ``environment.gpu_topology`` (``sysinfo``'s NVML reading): nvlink when every pair is
    joined by NVLink, pcie when every pair has peer access, pcie-host when any pair has none;
    None when nothing was recorded or read."""
    if not isinstance(topology, Mapping):
        return None
    links, p2p = topology.get("link"), topology.get("p2p_read")
    pairs = [(i, j) for i in range(len(links or [])) for j in range(len(links or [])) if i != j]
    if not pairs or not isinstance(p2p, list):
        return None
    if all(str(links[i][j]).startswith("NV") for i, j in pairs):  # type: ignore[index]
        return "nvlink"
    status = [p2p[i][j] for i, j in pairs]
    if any(s == "no" for s in status):
        return "pcie-host"
    if all(s == "OK" for s in status):
        return "pcie"
    return None


def link_from_gpu_name(name: str | None) -> LinkKind | None:
    """The usual link of a GPU by its name (:data:`PEER_ACCESS_BY_NAME`), None for a name not known:
    a data-centre part's PCIe card (:data:`PCIE_CARD_FRAGMENTS`) takes ``pcie``, not NVLink."""
    low = (name or "").lower()
    if any(fragment in low for fragment in PCIE_CARD_FRAGMENTS):
        return "pcie"
    for fragment, kind in PEER_ACCESS_BY_NAME:
        if _names(fragment, low):
            return kind
    return None


def _names(fragment: str, low: str) -> bool:
    """Whether the lower-case GPU name ``low`` names the part ``fragment``: not inside another
    part's name ("h200" is not "GH200 480GB", a Grace Hopper superchip; "b200" is not "GB200")."""
    return re.search(rf"(?<![a-z0-9]){re.escape(fragment)}", low) is not None


def nvlink_generation(name: str | None) -> tuple[float, str] | None:
    """The NVLink bus bandwidth (GB/s) of a GPU by its name and the published source of that figure
    (:data:`NVLINK_BY_NAME`); None for a PCIe card or a name not known."""
    low = (name or "").lower()
    if any(fragment in low for fragment in PCIE_CARD_FRAGMENTS):
        return None
    for fragment, gbps, source in NVLINK_BY_NAME:
        if _names(fragment, low):
            return gbps, source
    return None


def with_generation(link: Link, gpu: str | None) -> Link:
    """An ``nvlink`` link at the bandwidth of ``gpu``'s NVLink generation, where known."""
    generation = nvlink_generation(gpu) if link.kind == "nvlink" else None
    if generation is None:
        return link
    gbps, source = generation
    return replace(link, bandwidth_gbps=gbps, source=f"{link.source}; {source}")


def machine_link(environment: Mapping[str, Any], device: str | None) -> Link:
    """The link within one node of the machine a record was made on, and why: CPU workers use
    loopback; GPUs what ``sysinfo`` recorded, else what their name suggests, else pcie."""
    if device == "cpu" or not environment.get("gpu_model"):
        return default_link("loopback", "default for CPU workers on one host")
    gpu = str(environment.get("gpu_model"))
    recorded = link_from_topology(environment.get("gpu_topology"))
    if recorded is not None:
        return with_generation(default_link(recorded, "peer access recorded by sysinfo (NVML)"), gpu)
    by_name = link_from_gpu_name(gpu)
    if by_name is not None:
        return with_generation(default_link(by_name, f"assumed for {gpu} (no topology recorded)"), gpu)
    return default_link("pcie", f"assumed: {gpu} unknown, no topology recorded")


def link_from_comm(records: Iterable[Mapping[str, Any]], kind: str) -> Link | None:
    """A link measured by ``cnnbench comm``: the all-reduce bus bandwidth at its largest size, and
    the latency from the time at its smallest (a ring of n makes 2(n-1) message steps)."""
    rows = [r for r in records if (r.get("config") or {}).get("collective") == "all_reduce"
            and r.get("status", "ok") == "ok" and int((r.get("config") or {}).get("num_nodes") or 1) == 1]
    rows = [r for r in rows if _num(r["metrics"].get("busbw_gbps")) and _num(r["metrics"].get("time_s"))]
    if not rows:
        return None
    largest = max(rows, key=lambda r: r["config"]["bytes"])
    smallest = min(rows, key=lambda r: r["config"]["bytes"])
    n = max(2, int(smallest["config"].get("num_devices") or 2))
    latency = float(smallest["metrics"]["time_s"]) / (2 * (n - 1))
    bandwidth = float(largest["metrics"]["busbw_gbps"])
    if kind in SHARED_KINDS:  # a shared link's busbw at n devices: the aggregate is n/... see collectives
        bandwidth *= _shared_factor(int(largest["config"].get("num_devices") or 2))
    size = int(largest["config"]["bytes"])
    return Link(kind, bandwidth, latency, f"cnnbench comm all_reduce: busbw at {size / 2**20:.3g} MiB, "
                                          f"latency from {int(smallest['config']['bytes'])} B")


def _shared_factor(n: int) -> float:
    """busbw (ring-normalised) to the shared link's aggregate bandwidth: a ring's time at busbw B is
    2(n-1)/n S/B; the shared link's is 2(n-1) S/A, so A = n B."""
    return float(n)


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
