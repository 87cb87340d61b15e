"""Configuration validation and the CLI flags derived from it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.cli_args import add_config_arguments, config_from_args


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"batch_size": 0}, "--batch-size"),
        ({"num_batches": 0}, "--num-batches"),
        ({"num_epochs": 0}, "--num-epochs"),
        ({"num_epochs": 2}, "--num-epochs"),
        ({"num_epochs": 2, "num_batches": 5}, "--num-batches"),
        ({"num_epochs": 2, "num_warmup_batches": 3}, "--num-warmup-batches"),
        ({"num_epochs_per_decay": 2.0, "learning_rate_decay_factor": 0.5}, "--num-epochs-per-decay"),
        ({"num_learning_rate_warmup_epochs": 1.0}, "--num-learning-rate-warmup-epochs"),
        ({"num_warmup_batches": -1}, "--num-warmup-batches"),
        ({"display_every": 0}, "--display-every"),
        ({"image_size": 8}, "--image-size"),
        ({"device": "tpu"}, "--device"),
        ({"precision": "fp8"}, "--precision"),
        ({"data_format": "NWHC"}, "--data-format"),
        ({"optimizer": "lamb"}, "--optimizer"),
        ({"synthetic_location": "disk"}, "--synthetic-location"),
        ({"learning_rate": 0.0}, "--learning-rate"),
        ({"momentum": 1.5}, "--momentum"),
        ({"batch_size": "32"}, "--batch-size"),
        ({"forward_only": 1}, "--forward-only"),
        ({"compile": True, "num_warmup_batches": 0}, "--num-warmup-batches"),
        ({"all_reduce": "nccl", "device": "cpu"}, "--all-reduce"),
        ({"all_reduce": "gloo", "variable_update": "independent"}, "--all-reduce"),
        ({"variable_update": "parameter_server", "forward_only": True}, "--variable-update"),
        ({"forward_only": True, "optimizer": "adam"}, "--optimizer"),
        ({"forward_only": True, "learning_rate": 0.1}, "--learning-rate"),
        ({"momentum": 0.5}, "--momentum"),
        ({"optimizer": "adam", "momentum": 0.5}, "--momentum"),
        ({"num_workers": 2}, "--num-workers"),
        ({"synthetic_location": "loader", "num_workers": -1}, "--num-workers"),
        ({"learning_rate": float("nan")}, "--learning-rate"),
        ({"weight_decay": float("inf")}, "--weight-decay"),
        ({"distortions": True}, "--distortions"),
        ({"num_devices": 0}, "--num-devices"),
    ],
)
def test_invalid_values_name_the_flag(changes, flag):
    with pytest.raises(ConfigError) as info:
        RunConfig(**changes)
    assert str(info.value).startswith(flag + ":")
    assert "\n" not in str(info.value)


def test_choices_are_listed_in_the_message():
    with pytest.raises(ConfigError, match=r"choose from fp32, tf32, amp_fp16, amp_bf16, fp16, bf16"):
        RunConfig(precision="fp8")


def test_from_mapping_rejects_unknown_fields():
    with pytest.raises(ConfigError, match="--batchsize: unknown configuration field"):
        RunConfig.from_mapping({"batchsize": 8})


def test_recorded_config_leaves_out_output_options():
    recorded = RunConfig(results_dir="/x", machine_label="m").recorded()
    assert "results_dir" not in recorded and "machine_label" not in recorded
    assert recorded["model"] == "resnet18"


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return config_from_args(parser.parse_args(argv))


def test_every_field_has_a_flag_with_help():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    text = parser.format_help()
    for f in dataclasses.fields(RunConfig):
        flag = ("--no-" if f.default is True else "--") + f.name.replace("_", "-")  # switches on by default
        assert flag in text, flag
        assert f.metadata["help"], f.name


def test_flags_and_tf_style_aliases():
    cfg = _parse(["--model", "vgg16", "--batch_size", "8", "--num-batches", "3", "--forward_only",
                  "--data-format", "NHWC"])
    assert (cfg.model, cfg.batch_size, cfg.num_batches, cfg.forward_only, cfg.data_format) == (
        "vgg16", 8, 3, True, "NHWC")


def test_defaults_follow_tf_cnn_benchmarks():
    cfg = _parse([]).with_derived_defaults()
    assert (cfg.num_batches, cfg.num_warmup_batches, cfg.display_every, cfg.seed) == (100, 10, 10, 1234)
    assert cfg.batch_size is None and cfg.image_size is None


def test_unset_options_are_filled_from_the_others():
    training = RunConfig(optimizer="momentum").with_derived_defaults()
    assert (training.optimizer, training.momentum, training.learning_rate, training.weight_decay) == (
        "momentum", 0.9, 0.005, 4e-5)
    plain = RunConfig().with_derived_defaults()
    assert plain.optimizer == "sgd" and plain.momentum is None  # plain SGD has no momentum
    inference = RunConfig(forward_only=True).with_derived_defaults()
    assert (inference.optimizer, inference.learning_rate, inference.momentum, inference.weight_decay) == (
        None, None, None, None)
    loader = RunConfig(synthetic_location="loader").with_derived_defaults()
    assert loader.num_workers == 2 and RunConfig().with_derived_defaults().num_workers is None


def test_help_groups_flags_by_section():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    text = parser.format_help()
    for title in ("model and numerics options", "steps and measurement options", "devices options",
                  "training options", "input options", "output options"):
        assert title in text, title
