"""Input-pipeline tables: records of ``cnnbench data`` (``config.mode == "data"``), no model.

Such a record measures how fast a data set is read, decoded and augmented on a machine's
CPU. Its rows: the pipeline's configuration (data set, image size, preprocessing, batch,
loader processes, ``--host-cpus``); its columns: the report's column field (the machine by
default, so CPUs compare side by side); cells: the median images/sec over repeats, in total
and per core the run could use. These records stay out of the model tables. No torch here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.analysis.points import Measure
from cnnbench.config.input_options import DEFAULT_DALI_HW_DECODER_LOAD
from cnnbench.report.kinds import Inputs, TableKind, register, table_section
from cnnbench.report.layout import header, shown_value
from cnnbench.report.table import Cell, Table, label_cell, missing, throughput
from cnnbench.words import plural

DATA_MODE = "data"
METRICS = (F.IPS, F.IPS_PER_CORE)
"""The fields of its tables, one table each, titled by the field's label."""


def is_pipeline_record(record: Mapping[str, Any]) -> bool:
    """A ``cnnbench data`` record (the input pipeline alone)?"""
    config = record.get("config")
    return isinstance(config, Mapping) and config.get("mode") == DATA_MODE


def row_label(config: Mapping[str, Any]) -> str:
    """``imagefolder 224 px, distortions, bilinear, batch 64, 3 workers, 4 cores``; a pipeline other
    than ``cpu`` (the default, and what records from before ``--input-pipeline`` ran) is named:
    ``imagefolder through dali 224 px, ...``, with the hardware decoder's share where one other than
    the default was given (``through dali, hardware decoder 0.25``: runs that differ in it are not
    repeats; the default given or not reads the same)."""
    pipeline = config.get("input_pipeline")
    through = f" through {pipeline}" if pipeline not in (None, "cpu") else ""
    load = config.get("dali_hw_decoder_load")
    if isinstance(load, (int, float)) and not isinstance(load, bool) and load != DEFAULT_DALI_HW_DECODER_LOAD:
        through += f", hardware decoder {load:g},"
    parts = [f"{config.get('data_name') or 'data'}{through} {F.text(config.get('image_size'))} px",
             "distortions" if config.get("distortions") else "centre crop"]
    if config.get("resize_method"):
        parts.append(str(config["resize_method"]))
    parts.append(f"batch {F.text(config.get('batch_size'))}")
    workers = config.get("num_workers")
    parts.append(plural(workers, "worker") if isinstance(workers, int) else f"{F.text(workers)} workers")
    if config.get("host_cpus"):
        parts.append(f"{config['host_cpus']} cores")
    if config.get("device") not in (None, "cpu"):
        parts.append(f"to {config['device']}")
    return ", ".join(parts)


def pipeline_tables(records: Sequence[Mapping[str, Any]], column_field: str, noise: float) -> list[Table]:
    """The total and per-core tables of the ``cnnbench data`` records among ``records``."""
    data = [r for r in records if is_pipeline_record(r)]
    if not data:
        return []
    rows: dict[str, dict[Any, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for rec in data:
        column = shown_value(column_field, partial(F.get_value, rec))
        rows[row_label(rec["config"])][F.hashable(column)].append(rec)
    columns = sorted({c for cells in rows.values() for c in cells}, key=F.sort_key)
    tables = []
    for metric in METRICS:
        what = F.field(metric).label
        body: list[list[Cell]] = []
        for label in sorted(rows, key=F.sort_key):
            row = [label_cell(label)]
            for c in columns:
                recs = rows[label].get(c)
                row.append(throughput(_measure(recs, metric), noise) if recs else missing())
            body.append(row)
        notes = [f"cnnbench data: the input pipeline alone (read, decode, augment, normalise; no model). Cell = "
                 f"median {what} ({metric}) over repeats; columns: {F.short_name(column_field)}."]
        tables.append(Table(f"input-pipeline-{F.slug(what)}", f"Input pipeline alone: {what}", "pipeline",
                            ["pipeline"] + [header(column_field, c) for c in columns], body, notes))
    return tables


def _measure(records: list[Mapping[str, Any]], metric: str) -> Measure:
    values: list[float] = []
    statuses: dict[str, int] = defaultdict(int)
    for rec in records:
        status = str(rec.get("status") or "ok")
        value = F.get_value(rec, metric)
        if status == "ok" and isinstance(value, (int, float)) and not isinstance(value, bool):
            values.append(float(value))
        statuses[status] += 1
    return Measure(values, dict(statuses))


def _build(inputs: Inputs) -> list[Table]:
    """cnnbench data: no model, tables of their own (by the first column field)."""
    return pipeline_tables(inputs.records, inputs.layout.columns[0], inputs.options.repeat_noise)


register(TableKind("pipeline", 70, _build, table_section("Input pipeline alone (cnnbench data)", caption=True)))
