"""The forward/backward split: a few extra training steps after the timed window, each phase timed apart.

``cnnbench predict`` needs to know how much of a step is the backward pass (where a
data-parallel strategy overlaps its gradient exchange) and how much is the optimizer's update.
The timed steps cannot say: they are timed whole, with nothing waiting between phases. So,
after the timed window (its figures are final by then: none of these steps is in
``step_times_s``, the wall clock or the images/sec), :func:`measure_phase_split` runs
:data:`SPLIT_STEPS` more training steps through the step's own phases
(:class:`~cnnbench.engine.step.TrainPhases`), waits for the device at each phase boundary
(:func:`~cnnbench.engine.backend.phase_timing_syncs`), and keeps each phase's median:

* ``forward_time_s``: gradients zeroed, forward pass and loss (under autocast);
* ``backward_time_s``: the backward pass (scaled under amp_fp16);
* ``optimizer_time_s``: the optimizer step;
* ``phase_split_steps``: how many steps the medians are of;
* ``phase_split_error``: instead of them, why the split could not be measured (the run's own
  figures stand).

The waits add the device's idle time at each boundary (a few kernel launches), so the three
sum to a little more than an undisturbed step. Measured on single-device training runs of a
fixed step count only (:func:`splits_phases`): with several workers the backward pass holds
the gradient exchange, and a training-to-accuracy run's steps belong to its epochs.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from cnnbench.data.source import InputSource
from cnnbench.engine.backend import phase_timing_syncs
from cnnbench.engine.step import TrainPhases
from cnnbench.words import duration

SPLIT_STEPS = 5
"""Extra steps whose phases are timed (medians kept)."""
PHASES = ("forward_time_s", "backward_time_s", "optimizer_time_s")


def splits_phases(*, training: bool, world_size: int, epochs: bool) -> bool:
    """Whether a run measures the split: single-device training runs of a fixed step count."""
    return training and world_size == 1 and not epochs


def measure_phase_split(phases: TrainPhases, batches: InputSource, device: torch.device,
                        steps: int = SPLIT_STEPS) -> dict[str, Any]:
    """Median seconds of each phase over ``steps`` training steps (batches taken untimed)."""
    times: dict[str, list[float]] = {name: [] for name in PHASES}
    sync = _synchronizer(device)
    for _ in range(steps):
        images, labels = next(batches)
        sync()
        t0 = time.perf_counter()
        _, loss = phases.forward(images, labels)
        sync()
        t1 = time.perf_counter()
        phases.backward(loss)
        sync()
        t2 = time.perf_counter()
        phases.update()
        sync()
        t3 = time.perf_counter()
        for name, seconds in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            times[name].append(seconds)
    split: dict[str, Any] = {name: statistics.median(values) for name, values in times.items()}
    split["phase_split_steps"] = steps
    return split


def _synchronizer(device: torch.device) -> Any:
    if phase_timing_syncs(device.type):
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def split_line(split: dict[str, Any]) -> str:
    """The log line: ``Forward/backward split (5 steps after the timed ones): forward 12.1 ms, ...``."""
    parts = ", ".join(f"{name.removesuffix('_time_s')} {duration(split[name])}" for name in PHASES)
    return f"Forward/backward split ({split['phase_split_steps']} steps after the timed ones): {parts}"
