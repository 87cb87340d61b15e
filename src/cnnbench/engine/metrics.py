"""The metrics phase: from what the loop measured to the record's ``metrics``.

Throughput statistics follow tf_cnn_benchmarks (:mod:`cnnbench.engine.stats`);
``total_images_per_sec`` is images over the wall clock of the timed span. FLOP rates come
from the model's cost (a shape-only trace) and, on a GPU in the table of known peaks, MFU.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from cnnbench.engine.loop import LoopResult
from cnnbench.engine.resolve import ResolvedRun
from cnnbench.engine.stats import throughput_stats

log = logging.getLogger(__name__)


def loop_metrics(loop: LoopResult, images_per_step: int, *, first_step_s: float | None,
                 compiled: bool) -> dict[str, Any]:
    """Throughput, step times, input wait and losses of one timed loop."""
    stats = throughput_stats(loop.step_times_s, images_per_step)
    losses = loop.losses
    diverged = any(not math.isfinite(x) for x in losses)
    return {
        "total_images_per_sec": images_per_step * len(loop.step_times_s) / loop.wall_time_s,
        **stats.as_metrics(),
        "step_times_s": loop.step_times_s,
        "wall_time_s": loop.wall_time_s,
        "progress_time_s": loop.progress_time_s,
        "first_step_time_s": first_step_s,
        "compile_time_s": first_step_s if compiled else None,
        "input_wait_fraction": loop.input_wait_fraction,
        "loss_first": _finite_or_none(losses[0]) if losses else None,
        "loss_last": _finite_or_none(losses[-1]) if losses else None,
        "diverged": diverged,
    }


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


def flop_metrics(cost: Mapping[str, Any], run: ResolvedRun, environment: Mapping[str, Any],
                 total_images_per_sec: float | None) -> dict[str, Any]:
    """FLOPs per image, achieved TFLOP/s and, on a GPU with a known peak, MFU."""
    from cnnbench.machine.peaks import achieved_flops_per_s, mfu

    cfg = run.config
    per_image = cost["forward_flops"] if cfg.forward_only else cost["train_flops"]
    achieved = achieved_flops_per_s(per_image, total_images_per_sec)
    gpu = environment.get("gpu_model") if run.device.type == "cuda" else None
    return {
        "train_flops_per_image": cost["train_flops"],
        "forward_flops_per_image": cost["forward_flops"],
        "achieved_tflops": achieved / 1e12 if achieved is not None else None,
        # fp32 runs turn TF32 off explicitly (PrecisionPolicy), so the fp32 peak is the right one.
        "mfu": mfu(achieved, gpu, cfg.precision, num_devices=run.world.world_size) if achieved is not None else None,
    }
