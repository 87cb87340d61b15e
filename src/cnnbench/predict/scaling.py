"""``cnnbench predict``'s one call: records in, predicted rows out (one per base, strategy and point).

:func:`predict_scaling` selects records with ``--where`` (as ``report``), finds the one-device
bases, chooses each machine's links (:func:`machine_links`), calibrates them with
``calibrate``, and predicts every point; a measured figure stands beside each prediction
where the selection has one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cnnbench.analysis.fields import FieldError, resolve_field
from cnnbench.analysis.speedup import speedup_efficiency
from cnnbench.predict.bases import (
    MIN_RATE,
    CostLookup,
    Measured,
    comm_records,
    find_bases,
    measured_points,
    pipeline_records,
)
from cnnbench.predict.calibrate import Fit, check_pair, fit_link
from cnnbench.predict.links import (
    DEFAULT_RAILS,
    Link,
    default_link,
    given_link,
    link_from_comm,
    machine_link,
    with_generation,
)
from cnnbench.predict.model import STRATEGIES, Base, Scenario, exchange_of, predict
from cnnbench.results import fields as F
from cnnbench.results.query import get_value, parse_where, select
from cnnbench.words import shortened

DEFAULT_DEVICES = tuple(2 ** i for i in range(11))
"""1, 2, 4, ..., 1024."""
GPUS_PER_NODE = 8
"""Devices per node by default for GPUs (a CPU device is a whole host: one per node)."""


class PredictError(ValueError):
    """Options or records predict cannot work with (one line)."""


@dataclass(frozen=True)
class LinkChoice:
    """``--link``/``--inter-link`` and their figures (None: chosen from the records)."""

    kind: str | None = None
    bandwidth_gbps: float | None = None
    latency_us: float | None = None


@dataclass(frozen=True)
class PredictOptions:
    devices: Sequence[int] = DEFAULT_DEVICES
    devices_per_node: int | None = None
    nodes: int | None = None
    strategies: Sequence[str] = STRATEGIES
    link: LinkChoice = field(default_factory=LinkChoice)
    inter_link: LinkChoice = field(default_factory=LinkChoice)
    host_cpus: int | None = None
    input_rate_per_core: float | None = None
    calibrate: bool = False
    where: Sequence[str] = ()
    inter_rails: int | None = None
    """Network rails per node (``--inter-rails``; None: :data:`~cnnbench.predict.links.DEFAULT_RAILS`)."""


@dataclass(frozen=True)
class Row:
    """One predicted point of one base and strategy, and the measurement there if any."""

    base: Base
    strategy: str
    devices: int
    nodes: int
    images_per_sec: float
    speedup: float
    efficiency: float
    bound: str
    measured: float | None
    baseline: float | None = None
    """The naive baseline: ``n x`` one device's images/sec ``x`` the measured 2-device efficiency
    (on one node, same strategy); None without a 2-device measurement, and at 1 and 2 devices."""

    @property
    def error(self) -> float | None:
        return None if not self.measured else self.images_per_sec / self.measured - 1

    @property
    def baseline_error(self) -> float | None:
        return None if not self.measured or self.baseline is None else self.baseline / self.measured - 1

    def as_dict(self) -> dict[str, Any]:
        return {**dict(self.base.key), "strategy": self.strategy, "devices": self.devices, "nodes": self.nodes,
                "predicted_images_per_sec": self.images_per_sec, "speedup": self.speedup,
                "efficiency": self.efficiency, "bound": self.bound, "measured_images_per_sec": self.measured,
                "error": self.error, "split": self.base.split_source,
                "baseline_images_per_sec": self.baseline, "baseline_error": self.baseline_error}


@dataclass
class PredictResult:
    rows: list[Row]
    links: dict[str, tuple[Link, Link]]
    """Per machine: (within a node, between nodes)."""
    fits: dict[str, list[Fit]]
    skipped: list[str]
    bases: list[Base]
    verdicts: list[str] = field(default_factory=list)
    """Per machine whose measured points beyond 2 devices can be checked: whether the model beat
    the naive baseline (constant 2-device efficiency) there (:func:`baseline_verdicts`)."""


def predict_scaling(records: Sequence[Mapping[str, Any]], options: PredictOptions,
                    cost_lookup: CostLookup) -> PredictResult:
    """Predict every selected base at every point (see the module documentation)."""
    check_options(options)
    selected = _select(records, options.where)
    bases, skipped = find_bases(selected, cost_lookup, pipeline_records(records))
    if not bases and skipped:
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        raise PredictError(f"no usable one-device training record in the selection: left out {skipped[0]}{more}")
    if not bases:
        raise PredictError("no one-device training record in the selection: predict starts from one "
                           "(cnnbench run --num-devices 1, or an imported 1-GPU log)")
    measured = measured_points(selected)
    plain: dict[str, Scenario] = {}
    for base in bases:
        if base.machine not in plain:
            plain[base.machine] = _scenario(base, options, comm_records(records))
    rows_of, overflowed = _computable(bases, options, plain, measured)
    skipped += overflowed
    bases = [base for base in bases if id(base) in rows_of]
    scenarios, fits = _scenarios(bases, options, plain, measured)
    rows = [row for base in bases for row in (
        rows_of[id(base)] if not options.calibrate else
        [r for strategy in options.strategies for r in _rows(base, strategy, options, scenarios[base.machine],
                                                             measured)])]
    if not rows and overflowed:  # the configurations a count fitted were those left out
        raise PredictError(f"no configuration could be predicted: left out {overflowed[0]}"
                           + (f" (and {len(overflowed) - 1} more)" if len(overflowed) > 1 else ""))
    if not rows:
        raise PredictError(f"--devices {','.join(map(str, options.devices))}: no count spreads evenly over the "
                           f"nodes it takes ({GPUS_PER_NODE} GPUs a node unless --devices-per-node or --nodes "
                           "says otherwise)")
    links = {m: (s.intra, s.inter) for m, s in scenarios.items()}
    return PredictResult(rows, links, fits, skipped, bases, baseline_verdicts(rows))


def _scenarios(bases: Sequence[Base], options: PredictOptions, plain: Mapping[str, Scenario],
               measured: Sequence[Measured]) -> tuple[dict[str, Scenario], dict[str, list[Fit]]]:
    """Each machine's scenario: as found (``plain``), or fitted to its measured points (``--calibrate``)."""
    scenarios: dict[str, Scenario] = {}
    fits: dict[str, list[Fit]] = {}
    for base in bases:
        if base.machine not in scenarios:
            scenario = plain[base.machine]
            if options.calibrate:
                scenario, fits[base.machine] = _calibrated(scenario, base.machine, bases, measured)
            scenarios[base.machine] = scenario
    return scenarios, fits


