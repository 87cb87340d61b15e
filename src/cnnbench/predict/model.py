"""The scaling model: one device's step, the gradient exchange a strategy adds, and the input pipeline.

A :class:`Base` is what one device measured (step time and its forward/backward/optimizer
split, the gradient and parameter bytes, the per-device batch); a :class:`Scenario` the links
and the host; :func:`predict` the step at ``n`` devices on ``m`` nodes for one strategy, as
``docs/predict.md`` writes it down. Each strategy declares the pattern of its exchange
(:data:`~cnnbench.config.strategy_rules.Exchange`, in its declaration), and each pattern has its
formula here:

* ``bucketed_all_reduce`` (replicated, DDP): gradients all-reduced in buckets (25 MB by default)
  that start as the backward pass fills them: a pipeline of ``k`` buckets, each made in ``b/k``
  and sent in ``c``, ends ``b/k + c + (k-1) max(b/k, c)`` after the backward pass starts.
  Implementations that all-reduce only after the whole backward pass (tf_cnn_benchmarks'
  replicated) add ``b + C``;
* ``parameter_server``: after the backward pass, as the tool that made the records builds it
  (:func:`parameter_server_time`);
* ``sharded`` (fsdp): parameters all-gathered before the forward pass and again before the
  backward pass, gradients reduce-scattered after it; each overlaps its pass (layer by layer prefetch);
* ``none`` (independent): no exchange at all.

CPU workers on one host share its cores: a node's compute is the one-device figure split
between its workers (what other processes used of it during the one-device run stays used).
The input pipeline feeds a node at ``per-core rate x host cores``; a step
takes at least the time the node's images take to load. The bound of a point is whichever of
compute, communication (all of it, overlapped or not) and input is busiest per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from cnnbench.config.strategy_rules import STRATEGY_RULES, VARIABLE_UPDATES, Exchange, VariableUpdate
from cnnbench.predict import collectives as coll
from cnnbench.predict.links import Link, default_link

Strategy = VariableUpdate
STRATEGIES: tuple[str, ...] = VARIABLE_UPDATES
"""The strategies predicted: every ``--variable-update`` (:mod:`cnnbench.config.choices` lists them once)."""
Bound = Literal["compute", "communication", "input"]
MIN_FREE_CORES = 0.1
"""A CPU host is never taken to leave its workers less than this much of a core."""
DEFAULT_BUCKET_BYTES = 25 * 2**20
"""DDP's default ``bucket_cap_mb`` (25 MiB)."""


@dataclass(frozen=True)
class Base:
    """One device's measured step and what its exchange would carry."""

    model: str
    key: tuple[tuple[str, Any], ...]
    """The configuration (model, machine, precision, batch, ...), as (field, value) pairs."""
    batch_size: int
    """Images per device per step."""
    step_time_s: float
    forward_s: float
    backward_s: float
    optimizer_s: float
    split_source: str
    gradient_bytes: float
    parameter_bytes: float
    device: str
    """``cpu`` or ``cuda``."""
    overlap: bool = True
    """Whether gradient exchange overlaps the backward pass (DDP's buckets); False for
    implementations that exchange after the whole backward pass."""
    bucket_bytes: float = DEFAULT_BUCKET_BYTES
    machine: str = ""
    environment: dict[str, Any] = field(default_factory=dict, compare=False)
    input_rate_per_core: float | None = None
    host_cpus: int | None = None
    threads: int | None = None
    """CPU: the torch threads the one-device run computed with (None: all of ``host_cpus``)."""
    threads_per_worker: int | None = None
    """CPU: ``--threads-per-worker`` of the records (None: the host's cores divided among workers)."""
    busy_cores: float = 0.0
    """CPU: cores other processes used during the one-device run (``other_processes_cpu_cores``):
    the host is assumed as busy at every point."""
    source: str = "cnnbench"
    """The tool that made the records (``source``): each builds its parameter server its own way."""
    parameter_device: str = "device"
    """Where the parameter server keeps the weights (``config.local_parameter_device``): ``cpu``
    (the host) or ``device``."""
    parameters: float = 0.0
    """The model's parameter count (the host's update under ``parameter_device`` cpu)."""
    one_device_server: bool = False
    """Whether the one-device records ran the parameter server themselves (cnnbench keeps the
    master copy on ``--local-parameter-device`` even alone; tf_cnn_benchmarks' 1-GPU
    parameter_server runs cross PCIe to the host): its one-device cost is then in the step."""

    @property
    def images_per_sec(self) -> float:
        return self.batch_size / self.step_time_s


