"""``report --predict``: each scaling series' predicted images/sec, efficiency and bound beside the
measured ones (:mod:`cnnbench.predict`), and an observation where measured scaling falls short.

A series' prediction starts from its own 1-device run (the records behind its cells) with the
links ``cnnbench predict`` would choose without flags (a ``cnnbench comm`` record of the machine
among the series' records, else the recorded topology or the GPU's name), for the strategy the
series ran (``variable_update``). A series without a 1-device run, or whose model has no
parameter count, gets no prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cnnbench.analysis.marks import warnings_behind
from cnnbench.predict import STRATEGIES, PredictError, PredictOptions, predict_scaling
from cnnbench.report.observations import Observation
from cnnbench.report.tables.scaling_series import ScalingGroup, Series
from cnnbench.report.tables.tf_models import tf_cost


def parameter_count(model: str) -> int | None:
    """A tf_cnn_benchmarks name's torchvision parameter count (records of cnnbench carry their own)."""
    found = tf_cost(model)
    return int(found[0]["params"]) if found is not None else None


def predict_series(series: Sequence[Series], comm: Sequence[Any] = ()) -> None:
    """Fill each series' ``predicted``: device count -> (images/sec, efficiency, bound)."""
    for s in series:
        runs = [r for m in s.measures.values() for r in m.runs]
        if not runs or 1 not in s.measures:
            continue
        strategy = str((runs[0].get("config") or {}).get("variable_update") or "replicated")
        if strategy not in STRATEGIES:
            continue
        options = PredictOptions(devices=tuple(sorted(s.measures)), strategies=(strategy,),
                                 devices_per_node=_devices_per_node(runs))
        try:
            result = predict_scaling([*runs, *comm], options, parameter_count)
        except (PredictError, ValueError):
            continue
        for row in result.rows:
            s.predicted[row.devices] = (row.images_per_sec, row.efficiency, row.bound)


def _devices_per_node(runs: Sequence[Any]) -> int:
    """Devices per node as the series' records ran them (``num_devices / num_nodes``; one node
    unless they say otherwise)."""
    per_node = [int((r.get("config") or {}).get("num_devices") or 1) // max(1, int(
        (r.get("config") or {}).get("num_nodes") or 1)) for r in runs]
    return max(1, *per_node)


def predicted_text(s: Series, n: int) -> str:
    """`` (predicted 93%, compute)`` after a summary cell, or nothing."""
    if n not in s.predicted:
        return ""
    _, efficiency, bound = s.predicted[n]
    return f" (predicted {efficiency * 100:.0f}%, {bound})"


def prediction_observations(groups: Sequence[ScalingGroup], noise: float) -> list[Observation]:
    """Where a series' measured efficiency falls short of the predicted by more than ``noise``:
    ``resnet50 (...) falls short of the prediction beyond 4 devices: measured 71% vs predicted 93%
    efficiency at 8 devices, where the model expects it communication-bound (...)``."""
    out = []
    for g in groups:
        for s in g.series:
            short = [n for n in sorted(s.efficiency) if n in s.predicted and n != s.base
                     and s.predicted[n][1] - s.efficiency[n] > noise]
            if not short:
                continue
            last = short[-1]
            _, predicted, bound = s.predicted[last]
            before = max((n for n in s.efficiency if n < short[0]), default=s.base)
            out.append(Observation(
                f"{s.label} ({g.name}) falls short of the prediction beyond {before} "
                f"device{'s' if before != 1 else ''}: measured {s.efficiency[last] * 100:.0f}% vs predicted "
                f"{predicted * 100:.0f}% efficiency at {last} devices, where the model expects it {bound}-bound "
                f"(short by more than the {noise * 100:.0f}% noise; docs/predict.md says what it assumes).",
                warnings=warnings_behind([s.measures.get(n) for n in short]
                                         + ([s.measures.get(s.base)] if s.base is not None else []))))
    return out
