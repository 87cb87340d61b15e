"""``cnnbench predict``'s output: the rows as a table's cells, CSV or JSON, and the lines that say
what each prediction assumed (links, split, calibration)."""

from __future__ import annotations

import json
from typing import Any

from cnnbench.predict.scaling import PredictResult, Row
from cnnbench.results import fields as R
from cnnbench.results.csv_out import csv_text

COLUMNS = (R.field(R.MODEL).label, "configuration", "strategy", R.field(R.DEVICES).label, "nodes",
           R.field(R.IPS).label, "speedup", "efficiency", "bound", "measured", "error", "baseline error")
SETUP_LABELS = (("host_cpus", "host cpus"), ("threads_per_worker", "threads/worker"),
                ("synthetic_location", "synthetic"), ("num_workers", "loader workers"))
"""Fields of the configuration that set up the host (shown where recorded)."""


def configuration(row: Row) -> str:
    """``LambdaCloud-RTX_A6000, amp_fp16, batch 512`` (+ data, source where they say something)."""
    key = dict(row.base.key)
    parts = [str(key.get("machine")), str(key.get("precision") or "fp32"), f"batch {key.get('batch_size')}"]
    if key.get("data_name") not in (None, "synthetic"):
        parts.append(str(key["data_name"]))
    if key.get("source") not in (None, "cnnbench"):
        parts.append(str(key["source"]))
    parts += [f"{label} {key[name]}" for name, label in SETUP_LABELS if key.get(name) is not None]
    return ", ".join(parts)


def _ips(value: float) -> str:
    """Images/sec in the field registry's format for it."""
    return R.field(R.IPS).show(value)


def cells(row: Row) -> list[str]:
    measured = "" if row.measured is None else _ips(row.measured)
    error = "" if row.error is None else f"{row.error:+.1%}"
    naive = "" if row.baseline_error is None else f"{row.baseline_error:+.1%}"
    return [row.base.model, configuration(row), row.strategy, str(row.devices), str(row.nodes),
            _ips(row.images_per_sec), f"{row.speedup:.2f}", f"{row.efficiency:.0%}", row.bound, measured, error,
            naive]


def as_csv(result: PredictResult) -> str:
    rows = [r.as_dict() for r in result.rows]
    if not rows:
        return ""
    columns = list(rows[0])
    return csv_text(columns, ([row.get(c) for c in columns] for row in rows))


def as_json(result: PredictResult) -> str:
    return json.dumps({"rows": [r.as_dict() for r in result.rows], "assumptions": assumption_lines(result),
                       "calibration": calibration_data(result), "baseline": result.verdicts}, indent=2)


def assumption_lines(result: PredictResult) -> list[str]:
    """What each machine's links are, and where each base's split came from."""
    lines = []
    for machine, (intra, inter) in result.links.items():
        lines.append(f"{machine}: within a node {intra.describe()}; between nodes {inter.describe()}")
    splits = sorted({(b.machine, b.model, b.split_source) for b in result.bases})
    for machine, model, source in splits:
        lines.append(f"{model} on {machine}: forward/backward split {source}")
    return lines


def calibration_data(result: PredictResult) -> list[dict[str, Any]]:
    return [{"machine": machine, "link": fit.link.kind, "bandwidth_gbps": fit.link.bandwidth_gbps,
             "rms_error": fit.rms,
             "residuals": [{"model": r.model, "strategy": r.strategy, "devices": r.devices, "nodes": r.nodes,
                            "measured": r.measured, "predicted": r.predicted, "error": r.error}
                           for r in fit.residuals]}
            for machine, fits in result.fits.items() for fit in fits]


def calibration_lines(result: PredictResult) -> list[str]:
    """Per fitted link: the bandwidth, the fit's RMS error, and every point's residual."""
    lines = []
    for item in calibration_data(result):
        lines.append(f"{item['machine']}: {item['link']} calibrated to {item['bandwidth_gbps']:.3g} GB/s, "
                     f"RMS error {item['rms_error']:.1%} over {len(item['residuals'])} points")
        for r in item["residuals"]:
            lines.append(f"  {r['model']} {r['strategy']} {r['devices']} devices/{r['nodes']} nodes: "
                         f"measured {_ips(r['measured'])}, fitted {_ips(r['predicted'])} ({r['error']:+.1%})")
        if len(item["residuals"]) == 1:
            lines.append("  one point fixes the one number exactly: nothing checks the fit")
    return lines
