"""The metrics phase: from what the loop measured to the record's ``metrics``.

Throughput statistics follow tf_cnn_benchmarks (:mod:`cnnbench.engine.stats`);
``total_images_per_sec`` is images over the wall clock of the timed span. With several
workers, each worker's measure is gathered on rank 0 and combined
(:func:`measured_metrics`): memory peaks as the largest worker's (``peak_device_memory_bytes``:
per device) and as the total over workers (``peak_device_memory_total_bytes``), energy summed
over every worker's GPU, throttled if any was,
warnings from all, and each worker's own GPU (``gpu_devices``, tagged with its rank). The
step times are judged here too (pyperf's instability checks, :mod:`cnnbench.engine.stability`),
and energy turns into images per joule. FLOP rates come
from the model's cost (a shape-only trace) and, on a GPU in the table of known peaks, MFU
over the peaks of the devices the ranks actually ran on (a MIG slice: its share of the chip).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cnnbench.engine.loop import LoopResult
from cnnbench.engine.resolve import ResolvedRun
from cnnbench.engine.stability import spread_warnings
from cnnbench.engine.stats import throughput_stats
from cnnbench.engine.telemetry_figures import images_per_joule, merge_worker_telemetry
from cnnbench.words import plural

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerMeasure:
    """What one worker measured; in a multi-device run each worker's is gathered on rank 0."""

    step_times_s: list[float]
    wall_time_s: float
    progress_time_s: float
    input_wait_s: float
    losses: list[float]
    images: int = 0
    """Images this worker stepped through."""
    hook_metrics: dict[str, Any] = field(default_factory=dict)
    source_metrics: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None
    """The torch threads this worker ran with (``torch.get_num_threads()`` after its timed steps)."""

    @classmethod
    def of(cls, loop: LoopResult, hook_metrics: Mapping[str, Any], source_metrics: Mapping[str, Any], *,
           threads: int | None = None) -> WorkerMeasure:
        return cls(loop.step_times_s, loop.wall_time_s, loop.progress_time_s, loop.input_wait_s, loop.losses,
                   loop.images, dict(hook_metrics), dict(source_metrics), threads)


def measured_metrics(workers: Sequence[WorkerMeasure], batch_size: int, *, first_step_s: float | None,
                     compiled: bool, check_spread: bool = True) -> dict[str, Any]:
    """The record's figures from every worker's measure (rank 0's first).

    One step of the run lasts as long as its slowest worker, so the run's step times (and
    the statistics over them, at ``batch_size`` images per worker and step) are the per-step
    maxima over workers; ``total_images_per_sec`` is every worker's images over rank 0's
    wall clock between the barriers that open and close the timed steps. Each worker's own
    rate is in ``per_device_images_per_sec``. ``check_spread``: warn when the step times
    are unstable (not for training to accuracy, whose epochs start with a fresh loader and
    end with a short batch).
    """
    step_times = _run_step_times(workers)
    metrics = _timing_metrics(workers, step_times, batch_size, first_step_s=first_step_s, compiled=compiled)
    diverged, wall = metrics["diverged"], metrics["wall_time_s"]
    metrics.update(_combined_hook_metrics(workers))
    if "energy_j" in metrics:
        metrics["images_per_joule"] = images_per_joule(sum(w.images for w in workers), metrics["energy_j"])
    metrics["warnings"] = list(metrics.get("warnings") or [])
    if check_spread:
        metrics["warnings"] += spread_warnings(step_times)
    if diverged:
        metrics["warnings"].append(_divergence_note(workers))
    metrics.update(_summed(w.source_metrics for w in workers))
    metrics["warnings"] += input_warnings(metrics, [w.source_metrics for w in workers])
    comm = metrics.get("communication_time_s")
    if "communication_time_s" in metrics:
        metrics["communication_fraction"] = comm / wall if isinstance(comm, float) and wall > 0 else None
    return metrics