@dataclass(frozen=True)
class Scenario:
    """Where the devices are: the link within a node, the link between nodes, and each node's
    cores for the input pipeline (``None``: the base machine's)."""

    intra: Link
    inter: Link
    host_cpus: int | None = None
    input_rate_per_core: float | None = None


@dataclass(frozen=True)
class Prediction:
    """One predicted point: the step, its parts, and what bounds it."""

    devices: int
    nodes: int
    step_time_s: float
    images_per_sec: float
    compute_s: float
    communication_s: float
    input_s: float
    bound: Bound

    @property
    def per_node(self) -> int:
        return self.devices // self.nodes


def predict(base: Base, strategy: str, devices: int, nodes: int, scenario: Scenario) -> Prediction:
    """The step of ``strategy`` at ``devices`` devices spread evenly on ``nodes`` nodes."""
    per_node = devices // nodes
    share = _core_share(base, per_node)
    f, b, o = base.forward_s * share, base.backward_s * share, base.optimizer_s * share
    comm, step = _exchange(base, strategy, per_node, nodes, scenario, (f, b, o))
    input_s = _input_time(base, per_node, scenario)
    step = max(step, input_s)
    busy: dict[Bound, float] = {"compute": f + b + o, "communication": comm, "input": input_s}
    bound = max(busy, key=lambda k: busy[k])
    return Prediction(devices, nodes, step, devices * base.batch_size / step, f + b + o, comm, input_s, bound)


