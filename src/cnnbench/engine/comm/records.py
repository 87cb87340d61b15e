"""The records of ``cnnbench comm`` and the lines it prints, nccl-tests' table.

A record per (collective, size), with ``"kind": "comm"`` at the top level::

    config:  collective, bytes, dtype, num_devices, num_nodes, device, backend, warmup, iters
    metrics: time_s (median seconds per operation), time_s_samples (seconds per operation of each
             timed batch of ``iters`` back-to-back operations, the slowest rank's), algbw_gbps,
             busbw_gbps, spread (relative stdev of the samples), timer (``cuda events`` or
             ``host clock``), count (elements per rank's part, nccl-tests' count)

``bytes`` is the size as nccl-tests counts it (:mod:`cnnbench.engine.comm.spec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cnnbench.engine.comm.spec import BATCHES, KIND, bandwidths
from cnnbench.results.record import Record
from cnnbench.words import plural

if TYPE_CHECKING:
    from cnnbench.engine.comm.measure import Setting
    from cnnbench.engine.comm.timing import Timing


def comm_config(setting: Setting, collective: str, size: int | None) -> dict[str, Any]:
    config, world = setting.config, setting.world
    return {"collective": collective, "bytes": size, "dtype": config.dtype, "num_devices": world.world_size,
            "num_nodes": world.num_nodes, "device": setting.device.type, "backend": setting.backend,
            "warmup": config.warmup, "iters": config.iters}


def comm_record(setting: Setting, collective: str, size: int | None, timing: Timing | None, *,
                count: int | None = None, error: str | None = None) -> dict[str, Any]:
    """The record (a dict, as stored) of one collective at one size; ``error``: it did not run."""
    metrics: dict[str, Any] = {}
    if timing is not None and size is not None:
        algbw, busbw = bandwidths(collective, size, timing.median, setting.world.world_size)
        metrics = {"time_s": timing.median, "time_s_samples": list(timing.samples), "algbw_gbps": algbw,
                   "busbw_gbps": busbw, "spread": timing.spread, "timer": timing.timer}
        if count is not None:
            metrics["count"] = count
    if setting.warnings:
        metrics["warnings"] = list(setting.warnings)
    record = Record(config=comm_config(setting, collective, size), environment=dict(setting.environment),
                    metrics=metrics, status="error" if error else "ok", error=error,
                    extra={"kind": KIND, **setting.config.extra})
    return record.to_dict()


_COLUMNS = (("collective", "", 14), ("size", "(B)", 12), ("count", "(elements)", 12), ("type", "", 9),
            ("time", "(us)", 10), ("algbw", "(GB/s)", 8), ("busbw", "(GB/s)", 8), ("spread", "(%)", 7))


def table_header(setting: Setting, sizes: Sequence[int]) -> list[str]:
    """nccl-tests' header: what runs, then the column names and units."""
    config, world = setting.config, setting.world
    what = (f"# cnnbench comm: {plural(world.world_size, 'rank')} on {plural(world.num_nodes, 'node')}, "
            f"{setting.backend} on {setting.device.type}, {config.dtype}, {plural(len(sizes), 'size')} from "
            f"{sizes[0]} to {sizes[-1]} bytes; per size {config.warmup} warm-up calls, then "
            f"{plural(BATCHES, 'timed batch', 'timed batches')} of {config.iters} back-to-back calls "
            f"(time per call: the slowest rank's, median of the batches)")
    names = "#" + " ".join(f"{name:>{width}}" for name, _, width in _COLUMNS)[1:]
    units = "#" + " ".join(f"{unit:>{width}}" for _, unit, width in _COLUMNS)[1:]
    return [what, names, units]


def table_line(record: dict[str, Any]) -> str:
    """One size of one collective, in the header's columns."""
    c, m = record["config"], record["metrics"]
    spread = m.get("spread")
    cells = (c["collective"], str(c["bytes"]), str(m.get("count", "")), c["dtype"], f"{m['time_s'] * 1e6:.2f}",
             f"{m['algbw_gbps']:.4f}", f"{m['busbw_gbps']:.4f}", "—" if spread is None else f"{spread * 100:.1f}")
    return " ".join(f"{cell:>{width}}" for cell, (_, _, width) in zip(cells, _COLUMNS, strict=True))


def summary_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """Per collective, the average bus bandwidth over its sizes (nccl-tests' last line)."""
    lines = []
    for collective in dict.fromkeys(r["config"]["collective"] for r in records):
        ok = [r["metrics"]["busbw_gbps"] for r in records
              if r["config"]["collective"] == collective and r["status"] == "ok"]
        if ok:
            lines.append(f"# {collective}: average bus bandwidth {sum(ok) / len(ok):.4f} GB/s over "
                         f"{plural(len(ok), 'size')}")
    return lines
