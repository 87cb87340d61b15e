"""From records to what the model needs: one-device bases, measured multi-device points, comm and
input-pipeline figures.

A configuration is the record's machine, model, precision, per-device batch, image size, data,
data format, compilation, source and host setup (host CPUs, threads per worker, where synthetic
data is made, loader workers); its one-device training records (status ok) are its base
(the median images/sec over repeats; the forward/backward split's medians where ``run``
measured one). Records with more devices in the same configuration are its measured points,
per strategy (``variable_update``) and device/node count.

Imported tf_cnn_benchmarks records carry no split and no cost: the split is assumed
(:data:`ASSUMED_SPLIT`), the parameter count comes from :data:`TF_PARAMETERS` or the caller's
lookup (the torchvision model of the same architecture), and their replicated all-reduce starts after the whole
backward pass (no overlap), in fp16 under mixed precision (tf_cnn_benchmarks'
``--compact_gradient_transfer``, on by default). CPU workers exchange on the cores they compute
with (Gloo copies and sums on the CPU): no overlap either.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.predict.model import DEFAULT_BUCKET_BYTES, Base
from cnnbench.results import fields as F
from cnnbench.results.cleaning import MAX_FIGURE
from cnnbench.results.query import get_value
from cnnbench.results.record import record_kind
from cnnbench.words import shortened

KEY_FIELDS = (F.MACHINE, F.MODEL, F.PRECISION, F.BATCH, F.IMAGE_SIZE,
              F.DATA, F.DATA_FORMAT, F.COMPILE, "source", F.DEVICE,
              F.HOST_CPUS, F.THREADS_PER_WORKER, F.SYNTHETIC_LOCATION, F.NUM_WORKERS)
"""What makes a configuration (besides the device count and strategy)."""
ASSUMED_SPLIT = (1.0, 2.0, 0.0)
"""Forward : backward : optimizer when a record has no measured split: backward twice the
forward pass (its two products per layer against the forward's one), the update folded into them."""
ASSUMED_TEXT = "assumed: backward = 2 x forward (no split recorded)"
SPLIT_FIELDS = ("forward_time_s", "backward_time_s", "optimizer_time_s")
HALF = frozenset({"fp16", "bf16"})
GATHERED_HALF = frozenset({"fp16", "bf16", "amp_fp16", "amp_bf16"})
"""Precisions whose FSDP all-gathers carry 2 bytes a parameter: pure half weights, and amp, under
which ``distributed/fsdp.py``'s ``MixedPrecisionPolicy`` gathers in the autocast dtype (its
gradients are reduced in fp32: :attr:`Base.gradient_bytes` stays 4 bytes a parameter)."""
TF_PARAMETERS = {
    "alexnet": 61_842_345,
    "inception4": 42_680_000,
}
"""Parameter counts of tf_cnn_benchmarks models whose torchvision namesake differs or is missing:
alexnet from tf_cnn_benchmarks' layers (convolutions 64-192-384-384-256, fully connected
4096-4096-1001); inception4 as timm's inception_v4 (42.68 M, the same network)."""
CostLookup = Callable[[str], int | None]
"""Parameter count of a model name (None: not known)."""


@dataclass(frozen=True)
class Measured:
    """A multi-device measurement of a configuration: its images/sec (median of repeats)."""

    key: tuple[tuple[str, Any], ...]
    strategy: str
    devices: int
    nodes: int
    images_per_sec: float
    repeats: int


def run_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Training run records that finished (not comm, not ``cnnbench data``, not forward-only)
    with a figure more than 0 images/sec."""
    return [r for r in _training(records) if _rate((r.get("metrics") or {}).get("total_images_per_sec"))]


def _training(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in records if record_kind(r) == "run" and r.get("status", "ok") == "ok"
            and (r.get("config") or {}).get("mode") != "data" and not (r.get("config") or {}).get("forward_only")]


def config_key(record: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """What makes the record's configuration; a value that is a list or an object (a hand-made line's)
    as its JSON text, so that it keys a group as any value does (it was a TypeError)."""
    return tuple((name.rsplit(".", 1)[-1], _hashable(get_value(record, name))) for name in KEY_FIELDS)


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        import json

        return json.dumps(value, sort_keys=True, default=str)
    return value


def find_bases(records: Sequence[Mapping[str, Any]], cost_lookup: CostLookup,
               pipeline: Sequence[Mapping[str, Any]] = ()) -> tuple[list[Base], list[str]]:
    """The one-device bases of ``records`` and a line for each configuration or record left out
    (and why): a one-device record no step can be computed from (:func:`unusable`) is named
    and left out, as a reader names and leaves out a NaN figure."""
    groups: dict[tuple[tuple[str, Any], ...], list[Mapping[str, Any]]] = defaultdict(list)
    bases, skipped = [], []
    for rec in _training(records):
        if int(get_value(rec, F.DEVICES) or 1) != 1:
            continue
        why = unusable(rec)
        if why is not None:
            skipped.append(f"record {shortened(str(rec.get('run_id') or '(no run_id)'), 80)} "
                           f"({shortened(str(get_value(rec, F.MODEL)), 80)} on "
                           f"{shortened(str(get_value(rec, F.MACHINE)), 80)}): {why}")
        elif _rate((rec.get("metrics") or {}).get("total_images_per_sec")):
            groups[config_key(rec)].append(rec)
    for key, recs in groups.items():
        base = _base(key, recs, cost_lookup, pipeline)
        if isinstance(base, str):
            skipped.append(base)
        else:
            bases.append(base)
    return bases, skipped


def unusable(record: Mapping[str, Any]) -> str | None:
    """Why a one-device training record gives no step to start from, or None: a batch size that
    is not a whole number of 1 or more, images/sec of 0 or less, or a measured forward/backward/
    optimizer split that sums to 0 seconds. (A NaN or infinite figure is null when read: the
    reader names it.)"""
    model = get_value(record, F.MODEL)
    if not isinstance(model, str) or not model:
        return f"config.model is {shortened(repr(model), 80)}: a model is named by text"
    batch = _figure(get_value(record, F.BATCH))
    if batch is None or (isinstance(batch, float) and not batch.is_integer()) or batch < 1:
        shown = get_value(record, F.BATCH)
        return f"config.batch_size is {shown!r}: a step needs a batch of 1 image or more"
    metrics = record.get("metrics") or {}
    ips = _figure(metrics.get("total_images_per_sec"))
    if ips is not None and ips <= 0:
        return f"metrics.total_images_per_sec is {ips!r}: a finished run measures more than 0 images/sec"
    if ips is not None and not _rate(ips):
        return f"metrics.total_images_per_sec is {ips!r}: too small to compute a step from (under {MIN_RATE:g})"
    split = [v for v in (_figure(metrics.get(k)) for k in SPLIT_FIELDS) if v is not None and v >= 0]
    if len(split) == len(SPLIT_FIELDS) and not sum(split):
        return "metrics.forward_time_s, backward_time_s and optimizer_time_s are all 0: a step takes some time"
    return None


def measured_points(records: Sequence[Mapping[str, Any]]) -> list[Measured]:
    """Every configuration's median images/sec per strategy, device count (``num_devices``: all
    devices, over every node) and node count."""
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for rec in run_records(records):
        devices = int(get_value(rec, F.DEVICES) or 1)
        nodes = int(get_value(rec, F.NUM_NODES) or 1)
        strategy = str(get_value(rec, F.VARIABLE_UPDATE) or "replicated")
        groups[(config_key(rec), strategy, devices, nodes)].append(
            float(rec["metrics"]["total_images_per_sec"]))
    return [Measured(k[0], k[1], k[2], k[3], statistics.median(v), len(v)) for k, v in groups.items()]


def _base(key: tuple[tuple[str, Any], ...], recs: Sequence[Mapping[str, Any]], cost_lookup: CostLookup,
          pipeline: Sequence[Mapping[str, Any]]) -> Base | str:
    first, values = recs[0], dict(key)
    model = str(values["model"])
    params = _params(first, cost_lookup)
    if params is None:
        return f"{model} on {values['machine']}: no parameter count (no model_cost, and not a model known here)"
    imported = (first.get("source") or "cnnbench") != "cnnbench"
    precision = str(values.get("precision") or "fp32")
    ips = statistics.median(float(r["metrics"]["total_images_per_sec"]) for r in recs)
    batch = int(values["batch_size"])
    step = batch / ips
    f, b, o, source = _split(recs, step)
    env = dict(first.get("environment") or {})
    device = _device(values, env)
    return Base(model=model, key=key, batch_size=batch, step_time_s=step, forward_s=f, backward_s=b, optimizer_s=o,
                split_source=source, gradient_bytes=params * _gradient_element(precision, imported),
                parameter_bytes=params * (2 if precision in GATHERED_HALF else 4), device=device,
                overlap=not imported and device != "cpu", bucket_bytes=_bucket_bytes(first),
                machine=str(values["machine"]), environment=env,
                input_rate_per_core=_input_rate(first, pipeline),
                host_cpus=env.get("available_cpus") or env.get("cpu_threads"), threads=_threads(first),
                threads_per_worker=get_value(first, F.THREADS_PER_WORKER),
                busy_cores=_busy_cores(recs, device), source=str(first.get("source") or "cnnbench"),
                parameters=float(params), parameter_device=_parameter_device(recs),
                one_device_server=_one_device_server(recs))


def _gradient_element(precision: str, imported: bool) -> int:
    """Bytes a gradient element is exchanged in: 2 in pure half precision, and in imported
    tf_cnn_benchmarks runs under fp16 mixed precision (its compact gradient transfer), else 4."""
    return 2 if precision in HALF or (imported and precision == "amp_fp16") else 4


def _device(values: Mapping[str, Any], env: Mapping[str, Any]) -> str:
    """The configuration's device, else ``cuda`` where the environment names a GPU, else ``cpu``."""
    return str(values.get("device") or ("cuda" if env.get("gpu_model") else "cpu"))