def _run_step_times(workers: Sequence[WorkerMeasure]) -> list[float]:
    """Each step's time: its slowest worker's."""
    if len(workers) == 1:
        return workers[0].step_times_s
    return [max(ts) for ts in zip(*(w.step_times_s for w in workers), strict=True)]


def _timing_metrics(workers: Sequence[WorkerMeasure], step_times: list[float], batch_size: int, *,
                    first_step_s: float | None, compiled: bool) -> dict[str, Any]:
    """Throughput, step times, wall clock, input wait and loss (see :func:`measured_metrics`)."""
    main = workers[0]
    stats = throughput_stats(step_times, batch_size * len(workers))
    losses = main.losses
    wall = main.wall_time_s
    return {
        "total_images_per_sec": sum(w.images for w in workers) / wall,
        **stats.as_metrics(),
        "per_device_images_per_sec": [w.images / sum(w.step_times_s) for w in workers],
        "per_device_torch_threads": [w.threads for w in workers],
        "step_times_s": step_times,
        "wall_time_s": wall,
        "progress_time_s": main.progress_time_s,
        "first_step_time_s": first_step_s,
        "compile_time_s": first_step_s if compiled else None,
        "input_wait_fraction": statistics.fmean(w.input_wait_s / w.wall_time_s if w.wall_time_s > 0 else 0.0
                                                for w in workers),
        "loss_first": _finite_or_none(losses[0]) if losses else None,
        "loss_last": _finite_or_none(losses[-1]) if losses else None,
        "diverged": any(not math.isfinite(x) for w in workers for x in w.losses),
    }


