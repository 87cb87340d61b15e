"""The run record: one JSON object per run, the contract every later tool reads.

Top-level fields: ``schema_version``, ``tool_version``, ``run_id``, ``started_at`` (ISO 8601),
``status`` (``ok|oom|error|timeout``), ``error`` (text or null), ``config`` (every resolved
option under its snake_case flag name), ``environment`` and ``metrics``. Other top-level
fields (``source``, ``case_name``, ``suite_name``, ...) may be added freely.

This module does not import torch.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cnnbench import __version__

SCHEMA_VERSION = 2
STATUSES = ("ok", "oom", "error", "timeout")

# Metric names that are part of the contract (others may be added).
METRIC_FIELDS = (
    "total_images_per_sec",
    "images_per_sec_mean",
    "images_per_sec_stderr",
    "images_per_sec_jitter",
    "images_per_sec_median",
    "per_device_images_per_sec",
    "step_times_s",
    "wall_time_s",
    "peak_device_memory_bytes",
    "peak_host_memory_bytes",
    "input_wait_fraction",
    "loss_first",
    "loss_last",
)
ENVIRONMENT_FIELDS = (
    "machine",
    "hostname",
    "cpu_model",
    "cpu_cores",
    "gpu_model",
    "gpu_count",
    "torch_version",
    "torchvision_version",
    "cuda_version",
    "python_version",
    "platform",
)


def error_text(exc: BaseException, limit: int = 2000) -> str:
    """``"Type: message"`` for a record's ``error``: the message's first lines, without the
    C++ stack that some torch errors append (``Exception raised from ...``, ``frame #0``)."""
    lines = []
    for line in str(exc).strip().splitlines():
        if line.startswith(("Exception raised from", "frame #")):
            break
        lines.append(line)
    text = f"{type(exc).__name__}: {chr(10).join(lines)}".strip().rstrip(":")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Record:
    """An immutable run record. ``to_dict()`` gives the JSON form."""

    config: Mapping[str, Any]
    environment: Mapping[str, Any]
    metrics: Mapping[str, Any]
    status: str = "ok"
    error: str | None = None
    run_id: str = field(default_factory=new_run_id)
    started_at: str = field(default_factory=now_iso)
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further top-level fields (``source``, ``case_name``, ``suite_name``, ...)."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        ordered = {
            "schema_version": d["schema_version"],
            "tool_version": d["tool_version"],
            "run_id": d["run_id"],
            "started_at": d["started_at"],
            "status": d["status"],
            "error": d["error"],
            "config": dict(d["config"]),
            "environment": dict(d["environment"]),
            "metrics": dict(d["metrics"]),
        }
        for key, value in extra.items():
            ordered.setdefault(key, value)
        return ordered

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        known = {"schema_version", "tool_version", "run_id", "started_at", "status", "error",
                 "config", "environment", "metrics"}
        return cls(
            config=data.get("config") or {},
            environment=data.get("environment") or {},
            metrics=data.get("metrics") or {},
            status=data.get("status", "ok"),
            error=data.get("error"),
            run_id=data.get("run_id") or new_run_id(),
            started_at=data.get("started_at") or now_iso(),
            tool_version=data.get("tool_version", __version__),
            schema_version=data.get("schema_version", SCHEMA_VERSION),
            extra={k: v for k, v in data.items() if k not in known},
        )
