"""The CUDA device a run (or one rank of it) uses, as CUDA describes it: name, SMs, MIG profile.

    describe_cuda_device(torch.device("cuda:1")).as_dict()
    # {'cuda_index': 1, 'name': 'NVIDIA A100-SXM4-80GB MIG 3g.40gb', 'sm_count': 42,
    #  'mig_profile': '3g.40gb', 'uuid': '...'}

The name and the SM count are what ``torch.cuda.get_device_properties`` says of that very
device, never of device 0: on a MIG slice CUDA names the slice (``"... MIG 3g.40gb"``) and
counts its SMs, which is what its peak is scaled by (:func:`cnnbench.machine.peaks.peak_share`).
Imports torch lazily.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from cnnbench.machine.peaks import mig_profile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CudaDevice:
    cuda_index: int
    name: str
    sm_count: int | None
    mig_profile: str | None
    """The MIG profile of a slice (``"3g.40gb"``), None for a whole GPU."""
    uuid: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cuda_index(device: Any) -> int:
    """The CUDA index of a device (``torch.device`` or ``"cuda:k"``); the current device when
    it names none."""
    import torch

    index = torch.device(device).index
    return int(index) if index is not None else int(torch.cuda.current_device())


def describe_cuda_device(device: Any) -> CudaDevice:
    """The run's own CUDA device (``torch.device``, ``"cuda:k"`` or an index)."""
    import torch

    index = device if isinstance(device, int) else cuda_index(device)
    props = torch.cuda.get_device_properties(index)
    name = str(props.name)
    sms = getattr(props, "multi_processor_count", None)
    try:
        uuid: str | None = str(props.uuid)
    except Exception as exc:  # an old torch without device UUIDs
        log.debug("no UUID for cuda:%d: %s", index, exc)
        uuid = None
    return CudaDevice(index, name, int(sms) if sms else None, mig_profile(name), uuid)
