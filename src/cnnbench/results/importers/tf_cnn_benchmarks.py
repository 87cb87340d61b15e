"""Import tf_cnn_benchmarks output: plain log files and the Lambda benchmark folder layout.

The layout is ``<machine>.logs/<config>/<model>-<batch>/throughput/<iteration>``, with a
``<machine>.logs/metadata`` file of tab-separated facts (CPU, GPUs, CUDA, driver, TF).
``<config>`` reads like ``syn-replicated-fp16-2gpus-inference``.

cnnbench's own ``run`` output is read too (round trip): its header starts with ``PyTorch:``
instead of ``TensorFlow:``, names its devices ``cpu:0``/``cuda:0``, and also states the image
size, the warm-up steps and cnnbench's own precision (``fp16`` there is pure fp16, and
``(torch.compile)`` follows it for compiled runs); such records get ``source`` ``cnnbench``.
Progress lines may end with more fields (cnnbench's ``eta``), which are ignored.

From the info header (the block from ``TensorFlow:`` to ``==========``) come the model,
the data set (synthetic or not), the mode, the per-device batch, the devices, the data
format, the optimizer, the variable update and the all-reduce spec; precision and
distortions come from the header when it states them, else from the folder name. The
progress lines become ``metrics.step_series`` (tf_cnn_benchmarks prints the running
mean, its standard error and jitter every N steps, not raw step times, so there are no
``step_times_s``); the last one gives ``images_per_sec_mean``/``_stderr``/``_jitter``
over the whole run. ``total images/sec`` is ``metrics.total_images_per_sec``. A log
without it becomes a record with status ``error`` (``oom`` when TensorFlow reported
running out of memory) and no figure, never 0. A log that says something impossible (a
figure that is no number, a date that does not exist) is reported as ``path: problem``
and skipped; the other logs are imported.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import logging
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cnnbench import __version__
from cnnbench.results.importers import ImportOptions, ImportResult, finalize_record, register_importer
from cnnbench.results.record import SCHEMA_VERSION, RecordError, check_record, now_iso

log = logging.getLogger(__name__)

SOURCE = "tf_cnn_benchmarks"

# tf_cnn_benchmarks' --use_fp16 keeps fp32 master variables, computes in fp16 and scales
# the loss: that is mixed precision, the computation cnnbench calls amp_fp16 (its fp16
# casts the weights themselves). The folder label ("fp16") is kept in source_config.
_PRECISION_WORDS = {
    "fp32": "fp32",
    "fp16": "amp_fp16",
    "amp_fp16": "amp_fp16",
    "amp": "amp_fp16",
    "bf16": "amp_bf16",
    "amp_bf16": "amp_bf16",
    "tf32": "tf32",
}
_MODES = {"training": False, "forward only": True, "forward-only": True, "evaluation": True, "inference": True}
_OOM_MARKERS = ("ResourceExhaustedError", "OOM when allocating", "out of memory")

_HEADER_START = re.compile(r"^(TensorFlow|PyTorch):\s+(\S.*?)\s*$")
_HEADER_END = "=========="
_KEY_VALUE = re.compile(r"^([A-Za-z][A-Za-z0-9 _-]*?):\s+(.*)$")
_GLOBAL_BATCH = re.compile(r"^\s*(\d+)\s+global")
_PER_DEVICE = re.compile(r"^\s*(\d+)\s+per device")
_DEVICE = re.compile(r"(?:^|[\s'\"\[/,])(?:device:)?(gpu|cpu|cuda|GPU|CPU):(\d+)")
_STEP = re.compile(
    r"^(\d+)\s+images/sec:\s*([\d.]+)\s*\+/-\s*([\d.]+)\s*\(jitter\s*=\s*([\d.]+)\)\s*(.*)$"
)
_TOTAL = re.compile(r"^total images/sec:\s*([\d.]+)")
_OUR_RECORD = re.compile(r"^record (\S+) appended to ")
_FOUND_GPU = re.compile(r"Found device (\d+) with properties:")
_GPU_NAME = re.compile(r"\bname:\s*(.+?)\s+(?:computeCapability|major):")
_EARLIEST = _dt.datetime(2015, 1, 1, tzinfo=_dt.timezone.utc)  # before TensorFlow was released
_LOG_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)")


# --------------------------------------------------------------------------- parsing


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


def _has_loss_column(step: Step) -> bool:
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
        stripped = line.strip()
        if out.first_log_time is None:
            m = _LOG_TIME.match(line)
            if m:
                out.first_log_time = m.group(1)
        if in_header:
            if stripped.startswith(_HEADER_END):
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
        m = _FOUND_GPU.search(line)
        if m:
            last_found = int(m.group(1))
            continue
        if last_found is not None:
            m = _GPU_NAME.search(line)
            if m:
                out.gpu_names.setdefault(last_found, m.group(1).strip())
                last_found = None
        m = _STEP.match(stripped)
        if m:
            out.steps.append(_step(m))
            continue
        m = _TOTAL.match(stripped)
        if m:
            out.total_images_per_sec = _number(m.group(1), stripped)
            continue
        m = _OUR_RECORD.match(stripped)
        if m and out.record_id is None:
            out.record_id = m.group(1)
            continue
        if any(marker in line for marker in _OOM_MARKERS):
            out.out_of_memory = True
    out.tail = [ln for ln in text.splitlines() if ln.strip()][-15:]
    return out


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


def parse_metadata(path: Path) -> dict[str, str]:
    """The ``metadata`` file of a ``<machine>.logs`` folder: ``KEY<tab>VALUE`` per line."""
    facts: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("\t")
        if sep and key.strip():
            facts[key.strip()] = value.strip()
    return facts


# --------------------------------------------------------------------------- the layout


@dataclass(frozen=True)
class LayoutInfo:
    """Where a log sits in ``<machine>.logs/<config>/<model>-<batch>/throughput/<iteration>``."""

    machine: str
    logs_dir: Path
    config_name: str
    model_batch: str
    iteration: int | None


def layout_of(path: Path) -> LayoutInfo | None:
    parts = path.parts
    if len(parts) < 5 or parts[-2] != "throughput" or not parts[-5].endswith(".logs"):
        return None
    iteration = int(parts[-1]) if parts[-1].isdigit() else None
    return LayoutInfo(
        machine=parts[-5][: -len(".logs")],
        logs_dir=Path(*parts[:-4]),
        config_name=parts[-4],
        model_batch=parts[-3],
        iteration=iteration,
    )


def folder_words(config_name: str) -> dict[str, Any]:
    """Precision, distortions and mode named by a config folder (``syn-replicated-fp16-2gpus-inference``)."""
    words = config_name.lower().split("-")
    out: dict[str, Any] = {}
    for w in words:
        if w in _PRECISION_WORDS:
            out["precision"] = _PRECISION_WORDS[w]
            out["precision_label"] = w
    if "distortions" in words:
        out["distortions"] = True
    if "inference" in words:
        out["forward_only"] = True
    return out


def find_logs(paths: Sequence[Path]) -> Iterator[Path]:
    """Log files under ``paths``: files given by name, and in folders every file in a
    ``throughput/`` folder plus ``*.log`` / ``*.txt`` files."""
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.is_file() and (f.parent.name == "throughput" or f.suffix in (".log", ".txt")):
                    yield f
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")


# --------------------------------------------------------------------------- records


def record_from_log(path: Path, text: str, metadata: dict[str, str] | None = None) -> dict[str, Any] | None:
    """One record for one log, or None when the text has no info header (tf_cnn_benchmarks' or cnnbench's)."""
    parsed = parse_log(text)
    if parsed.framework is None:
        return None
    ours = parsed.framework == "PyTorch"
    layout = layout_of(path)
    words = folder_words(layout.config_name) if layout else {}
    h = parsed.header

    config: dict[str, Any] = {}
    if "Model" in h:
        config["model"] = h["Model"]
    if parsed.per_device_batch is not None:
        config["batch_size"] = parsed.per_device_batch
    mode = h.get("Mode", "").lower()
    if mode in _MODES:
        config["forward_only"] = _MODES[mode]
    elif "forward_only" in words:
        config["forward_only"] = words["forward_only"]
    for key, name in (("Num batches", "num_batches"), ("Num epochs", "num_epochs"),
                      ("Num warmup", "num_warmup_batches")):
        if h.get(key, "").isdigit():
            config[name] = int(h[key])
    size = re.fullmatch(r"(\d+)x\1", h.get("Image size", ""))
    if size:
        config["image_size"] = int(size.group(1))
    devices = _DEVICE.findall(h.get("Devices", ""))
    if devices:
        kind = devices[0][0].lower()
        config["device"] = "cuda" if kind in ("gpu", "cuda") else "cpu"
        nodes = re.search(r"on each of (\d+) nodes", h.get("Devices", ""))  # cnnbench's multi-node header
        config["num_devices"] = len(devices) * (int(nodes.group(1)) if nodes else 1)
        if nodes:
            config["num_nodes"] = int(nodes.group(1))
    if "Variables" in h:
        config["variable_update"] = h["Variables"]
    all_reduce = h.get("AllReduce")
    if all_reduce is not None:
        config["all_reduce"] = None if all_reduce in ("None", "") else all_reduce
    if "Data format" in h:
        config["data_format"] = h["Data format"]
    if "Optimizer" in h and not config.get("forward_only"):  # inference trains nothing: no optimizer
        config["optimizer"] = h["Optimizer"].split()[0]  # cnnbench adds its implementation: "momentum (fused)"
    dataset = h.get("Dataset", "")
    if dataset:
        synthetic = "(synthetic)" in dataset
        config["data_name"] = "synthetic" if synthetic else dataset.split()[0]
        location = re.fullmatch(r"synthetic \((\w+)\)", dataset)
        if ours and location:  # cnnbench says where its synthetic batches live
            config["synthetic_location"] = location.group(1)
    precision = (_our_precision(h, config) if ours else _header_precision(h)) or words.get("precision")
    if precision:
        config["precision"] = precision
    distortions = _header_bool(h, "Distortions")
    if distortions is None:
        distortions = words.get("distortions", False)
    config["distortions"] = distortions

    environment = _environment(parsed, layout, metadata or {})
    metrics = _metrics(parsed, training=not config.get("forward_only", False))
    status, error = "ok", None
    if parsed.total_images_per_sec is None:
        status = "oom" if parsed.out_of_memory else "error"
        error = "log ends without a `total images/sec` line (the run did not finish); last lines:\n" + "\n".join(
            parsed.tail
        )

    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "run_id": _run_id(parsed, text, ours=ours),
        "started_at": _started_at(parsed, path),
        "status": status,
        "error": error,
        "config": config,
        "environment": environment,
        "metrics": metrics,
        "source": "cnnbench" if ours else SOURCE,
        "source_path": str(path.resolve()),
        "source_header": dict(h),
    }
    if parsed.global_batch is not None:
        record["source_global_batch_size"] = parsed.global_batch
    if layout:
        record["source_config"] = layout.config_name
        if layout.iteration is not None:
            record["source_iteration"] = layout.iteration
    return record


def _run_id(parsed: ParsedLog, text: str, *, ours: bool) -> str:
    """cnnbench's own log names the record it stored (the same run: the same run_id, so
    importing it into that store adds nothing); any other log gets a hash of its text."""
    if ours and parsed.record_id:
        return parsed.record_id
    return hashlib.sha1(text.encode("utf-8", errors="replace")).hexdigest()[:16]


def _our_precision(h: dict[str, str], config: dict[str, Any]) -> str | None:
    """cnnbench's ``Precision:`` line: its own precision names, then `` (torch.compile)`` when compiled."""
    from cnnbench.config.model_options import PRECISIONS

    words = h.get("Precision", "").split()
    if not words or words[0] not in PRECISIONS:
        return None
    config["compile"] = "(torch.compile)" in words[1:]
    return words[0]


