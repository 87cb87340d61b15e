"""What differs between the torch releases cnnbench runs on (``torch>=2.11``), in one place.

Each function picks the newer API where this torch has it and the older one otherwise, so
that the first GPU machine, whose image may ship an older torch than the one we test with,
runs the same code. Found on an H200 with torch 2.11: ``dist.set_timeout`` and
``LaunchConfig(shutdown_timeout=...)`` did not exist there.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import torch.distributed as dist


def set_group_timeout(timeout: datetime.timedelta) -> None:
    """Every later collective of the default process group times out after ``timeout``.

    Newer torch has ``dist.set_timeout``; older releases have the same operation as
    ``distributed_c10d._set_pg_timeout`` (Gloo and NCCL alike)."""
    setter = getattr(dist, "set_timeout", None)
    if setter is None:
        setter = dist.distributed_c10d._set_pg_timeout
    setter(timeout)


def supported_fields(cls: type, wanted: dict[str, Any]) -> dict[str, Any]:
    """The items of ``wanted`` that the dataclass ``cls`` has a field for (an option newer
    than this torch is left at the old behaviour instead of failing the run: without
    ``LaunchConfig.shutdown_timeout``, before torch 2.12, stopping the workers after a failure
    waits up to torch's own 30 s for a worker that ignores SIGTERM, not 5 s)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in wanted.items() if k in names}
