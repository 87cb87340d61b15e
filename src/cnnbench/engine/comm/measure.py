"""The body of ``cnnbench comm`` on every rank: each collective over the sizes, a record each.

Every rank runs the same sequence. For each collective, the first size is tried once before
anything is timed; when it fails on any rank (a collective or a dtype the back end does not
support, memory that runs out), every rank learns it (one all-reduce of a flag) and the
collective gets one ``error`` record naming it, and the next collective goes on. Rank 0
prints a line per size as nccl-tests does and appends each record to the store as soon as it
is measured, so a run stopped half way keeps what it measured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from cnnbench.distributed.process_group import max_over_workers
from cnnbench.distributed.world import World
from cnnbench.engine.comm.ops import Op, make_op, torch_dtype
from cnnbench.engine.comm.records import comm_record, summary_lines, table_header, table_line
from cnnbench.engine.comm.spec import CommConfig
from cnnbench.engine.comm.timing import synchronize, time_op
from cnnbench.results.record import error_text

log = logging.getLogger(__name__)

Emit = Callable[[str], None]


class Setting:
    """What every record of this run shares: the world, device, back end and environment."""

    def __init__(self, config: CommConfig, world: World, device: torch.device, backend: str,
                 environment: Mapping[str, Any] | None, warnings: list[str]) -> None:
        self.config = config
        self.world = world
        self.device = device
        self.backend = backend
        self.environment = environment or {}
        self.warnings = warnings


def measure_all(setting: Setting, emit: Emit | None, write: Callable[[dict[str, Any]], Path] | None,
                ) -> list[dict[str, Any]]:
    """Every collective over every size (see the module); rank 0's records (others: empty)."""
    config, main = setting.config, setting.world.is_main
    sizes = config.sizes(setting.device.type)
    if emit and main:
        for line in table_header(setting, sizes):
            emit(line)
    records: list[dict[str, Any]] = []
    for collective in config.collectives:
        done = _measure_collective(setting, collective, sizes, emit if main else None, write if main else None)
        records += done if main else []
    if emit and main:
        for line in summary_lines(records):
            emit(line)
    return records


def _measure_collective(setting: Setting, collective: str, sizes: list[int], emit: Emit | None,
                        write: Callable[[dict[str, Any]], Path] | None) -> list[dict[str, Any]]:
    """One collective over the sizes; each record written (``write``) as soon as it is made."""
    out: list[dict[str, Any]] = []
    for size in sizes:
        prepared = _prepared(setting, collective, size)
        if isinstance(prepared, str):
            if emit:
                emit(f"# {prepared}")
            failed = comm_record(setting, collective, size, None, error=prepared)
            if write is not None:
                write(failed)
            return out + [failed]
        op, count, total = prepared
        timing = time_op(op, setting.config.warmup, setting.config.iters, setting.device)
        del op, prepared  # the buffers go before the next size's are made
        record = comm_record(setting, collective, total, timing, count=count)
        if write is not None:
            write(record)
        out.append(record)
        if emit:
            emit(table_line(record))
        log.debug("%s %d bytes: %s s", collective, total, timing.median)
    return out


def _prepared(setting: Setting, collective: str, size: int) -> tuple[Op, int, int] | str:
    """The collective at ``size``, run once on every rank; or why it failed on any rank (one line)."""
    mine, prepared = "", None
    try:
        prepared = make_op(collective, size, setting.world.world_size, torch_dtype(setting.config.dtype),
                           setting.device)
        prepared[0]()
        synchronize(setting.device)
    except (RuntimeError, ValueError, NotImplementedError, TypeError, MemoryError) as exc:
        mine, prepared = error_text(exc).splitlines()[0], None
    failed = max_over_workers([1.0 if mine else 0.0], setting.device)[0] > 0
    if not failed and prepared is not None:
        return prepared
    where = f"{setting.backend} on {setting.device.type}, dtype {setting.config.dtype}"
    return f"{collective} did not run ({where}): {mine or 'it failed on another rank'}"