def _header_precision(h: dict[str, str]) -> str | None:
    for key in ("Precision", "Use fp16"):
        value = h.get(key)
        if value is None:
            continue
        v = value.strip().lower()
        if key == "Use fp16":
            return "amp_fp16" if v == "true" else "fp32"
        return _PRECISION_WORDS.get(v)
    return None


def _header_bool(h: dict[str, str], key: str) -> bool | None:
    value = h.get(key)
    if value is None:
        return None
    return value.strip().lower() == "true"


def _environment(parsed: ParsedLog, layout: LayoutInfo | None, meta: dict[str, str]) -> dict[str, Any]:
    env: dict[str, Any] = {"machine": layout.machine if layout else "unknown"}
    if "CPU" in meta:
        env["cpu_model"] = meta["CPU"]
    gpus = [v for k, v in sorted(meta.items()) if re.fullmatch(r"GPU \d+", k)]
    if not gpus and parsed.gpu_names:
        gpus = [parsed.gpu_names[i] for i in sorted(parsed.gpu_names)]
    if gpus:
        env["gpu_model"] = gpus[0]
        env["gpu_count"] = len(gpus)
    if "CUDA" in meta:
        env["cuda_version"] = meta["CUDA"].lstrip("Vv")
    if "Nvidia" in meta:
        env["gpu_driver"] = meta["Nvidia"]
    if parsed.framework == "PyTorch":
        torch_version = (parsed.tf_version or "").removeprefix("torch").strip()
        if torch_version:
            env["torch_version"] = torch_version
    else:
        tf_version = meta.get("TF") or parsed.tf_version
        if tf_version:
            env["framework"] = f"tensorflow {tf_version}"
    if "Python" in meta:
        env["python_version"] = meta["Python"]
    if "Kernel" in meta:
        env["platform"] = f"Linux {meta['Kernel']}"
    memory = re.fullmatch(r"([\d.]+)\s*GB", meta.get("Memory", ""))
    if memory:
        # The figures are MemTotal in GiB (62.67 "GB" on a 64 GiB machine), whatever the unit says.
        env["memory_bytes"] = int(float(memory.group(1)) * 2**30)
    return env


