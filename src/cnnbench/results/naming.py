"""Names of configurations in the style of vendor tf_cnn_benchmarks reports, shared by sweeps and reports.

``<data>-<variable_update>[-<all_reduce>][-distortions]-<N><device>s``, e.g.
``syn-replicated-nccl-4gpus``, ``real-parameter_server-distortions-4gpus``, ``syn-replicated-1cpus``.
No torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def data_kind(config: Mapping[str, Any]) -> str:
    """``syn`` for synthetic input, ``real`` otherwise."""
    name = config.get("data_name") or "synthetic"
    return "syn" if name == "synthetic" else "real"


def device_word(config: Mapping[str, Any]) -> str:
    device = config.get("device") or "cpu"
    return "gpu" if device in ("cuda", "gpu") else str(device)


def named_all_reduce(config: Mapping[str, Any], source: str | None = None) -> str | None:
    """The all-reduce back end as a name shows it: cnnbench records name it only when it is
    not the device's own (gloo on CPUs, nccl on GPUs); imported tf_cnn_benchmarks records
    name what their log says (there, no value is tf's own cross-device aggregation)."""
    value = config.get("all_reduce")
    if not value:
        return None
    if (source or "cnnbench") == "cnnbench" and value == ("nccl" if device_word(config) == "gpu" else "gloo"):
        return None
    return str(value)


def case_name(config: Mapping[str, Any], source: str | None = None) -> str:
    """The configuration name of a record's ``config`` (without model and batch)."""
    parts = [data_kind(config), str(config.get("variable_update") or "replicated")]
    all_reduce = named_all_reduce(config, source)
    if all_reduce:
        parts.append(all_reduce)
    if config.get("distortions"):
        parts.append("distortions")
    parts.append(f"{int(config.get('num_devices') or 1)}{device_word(config)}s")
    return "-".join(parts)