def two_device_efficiency(base: Base, strategy: str, measured: Sequence[Measured]) -> float | None:
    """The measured 2-device efficiency of ``base``'s configuration under ``strategy`` (2 devices on
    one node: images/sec over twice the one-device figure), None where not measured."""
    for m in measured:
        if m.key == base.key and m.strategy == strategy and m.devices == 2 and m.nodes == 1:
            return speedup_efficiency(m.images_per_sec, 2, base.images_per_sec)[1]
    return None


def baseline_verdicts(rows: Sequence[Row]) -> list[str]:
    """Per machine: the model's and the naive baseline's mean absolute error over the points that
    have both (measured, beyond 2 devices), and a line saying the model lost where it did."""
    by_machine: dict[str, list[Row]] = {}
    for row in rows:
        if row.error is not None and row.baseline_error is not None:
            by_machine.setdefault(row.base.machine, []).append(row)
    lines = []
    for machine, mine in by_machine.items():
        model = sum(abs(r.error or 0.0) for r in mine) / len(mine)
        naive = sum(abs(r.baseline_error or 0.0) for r in mine) / len(mine)
        points = f"{len(mine)} point{'s' if len(mine) > 1 else ''}"
        if model > naive:
            lines.append(f"{machine}: the model loses to the naive baseline (constant 2-device efficiency): "
                         f"mean |error| {model:.1%} against {naive:.1%} over {points}; trust the 2-device "
                         "efficiency here")
        else:
            lines.append(f"{machine}: the model beats the naive baseline (constant 2-device efficiency): "
                         f"mean |error| {model:.1%} against {naive:.1%} over {points}")
    return lines


