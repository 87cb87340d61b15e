"""tf_cnn_benchmarks' command lines, in their own spelling, through `cnnbench run`'s parser."""

from __future__ import annotations

import argparse
import shlex

import pytest

from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.cli_args import add_config_arguments, config_from_args
from cnnbench.config.tf_flags import TfFlagError, translate, translate_with_notes


def parse(line: str) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return config_from_args(parser.parse_args(translate(shlex.split(line))))


# tf_cnn_benchmarks' own README (scripts/tf_cnn_benchmarks/README.md)
README_SINGLE_GPU = "--num_gpus=1 --batch_size=32 --model=resnet50 --variable_update=parameter_server"
README_REAL_DATA = ("--data_format=NCHW --batch_size=256 --model=resnet50 --optimizer=momentum "
                    "--variable_update=replicated --nodistortions --gradient_repacking=8 --num_gpus=8 "
                    "--num_epochs=90 --weight_decay=1e-4 --data_dir=/data/imagenet --use_fp16 --train_dir=/ckpt")
# The tensorpack comparison: tf_cnn_benchmarks with a parameter server on the CPU.
TENSORPACK = ("--num_gpus=8 --batch_size=64 --model=resnet50 --variable_update=parameter_server "
              "--local_parameter_device=cpu")
# Lambda's benchmark.sh (the layout of the imported logs): args for training and inference, fp16.
LAMBDA_TRAIN = ("--optimizer=sgd --model=resnet50 --num_gpus=4 --batch_size=64 --variable_update=replicated "
                "--distortions=false --num_batches=100 --data_name=imagenet --all_reduce_spec=nccl --use_fp16=True")
LAMBDA_INFERENCE = LAMBDA_TRAIN + " --forward_only=True"


def test_readme_single_gpu_line():
    cfg = parse(README_SINGLE_GPU)
    assert (cfg.num_devices, cfg.batch_size, cfg.model, cfg.variable_update) == (1, 32, "resnet50", "parameter_server")


def test_tensorpack_parameter_server_on_cpu():
    cfg = parse(TENSORPACK)
    assert (cfg.num_devices, cfg.local_parameter_device, cfg.variable_update) == (8, "cpu", "parameter_server")


def _after(words: list[str], flag: str) -> str:
    return words[words.index(flag) + 1]


def test_readme_real_data_line():
    result = translate_with_notes(shlex.split(README_REAL_DATA))
    words = result.args
    assert _after(words, "--num-devices") == "8" and _after(words, "--precision") == "amp_fp16"
    assert _after(words, "--num-epochs") == "90" and _after(words, "--results-dir") == "/ckpt"
    assert _after(words, "--optimizer") == "momentum"
    assert "--distortions" not in words and not any("gradient_repacking" in w for w in words)
    assert _after(words, "--data-dir") == "/data/imagenet"
    assert any("--gradient_repacking" in n for n in result.notes)


def test_lambda_training_line():
    cfg = parse(LAMBDA_TRAIN)
    assert (cfg.model, cfg.num_devices, cfg.batch_size, cfg.variable_update, cfg.distortions) == (
        "resnet50", 4, 64, "replicated", False)
    assert (cfg.num_batches, cfg.all_reduce, cfg.precision, cfg.optimizer) == (100, "nccl", "amp_fp16", "sgd")
    assert cfg.data_name is None and cfg.data_dir is None  # --data_name=imagenet without --data_dir: synthetic
    assert cfg.with_derived_defaults().data_name == "synthetic"


def test_lambda_inference_line_leaves_the_optimizer_out_with_a_note():
    result = translate_with_notes(shlex.split(LAMBDA_INFERENCE))
    assert "--optimizer" not in " ".join(result.args) and "--forward-only" in result.args
    assert any("--optimizer is not used with --forward_only" in n for n in result.notes)
    cfg = parse(LAMBDA_INFERENCE)
    assert cfg.forward_only and cfg.optimizer is None


