"""``--profile-steps N``: a torch.profiler trace of N steps between the warm-up and the timed steps.

:func:`profile_steps` runs N more steps under :class:`torch.profiler.profile` (CPU activity,
and CUDA on a GPU), writes the Chrome trace JSON (open it in Perfetto, ``chrome://tracing``
or TensorBoard) and returns the top operators by self time: device time on a GPU, CPU time
otherwise. The profiled steps are extra: not warm-up, not timed; the profiler has stopped
before the timed steps start. With several workers every worker runs the N steps (their
collectives must meet) and only rank 0 records them (:func:`run_steps`); its trace shows
rank 0's view, waits on the others included.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cnnbench.engine.prepare import Prepared
from cnnbench.engine.timer import synchronize
from cnnbench.results import files

log = logging.getLogger(__name__)

TOP_OPERATORS = 10
TRACE_FOLDER = "traces"


def trace_file(run_id: str) -> str:
    """Where a run's trace goes, relative to its results folder."""
    return f"{TRACE_FOLDER}/{run_id}.pt.trace.json"


@dataclass(frozen=True)
class ProfileResult:
    steps: int
    trace: str
    """The trace's path relative to the results folder."""
    top_operators: list[dict[str, Any]]
    """Rows ``{name, calls, self_cpu_ms, self_device_ms, self_share}``, largest self time first."""

    def as_metrics(self) -> dict[str, Any]:
        return {"profile_trace": self.trace, "profile_top_operators": self.top_operators}


def run_steps(prepared: Prepared, num_steps: int, device: torch.device) -> None:
    """Run steps untimed and unprofiled (the other workers' part of a profiled span)."""
    for _ in range(num_steps):
        prepared.step(*next(prepared.source))
    synchronize(device)


def profile_steps(prepared: Prepared, num_steps: int, device: torch.device, results_dir: str | Path,
                  run_id: str, *, top: int = TOP_OPERATORS) -> ProfileResult:
    """Profile ``num_steps`` steps, write the trace under ``results_dir``, return the summary."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU]
    on_device = device.type == "cuda"
    if on_device:
        activities.append(ProfilerActivity.CUDA)
    else:
        # Kineto's own log lines (start/stop markers, "gpuGetDeviceCount failed" on a machine
        # without a GPU) say nothing to a CPU run; on a GPU they can explain a trace without
        # device times (CUPTI permissions), so they stay. A value the user set wins.
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    relative = trace_file(run_id)
    path = Path(results_dir) / relative
    files.real_folder_inside(Path(results_dir), TRACE_FOLDER)  # a real folder of the store, never a link
    with profile(activities=activities) as prof:
        for i in range(num_steps):
            with record_function(f"ProfilerStep#{i}"):  # the step markers a scheduled profiler would add
                prepared.step(*next(prepared.source))
        synchronize(device)
    with tempfile.TemporaryDirectory(prefix="cnnbench-trace-") as private:
        # torch writes by path (through any link there): so in a folder of ours, then copied in as a new file
        draft = Path(private) / path.name
        prof.export_chrome_trace(str(draft))
        with files.open_regular(draft) as src, files.replacing(path, Path(results_dir)) as out:
            shutil.copyfileobj(src, out, files.WRITE_PIECE)
    log.info("profiler trace of %d steps written to %s", num_steps, path)
    return ProfileResult(num_steps, relative, top_operators(prof.key_averages(), on_device=on_device, top=top))


def top_operators(averages: Any, *, on_device: bool, top: int = TOP_OPERATORS) -> list[dict[str, Any]]:
    """The ``top`` operators of ``prof.key_averages()`` by self device time (on a GPU) or
    self CPU time, with their share of all self time of that kind."""
    rows = []
    for event in averages:
        name = str(event.key)
        if name.startswith("ProfilerStep"):
            continue  # the step markers, not operators
        rows.append({
            "name": name,
            "calls": int(event.count),
            "self_cpu_ms": event.self_cpu_time_total / 1000.0,
            "self_device_ms": event.self_device_time_total / 1000.0 if on_device else None,
        })
    key = "self_device_ms" if on_device else "self_cpu_ms"
    total = sum(r[key] for r in rows) or 1.0
    rows.sort(key=lambda r: r[key], reverse=True)
    out = []
    for r in rows[:top]:
        r["self_share"] = round(r[key] / total, 4)
        r["self_cpu_ms"] = round(r["self_cpu_ms"], 3)
        if r["self_device_ms"] is not None:
            r["self_device_ms"] = round(r["self_device_ms"], 3)
        out.append(r)
    return out
