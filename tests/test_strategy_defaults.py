"""The values a run gives its strategy's unset options come from the strategy registry
(``Declared.options`` and ``training_only`` in config/strategy_rules.py), not from names of
strategies written into ``ParallelOptions.parallel_defaults`` (issue 20's note)."""

from __future__ import annotations

import pytest

from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.choices import Declared
from cnnbench.config.strategy_rules import STRATEGY_RULES

DDP = {"bucket_cap_mb": 25.0, "gradient_compression": "none"}
NO_DDP = {"broadcast_buffers": None}
"""A switch DDP has on by default is recorded as null where DDP is not used."""


@pytest.mark.parametrize(("options", "device_kind", "filled"), [
    ({"variable_update": "replicated"}, "cpu", {"all_reduce": "gloo", **DDP}),
    ({"variable_update": "replicated"}, "cuda", {"all_reduce": "nccl", **DDP}),
    ({"variable_update": "replicated", "forward_only": True}, "cpu", {"all_reduce": "gloo", **NO_DDP}),
    ({"variable_update": "replicated", "bucket_cap_mb": 50.0, "all_reduce": "gloo"}, "cuda",
     {"gradient_compression": "none"}),
    ({"variable_update": "parameter_server"}, "cuda",
     {"all_reduce": "nccl", "local_parameter_device": "device", **NO_DDP}),
    ({"variable_update": "independent"}, "cpu", NO_DDP),
    ({"variable_update": "fsdp"}, "cuda", {"all_reduce": "nccl", **NO_DDP}),
    ({"variable_update": "replicated"}, "auto", DDP),  # the back end waits for the device kind
])
def test_each_strategy_gets_the_defaults_of_the_options_it_takes(options, device_kind, filled):
    config = RunConfig(model="trivial", **options)
    assert config.parallel_defaults(device_kind, config.forward_only) == filled


def test_a_strategy_declared_with_other_options_gets_their_defaults_without_another_edit(monkeypatch):
    """Declare fsdp with DDP's bucket size, for training only: its defaults follow the declaration
    alone."""
    monkeypatch.setitem(STRATEGY_RULES, "fsdp", Declared(("fsdp",), ("all_reduce", "bucket_cap_mb"),
                                                         training_only=("bucket_cap_mb",)))
    training = RunConfig(model="trivial", variable_update="fsdp")
    assert training.parallel_defaults("cpu", False) == {"all_reduce": "gloo", "bucket_cap_mb": 25.0, **NO_DDP}
    inference = RunConfig(model="trivial", variable_update="fsdp", forward_only=True)
    assert inference.parallel_defaults("cpu", True) == {"all_reduce": "gloo", **NO_DDP}
    with pytest.raises(ConfigError, match="applies to --variable-update replicated / fsdp") as info:
        RunConfig(model="trivial", variable_update="independent", bucket_cap_mb=10.0)
    assert info.value.field == "bucket_cap_mb"


def test_the_filled_configuration_is_what_runs_record():
    resolved = RunConfig(model="trivial", device="cpu").with_derived_defaults()
    assert (resolved.all_reduce, resolved.bucket_cap_mb, resolved.gradient_compression) == ("gloo", 25.0, "none")
    assert resolved.local_parameter_device is None  # replicated has no parameter server
