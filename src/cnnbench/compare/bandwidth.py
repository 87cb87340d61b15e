"""``cnnbench compare`` of ``cnnbench comm`` records: bus bandwidth per collective and size.

Two records match when they agree on the collective, the size, the setting (ranks, nodes,
back end, device, dtype) and the machine (unless ``across_machines``). Each side's figure is
the median busbw of its records; the test is :func:`cnnbench.analysis.significance.compare_runs`'s:
on the records' busbw when both sides have two or more (repeats), else on the timed batches
of each record (``metrics.time_s_samples``, seconds per operation of the same size, whose ratio
is that of the bandwidths). No torch here.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.samples import RunSample
from cnnbench.analysis.significance import NONE, Comparison, compare_runs
from cnnbench.results.csv_out import csv_text
from cnnbench.results.record import record_kind
from cnnbench.words import plural, size_text

_UNIT = F.FIELDS[F.BUSBW].unit
"""Bus bandwidth's unit, as the field registry declares it."""
_BUSBW = F.field(F.BUSBW).label
"""Its label (``busbw``), as the registry declares it."""
HEADER = ("collective", "size", "setting", F.field(F.MACHINE).label, f"baseline {_BUSBW} {_UNIT}",
          f"candidate {_BUSBW} {_UNIT}", "ratio", "95% interval", "p", "test", "result")
_SETTING = ("num_devices", "num_nodes", "backend", "device", "dtype")


@dataclass
class BandwidthPair:
    """One collective at one size in one setting on both sides."""

    collective: str
    bytes: int
    setting: str
    machine: str
    base: float
    cand: float
    comparison: Comparison

    @property
    def name(self) -> str:
        """``all_reduce · 1 MiB · 2 ranks, gloo on cpu, float32`` (busbw)."""
        return f"{self.collective} · {size_text(self.bytes)} · {self.setting} (busbw)"


def _sample(record: Mapping[str, Any]) -> RunSample | None:
    metrics = record.get("metrics") or {}
    busbw = metrics.get("busbw_gbps")
    if record.get("status") != "ok" or not isinstance(busbw, (int, float)) or busbw <= 0:
        return None
    times = [t for t in metrics.get("time_s_samples") or [] if isinstance(t, (int, float)) and t > 0]
    return RunSample(float(busbw), blocks=times)


def _key(record: Mapping[str, Any], across_machines: bool) -> tuple[Any, ...] | None:
    config = record.get("config") or {}
    if record_kind(record) != "comm" or not isinstance(config.get("bytes"), int):
        return None
    machine = None if across_machines else F.hashable(F.get_value(record, F.MACHINE))
    return (str(config.get("collective")), config["bytes"], *(F.hashable(config.get(k)) for k in _SETTING), machine,
            timing_method(record))


OLD_TIMING = "host clock, one call a sample"
"""How a comm record without ``metrics.timer`` was timed (before batches of back-to-back calls)."""


def timing_method(record: Mapping[str, Any]) -> str:
    """How a comm record's samples were timed: its ``metrics.timer`` (``cuda events``, ``host
    clock``: a batch of ``iters`` back-to-back calls each), else :data:`OLD_TIMING`. Records timed
    two ways are never paired: launch and sync overhead in every sample of one side only would read
    as a speed-up at small sizes."""
    timer = (record.get("metrics") or {}).get("timer")
    return str(timer) if isinstance(timer, str) and timer else OLD_TIMING


def _setting(key: tuple[Any, ...]) -> str:
    devices, nodes, backend, device, dtype = key[2:7]
    where = plural(devices, "rank") if isinstance(devices, int) else f"{F.text(devices)} ranks"
    if isinstance(nodes, int) and nodes > 1:
        where += f" on {plural(nodes, 'node')}"
    return f"{where}, {F.text(backend)} on {F.text(device)}, {F.text(dtype)}"


def _machines(records: list[Mapping[str, Any]]) -> str:
    return "/".join(dict.fromkeys(F.text(F.get_value(r, F.MACHINE)) for r in records))