def test_tfs_meaning_of_forward_only_comes_with_its_spelling_alone():
    """One flag spelled with _ (--batch_size) turned cnnbench's error for a training option with
    --forward-only into a note, naming the flags in the spelling not typed."""
    result = translate_with_notes(["--batch_size", "8", "--forward-only", "--learning-rate", "0.1"])
    assert not result.notes and "--learning-rate" in result.args  # cnnbench's check refuses it
    with pytest.raises(ConfigError, match="--learning-rate"):
        parse("--batch_size 8 --forward-only --learning-rate 0.1")
    result = translate_with_notes(["--batch-size", "8", "--forward_only", "--learning_rate", "0.1"])
    assert result.notes == ["--learning_rate is not used with --forward_only (tf_cnn_benchmarks ignores it too); "
                            "the record says null"] and "--learning-rate" not in result.args


@pytest.mark.parametrize(("line", "expected"), [
    ("--forward_only", {"forward_only": True}),
    ("--forward_only=true", {"forward_only": True}),
    ("--forward_only=True", {"forward_only": True}),
    ("--forward_only=1", {"forward_only": True}),
    ("--forward_only=false", {"forward_only": False}),
    ("--noforward_only", {"forward_only": False}),
    ("--forward-only=false", {"forward_only": False}),
    ("--device=gpu", {"device": "cuda"}),
    ("--device=CPU", {"device": "cpu"}),
    ("--num_gpus 2", {"num_devices": 2}),
    ("--use_fp16", {"precision": "amp_fp16"}),
    ("--use_fp16=false", {"precision": "fp32"}),
    ("--xla", {"compile": True}),
    ("--xla=True", {"compile": True}),
    ("--local_parameter_device=gpu --variable_update=parameter_server", {"local_parameter_device": "device"}),
    ("--train_dir=/tmp/x", {"results_dir": "/tmp/x"}),
    ("--display_every=5 --num_warmup_batches=2", {"display_every": 5, "num_warmup_batches": 2}),
    ("--optimizer=rmsprop --rmsprop_momentum=0.5", {"optimizer": "rmsprop", "momentum": 0.5}),
    ("--weight_decay=1e-4", {"weight_decay": 1e-4}),
    ("--init_learning_rate=0.1", {"learning_rate": 0.1}),
    ("--tf_random_seed=7", {"seed": 7}),
    ("--data_name=imagenet", {"data_name": None, "data_dir": None}),
    ("--data_dir=/data/imagenet --data_name=imagenet", {"data_name": "imagefolder", "data_dir": "/data/imagenet"}),
    ("--data_name=cifar10 --data_dir /data/cifar", {"data_name": "cifar10", "data_dir": "/data/cifar"}),
    ("--data_dir=/data/x", {"data_name": None, "data_dir": "/data/x"}),  # guessed from the folder
    ("--data_dir=/data/x --distortions", {"distortions": True}),
    ("--data_dir=/data/x --distortions=false", {"distortions": False}),
    ("--data_dir=/data/x --resize_method=bicubic", {"resize_method": "bicubic"}),
    ("--data_dir=/data/x --resize-method nearest", {"resize_method": "nearest"}),
    ("--nodistortions", {"distortions": False}),
    ("--batch-size=8", {"batch_size": 8}),
])
def test_forms_and_names(line, expected):
    cfg = parse(line)
    for key, value in expected.items():
        assert getattr(cfg, key) == value, key