def _computable(bases: Sequence[Base], options: PredictOptions, plain: Mapping[str, Scenario],
                measured: Sequence[Measured]) -> tuple[dict[int, list[Row]], list[str]]:
    """The rows of each base (by ``id``) on its machine's uncalibrated scenario, and a line for each
    base whose figures no float computes with (1e308 parameters, a bucket of 1e-320 MB: figures a
    record may hold), left out by name before any is predicted or calibrated on (at its points and
    at each measured point ``--calibrate`` fits to); :class:`PredictError` when that is every base."""
    rows_of: dict[int, list[Row]] = {}
    overflowed = []
    for base in bases:
        try:
            rows = [row for strategy in options.strategies
                    for row in _rows(base, strategy, options, plain[base.machine], measured)]
            if options.calibrate:  # each point the fit takes, at the bandwidths it tries
                for m in measured:
                    if m.key == base.key and m.devices > 1 and m.strategy in STRATEGIES \
                            and exchange_of(m.strategy) != "none":
                        check_pair(base, m, plain[base.machine])
            rows_of[id(base)] = rows
        except ArithmeticError as exc:
            overflowed.append(f"{shortened(base.model, 80)} on {shortened(str(base.machine), 80)}: its figures are "
                              f"past what a prediction can compute with ({shortened(str(exc), 80)})")
    if overflowed and len(overflowed) == len(bases):
        more = f" (and {len(overflowed) - 1} more)" if len(overflowed) > 1 else ""
        raise PredictError(f"no configuration could be predicted: left out {overflowed[0]}{more}")
    return rows_of, overflowed


def check_options(options: PredictOptions) -> None:
    """Refuse, in one line, options that leave nothing to predict whatever the records say: no
    strategy or an unknown one, no device count, or ``--nodes``/``--devices-per-node`` that no
    device count spreads evenly over (each point puts as many devices on every node)."""
    if not options.strategies:
        raise PredictError(f"--strategy: names no strategy (one or more of {', '.join(STRATEGIES)})")
    for s in options.strategies:
        if s not in STRATEGIES:
            raise PredictError(f"--strategy: unknown {s!r} (one of {', '.join(STRATEGIES)})")
    if not options.devices:
        raise PredictError("--devices: names no device count")
    rate = options.input_rate_per_core
    if rate is not None and not (math.isfinite(rate) and rate >= MIN_RATE):
        raise PredictError(f"--input-rate: must be a finite number of {MIN_RATE:g} images/sec or more, got {rate}")
    for flag, value in (("--nodes", options.nodes), ("--devices-per-node", options.devices_per_node),
                        ("--inter-rails", options.inter_rails)):
        if value is not None and value < 1:
            raise PredictError(f"{flag}: must be 1 or more, got {value}")
    counts = ",".join(map(str, options.devices))
    if options.nodes is not None and not any(n % options.nodes == 0 for n in options.devices):
        raise PredictError(f"--nodes {options.nodes}: divides none of --devices {counts}, so no point "
                           "has as many devices on every node")
    per_node = options.devices_per_node
    if per_node is not None and not any(n % node_count(n, per_node) == 0 for n in options.devices):
        first = options.devices[0]
        raise PredictError(f"--devices-per-node {per_node}: none of --devices {counts} spreads evenly over the "
                           f"nodes it takes ({first} devices take {node_count(first, per_node)} nodes of up to "
                           f"{per_node}); give multiples of {per_node}")


def node_count(devices: int, per_node: int) -> int:
    """The nodes ``devices`` take at ``per_node`` devices a node."""
    return 1 if devices <= per_node else math.ceil(devices / per_node)


def _select(records: Sequence[Mapping[str, Any]], where: Sequence[str]) -> list[Mapping[str, Any]]:
    """``--where`` as ``report`` reads it (aliases such as ``model`` resolved)."""
    if not where:
        return list(records)
    try:
        return select(records, parse_where(where, lambda name: resolve_field(name, records)))
    except (FieldError, ValueError) as exc:
        raise PredictError(f"--where: {exc}") from None


