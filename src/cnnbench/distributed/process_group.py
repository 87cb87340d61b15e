"""The torch.distributed process group of a run's workers: start, barrier, gather, stop.

The back end is the run's ``--all-reduce`` (NCCL on GPUs, Gloo on CPUs); ``--timeout``
bounds every collective, so a worker that stops answering makes the others fail instead
of waiting forever.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

import torch
import torch.distributed as dist

from cnnbench.distributed.world import World

log = logging.getLogger(__name__)


def start_process_group(world: World, backend: str, device: torch.device, timeout_s: float) -> None:
    """Join the group (rendezvous through the environment torch's agent set)."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
    kwargs: dict[str, Any] = {}
    if device.type == "cuda" and backend == "nccl":
        kwargs["device_id"] = device  # binds the communicator to this worker's GPU at once
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    log.debug("rank %d of %d joined the %s process group", world.rank, world.world_size, backend)


def stop_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def barrier(device: torch.device) -> None:
    """All workers reach this point before any goes on."""
    if device.type == "cuda" and dist.get_backend() == "nccl":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()


def gather_to_main(value: Any, world: World) -> list[Any] | None:
    """Every worker's ``value`` (picklable), in rank order, on rank 0; None elsewhere."""
    out: list[Any] | None = [None] * world.world_size if world.is_main else None
    dist.gather_object(value, out, dst=0)
    return out


def sum_over_workers(values: list[float], device: torch.device) -> list[float]:
    """Each value summed over every worker (one all-reduce)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def max_over_workers(values: list[float], device: torch.device) -> list[float]:
    """Each value's maximum over every worker (one all-reduce)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()