def input_warnings(metrics: Mapping[str, Any], per_worker: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the record must say about its input: images skipped by --skip-bad-images, and the
    classes every read image of which was bad (so the run trained without them)."""
    out: list[str] = []
    bad = metrics.get("bad_images")
    if isinstance(bad, int) and bad > 0:
        out.append(f"{plural(bad, 'bad image')} skipped (--skip-bad-images): the figures count only the "
                   "images that loaded")
    empty = sorted({name for m in per_worker for name in m.get("classes_all_bad") or []})
    if empty:
        metrics_list = ", ".join(empty[:10]) + (f" and {len(empty) - 10} more" if len(empty) > 10 else "")
        out.append(f"every image read from class {metrics_list} was bad: the run had none of "
                   f"{'that class' if len(empty) == 1 else 'those classes'}")
    return out


def _combined_hook_metrics(workers: Sequence[WorkerMeasure]) -> dict[str, Any]:
    """Rank 0's hook metrics, with peaks taken over every worker, every worker's GPU
    telemetry and its totals, and warnings from all (each text once)."""
    combined = dict(workers[0].hook_metrics)
    combined.update(_peaks([w.hook_metrics for w in workers]))
    combined.update(merge_worker_telemetry([w.hook_metrics for w in workers]))
    if any("gpu_devices" in w.hook_metrics for w in workers):
        combined["gpu_devices"] = [{"rank": rank, **d} for rank, w in enumerate(workers)
                                   for d in w.hook_metrics.get("gpu_devices") or []]
    warnings: list[str] = []
    for rank, w in enumerate(workers):
        for text in w.hook_metrics.get("warnings") or []:
            line = text if rank == 0 else f"rank {rank}: {text}"
            if line not in warnings:
                warnings.append(line)
    if warnings or "warnings" in combined:
        combined["warnings"] = warnings
    return combined


MEMORY_PEAKS = ("peak_device_memory_bytes", "peak_device_reserved_bytes", "peak_host_memory_bytes")
"""Per-device peaks (the largest worker's, under these names) that also get a total over devices."""


def total_key(key: str) -> str:
    """``peak_device_memory_bytes`` -> ``peak_device_memory_total_bytes``."""
    return key.removesuffix("_bytes") + "_total_bytes"


def _peaks(per_worker: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every ``peak_*`` figure of rank 0's as the largest worker's, and the memory totals."""
    out: dict[str, Any] = {}
    for key in per_worker[0]:
        if key.startswith("peak_"):
            present = [v for v in (m.get(key) for m in per_worker) if isinstance(v, (int, float))]
            out[key] = max(present) if present else None
    out.update(memory_totals(per_worker))
    return out


def memory_totals(per_worker: Sequence[Mapping[str, Any]]) -> dict[str, int | None]:
    """Each memory peak summed over the workers (one device each), as the studies count a run's
    memory; None where a worker lacks it. The per-device peak stays under the plain name."""
    out: dict[str, int | None] = {}
    for key in MEMORY_PEAKS:
        values = [m.get(key) for m in per_worker]
        if all(v is None for v in values):
            continue
        counts = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[total_key(key)] = int(sum(counts)) if len(counts) == len(values) else None
    return out


def _summed(per_worker: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Counters from every worker's input source, added up (``bad_images``)."""
    out: dict[str, Any] = {}
    for metrics in per_worker:
        for key, value in metrics.items():
            previous = out.get(key)
            if _is_count(value) and (previous is None or _is_count(previous)):
                out[key] = (previous or 0) + value
            else:
                out.setdefault(key, value)
    return out


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _divergence_note(workers: Sequence[WorkerMeasure]) -> str:
    """The warning a diverged run keeps: from which timed step the loss was NaN or infinite."""
    first = min(next(i for i, x in enumerate(w.losses) if not math.isfinite(x))
                for w in workers if any(not math.isfinite(x) for x in w.losses))
    return (f"training diverged: the loss is NaN or infinite from timed step {first + 1} on "
            "(the figures are the speed of those steps; the learning rate may be too high)")


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def model_cost(run: ResolvedRun) -> dict[str, Any] | None:
    """The model's cost at the run's image size (shape-only trace; None if it cannot be traced)."""
    from cnnbench.models.cost import model_cost as trace_cost

    try:
        return trace_cost(run.spec.name, run.image_size).to_dict()
    except Exception as exc:  # a missing cost must not lose the run
        log.warning("no model cost for %s at %s px: %s", run.spec.name, run.image_size, exc)
        return None


def run_peak_flops(run: ResolvedRun, environment: Mapping[str, Any],
                   devices: Sequence[Mapping[str, Any]] | None = None) -> float | None:
    """The summed dense peak of the devices the run used: each rank's own (``devices``, the
    merged ``metrics.gpu_devices``), else the environment's device (rank 0's) times the
    number of ranks. None on a CPU, or when any device's peak is unknown."""
    from cnnbench.machine.peaks import total_peak_flops

    if run.device.type != "cuda":
        return None
    if devices:
        if len(devices) != run.world.world_size:
            return None  # a rank's device is missing: no guess
        pairs = [(d.get("name"), d.get("sm_count")) for d in devices]
    else:
        pairs = [(environment.get("gpu_model"), environment.get("gpu_sm_count"))] * run.world.world_size
    # fp32 runs turn TF32 off explicitly (PrecisionPolicy), so the fp32 peak is the right one.
    return total_peak_flops(pairs, run.config.precision)


def flop_metrics(cost: Mapping[str, Any], run: ResolvedRun, environment: Mapping[str, Any],
                 total_images_per_sec: float | None,
                 devices: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """FLOPs per image, achieved TFLOP/s and, on GPUs with a known peak, the peak and MFU
    (see :func:`run_peak_flops`)."""
    from cnnbench.machine.peaks import achieved_flops_per_s

    cfg = run.config
    per_image = cost["forward_flops"] if cfg.forward_only else cost["train_flops"]
    achieved = achieved_flops_per_s(per_image, total_images_per_sec)
    peak = run_peak_flops(run, environment, devices)
    return {
        "train_flops_per_image": cost["train_flops"],
        "forward_flops_per_image": cost["forward_flops"],
        "achieved_tflops": achieved / 1e12 if achieved is not None else None,
        "peak_tflops": peak / 1e12 if peak is not None else None,
        "mfu": achieved / peak if achieved is not None and peak else None,
    }