def compare_bandwidth(baseline: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]], *,
                      noise: float, alpha: float, across_machines: bool = False) -> list[BandwidthPair]:
    """The comm records of both sides matched (see the module) and each pair tested."""
    sides: list[dict[tuple[Any, ...], list[Mapping[str, Any]]]] = [defaultdict(list), defaultdict(list)]
    for side, records in zip(sides, (baseline, candidate), strict=True):
        for r in records:
            key = _key(r, across_machines)
            if key is not None:
                side[key].append(r)
    pairs = []
    for key in sorted(sides[0].keys() & sides[1].keys(), key=lambda k: tuple(F.sort_key(v) for v in k)):
        base_recs, cand_recs = sides[0][key], sides[1][key]
        base = [s for s in map(_sample, base_recs) if s is not None]
        cand = [s for s in map(_sample, cand_recs) if s is not None]
        if not base or not cand:
            continue
        comparison = compare_runs(base, cand, noise, alpha)
        machine = _machines(base_recs)
        if across_machines and _machines(cand_recs) != machine:
            machine = f"{machine} → {_machines(cand_recs)}"
        pairs.append(BandwidthPair(key[0], key[1], _setting(key), machine, statistics.median([s.rate for s in base]),
                                   statistics.median([s.rate for s in cand]), comparison))
    return pairs


def _cells(p: BandwidthPair) -> list[str]:
    c = p.comparison
    interval = "—" if c.basis == NONE or c.low is None or c.high is None else f"{c.low:.3f}–{c.high:.3f}"
    pvalue = "—" if c.p is None else ("<0.001" if c.p < 0.001 else f"{c.p:.3f}")
    test = f"{c.basis}, {c.n_base} vs {plural(c.n_cand, 'run')}" if c.basis != NONE else "—"
    ratio = "—" if c.ratio is None else f"{c.ratio:.3f}"
    return [p.collective, size_text(p.bytes), p.setting, p.machine, f"{p.base:.3g}", f"{p.cand:.3g}", ratio, interval,
            pvalue, test, c.verdict]


def bandwidth_rows(pairs: Sequence[BandwidthPair]) -> tuple[list[str], list[list[str]]]:
    return list(HEADER), [_cells(p) for p in pairs]


NOTE = ("ratio = candidate / baseline bus bandwidth (nccl-tests' busbw, medians over records; > 1: the candidate "
        "is faster); test 'repeats' on the records' busbw when both sides have two or more, else 'steps' on the "
        "timed iterations of each record.")


def bandwidth_records(pairs: Sequence[BandwidthPair]) -> list[dict[str, Any]]:
    """The pairs as JSON/CSV rows (full values)."""
    return [{"collective": p.collective, "bytes": p.bytes, "setting": p.setting, "machine": p.machine,
             "baseline_busbw_gbps": p.base, "candidate_busbw_gbps": p.cand, "ratio": p.comparison.ratio,
             "ci_low": p.comparison.low, "ci_high": p.comparison.high, "p_value": p.comparison.p,
             "test": p.comparison.basis, "significant": p.comparison.significant, "verdict": p.comparison.verdict}
            for p in pairs]


def bandwidth_csv(pairs: Sequence[BandwidthPair]) -> str:
    rows = bandwidth_records(pairs)
    columns = list(rows[0]) if rows else ["collective", "bytes", "ratio", "verdict"]
    return csv_text(columns, (["" if r[k] is None else r[k] for k in columns] for r in rows))


def bandwidth_markdown(pairs: Sequence[BandwidthPair]) -> str:
    from cnnbench.words import escape_markdown

    header, body = bandwidth_rows(pairs)
    right = {h for h in header if _BUSBW in h} | {"ratio", "95% interval", "p"}
    out = ["| " + " | ".join(escape_markdown(h) for h in header) + " |",
           "|" + "|".join("--:" if h in right else ":--" for h in header) + "|"]
    out += ["| " + " | ".join(escape_markdown(c) for c in r) + " |" for r in body]
    return "\n".join(out + ["", f"_{escape_markdown(NOTE)}_"]) + "\n"


def print_bandwidth(pairs: Sequence[BandwidthPair]) -> None:
    """The bandwidth pairs as a terminal table (:func:`cnnbench.terminal.print_table`)."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from cnnbench.terminal import print_table
    from cnnbench.words import one_line

    header, body = bandwidth_rows(pairs)
    table = Table(*header, title="Bus bandwidth (cnnbench comm)", caption=escape(NOTE), caption_justify="left")
    for col in table.columns:
        if str(col.header) in ("ratio", "95% interval", "p") or _BUSBW in str(col.header):
            col.justify = "right"
    for r in body:
        table.add_row(*(Text(one_line(c)) for c in r))  # a label's text, as it is (never markup nor escapes)
    print_table(table)
