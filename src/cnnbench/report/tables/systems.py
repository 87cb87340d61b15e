"""The Systems table: for each machine, its CPU, cores, GPUs, driver, CUDA and framework, as
its records' ``environment`` says.

A machine whose records disagree on a field (torch upgraded between runs) shows every value
seen, in order of first appearance. Imported tf_cnn_benchmarks logs name their framework
(``environment.framework``: ``tensorflow 2.4.1``); cnnbench records their torch and
torchvision versions. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.report.kinds import TableKind, register, table_section
from cnnbench.report.table import Cell, Table, label_cell, missing

GIB = 2**30


def _cores(env: Mapping[str, Any]) -> str | None:
    cores, threads = env.get("cpu_cores"), env.get("cpu_threads")
    if cores is None:
        return None if threads is None else f"{threads} threads"
    return f"{cores}" + (f" ({threads} threads)" if threads not in (None, cores) else "")


def _gpus(env: Mapping[str, Any]) -> str | None:
    model, count = env.get("gpu_model"), env.get("gpu_count")
    if not model:
        return "none" if count == 0 else None
    return f"{count} × {model}" if isinstance(count, int) and count > 1 else str(model)


def _framework(env: Mapping[str, Any]) -> str | None:
    parts = []
    if env.get("torch_version"):
        parts.append(f"torch {env['torch_version']}")
    if env.get("torchvision_version"):
        parts.append(f"torchvision {env['torchvision_version']}")
    if env.get("framework"):
        parts.append(str(env["framework"]))
    return ", ".join(parts) or None


def _memory(env: Mapping[str, Any]) -> str | None:
    total = env.get("memory_bytes")
    return f"{total / GIB:,.0f} GiB" if isinstance(total, (int, float)) and total > 0 else None


def _get(name: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda env: env.get(name)


COLUMNS: list[tuple[str, Callable[[Mapping[str, Any]], Any]]] = [
    ("CPU", _get("cpu_model")),
    ("cores", _cores),
    ("memory", _memory),
    ("GPUs", _gpus),
    ("driver", _get("gpu_driver")),
    ("CUDA", _get("cuda_version")),
    ("framework", _framework),
    ("Python", _get("python_version")),
    ("platform", _get("platform")),
]

FIELDS_READ = ("cpu_model", "cpu_cores", "cpu_threads", "memory_bytes", "gpu_model", "gpu_count", "gpu_driver",
               "cuda_version", "torch_version", "torchvision_version", "framework", "python_version", "platform")


def systems_table(records: Sequence[Mapping[str, Any]]) -> Table | None:
    """One row per machine (as the report names machines); ``None`` without records. Columns no
    machine has a value for are left out."""
    seen: dict[str, list[dict[str, None]]] = {}
    done: set[tuple] = set()  # (machine, the fields read): records of one machine mostly agree
    for rec in records:
        env = rec.get("environment")
        if not isinstance(env, dict):
            env = {}
        machine = str(F.get_value(rec, F.MACHINE))
        key = (machine, *map(env.get, FIELDS_READ))
        try:
            if key in done:
                continue
            done.add(key)
        except TypeError:  # an unhashable value: read it every time
            pass
        values = seen.get(machine)
        if values is None:
            values = seen[machine] = [{} for _ in COLUMNS]
        for i, (_, fn) in enumerate(COLUMNS):
            v = fn(env)
            if v is not None and v != "":
                values[i].setdefault(str(v), None)
    if not seen:
        return None
    keep = [i for i in range(len(COLUMNS)) if any(values[i] for values in seen.values())]
    rows = []
    for machine in sorted(seen, key=F.sort_key):
        row = [label_cell(machine)]
        for i in keep:
            texts = list(seen[machine][i])
            row.append(Cell("; ".join(texts), "; ".join(texts)) if texts else missing())
        rows.append(row)
    notes = ["From the records' environment (cnnbench sysinfo shows the same for this machine). GPUs: the "
             "machine's GPUs when the run was made; CUDA: the version torch was built with (or the log's); "
             "several values: the records of that machine disagree."]
    columns = F.headers(F.MACHINE) + [COLUMNS[i][0] for i in keep]
    return Table("systems", "Systems", "systems", columns, rows, notes, label_columns=len(columns))


register(TableKind("systems", 10, lambda inputs: systems_table(inputs.records), table_section("Systems")))
