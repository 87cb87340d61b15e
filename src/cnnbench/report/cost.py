"""The model cost table (the first table of vendor CPU-comparison reports) from the records' ``model_cost``.

Imported records carry no cost: their models show ``—``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cnnbench.report import fields as F
from cnnbench.report.points import PointSet
from cnnbench.report.table import Cell, Table, label_cell, missing

COLUMNS = ["model", "input size", "params", "param memory", "feature memory", "forward FLOPs",
           "train FLOPs/image", "top-1 / top-5 error (%)"]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _input_size(value: Any) -> Cell:
    if isinstance(value, (list, tuple)):
        dims = [int(v) for v in value if isinstance(v, (int, float))]
        hw = dims[-2:] if len(dims) >= 2 else dims
        if len(hw) == 2:
            return Cell(f"{hw[0]} x {hw[1]}", f"{hw[0]}x{hw[1]}")
    if _num(value) is not None:
        n = int(value)
        return Cell(f"{n} x {n}", f"{n}x{n}")
    return missing()


def _scaled(value: Any, units: tuple[tuple[float, str], ...], digits: int = 1) -> Cell:
    v = _num(value)
    if v is None:
        return missing()
    for scale, unit in units:
        if abs(v) >= scale:
            return Cell(f"{v / scale:.{digits}f} {unit}", v)
    return Cell(f"{v:.0f}", v)


_COUNT = ((1e9, "G"), (1e6, "M"), (1e3, "k"))
_FLOPS = ((1e12, "TFLOPs"), (1e9, "GFLOPs"), (1e6, "MFLOPs"), (1e3, "kFLOPs"))


def _mib(value: Any) -> Cell:
    v = _num(value)
    return missing() if v is None else Cell(f"{v:.1f} MiB", v)


def _errors(cost: Mapping[str, Any]) -> Cell:
    top1, top5 = _num(cost.get("top1_error")), _num(cost.get("top5_error"))
    if top1 is None and top5 is None:
        return missing()
    text = " / ".join("—" if v is None else f"{v:.2f}" for v in (top1, top5))
    return Cell(text, text)


def cost_table(points: PointSet) -> Table | None:
    """One row per model present; ``None`` when no record carries a model cost."""
    costs: dict[Any, Mapping[str, Any]] = {}
    for p in points.points:
        model = p.values.get(F.MODEL)
        if model in costs:
            continue
        for rec in p.records:
            cost = rec.get("model_cost")
            if isinstance(cost, Mapping) and cost:
                costs[model] = cost
                break
    if not costs:
        return None
    rows = []
    for model in points.distinct(F.MODEL):
        cost = costs.get(model)
        if cost is None:
            rows.append([label_cell(model)] + [missing() for _ in COLUMNS[1:]])
            continue
        rows.append([
            label_cell(model),
            _input_size(cost.get("input_size")),
            _scaled(cost.get("params"), _COUNT),
            _mib(cost.get("param_memory_mib")),
            _mib(cost.get("feature_memory_mib")),
            _scaled(cost.get("forward_flops"), _FLOPS),
            _scaled(cost.get("train_flops"), _FLOPS),
            _errors(cost),
        ])
    notes = ["Feature memory: all activations of one forward pass at batch 1, fp32. FLOPs = 2 x MACs. "
             "Error: reference ImageNet top-1 / top-5 where the model library publishes it."]
    return Table("model-cost", "Model cost", "cost", list(COLUMNS), rows, notes)