def _bucket_bytes(record: Mapping[str, Any]) -> float:
    """The gradient bucket size the run used, in bytes (the default where it set none)."""
    bucket = get_value(record, F.BUCKET_CAP_MB)
    return float(bucket) * 2**20 if _positive(bucket) else DEFAULT_BUCKET_BYTES


def _busy_cores(recs: Sequence[Mapping[str, Any]], device: str) -> float:
    """The median of the cores other processes kept busy during the runs (on a CPU device only)."""
    return statistics.median(_busy(r) for r in recs) if device == "cpu" else 0.0


def _parameter_device(recs: Sequence[Mapping[str, Any]]) -> str:
    """Where the parameters lived: ``cpu`` if any run kept them there, else ``device``."""
    return "cpu" if any(get_value(r, F.LOCAL_PARAMETER_DEVICE) == "cpu" for r in recs) else "device"


def _one_device_server(recs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any one-device run updated through a parameter server."""
    return any(get_value(r, F.VARIABLE_UPDATE) == "parameter_server" for r in recs)


def _threads(record: Mapping[str, Any]) -> int | None:
    """The torch threads a one-device run computed with (its worker's, else the environment's)."""
    per_device = get_value(record, F.PER_DEVICE_TORCH_THREADS)
    if isinstance(per_device, list) and per_device and _positive(per_device[0]):
        return int(per_device[0])
    threads = get_value(record, F.TORCH_NUM_THREADS)
    return int(threads) if _positive(threads) else None


def _busy(record: Mapping[str, Any]) -> float:
    value = get_value(record, F.OTHER_PROCESSES_CPU_CORES)
    return float(value) if _positive(value) else 0.0


def _params(record: Mapping[str, Any], cost_lookup: CostLookup) -> int | None:
    cost = record.get("model_cost")
    if isinstance(cost, Mapping) and _positive(cost.get("params")):
        return int(cost["params"])
    model = str(get_value(record, F.MODEL))
    if (record.get("source") or "cnnbench") != "cnnbench" and model in TF_PARAMETERS:
        return TF_PARAMETERS[model]
    return cost_lookup(model)


def _split(recs: Sequence[Mapping[str, Any]], step: float) -> tuple[float, float, float, str]:
    """Forward, backward and optimizer seconds of a ``step``-second step: the measured split's
    medians, scaled so that they sum to the timed step (the split's own steps wait at each phase),
    else :data:`ASSUMED_SPLIT`."""
    measured = [tuple(float(r["metrics"][k]) for k in SPLIT_FIELDS)
                for r in recs if all(_positive_or_zero((r.get("metrics") or {}).get(k)) for k in SPLIT_FIELDS)]
    parts, source = ASSUMED_SPLIT, ASSUMED_TEXT
    if measured:
        parts = tuple(statistics.median(m[i] for m in measured) for i in range(3))  # type: ignore[assignment]
        source = f"measured ({len(measured)} record{'s' if len(measured) > 1 else ''})"
    total = sum(parts) or 1.0
    f, b, o = (step * (p / total) for p in parts)
    return f, b, o, source


def _input_rate(record: Mapping[str, Any], pipeline: Sequence[Mapping[str, Any]]) -> float | None:
    """The best per-core rate of the ``cnnbench data`` records of this data set and image size on
    this machine (synthetic data has no pipeline to bound it)."""
    data = get_value(record, F.DATA)
    if data in (None, "synthetic"):
        return None
    rates = [float(p["metrics"]["images_per_sec_per_core"]) for p in pipeline
             if get_value(p, F.DATA) == data and get_value(p, F.MACHINE)
             == get_value(record, F.MACHINE)
             and get_value(p, F.IMAGE_SIZE) in (None, get_value(record, F.IMAGE_SIZE))
             and _positive((p.get("metrics") or {}).get("images_per_sec_per_core"))]
    return max(rates) if rates else None


def pipeline_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in records if (r.get("config") or {}).get("mode") == "data" and r.get("status", "ok") == "ok"]


def comm_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in records if record_kind(r) == "comm"]


def _figure(value: Any) -> int | float | None:
    """A number (not a bool), else None."""
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else value


MIN_RATE = 1 / MAX_FIGURE
"""The least images/sec a step is computed from: a step of a batch at a smaller rate (5e-324, as a
figure may say) lasts longer than any figure a reader computes with."""


def _rate(value: Any) -> bool:
    """Whether ``value`` is images/sec a step can be computed from (:data:`MIN_RATE` or more)."""
    return _positive(value) and value >= MIN_RATE


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _positive_or_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
