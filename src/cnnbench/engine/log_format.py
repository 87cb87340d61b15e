"""Log lines in tf_cnn_benchmarks' format, so existing log tooling keeps working.

The importer for tf_cnn_benchmarks logs reads these lines back, for ours as for theirs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from cnnbench.engine.stats import ThroughputStats
from cnnbench.terminal import is_terminal
from cnnbench.words import one_line, plural

RULE = "-" * 64


def threads_text(threads: int, cores: int, workers_here: int, *, fixed: bool = False) -> str:
    """The header's ``Threads:`` value: torch threads each worker runs, and why that many
    (``fixed``: set by ``--threads-per-worker``)."""
    if fixed:
        return (f"{threads} per worker (--threads-per-worker; {plural(workers_here, 'worker')} on "
                f"{plural(cores, 'core')} on this node)")
    if workers_here > 1:
        return f"{threads} per worker ({plural(cores, 'core')} split among {workers_here} workers on this node)"
    return f"{threads} ({plural(cores, 'core')})"


def device_names(config: Mapping[str, Any]) -> list[str]:
    """The devices of the run on this node: ``--gpu-indices`` when given, else 0..N-1 of the
    node's share of ``num_devices``."""
    per_node = max(1, config["num_devices"] // max(1, config.get("num_nodes") or 1))
    indices = config.get("gpu_indices")
    if config["device"] == "cuda" and indices:
        picked = [int(i) for i in str(indices).split(",")][:per_node]
    else:
        picked = list(range(per_node))
    return [f"{config['device']}:{i}" for i in picked]


def header_lines(config: Mapping[str, Any], *, framework: str, dataset: str, threads: str | None = None,
                 notes: Mapping[str, Any] | None = None) -> list[str]:
    """The run's header; ``threads``: the ``Threads:`` row (CPU runs, :func:`threads_text`);
    ``notes``: what the run chose (:meth:`cnnbench.engine.prepare.Prepared.notes`): the cuDNN
    row on CUDA, and the optimizer's implementation when it is not torch's default."""
    per_device = config["batch_size"]
    devices = config["num_devices"]
    nodes = config.get("num_nodes") or 1
    names = str(device_names(config)) + (f" on each of {nodes} nodes" if nodes > 1 else "")
    notes = notes or {}
    rows = [
        ("PyTorch:", framework),
        ("Model:", config["model"]),
        ("Dataset:", dataset),
        ("Mode:", "forward-only" if config["forward_only"] else "training"),
        ("Batch size:", f"{per_device * devices} global"),
        ("", f"{per_device} per device"),
        ("Image size:", f"{config['image_size']}x{config['image_size']}"),
        ("Num batches:", str(config["num_batches"])) if config.get("num_epochs") is None
        else ("Num epochs:", str(config["num_epochs"])),
        ("Num warmup:", str(config["num_warmup_batches"])),
        ("Devices:", names),
        ("Data format:", config["data_format"]),
        ("Precision:", config["precision"] + (" (torch.compile)" if config["compile"] else "")),
        ("Variables:", config["variable_update"]),
    ]
    if config.get("optimizer"):  # none for inference
        implementation = notes.get("optimizer_implementation")
        shown = implementation if implementation not in (None, "default") else None
        rows.insert(-1, ("Optimizer:", config["optimizer"] + (f" ({shown})" if shown else "")))
        if notes.get("step_syncs_host"):
            rows.insert(-1, ("", "no fused implementation: amp_fp16's scaler waits for the device every step"
                             if config["precision"] == "amp_fp16" else
                             "rank 0 updates the weights on the host: each step waits for the device"))
    if config["device"] == "cuda":
        rows.append(("cuDNN:", "benchmark (autotuned in warm-up)" if notes.get("cudnn_benchmark")
                     else "heuristic algorithms (--no-cudnn-benchmark)"))
    if config.get("all_reduce"):
        rows.append(("AllReduce:", config["all_reduce"]))
    if threads is not None:
        rows.append(("Threads:", threads))
    # a data folder's, a model's name as one line a terminal shows as it is (someone else's folder)
    return [f"{k:<12} {one_line(v)}".rstrip() if k else f"{'':<12} {one_line(v)}" for k, v in rows] + ["=========="]


ETA_FROM_S = 60.0
"""A run whose timed steps are expected to take longer than this shows an ETA on its progress
lines (on a terminal: :func:`eta_shown`)."""


def eta_shown() -> bool:
    """Whether progress lines may end with an ETA: only when stdout is a terminal. In a log or
    a pipe they keep tf_cnn_benchmarks' exact fields (its fields after the loss are top_1 and
    top_5 accuracies: a tool reading them must not get ``eta 2m 05s``)."""
    return is_terminal(sys.stdout)


def step_line(step: int, stats: ThroughputStats, loss: float, eta_s: float | None = None) -> str:
    """One progress line; with ``eta_s``, a last tab-separated field ``eta 2m 05s`` (for a
    terminal only: :func:`eta_shown`)."""
    line = f"{step}\timages/sec: {stats.mean:.1f} +/- {stats.stderr:.1f} (jitter = {stats.jitter:.1f})\t{loss:.3f}"
    return line if eta_s is None else f"{line}\teta {duration(eta_s)}"


def eta_s(step: int, total_steps: int, step_times_s: Sequence[float]) -> float | None:
    """Seconds left for the timed steps after ``step`` of ``total_steps`` at the mean step
    time so far, or None when the run is short (under :data:`ETA_FROM_S` in all) or done."""
    if not step_times_s or step >= total_steps:
        return None
    mean = sum(step_times_s) / len(step_times_s)
    if mean * total_steps < ETA_FROM_S:
        return None
    return mean * (total_steps - step)


def duration(seconds: float) -> str:
    """``45s``, ``2m 05s``, ``1h 03m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def total_lines(total_images_per_sec: float) -> list[str]:
    """The closing block: a rule, ``total images/sec: X``, a rule.

    It is the log's last three lines, as in tf_cnn_benchmarks' logs, whose parsers take the
    run's figure from the second-to-last line: so the engine does not print it; whoever
    reports a record prints its warnings and path first, then this (:func:`closing_lines`)."""
    return [RULE, f"total images/sec: {total_images_per_sec:.2f}", RULE]


def closing_lines(metrics: Mapping[str, Any]) -> list[str]:
    """The closing block of a record's metrics (none when the run measured no figure)."""
    value = metrics.get("total_images_per_sec")
    return total_lines(float(value)) if isinstance(value, (int, float)) else []
