"""Training-to-accuracy tables (as in published multi-GPU CIFAR-10 training
reports): rows = what it took, columns = device counts.

Built from records whose metrics hold ``epochs`` (a list of ``{epoch, time_s,
images_per_sec, train_loss, train_accuracy, test_accuracy, peak_device_memory_bytes}``)
and/or ``total_time_s``, ``train_accuracy``, ``test_accuracy``; memory both per device and
summed over devices (``peak_device_memory_total_bytes``), as multi-device studies count it. One table per model,
configuration and machine; repeats fold to their median. Also the test-accuracy-vs-time
curves for the plots.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.labels import Namer, data_set_note
from cnnbench.analysis.points import Point, PointSet
from cnnbench.analysis.repeat_stats import median
from cnnbench.report.document import Figure, Heading, Report, TableBlock
from cnnbench.report.kinds import Inputs, TableKind, register
from cnnbench.report.table import Cell, Table, label_cell, missing, number
from cnnbench.report.table import failed as failed_cell
from cnnbench.results.naming import device_word
from cnnbench.words import plural

MIB = 2**20
RATE_ROW = "Learning rate at the start (after --lr-scaling)"
"""Shown when a record holds it (``metrics.learning_rate``): the global batch grows with the devices."""
MEMORY_ROW = "Maximum device memory per device (MiB)"
TOTAL_MEMORY_ROW = "Maximum device memory, total over devices (MiB)"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _epochs(rec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    epochs = (rec.get("metrics") or {}).get("epochs")
    return [e for e in epochs if isinstance(e, Mapping)] if isinstance(epochs, list) else []


def is_training_record(rec: Mapping[str, Any]) -> bool:
    """Does the record hold training-to-accuracy results (epochs or a test accuracy)?"""
    m = rec.get("metrics")
    if not m:
        return False
    epochs = m.get("epochs")
    return (isinstance(epochs, list) and bool(epochs)) or _num(m.get("test_accuracy")) is not None


def total_time(rec: Mapping[str, Any]) -> float | None:
    t = _num((rec.get("metrics") or {}).get("total_time_s"))
    if t is not None:
        return t
    times = [_num(e.get("time_s")) for e in _epochs(rec)]
    known = [x for x in times if x is not None]
    return sum(known) if times and len(known) == len(times) else None


def epoch_time(rec: Mapping[str, Any]) -> float | None:
    times = [t for t in (_num(e.get("time_s")) for e in _epochs(rec)) if t is not None]
    if times:
        return sum(times) / len(times)
    total, n = total_time(rec), len(_epochs(rec))
    return total / n if total is not None and n else None


def images_per_sec(rec: Mapping[str, Any]) -> float | None:
    v = _num((rec.get("metrics") or {}).get("total_images_per_sec"))
    if v:
        return v
    xs = [x for x in (_num(e.get("images_per_sec")) for e in _epochs(rec)) if x is not None]
    return sum(xs) / len(xs) if xs else None


def _last(rec: Mapping[str, Any], name: str) -> float | None:
    v = _num((rec.get("metrics") or {}).get(name))
    if v is not None:
        return v
    for e in reversed(_epochs(rec)):
        v = _num(e.get(name))
        if v is not None:
            return v
    return None


def on_cpu(rec: Mapping[str, Any]) -> bool:
    return (rec.get("config") or {}).get("device") == "cpu"


def _memory_key(rec: Mapping[str, Any]) -> str:
    return "peak_host_memory_bytes" if on_cpu(rec) else "peak_device_memory_bytes"


def max_memory_mib(rec: Mapping[str, Any]) -> float | None:
    """Peak memory of one device (the largest worker's); on a CPU, whose memory is the host's,
    the peak host memory (RSS) of one worker process."""
    key = _memory_key(rec)
    xs = [_num(e.get(key)) for e in _epochs(rec)]
    xs.append(_num((rec.get("metrics") or {}).get(key)))
    present = [x for x in xs if x]
    return max(present) / MIB if present else None


def total_memory_mib(rec: Mapping[str, Any]) -> float | None:
    """The same peak summed over the devices (workers): what the run held in all. A record
    without the total has it only when it ran on one device."""
    key = _memory_key(rec)
    total = _num((rec.get("metrics") or {}).get(key.removesuffix("_bytes") + "_total_bytes"))
    if total:
        return total / MIB
    one_device = int((rec.get("config") or {}).get("num_devices") or 1) == 1
    return max_memory_mib(rec) if one_device else None


ROWS: list[tuple[str, Callable[[Mapping[str, Any]], float | None], int]] = [
    ("Training time (s)", total_time, 2),
    ("Average time per epoch (s)", epoch_time, 2),
    ("Images/sec", images_per_sec, 2),
    ("Training accuracy", lambda r: _last(r, "train_accuracy"), 3),
    ("Test accuracy", lambda r: _last(r, "test_accuracy"), 3),
    (MEMORY_ROW, max_memory_mib, 0),
    (TOTAL_MEMORY_ROW, total_memory_mib, 0),
    (RATE_ROW, lambda r: _num((r.get("metrics") or {}).get("learning_rate")), 4),
]
HOST_MEMORY_ROWS = {MEMORY_ROW: "Maximum host memory per worker, RSS (MiB)",
                    TOTAL_MEMORY_ROW: "Maximum host memory, total over workers, RSS (MiB)"}
"""The memory rows' labels on a CPU, where the figure is the worker processes' peak resident memory."""


def curve(rec: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(elapsed seconds at the end of each epoch, test accuracy) for one record."""
    out: list[tuple[float, float]] = []
    t = 0.0
    for e in _epochs(rec):
        dt, acc = _num(e.get("time_s")), _num(e.get("test_accuracy"))
        if dt is None:
            return out
        t += dt
        if acc is not None:
            out.append((t, acc))
    return out


@dataclass
class TrainingResult:
    """One training-to-accuracy table and its curves (label -> points)."""

    table: Table
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def training_results(points: PointSet) -> list[TrainingResult]:
    """Tables for every model/configuration/machine with training-to-accuracy records."""
    train_points = [p for p in points.points if any(is_training_record(r) for r in p.records)]
    if not train_points:
        return []
    group_fields = [f for f in points.key_fields if f != F.DEVICES]
    namer = Namer(points, exclude=(F.DEVICES, F.MODEL, F.BATCH, F.MACHINE))
    groups: dict[tuple, list[Point]] = defaultdict(list)
    key = points.getter(group_fields)
    for p in train_points:
        groups[key(p)].append(p)
    results = [_result(namer, group) for group in groups.values()]
    results.sort(key=lambda r: F.sort_key(r.table.title))
    return results


def _rows(by_n: Mapping[int, list[Mapping[str, Any]]], failed: Mapping[int, list[str]], devices: list[int],
          cpu: bool) -> list[list[Cell]]:
    """One row per measure (the learning rate only when a record holds it), a cell per device count."""
    rows = []
    for label, fn, digits in ROWS:
        row = [label_cell(HOST_MEMORY_ROWS.get(label, label) if cpu else label)]
        for n in devices:
            xs = [x for x in (fn(r) for r in by_n.get(n, [])) if x is not None]
            if xs:
                row.append(number(median(xs), digits))
            elif failed.get(n):
                row.append(failed_cell(failed[n][0]))
            else:
                row.append(missing())
        if label != RATE_ROW or any(c.value is not None for c in row[1:]):
            rows.append(row)
    return rows


def _result(namer: Namer, group: list[Point]) -> TrainingResult:
    first = group[0].values
    word = device_word({"device": first.get(F.DEVICE)}).upper()
    by_n: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    failed: dict[int, list[str]] = defaultdict(list)
    for p in group:
        n = int(p.values.get(F.DEVICES) or 1)
        for rec in p.records:
            if (rec.get("status") or "ok") == "ok":
                by_n[n].append(rec)
            else:
                failed[n].append(p.measure.failure_text())
    devices = sorted(set(by_n) | set(failed))
    cpu = first.get(F.DEVICE) == "cpu"
    rows = _rows(by_n, failed, devices, cpu)
    title = (f"Training to accuracy: {first.get(F.MODEL)}, batch {F.text(first.get(F.BATCH))} per device, "
             f"{namer.name(first)}, on {first.get(F.MACHINE)}")
    memory = ("peak resident memory of each worker process (RSS): on a CPU the model lives in host "
              "memory" if cpu else "peak device memory over epochs")
    notes = [f"Columns: device count. Median over repeats; accuracies at the last epoch; memory = {memory}, "
             f"of the largest {'worker' if cpu else 'device'} and summed over all of them."] + data_set_note(first)
    table = Table(f"training-{F.slug(title[len('Training to accuracy: '):])}", title, "training",
                  [""] + [f"{word} ({n})" for n in devices], rows, notes)
    curves = {}
    for n in devices:
        for rec in by_n.get(n, []):
            c = curve(rec)
            if c:
                curves[plural(n, word.lower())] = c
                break
    return TrainingResult(table, curves)


def training_figure(r: TrainingResult) -> Figure | None:
    """The accuracy curves of a training table (``None`` without curves)."""
    if not r.curves:
        return None
    return Figure("training", f"training-{r.table.id[len('training-'):]}", r.table.title, {"curves": r.curves})


def _training_section(report: Report, results: list[TrainingResult], inputs: Inputs) -> None:
    if not results:
        return
    b = report.blocks
    b.append(Heading("Training to accuracy"))
    for r in results:
        b += [Heading(r.table.title.split(": ", 1)[-1], 3), TableBlock(r.table)]
        fig = training_figure(r)
        if fig:
            b.append(fig)
            report.figures.append(fig)


register(TableKind("training", 60, lambda inputs: training_results(inputs.points), _training_section,
                   lambda results: [r.table for r in results],
                   plot=lambda results: [f for f in map(training_figure, results) if f],
                   plot_order=1, draw="cnnbench.report.render.plots:_training"))
