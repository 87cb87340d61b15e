"""Names of configurations in the style of vendor tf_cnn_benchmarks reports: the one place they are made.

``<data>-<variable_update>[-<all_reduce>][-distortions][-<precision>]-<N><device>s[-inference]``,
e.g. ``syn-replicated-nccl-4gpus``, ``real-parameter_server-distortions-4gpus``,
``syn-replicated-1cpus``. Sweeps name their cases with :func:`case_name`; reports name
configurations and series with :func:`config_name`, which can also show the precision and
the mode when they vary, and leave out the parts a table shows elsewhere. Real data is
``real`` whatever the data set (as tf_cnn_benchmarks writes it: tables say the data set in
their notes), and a one-device run names no gradient exchange (no all-reduce back end), so a
name never depends on which other records are present. No torch here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
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


def one_device(config: Mapping[str, Any]) -> bool:
    """Did the run use one device (so that it exchanged no gradients)?"""
    return int(config.get("num_devices") or 1) == 1


def config_name(config: Mapping[str, Any], source: str | None = None, *, omit: Collection[str] = (),
                precision: bool = False, inference: bool = False) -> str:
    """The name of a configuration (a record's ``config``, without model and batch).

    ``omit``: config fields whose part is left out (``num_devices`` reads ``N<device>s``);
    ``precision`` / ``inference``: name the precision / a forward-only run (reports do when
    those vary). A one-device run names no all-reduce back end (it exchanges nothing).
    """
    parts: list[str] = []
    if "data_name" not in omit:
        parts.append(data_kind(config))
    if "variable_update" not in omit:
        parts.append(str(config.get("variable_update") or "replicated"))
    all_reduce = named_all_reduce(config, source)
    if "num_devices" not in omit and one_device(config):
        all_reduce = None
    if "all_reduce" not in omit and all_reduce:
        parts.append(all_reduce)
    if "distortions" not in omit and config.get("distortions"):
        parts.append("distortions")
    if precision and "precision" not in omit and config.get("precision"):
        parts.append(str(config.get("precision")))
    devices = "N" if "num_devices" in omit else str(int(config.get("num_devices") or 1))
    parts.append(f"{devices}{device_word(config)}s")
    if inference and "forward_only" not in omit and config.get("forward_only"):
        parts.append("inference")
    return "-".join(parts)


def case_name(config: Mapping[str, Any], source: str | None = None) -> str:
    """The configuration name a record carries (``case_name``): :func:`config_name` in its plain form."""
    return config_name(config, source)
