"""A record from a parsed tf_cnn_benchmarks log: its configuration from the info header (and
the folder's words where the header is silent), its environment from the ``metadata`` file
and the log, its metrics from the progress lines, its status, run id and start time.
See :mod:`cnnbench.results.importers.tf_cnn_benchmarks`."""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from pathlib import Path
from typing import Any

from cnnbench.results.importers.tf_layout import PRECISION_WORDS, LayoutInfo, folder_words, layout_of
from cnnbench.results.importers.tf_log import ParsedLog, has_loss_column, parse_log
from cnnbench.results.record import SCHEMA_VERSION, STARTED_AT_FILLED_IN
from cnnbench.results.stamps import now_iso
from cnnbench.version import __version__

SOURCE = "tf_cnn_benchmarks"

_MODES = {"training": False, "forward only": True, "forward-only": True, "evaluation": True, "inference": True}
_DEVICE = re.compile(r"(?:^|[\s'\"\[/,])(?:device:)?(gpu|cpu|cuda|GPU|CPU):(\d+)")
_EARLIEST = _dt.datetime(2015, 1, 1, tzinfo=_dt.timezone.utc)  # before TensorFlow was released


def record_from_log(path: Path, text: str, metadata: dict[str, str] | None = None) -> dict[str, Any] | None:
    """One record for one log, or None when the text has no info header (tf_cnn_benchmarks' or cnnbench's)."""
    parsed = parse_log(text)
    if parsed.framework is None:
        return None
    ours = parsed.framework == "PyTorch"
    layout = layout_of(path)
    h = parsed.header
    config = _config(parsed, folder_words(layout.config_name) if layout else {}, ours=ours)
    environment = _environment(parsed, layout, metadata or {})
    metrics = _metrics(parsed, training=not config.get("forward_only", False))
    status, error = "ok", None
    if parsed.total_images_per_sec is None:
        status = "oom" if parsed.out_of_memory else "error"
        error = "log ends without a `total images/sec` line (the run did not finish); last lines:\n" + "\n".join(
            parsed.tail
        )

    started_at, filled_in = _started_at(parsed, path)
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "run_id": _run_id(parsed, text, ours=ours),
        "started_at": started_at,
        "status": status,
        "error": error,
        "config": config,
        "environment": environment,
        "metrics": metrics,
        "source": "cnnbench" if ours else SOURCE,
        "source_path": str(path.resolve()),
        "source_header": dict(h),
    }
    if filled_in:
        record["started_at_source"] = STARTED_AT_FILLED_IN  # no real start time: history leaves it out
    if parsed.global_batch is not None:
        record["source_global_batch_size"] = parsed.global_batch
    if layout:
        record["source_config"] = layout.config_name
        if layout.iteration is not None:
            record["source_iteration"] = layout.iteration
    return record


def _config(parsed: ParsedLog, words: dict[str, Any], *, ours: bool) -> dict[str, Any]:
    """The record's configuration, in the order of its fields."""
    h = parsed.header
    config: dict[str, Any] = {}
    _run_fields(parsed, words, config)
    _device_fields(h, config)
    _training_fields(h, config, ours=ours)
    precision = (_our_precision(h, config) if ours else _header_precision(h)) or words.get("precision")
    if precision:
        config["precision"] = precision
    distortions = _header_bool(h, "Distortions")
    if distortions is None:
        distortions = words.get("distortions", False)
    config["distortions"] = distortions
    return config


def _run_fields(parsed: ParsedLog, words: dict[str, Any], config: dict[str, Any]) -> None:
    """Model, batch, mode, the steps and the image size."""
    h = parsed.header
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


def _device_fields(h: dict[str, str], config: dict[str, Any]) -> None:
    """The device kind, the devices and the nodes."""
    devices = _DEVICE.findall(h.get("Devices", ""))
    if devices:
        kind = devices[0][0].lower()
        config["device"] = "cuda" if kind in ("gpu", "cuda") else "cpu"
        nodes = re.search(r"on each of (\d+) nodes", h.get("Devices", ""))  # cnnbench's multi-node header
        config["num_devices"] = len(devices) * (int(nodes.group(1)) if nodes else 1)
        if nodes:
            config["num_nodes"] = int(nodes.group(1))


def _training_fields(h: dict[str, str], config: dict[str, Any], *, ours: bool) -> None:
    """Variable update, all-reduce, data format, optimizer and the data set."""
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
        return PRECISION_WORDS.get(v)
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
        has_loss = any(has_loss_column(s) for s in parsed.steps)
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


def _started_at(parsed: ParsedLog, path: Path) -> tuple[str, bool]:
    """The first timed step's clock (UTC), else the first log timestamp (zone unknown), else the file's mtime
    (or now, for text without a file); and whether it was filled in (the last two).

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
        return when.isoformat(timespec="seconds"), False
    if parsed.first_log_time:
        try:
            return _dt.datetime.fromisoformat(parsed.first_log_time).isoformat(timespec="seconds"), False
        except ValueError:
            raise ValueError(f"the log time {parsed.first_log_time!r} is not a date and time") from None
    try:
        mtime = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
    except OSError:  # text given without a file
        return now_iso(), True
    return mtime.isoformat(timespec="seconds"), True