@pytest.mark.parametrize(("line", "words"), [
    ("--variable_update=distributed_replicated", "torchrun"),
    ("--variable_update=horovod", "torchrun"),
    ("--all_reduce_spec=xring", "nccl or gloo"),
    ("--num_epochs=1.5", "whole epochs"),
    ("--eval", "not built"),
    ("--adam_beta1=0.8", "not built"),
    ("--adam-beta1=0.8", "^--adam-beta1: this tf_cnn_benchmarks feature is not built"),  # as typed
    ("--noml_perf", "^--noml_perf: this tf_cnn_benchmarks feature is not built"),
    ("--rmsprop_decay=0.5", "fixed at 0.9"),
    ("--forward_only=maybe", "^--forward_only: expected true or false, got 'maybe'"),
    ("--forward-only=maybe", "^--forward-only: expected true or false"),
    ("--use_fp16=maybe", "^--use_fp16: expected true or false"),
    ("--data_name=cifar10", "--image-size 32"),
    ("--data_name cifar10", "^--data_name cifar10 without --data_dir: .*give --data_dir DIR"),
    ("--data-name=cifar10", "^--data-name=cifar10 without --data-dir: .*give --data-dir DIR"),
    ("--data_dir=/x --resize_method=round_robin", "bilinear, bicubic or nearest"),
    ("--data_dir=/x --resize_method=area", "bilinear, bicubic or nearest"),
])
def test_what_cannot_be_honoured_is_one_line(line, words):
    with pytest.raises(TfFlagError, match=words):
        translate(shlex.split(line))


@pytest.mark.parametrize(("line", "expected"), [
    ("--device=gpu", ["--device", "cuda"]),
    ("--device cuda", ["--device", "cuda"]),
    ("--device=auto", ["--device", "auto"]),
    ("--device=tpu", ["--device", "tpu"]),  # the parser names the allowed values
    ("--local_parameter_device=gpu", ["--local-parameter-device", "device"]),
    ("--local-parameter-device device", ["--local-parameter-device", "device"]),
])
def test_tf_values_are_renamed_and_ours_pass_through(line, expected):
    assert translate(shlex.split(line)) == expected


def test_num_epochs_becomes_whole_epochs():
    assert translate(["--num_epochs=3.0"]) == ["--num-epochs", "3"]


def test_the_command_refuses_in_one_line_pointing_to_help(capsys):
    assert main(["run", "--variable_update=horovod"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cnnbench run --help" in err


def test_the_command_runs_a_tf_style_line_and_records_cnnbench_fields(tmp_path, capsys):
    line = (f"run --model=trivial --device=cpu --num_gpus=1 --batch_size=4 --num_batches=3 --num_warmup_batches=1 "
            f"--forward_only=True --optimizer=sgd --summary_verbosity=1 --train_dir={tmp_path}")
    assert main(shlex.split(line)) == 0
    err = capsys.readouterr().err
    assert "--summary_verbosity" in err and "--optimizer is not used" in err
    import json

    (record,) = [json.loads(x) for f in tmp_path.glob("*.jsonl") for x in f.read_text().splitlines()]
    assert record["config"]["forward_only"] is True and record["config"]["num_devices"] == 1
    assert "num_gpus" not in record["config"] and record["config"]["optimizer"] is None


def test_num_gpus_on_a_machine_without_gpus_is_refused_unless_cpu_workers_are_asked_for(monkeypatch, capsys,
                                                                                       tmp_path):
    from cnnbench.machine import devices

    monkeypatch.setattr(devices, "cuda_available", lambda: False)
    assert main(["run", "--model=trivial", "--num_gpus=2", f"--train_dir={tmp_path}"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("cnnbench run: error: --num_gpus=2: this machine has no CUDA GPU")
    assert "add --device=cpu to run 2 CPU workers" in line
    assert main(["run", "--model=trivial", "--num_gpus=01", f"--train_dir={tmp_path}"]) == 2
    assert "add --device=cpu to run 1 CPU worker (" in capsys.readouterr().err  # the count, read
    with pytest.raises(SystemExit) as info:
        main(["run", "--model=trivial", "--num_gpus=two", f"--train_dir={tmp_path}"])
    assert info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()  # no count to read: the parser names the bad value
    assert "'two'" in line
    assert list(tmp_path.iterdir()) == []
    translate_with_notes(["--num_gpus=2", "--device=cpu"]).check_machine()  # CPU workers, asked for
    monkeypatch.setattr(devices, "cuda_available", lambda: True)
    translate_with_notes(["--num_gpus=2"]).check_machine()  # GPUs here: as tf_cnn_benchmarks meant