def _metrics(parsed: ParsedLog, training: bool) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    if parsed.total_images_per_sec is not None:
        metrics["total_images_per_sec"] = parsed.total_images_per_sec
    if parsed.steps:
        last = parsed.steps[-1]
        metrics["images_per_sec_mean"] = last.images_per_sec
        metrics["images_per_sec_stderr"] = last.stderr
        metrics["images_per_sec_jitter"] = last.jitter
        series: dict[str, list[Any]] = {
            "step": [s.step for s in parsed.steps],
            "images_per_sec": [s.images_per_sec for s in parsed.steps],
            "images_per_sec_stderr": [s.stderr for s in parsed.steps],
            "images_per_sec_jitter": [s.jitter for s in parsed.steps],
        }
        losses = [s.loss for s in parsed.steps]  # None where the log says nan
        has_loss = any(_has_loss_column(s) for s in parsed.steps)
        if training and has_loss:
            series["loss"] = losses
            if losses[0] is not None:
                metrics["loss_first"] = losses[0]
            if losses[-1] is not None:
                metrics["loss_last"] = losses[-1]
        if all(s.timestamp is not None for s in parsed.steps):
            series["unix_time"] = [s.timestamp for s in parsed.steps]
        metrics["step_series"] = series
    return metrics


def _started_at(parsed: ParsedLog, path: Path) -> str:
    """The first timed step's clock (UTC), else the first log timestamp (zone unknown), else the file's mtime.

    ``ValueError`` when the log's clock is no time (a date that does not exist, a Unix time
    outside any calendar)."""
    if parsed.steps and parsed.steps[0].timestamp is not None:
        stamp = parsed.steps[0].timestamp
        try:
            when = _dt.datetime.fromtimestamp(stamp, _dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"the step time {stamp} is not a Unix time") from None
        if not _EARLIEST <= when <= _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(days=1):
            raise ValueError(f"the step time {stamp} is {when:%Y-%m-%d}, not a time a log was written")
        return when.isoformat(timespec="seconds")
    if parsed.first_log_time:
        try:
            return _dt.datetime.fromisoformat(parsed.first_log_time).isoformat(timespec="seconds")
        except ValueError:
            raise ValueError(f"the log time {parsed.first_log_time!r} is not a date and time") from None
    try:
        mtime = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
    except OSError:  # text given without a file
        return now_iso()
    return mtime.isoformat(timespec="seconds")


