"""Collective times over a :class:`~cnnbench.predict.links.Link`, as ``docs/predict.md`` writes them down.

``S`` is the message in bytes, ``n`` the devices, ``B`` the link's bandwidth, ``a`` its latency.

* all-reduce, ring (peer access): ``2(n-1)/n * S/B + 2(n-1) a`` (nccl-tests' bus bandwidth
  is defined so that this is the time);
* all-reduce through a shared host (``pcie-host``): every device's ring traffic crosses the
  one root complex, so the n transfers of a ring step take turns: ``2(n-1) * S/B + 2(n-1) a``;
* all-gather and reduce-scatter: half an all-reduce each;
* across nodes, hierarchical: reduce-scatter within each node, all-reduce of each node's
  share across nodes (all of a node's shares through its one network link), all-gather
  within the node.
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
    """Within each node (reduce-scatter), across nodes (all-reduce, every share through the node's
    one network link: the node's whole message), within again (all-gather)."""
    if nodes <= 1:
        return all_reduce(size, per_node, intra)
    within = 2 * half_collective(size, per_node, intra)
    return within + all_reduce(size, nodes, inter)


def exchange(size: float, per_node: int, nodes: int, intra: Link, inter: Link) -> float:
    """An all-reduce over ``per_node * nodes`` devices: flat on one node, hierarchical on several."""
    return hierarchical_all_reduce(size, per_node, nodes, intra, inter)


def gather_or_scatter(size: float, per_node: int, nodes: int, intra: Link, inter: Link) -> float:
    """An all-gather (or reduce-scatter) over ``per_node * nodes`` devices: half an all-reduce."""
    return exchange(size, per_node, nodes, intra, inter) / 2


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
