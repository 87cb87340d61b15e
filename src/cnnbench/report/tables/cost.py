"""The model cost table (the first table of vendor CPU-comparison reports) from the records' ``model_cost``.

Imported tf_cnn_benchmarks records carry no cost: their model names (``inception3``,
``resnet50``, ...) take the cost of the torchvision model of the same architecture
(:mod:`cnnbench.report.tables.tf_models`; a note names the model and any difference); other
models without a cost show ``—``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.points import PointSet
from cnnbench.report.kinds import TableKind, register, table_section
from cnnbench.report.numbers import significant
from cnnbench.report.table import Cell, Table, label_cell, missing
from cnnbench.report.tables.tf_models import UNMAPPED, tf_cost

COLUMNS = [*F.headers(F.MODEL), "input size", "params", "param memory (MiB)", "feature memory (MiB)", "forward MACs",
           "forward FLOPs", "train FLOPs/image", "top-1 / top-5 error (%)"]
"""MACs and FLOPs (= 2 x MACs) apart, as ``cnnbench models`` shows them: tables that write
"FLOPs" for multiply-adds are read against the MACs column. Memory in MiB (2**20 bytes), which
the "MB" of published cost tables are."""


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
_MACS = ((1e12, "TMACs"), (1e9, "GMACs"), (1e6, "MMACs"), (1e3, "kMACs"))


def _mib(value: Any) -> Cell:
    """Memory in MiB (the column says the unit), to three significant digits: ``97.5``, ``0.0201``."""
    v = _num(value)
    return missing() if v is None else Cell(significant(v, 3), v)


def _macs(cost: Mapping[str, Any]) -> Any:
    """Forward MACs: recorded, else half the forward FLOPs (the tf_cnn_benchmarks stand-ins)."""
    macs, flops = _num(cost.get("forward_macs")), _num(cost.get("forward_flops"))
    return macs if macs is not None else (flops / 2 if flops is not None else None)


def _errors(cost: Mapping[str, Any]) -> Cell:
    top1, top5 = _num(cost.get("top1_error")), _num(cost.get("top5_error"))
    if top1 is None and top5 is None:
        return missing()
    text = " / ".join("—" if v is None else f"{v:.2f}" for v in (top1, top5))
    return Cell(text, text)


def cost_table(points: PointSet) -> Table | None:
    """One row per model present; ``None`` when no record carries a model cost."""
    costs, mapped, unmapped = _costs(points)
    if not costs:
        return None
    rows = [_row(model, costs.get(model)) for model in sorted(points.distinct(F.MODEL), key=F.sort_key)]
    return Table("model-cost", "Model cost", "cost", list(COLUMNS), rows, _notes(costs, mapped, unmapped))


def _costs(points: PointSet) -> tuple[dict[Any, Mapping[str, Any]], dict[Any, tuple[str, str]], dict[Any, str]]:
    """Per model: its recorded cost; for imported tf_cnn_benchmarks models, the torchvision model
    measured in its place (``mapped``: target and how) or why there is none (``unmapped``)."""
    costs: dict[Any, Mapping[str, Any]] = {}
    mapped: dict[Any, tuple[str, str]] = {}
    unmapped: dict[Any, str] = {}
    for p in points.points:
        model = p.values.get(F.MODEL)
        if model in costs:
            continue
        cost = _recorded_cost(p.records)
        if cost is not None:
            costs[model] = cost
            mapped.pop(model, None)
            continue
        if (p.values.get(F.SOURCE) or "cnnbench") == "cnnbench":
            continue
        found = tf_cost(model)
        if found is not None and model not in mapped:
            mapped[model] = (found[1], found[2])
        elif str(model) in UNMAPPED:
            unmapped[model] = UNMAPPED[str(model)]
    for model in mapped:
        costs[model] = tf_cost(model)[0]  # type: ignore[index]
    return costs, mapped, unmapped


def _recorded_cost(records: Any) -> Mapping[str, Any] | None:
    for rec in records:
        cost = rec.get("model_cost")
        if isinstance(cost, Mapping) and cost:
            return cost
    return None


def _row(model: Any, cost: Mapping[str, Any] | None) -> list[Cell]:
    if cost is None:
        return [label_cell(model)] + [missing() for _ in COLUMNS[1:]]
    return [
        label_cell(model),
        _input_size(cost.get("input_size")),
        _scaled(cost.get("params"), _COUNT),
        _mib(cost.get("param_memory_mib")),
        _mib(cost.get("feature_memory_mib")),
        _scaled(_macs(cost), _MACS),
        _scaled(cost.get("forward_flops"), _FLOPS),
        _scaled(cost.get("train_flops"), _FLOPS),
        _errors(cost),
    ]


def _notes(costs: Mapping[Any, Any], mapped: Mapping[Any, tuple[str, str]], unmapped: Mapping[Any, str]) -> list[str]:
    notes = ["Per image, fp32; MiB = 2^20 bytes. Feature memory: all activations of one forward pass at batch 1. "
             "MACs = multiply-accumulates; FLOPs = 2 x MACs (tables that write FLOPs for multiply-adds "
             "match the MACs column). "
             "Error: reference ImageNet top-1 / top-5 where the model library publishes it."]
    if mapped:
        parts = [f"{m} = {target}" + (f" ({how})" if how else "") for m, (target, how) in
                 sorted(mapped.items(), key=lambda kv: F.sort_key(kv[0]))]
        notes.append("Imported tf_cnn_benchmarks models, measured on the torchvision model of the same "
                     "architecture: " + "; ".join(parts) + ".")
    for model, why in sorted(unmapped.items(), key=lambda kv: F.sort_key(kv[0])):
        if model not in costs:
            notes.append(f"Imported tf_cnn_benchmarks {model}: no cost, as {why}.")
    return notes


register(TableKind("cost", 80, lambda inputs: cost_table(inputs.points), table_section("Model cost")))
