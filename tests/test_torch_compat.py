"""cnnbench on an older torch than the one we test with (the first GPU machine had 2.11)."""

from __future__ import annotations

import dataclasses
import datetime

import torch.distributed as dist

from cnnbench.distributed import torch_compat
from cnnbench.engine.multidevice import launch


def test_set_group_timeout_uses_set_timeout_where_torch_has_it(monkeypatch):
    calls = []
    monkeypatch.setattr(dist, "set_timeout", lambda t: calls.append(("new", t)), raising=False)
    monkeypatch.setattr(dist.distributed_c10d, "_set_pg_timeout", lambda t: calls.append(("old", t)))
    torch_compat.set_group_timeout(datetime.timedelta(seconds=7))
    assert calls == [("new", datetime.timedelta(seconds=7))]


def test_set_group_timeout_falls_back_on_a_torch_without_set_timeout(monkeypatch):
    """torch 2.11 has no dist.set_timeout: a compiled or profiled multi-GPU run failed there."""
    calls = []
    monkeypatch.delattr(dist, "set_timeout", raising=False)
    monkeypatch.setattr(dist.distributed_c10d, "_set_pg_timeout", lambda t: calls.append(t))
    torch_compat.set_group_timeout(datetime.timedelta(seconds=9))
    assert calls == [datetime.timedelta(seconds=9)]


def test_the_older_timeout_setter_exists_in_this_torch():
    assert callable(dist.distributed_c10d._set_pg_timeout)


def test_a_launch_option_this_torch_lacks_is_left_out():
    @dataclasses.dataclass
    class OldLaunchConfig:  # LaunchConfig of torch 2.11: no shutdown_timeout
        min_nodes: int
        max_nodes: int

    assert torch_compat.supported_fields(OldLaunchConfig, {"shutdown_timeout": 5, "max_nodes": 1}) == {"max_nodes": 1}


def test_workers_start_on_a_torch_whose_launch_config_lacks_shutdown_timeout(monkeypatch):
    """launch_workers builds its LaunchConfig from the fields this torch has."""
    seen = {}
    real = launch.LaunchConfig
    names = {f.name for f in dataclasses.fields(real)} - {"shutdown_timeout"}

    def old_config(**kwargs):
        seen.update(kwargs)
        if "shutdown_timeout" in kwargs:
            raise TypeError("LaunchConfig.__init__() got an unexpected keyword argument 'shutdown_timeout'")
        return real(**kwargs)

    old_config.__dataclass_fields__ = {n: real.__dataclass_fields__[n] for n in names}  # type: ignore[attr-defined]
    monkeypatch.setattr(launch, "LaunchConfig", old_config)
    monkeypatch.setattr(launch, "elastic_launch", lambda config, fn: lambda *a: {0: fn(*a)})
    assert launch.launch_workers(lambda x: x + 1, (1,), nprocs=1, timeout_s=10) == {0: 2}
    assert "shutdown_timeout" not in seen
