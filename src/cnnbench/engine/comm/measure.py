"""The body of ``cnnbench comm`` on every rank: each collective over the sizes, a record each.

Every rank runs the same sequence of collectives, a failed rank included. Each size's buffers
are made, and every rank says whether it made them (one all-reduce of a flag per rank) before
any rank calls the collective; then the collective is tried once untimed, and every rank says
again whether it ran. When either fails on any rank (memory that runs out on one GPU, a
collective or a dtype the back end does not support), every rank learns which ranks failed,
the collective gets one ``error`` record naming them and the first one's reason, and the next
collective goes on: nothing waits for ``--timeout``. Rank 0 prints a line per size as
nccl-tests does and appends each record to the store as soon as it is measured, so a run
stopped half way keeps what it measured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from cnnbench.distributed.process_group import gather_to_main, max_over_workers
from cnnbench.distributed.world import World
from cnnbench.engine.comm.ops import Op, make_op, torch_dtype
from cnnbench.engine.comm.records import comm_record, summary_lines, table_header, table_line
from cnnbench.engine.comm.spec import CommConfig
from cnnbench.engine.comm.timing import synchronize, time_op
from cnnbench.results.error_text import error_text

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


_FAILURES = (RuntimeError, ValueError, NotImplementedError, TypeError, MemoryError)
"""What making the buffers or the first call may raise (out of memory is a RuntimeError)."""


def _prepared(setting: Setting, collective: str, size: int) -> tuple[Op, int, int] | str:
    """The collective at ``size``, run once on every rank; or why it failed on any rank (one line).

    Every rank says whether its buffers were made before any rank calls the collective, and
    again after the first call: a rank whose allocation failed must not skip to a different
    collective (the flag's) while the others wait in this one, which NCCL would let hang until
    ``--timeout``."""
    mine, prepared = "", None
    try:
        prepared = make_op(collective, size, setting.world.world_size, torch_dtype(setting.config.dtype),
                           setting.device)
    except _FAILURES as exc:
        mine = error_text(exc).splitlines()[0]
    failed = failed_ranks(bool(mine), setting.world, setting.device)
    if not failed and prepared is not None:
        try:
            prepared[0]()
            synchronize(setting.device)
        except _FAILURES as exc:
            mine = error_text(exc).splitlines()[0]
        failed = failed_ranks(bool(mine), setting.world, setting.device)
    if not failed and prepared is not None:
        return prepared
    del prepared  # free this rank's buffers before the next collective's
    reasons = gather_to_main(mine, setting.world)  # every rank is here: all agreed it failed
    where = f"{setting.backend} on {setting.device.type}, dtype {setting.config.dtype}"
    return f"{collective} did not run ({where}) {failure_text(failed, reasons or [], setting.world.world_size)}"


def failed_ranks(failed: bool, world: World, device: torch.device) -> list[int]:
    """The ranks that failed (each rank says whether it did; one all-reduce, the same list on every rank)."""
    flags = [0.0] * world.world_size
    flags[world.rank] = 1.0 if failed else 0.0
    return [rank for rank, flag in enumerate(max_over_workers(flags, device)) if flag > 0]


def failure_text(failed: list[int], reasons: list[str], world_size: int) -> str:
    """``on rank 1: CUDA out of memory ...``: which ranks failed and the first one's reason."""
    which = ("on every rank" if len(failed) == world_size and world_size > 1
             else f"on rank {failed[0]}" if len(failed) == 1
             else f"on ranks {', '.join(map(str, failed))}")
    reason = next((reasons[r] for r in failed if r < len(reasons) and reasons[r]), "")
    return f"{which}: {reason}" if reason else which