def _core_share(base: Base, per_node: int) -> float:
    """How much longer each worker computes than the one-device run: CPU workers on one host
    split its cores (``run``'s default: the one-device run's threads / workers each;
    ``--threads-per-worker``: that many; never more than the worker's share of the cores other
    processes leave), at a time proportional to 1 / threads."""
    if base.device != "cpu":
        return 1.0
    cores = base.host_cpus or base.threads or 1
    free = max(cores - base.busy_cores, MIN_FREE_CORES)
    threads = base.threads or cores
    alone = min(threads, free)
    mine = base.threads_per_worker or max(1, threads // per_node)
    return alone / min(mine, free / per_node)


def exchange_of(strategy: str) -> Exchange:
    """The pattern of ``strategy``'s exchange, from its declaration (a :class:`ValueError` for a name
    that is no strategy)."""
    try:
        return STRATEGY_RULES[strategy].exchange  # type: ignore[index]
    except KeyError:
        raise ValueError(f"unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)})") from None


Phases = tuple[float, float, float]
"""One worker's forward, backward and optimizer seconds."""


def _exchange(base: Base, strategy: str, per_node: int, nodes: int, scenario: Scenario,
              phases: Phases) -> tuple[float, float]:
    """(communication seconds, step seconds) of ``strategy``: its exchange's formula
    (:data:`_FORMULAS`), none on one device."""
    exchange = exchange_of(strategy)
    if per_node * nodes == 1:
        f, b, o = phases
        return 0.0, f + b + o
    return _FORMULAS[exchange](base, per_node, nodes, scenario, phases)


def _no_exchange(base: Base, per_node: int, nodes: int, scenario: Scenario, phases: Phases) -> tuple[float, float]:
    f, b, o = phases
    return 0.0, f + b + o


def _parameter_server(base: Base, per_node: int, nodes: int, scenario: Scenario,
                      phases: Phases) -> tuple[float, float]:
    f, b, o = phases
    alone = parameter_server_time(base, 1, 1, scenario) if base.one_device_server else 0.0
    comm = parameter_server_time(base, per_node, nodes, scenario) - alone
    return comm, f + b + comm + o


def _sharded(base: Base, per_node: int, nodes: int, scenario: Scenario, phases: Phases) -> tuple[float, float]:
    f, b, o = phases
    gather = coll.gather_or_scatter(base.parameter_bytes, per_node, nodes, scenario.intra, scenario.inter)
    scatter = coll.gather_or_scatter(base.gradient_bytes, per_node, nodes, scenario.intra, scenario.inter)
    return 2 * gather + scatter, max(f, gather) + max(b, gather + scatter) + o


def parameter_server_time(base: Base, per_node: int, nodes: int, scenario: Scenario) -> float:
    """Seconds a step's parameter server takes, as the tool that made the records builds it
    (``docs/predict.md``). Where the one-device records ran the server too
    (:attr:`Base.one_device_server`), a point adds what this takes beyond its time on one device.

    * cnnbench: an NCCL reduce onto rank 0 and a broadcast from it; with the weights on the host
      (``--local-parameter-device cpu`` on GPUs) rank 0 also copies to the host and back over its
      PCIe link and updates there;
    * tf_cnn_benchmarks (imported logs, published tables): every GPU sends its gradients to and
      fetches the variables from the parameter device; on the host (``local_parameter_device=cpu``)
      over a DGX-1-class PCIe tree (:func:`~cnnbench.predict.collectives.host_tree`); on the GPUs
      the variables are spread over all of them (an all-reduce's traffic)."""
    size, intra, inter = base.gradient_bytes, scenario.intra, scenario.inter
    on_host = base.parameter_device == "cpu" and base.device != "cpu"
    pcie = default_link("pcie", "each GPU's PCIe link to the host")
    if base.source == "cnnbench":
        t = coll.reduce_broadcast(size, per_node, nodes, intra, inter)
        if on_host:
            t += coll.host_round_trip(size, pcie) + coll.host_update(base.parameters)
        return t
    if on_host and nodes == 1:
        return coll.host_tree(size, per_node, pcie)
    if on_host:
        return coll.parameter_server(size, per_node, nodes, pcie, inter)
    return coll.exchange(size, per_node, nodes, intra, inter)


def _bucketed_all_reduce(base: Base, per_node: int, nodes: int, scenario: Scenario,
                         phases: Phases) -> tuple[float, float]:
    f, b, o = phases
    size = base.gradient_bytes
    if not base.overlap:
        comm = coll.exchange(size, per_node, nodes, scenario.intra, scenario.inter)
        return comm, f + b + comm + o
    buckets = max(1, math.ceil(size / base.bucket_bytes))
    each = coll.exchange(size / buckets, per_node, nodes, scenario.intra, scenario.inter)
    made = b / buckets
    backward_and_exchange = made + each + (buckets - 1) * max(made, each)
    return buckets * each, f + backward_and_exchange + o


_FORMULAS: dict[Exchange, Callable[[Base, int, int, Scenario, Phases], tuple[float, float]]] = {
    "none": _no_exchange,
    "bucketed_all_reduce": _bucketed_all_reduce,
    "parameter_server": _parameter_server,
    "sharded": _sharded,
}
"""(communication seconds, step seconds) of each pattern of exchange, from the base, the devices
per node, the nodes, the scenario and one worker's phases."""


def _input_time(base: Base, per_node: int, scenario: Scenario) -> float:
    """Seconds a node's input pipeline takes for one step of its devices (0: not modelled)."""
    rate = scenario.input_rate_per_core or base.input_rate_per_core
    cores = scenario.host_cpus or base.host_cpus
    if not rate or not cores:
        return 0.0
    return per_node * base.batch_size / (rate * cores)
