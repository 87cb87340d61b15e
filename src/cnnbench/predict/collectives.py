"""Collective times over a :class:`~cnnbench.predict.links.Link`, as ``docs/predict.md`` writes them down.

``S`` is the message in bytes, ``n`` the devices, ``B`` the link's bandwidth, ``a`` its latency.

* all-reduce, ring (peer access): ``2(n-1)/n * S/B + 2(n-1) a`` (nccl-tests' bus bandwidth
  is defined so that this is the time);
* all-reduce through a shared host (``pcie-host``): every device's ring traffic crosses the
  one root complex, so the n transfers of a ring step take turns: ``2(n-1) * S/B + 2(n-1) a``;
* all-gather and reduce-scatter: half an all-reduce each;
* across nodes, hierarchical: reduce-scatter within each node, all-reduce of each node's
  shares across nodes (spread over the node's network rails, one per device up to the
  link's ``rails``), all-gather within the node.
"""

from __future__ import annotations

from cnnbench.predict.links import Link

GB = 1e9


def all_reduce(size: float, n: int, link: Link) -> float:
    """Seconds to all-reduce ``size`` bytes over ``n`` devices on one ``link``."""
    if n <= 1 or size <= 0:
        return 0.0
    steps = 2 * (n - 1)
    volume = steps * size if link.shared else steps / n * size
    return volume / (link.bandwidth_gbps * GB) + steps * link.latency_s


def half_collective(size: float, n: int, link: Link) -> float:
    """Seconds for an all-gather or a reduce-scatter of ``size`` bytes (the whole, not a shard)."""
    return all_reduce(size, n, link) / 2


def hierarchical_all_reduce(size: float, per_node: int, nodes: int, intra: Link, inter: Link) -> float:
    """Within each node (reduce-scatter), across nodes (all-reduce of the node's whole message,
    spread over the rails its devices drive: :meth:`Link.rails_used`), within again (all-gather)."""
    if nodes <= 1:
        return all_reduce(size, per_node, intra)
    within = 2 * half_collective(size, per_node, intra)
    return within + all_reduce(size / inter.rails_used(per_node), nodes, inter)


def exchange(size: float, per_node: int, nodes: int, intra: Link, inter: Link) -> float:
    """An all-reduce over ``per_node * nodes`` devices: flat on one node, hierarchical on several."""
    return hierarchical_all_reduce(size, per_node, nodes, intra, inter)


def gather_or_scatter(size: float, per_node: int, nodes: int, intra: Link, inter: Link) -> float:
    """An all-gather (or reduce-scatter) over ``per_node * nodes`` devices: half an all-reduce."""
    return exchange(size, per_node, nodes, intra, inter) / 2


HOST_MEMORY_GBPS = 76.8
"""One CPU socket's memory bandwidth, GB/s: Intel's published maximum for the Xeon E5-2698 v4
(4 channels of DDR4-2400) that DGX-1 carries two of."""
GPUS_PER_SWITCH = 2
"""GPUs behind one PCIe switch on a DGX-1-class machine (its uplink to the CPU is one x16 link)."""
GPUS_PER_SOCKET = 4
"""GPUs (two switches) under one CPU socket of a DGX-1-class machine."""
HOST_UPDATE_BYTES = 20
"""Host memory bytes an fp32 momentum-SGD update moves per parameter: weight, gradient and momentum
read, weight and momentum written (4 bytes each)."""


def reduce_broadcast(size: float, per_node: int, nodes: int, intra: Link, inter: Link) -> float:
    """cnnbench's parameter server over NCCL: a ``reduce`` onto rank 0 and a ``broadcast`` from it,
    each pipelined through the devices (``S/B`` on the slowest hop, ``(n-1)`` latencies). Without
    peer access every hop within a node crosses the one root complex (``(d-1) S/B``); across
    nodes the hop between nodes spreads over the rails the node's devices drive."""
    n = per_node * nodes
    if n <= 1 or size <= 0:
        return 0.0
    within = 0.0 if per_node <= 1 else size * ((per_node - 1) if intra.shared else 1) / (intra.bandwidth_gbps * GB)
    across = 0.0 if nodes <= 1 else size / (inter.bandwidth_gbps * inter.rails_used(per_node) * GB)
    latency = (per_node - 1) * intra.latency_s + (nodes - 1) * inter.latency_s
    return 2 * (max(within, across) + latency)


def host_round_trip(size: float, host: Link) -> float:
    """Rank 0's copy of ``size`` bytes to the host and back over its own link (``2 S/B``)."""
    return 2 * (size / (host.bandwidth_gbps * GB) + host.latency_s) if size > 0 else 0.0


def host_update(parameters: float) -> float:
    """The host's fp32 momentum-SGD update of ``parameters``, bound by memory traffic
    (:data:`HOST_UPDATE_BYTES` a parameter at :data:`HOST_MEMORY_GBPS`)."""
    return parameters * HOST_UPDATE_BYTES / (HOST_MEMORY_GBPS * GB)


def host_tree(size: float, n: int, gpu_link: Link) -> float:
    """tf_cnn_benchmarks' parameter server on the host (``local_parameter_device=cpu``) on one
    DGX-1-class node, as a tree: every GPU sends its ``S`` bytes of gradients up and fetches ``S``
    of variables down over its own PCIe link; :data:`GPUS_PER_SWITCH` share a switch's uplink,
    :data:`GPUS_PER_SOCKET` a socket's memory. Each direction takes as long as its busiest level;
    the two directions follow each other (gradients up after the backward pass, variables down
    before the next forward pass). GPUs fill switches in order."""
    if n < 1 or size <= 0:
        return 0.0
    b = gpu_link.bandwidth_gbps * GB
    levels = (size / b, min(n, GPUS_PER_SWITCH) * size / b, min(n, GPUS_PER_SOCKET) * size / (HOST_MEMORY_GBPS * GB))
    return 2 * (max(levels) + gpu_link.latency_s)


def parameter_server(size: float, per_node: int, nodes: int, intra: Link, inter: Link) -> float:
    """Every worker's gradients in and parameters out through the server's one link (the server
    is one of the devices, so its own share stays put): ``2(n-1) S/B`` over the node's link, and
    with several nodes the other nodes' shares also cross the server node's network link."""
    n = per_node * nodes
    if n <= 1:
        return 0.0
    within = 2 * (per_node - 1) * (size / (intra.bandwidth_gbps * GB) + intra.latency_s)
    across = 2 * (n - per_node) * (size / (inter.bandwidth_gbps * GB) + inter.latency_s)
    return within + across
