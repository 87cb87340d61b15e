"""Hand-made run records for the report tests (the record contract of results/record.py)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_ids = itertools.count()

COSTS = {
    "resnet50": {"name": "resnet50", "input_size": [3, 224, 224], "params": 25_557_032,
                 "param_memory_mib": 97.49, "feature_memory_mib": 103.2, "forward_macs": 4.09e9,
                 "forward_flops": 8.18e9, "train_flops": 24.5e9, "top1_error": 23.87, "top5_error": 7.14},
    "vgg16": {"name": "vgg16", "input_size": [3, 224, 224], "params": 138_357_544,
              "param_memory_mib": 527.8, "feature_memory_mib": 58.9, "forward_macs": 15.5e9,
              "forward_flops": 31.0e9, "train_flops": 93e9, "top1_error": 28.41, "top5_error": 9.63},
}

MACHINES = {
    "m-fast": {"cpu_model": "CPU-X", "gpu_model": "GPU-P100"},
    "m-slow": {"cpu_model": "CPU-Y", "gpu_model": "GPU-K80"},
}


def record(
    model: str = "resnet50",
    machine: str = "m-fast",
    ips: float | None = 100.0,
    status: str = "ok",
    *,
    num_devices: int = 1,
    batch_size: int = 64,
    data_name: str = "synthetic",
    variable_update: str = "replicated",
    all_reduce: str | None = None,
    distortions: bool = False,
    precision: str = "fp32",
    forward_only: bool = False,
    device: str = "cuda",
    compile: bool | None = False,
    source: str | None = None,
    cost: bool = True,
    seed: int = 1234,
    metrics: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    **config_extra: Any,
) -> dict[str, Any]:
    """One record; ``ips=None`` or a failed ``status`` leaves no throughput."""
    config = {
        "model": model, "batch_size": batch_size, "image_size": None, "forward_only": forward_only,
        "num_batches": 100, "num_warmup_batches": 10, "seed": seed, "device": device,
        "num_devices": num_devices, "variable_update": variable_update, "all_reduce": all_reduce,
        "data_format": "NCHW", "precision": precision, "compile": compile, "optimizer": "sgd",
        "data_name": data_name, "synthetic_location": "device", "distortions": distortions,
    }
    if compile is None:
        del config["compile"]
    config.update(config_extra)
    env = {"machine": machine, "hostname": machine + "-host", "cpu_cores": 16, "gpu_count": 8,
           "torch_version": "2.5.0", **MACHINES.get(machine, {"cpu_model": "CPU-Z", "gpu_model": "GPU-Z"})}
    env.update(environment or {})
    m: dict[str, Any] = {}
    if status == "ok" and ips is not None:
        m = {"total_images_per_sec": ips, "images_per_sec_mean": ips}
        if ips > 0:
            m["step_times_s"] = step_times(ips, batch_size * num_devices)
    m.update(metrics or {})
    rec: dict[str, Any] = {
        "schema_version": 1, "tool_version": "0.1.0", "run_id": f"r{next(_ids):06d}",
        "started_at": "2024-01-01T00:00:00+00:00", "status": status,
        "error": None if status == "ok" else f"{status} happened",
        "config": config, "environment": env, "metrics": m,
    }
    if source:
        rec["source"] = source
    if cost and source is None and model in COSTS:
        rec["model_cost"] = dict(COSTS[model])
    return rec


def step_times(ips: float, images_per_step: int, n: int = 20, jitter: float = 0.002) -> list[float]:
    """``n`` step times whose mean gives ``ips``, with a small deterministic wobble (±``jitter``)."""
    mean = images_per_step / ips
    return [mean * (1 + jitter * (1 if i % 2 else -1) * (1 + i % 3) / 2) for i in range(n)]


def write_store(folder: Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write records as a JSON Lines store (one file per machine), like the real store."""
    folder.mkdir(parents=True, exist_ok=True)
    by_machine: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_machine.setdefault(r["environment"]["machine"], []).append(r)
    for machine, recs in by_machine.items():
        with open(folder / f"{machine}.jsonl", "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
    return folder


def scaling_records() -> list[dict[str, Any]]:
    """Two models x two machines x 1/2/4 devices; vgg16 OOMs at 4 devices on m-slow."""
    recs = []
    base = {("resnet50", "m-fast"): 400.0, ("resnet50", "m-slow"): 200.0,
            ("vgg16", "m-fast"): 250.0, ("vgg16", "m-slow"): 120.0}
    eff = {1: 1.0, 2: 0.95, 4: 0.90}
    for (model, machine), ips1 in base.items():
        for n in (1, 2, 4):
            if (model, machine, n) == ("vgg16", "m-slow", 4):
                recs.append(record(model, machine, status="oom", num_devices=n))
                continue
            recs.append(record(model, machine, ips1 * n * eff[n], num_devices=n))
    return recs


def training_record(num_devices: int, epochs: int = 3, *, machine: str = "m-fast",
                    seconds_per_epoch: float = 100.0) -> dict[str, Any]:
    """A training-to-accuracy record in the C7 shape (``metrics.epochs`` and totals)."""
    per_epoch = seconds_per_epoch / num_devices
    eps = [{"epoch": i + 1, "time_s": per_epoch, "images_per_sec": 50000 / per_epoch,
            "train_loss": 2.0 / (i + 1), "train_accuracy": 0.5 + 0.1 * i, "test_accuracy": 0.45 + 0.1 * i,
            "peak_device_memory_bytes": (1000 + 10 * i) * 2**20} for i in range(epochs)]
    metrics = {"epochs": eps, "total_time_s": per_epoch * epochs, "train_accuracy": eps[-1]["train_accuracy"],
               "test_accuracy": eps[-1]["test_accuracy"], "total_images_per_sec": 50000 / per_epoch,
               "peak_device_memory_total_bytes": eps[-1]["peak_device_memory_bytes"] * num_devices}
    return record("resnet50", machine, 50000 / per_epoch, num_devices=num_devices, batch_size=32,
                  data_name="cifar10", num_epochs=epochs, metrics=metrics)