def machine_links(base: Base, options: PredictOptions, comm: Sequence[Mapping[str, Any]]) -> tuple[Link, Link]:
    """The link within a node (``--link``, else a comm record of the machine, else its recorded
    topology or GPU name; ``nvlink`` at the GPU's NVLink generation) and between nodes
    (``--inter-link``, else InfiniBand for GPUs and Ethernet for CPUs) with its rails a node
    (``--inter-rails``, else :data:`~cnnbench.predict.links.DEFAULT_RAILS`)."""
    recorded = machine_link(base.environment, base.device)
    if options.link.kind is not None:
        intra = given_link(options.link.kind, options.link.bandwidth_gbps, options.link.latency_us)
        if options.link.bandwidth_gbps is None:  # --link nvlink: the GPU's NVLink generation
            intra = with_generation(intra, base.environment.get("gpu_model"))
    else:
        mine = [r for r in comm if get_value(r, F.MACHINE) == base.machine]
        intra = _override(link_from_comm(mine, recorded.kind) or recorded, options.link, "")
    inter_kind = options.inter_link.kind or ("ethernet" if base.device == "cpu" else "ib")
    if options.inter_link.kind is None:
        inter = _override(default_link(inter_kind, "default between nodes"), options.inter_link, "inter-")
    else:
        inter = given_link(inter_kind, options.inter_link.bandwidth_gbps, options.inter_link.latency_us,
                           prefix="inter-")
    rails = options.inter_rails or DEFAULT_RAILS.get(inter_kind, 1)
    return intra, replace(inter, rails=rails)


def _override(link: Link, choice: LinkChoice, prefix: str) -> Link:
    """``link`` with only the figures given on the command line replaced (``--bandwidth`` alone keeps
    the chosen link's latency, and the other way round)."""
    if choice.bandwidth_gbps is None and choice.latency_us is None:
        return link
    flags = (f" --{prefix}bandwidth" if choice.bandwidth_gbps is not None else "") + (
        f" --{prefix}latency" if choice.latency_us is not None else "")
    return replace(link, bandwidth_gbps=link.bandwidth_gbps if choice.bandwidth_gbps is None else choice.bandwidth_gbps,
                   latency_s=link.latency_s if choice.latency_us is None else choice.latency_us * 1e-6,
                   source=f"{link.source};{flags}")


def _scenario(base: Base, options: PredictOptions, comm: Sequence[Mapping[str, Any]]) -> Scenario:
    intra, inter = machine_links(base, options, comm)
    return Scenario(intra, inter, options.host_cpus, options.input_rate_per_core)


def _calibrated(scenario: Scenario, machine: str, bases: Sequence[Base],
                measured: Sequence[Measured]) -> tuple[Scenario, list[Fit]]:
    """The machine's links fitted to its measured points: within a node first, then between."""
    by_key = {b.key: b for b in bases if b.machine == machine}
    pairs = [(by_key[m.key], m) for m in measured
             if m.key in by_key and m.devices > 1 and m.strategy in STRATEGIES and exchange_of(m.strategy) != "none"]
    fits: list[Fit] = []
    for which, points in (("intra", [p for p in pairs if p[1].nodes == 1]),
                          ("inter", [p for p in pairs if p[1].nodes > 1])):
        fit = fit_link(points, scenario, which)
        if fit is not None:
            fits.append(fit)
            scenario = Scenario(**{**scenario.__dict__, which: fit.link})
    return scenario, fits


def points(base: Base, options: PredictOptions, measured: Sequence[Measured] = ()) -> list[tuple[int, int]]:
    """(devices, nodes) of every point: ``--nodes`` for all, else as many nodes of
    ``--devices-per-node`` (default 8 GPUs; for CPUs one host a device, or all devices on one host
    where the configuration's measured points all ran on one node) as the devices need."""
    out = []
    mine = [m.nodes for m in measured if m.key == base.key]
    one_host = base.device == "cpu" and bool(mine) and all(n == 1 for n in mine)
    per_node = options.devices_per_node or (
        max(options.devices) if one_host else 1 if base.device == "cpu" else GPUS_PER_NODE)
    for n in options.devices:
        nodes = options.nodes or node_count(n, per_node)
        if n % nodes == 0:
            out.append((n, nodes))
    return out


def _rows(base: Base, strategy: str, options: PredictOptions, scenario: Scenario,
          measured: Sequence[Measured]) -> list[Row]:
    found = {(m.devices, m.nodes): m.images_per_sec for m in measured if m.key == base.key and m.strategy == strategy}
    one = predict(base, strategy, 1, 1, scenario).images_per_sec
    two = two_device_efficiency(base, strategy, measured)
    rows = []
    for n, nodes in points(base, options, measured):
        p = predict(base, strategy, n, nodes, scenario)
        speedup, efficiency = speedup_efficiency(p.images_per_sec, n, one)
        at = base.images_per_sec if n == 1 and nodes == 1 else found.get((n, nodes))
        baseline = n * base.images_per_sec * two if two is not None and n > 2 else None
        rows.append(Row(base, strategy, n, nodes, p.images_per_sec, speedup, efficiency, p.bound, at, baseline))
    return rows
