"""Parsing a tf_cnn_benchmarks log (or cnnbench's own, which reads the same): the info
header (the block from ``TensorFlow:`` or ``PyTorch:`` to ``==========``), the progress
lines (``images/sec`` with its standard error and jitter every N steps), ``total
images/sec``, the GPUs TensorFlow found, and the ``metadata`` file of the Lambda layout.
See :mod:`cnnbench.results.importers.tf_cnn_benchmarks`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_OOM_MARKERS = ("ResourceExhaustedError", "OOM when allocating", "out of memory")

_HEADER_START = re.compile(r"^(TensorFlow|PyTorch):\s+(\S.*?)\s*$")
_HEADER_END = "=========="
_KEY_VALUE = re.compile(r"^([A-Za-z][A-Za-z0-9 _-]*?):\s+(.*)$")
_GLOBAL_BATCH = re.compile(r"^\s*(\d+)\s+global")
_PER_DEVICE = re.compile(r"^\s*(\d+)\s+per device")
_STEP = re.compile(
    r"^(\d+)\s+images/sec:\s*([\d.]+)\s*\+/-\s*([\d.]+)\s*\(jitter\s*=\s*([\d.]+)\)\s*(.*)$"
)
_TOTAL = re.compile(r"^total images/sec:\s*([\d.]+)")
_OUR_RECORD = re.compile(r"^record (\S+) appended to ")
_FOUND_GPU = re.compile(r"Found device (\d+) with properties:")
_GPU_NAME = re.compile(r"\bname:\s*(.+?)\s+(?:computeCapability|major):")
_LOG_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)")


@dataclass
class Step:
    step: int
    images_per_sec: float
    stderr: float
    jitter: float
    loss: float | None
    timestamp: int | None
    loss_printed: bool = True
    """Whether the line had a loss column at all (``loss`` is None for nan too)."""


def has_loss_column(step: Step) -> bool:
    return step.loss_printed


@dataclass
class ParsedLog:
    """What one tf_cnn_benchmarks log says."""

    framework: str | None = None
    """``TensorFlow`` or ``PyTorch`` (cnnbench's own logs): what the info header starts with."""
    tf_version: str | None = None
    """The framework's version from the header (TensorFlow's, or ``torch 2.4.0`` for cnnbench)."""
    header: dict[str, str] = field(default_factory=dict)
    global_batch: int | None = None
    per_device_batch: int | None = None
    steps: list[Step] = field(default_factory=list)
    total_images_per_sec: float | None = None
    gpu_names: dict[int, str] = field(default_factory=dict)
    first_log_time: str | None = None
    out_of_memory: bool = False
    record_id: str | None = None
    """The run_id of the record cnnbench stored for this run (its ``record <id> appended to`` line)."""
    tail: list[str] = field(default_factory=list)


def parse_log(text: str) -> ParsedLog:
    """Parse the text of one log; ``ParsedLog.framework`` is None when it has no info header."""
    out = ParsedLog()
    in_header = False
    last_found: int | None = None
    for line in text.splitlines():
        if out.first_log_time is None:
            m = _LOG_TIME.match(line)
            if m:
                out.first_log_time = m.group(1)
        if in_header:
            if line.strip().startswith(_HEADER_END):
                in_header = False
                continue
            _header_line(out, line)
            continue
        m = _HEADER_START.match(line)
        if m and out.framework is None:
            out.framework = m.group(1)
            out.tf_version = m.group(2) if out.framework == "PyTorch" else m.group(2).split()[0]
            in_header = True
            continue
        last_found = _body_line(out, line, last_found)
    out.tail = [ln for ln in text.splitlines() if ln.strip()][-15:]
    return out


def _body_line(out: ParsedLog, line: str, last_found: int | None) -> int | None:
    """Take in a line outside the header; returns the GPU whose name may follow (``Found device N``)."""
    m = _FOUND_GPU.search(line)
    if m:
        return int(m.group(1))
    if last_found is not None:
        m = _GPU_NAME.search(line)
        if m:
            out.gpu_names.setdefault(last_found, m.group(1).strip())
            last_found = None
    stripped = line.strip()
    m = _STEP.match(stripped)
    if m:
        out.steps.append(_step(m))
        return last_found
    m = _TOTAL.match(stripped)
    if m:
        out.total_images_per_sec = _number(m.group(1), stripped)
        return last_found
    m = _OUR_RECORD.match(stripped)
    if m and out.record_id is None:
        out.record_id = m.group(1)
        return last_found
    if any(marker in line for marker in _OOM_MARKERS):
        out.out_of_memory = True
    return last_found


def _header_line(out: ParsedLog, line: str) -> None:
    m = _PER_DEVICE.match(line)
    if m:
        out.per_device_batch = int(m.group(1))
        return
    m = _KEY_VALUE.match(line.strip())
    if not m:
        return
    key, value = m.group(1).strip(), m.group(2).strip()
    out.header.setdefault(key, value)
    if key == "Batch size":
        g = _GLOBAL_BATCH.match(value)
        if g:
            out.global_batch = int(g.group(1))


def _number(text: str, line: str) -> float:
    """A figure of the log; ``ValueError`` quoting the line when it is none (``1.2.3``)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number in the line `{line[:80]}`") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number in the line `{line[:80]}`")
    return value


def _step(m: re.Match[str]) -> Step:
    line = m.group(0)
    rest = m.group(5).split()
    numbers: list[float] = []
    for token in rest:
        try:
            numbers.append(float(token))
        except ValueError:
            break
    timestamp = None
    if numbers and rest[len(numbers) - 1].isdigit() and numbers[-1] > 1e9:
        timestamp = int(rest[len(numbers) - 1])  # from the text: a float would round a long one
        numbers.pop()
    return Step(
        step=int(m.group(1)),
        images_per_sec=_number(m.group(2), line),
        stderr=_number(m.group(3), line),
        jitter=_number(m.group(4), line),
        loss=numbers[0] if numbers and math.isfinite(numbers[0]) else None,  # a diverged run prints nan
        timestamp=timestamp,
        loss_printed=bool(numbers),
    )


def parse_metadata(text: str) -> dict[str, str]:
    """The text of the ``metadata`` file of a ``<machine>.logs`` folder: ``KEY<tab>VALUE`` per line."""
    facts: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep and key.strip():
            facts[key.strip()] = value.strip()
    return facts