@register_importer("tf-cnn-benchmarks", "tf_cnn_benchmarks logs: plain files or <machine>.logs/ folders")
def import_tf_cnn_benchmarks(paths: Sequence[Path], options: ImportOptions) -> ImportResult:
    """Records for every tf_cnn_benchmarks log under ``paths``."""
    result = ImportResult()
    metadata_cache: dict[Path, dict[str, str]] = {}
    for path in find_logs(paths):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            result.problems.append(f"{path}: cannot read ({exc.strerror})")
            continue
        layout = layout_of(path)
        metadata: dict[str, str] = {}
        if layout:
            if layout.logs_dir not in metadata_cache:
                meta_file = layout.logs_dir / "metadata"
                metadata_cache[layout.logs_dir] = parse_metadata(meta_file) if meta_file.is_file() else {}
            metadata = metadata_cache[layout.logs_dir]
        try:
            record = record_from_log(path, text, metadata)
            if record is not None:
                record = finalize_record(record, options)
                check_record(record)
        except (ValueError, RecordError) as exc:
            result.problems.append(f"{path}: {exc}")
            continue
        if record is None:
            result.problems.append(f"{path}: not a tf_cnn_benchmarks log (no `TensorFlow:` info header, "
                                   "nor cnnbench's `PyTorch:` one)")
            continue
        result.records.append(record)
        log.debug("imported %s (%s)", path, record["status"])
    return result


__all__ = ["import_tf_cnn_benchmarks", "parse_log", "parse_metadata", "record_from_log"]
