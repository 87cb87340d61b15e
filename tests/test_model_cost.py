"""Model cost (SPEC C8): counts against torchvision's metadata, seed 000 and hand counts; CLI; GPU peaks."""

from __future__ import annotations

import csv
import io
import json

import pytest
import torch
from torch import nn

from cnnbench.cli import main
from cnnbench.config import ConfigError
from cnnbench.machine.peaks import achieved_flops_per_s, known_gpu, mfu, peak_flops
from cnnbench.models import UnknownModelError, get_model_spec, list_models, registry
from cnnbench.models.cost import METHOD_META, METHOD_REAL, ModelCost, _measure, model_cost

WITH_METADATA = [
    n for n in list_models(include_aliases=False)
    if get_model_spec(n).source == "torchvision" and get_model_spec(n).reference.get("ops")
]

# torchvision's GoogLeNet weights are published without the two auxiliary classifiers
# (the builder drops aux1/aux2 after loading them); the model that is trained has them.
_NOT_IN_PUBLISHED_PARAMS = {"googlenet": ("aux1.", "aux2.")}


def test_every_torchvision_model_has_metadata():
    assert len(WITH_METADATA) >= 80


@pytest.mark.parametrize("name", WITH_METADATA)
def test_params_and_macs_agree_with_torchvision_metadata(name):
    """``_ops`` is GMACs: torchvision counted it with a dispatch-mode counter that counts one
    multiply-add of a convolution or matrix product as one operation (no factor 2), at the
    crop size of the weights (``reference["image_size"]``: 224, 299, 518 ...)."""
    ref = get_model_spec(name).reference
    cost = model_cost(name, ref["image_size"])
    assert cost.method == METHOD_META
    params = cost.params
    if name in _NOT_IN_PUBLISHED_PARAMS:
        prefixes = _NOT_IN_PUBLISHED_PARAMS[name]
        with torch.device("meta"):
            model = get_model_spec(name).build()
        params = sum(p.numel() for n, p in model.named_parameters() if not n.startswith(prefixes))
    assert params == ref["num_params"]
    assert cost.forward_macs / 1e9 == pytest.approx(ref["ops"], rel=0.02)
    assert cost.forward_flops == 2 * cost.forward_macs
    assert 2.5 * cost.forward_flops < cost.train_flops < 3.1 * cost.forward_flops


def test_resnet50_feature_memory_matches_seed_000():
    cost = model_cost("resnet50")
    assert cost.input_size == (3, 224, 224)
    assert cost.feature_memory_mib == pytest.approx(103, rel=0.10)  # seed 000: "103 MB" (MiB)
    assert cost.param_memory_mib == pytest.approx(97.5, abs=0.1)  # seed 000: "98 MB"
    assert cost.top1_error == pytest.approx(100 - 76.13) and cost.top5_error == pytest.approx(100 - 92.862)


class _Tiny(nn.Module):
    """conv -> relu_ -> depthwise conv -> in-place residual -> cat -> mean -> linear."""

    def __init__(self, num_classes: int = 10, data_dependent: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)
        self.fc = nn.Linear(8, num_classes)
        self.data_dependent = data_dependent

    def forward(self, x):  # type: ignore[no-untyped-def]
        if self.data_dependent and x[0, 0, 0, 0].item() != x[0, 0, 0, 0].item():  # no .item() on meta
            raise AssertionError("NaN input")
        y = torch.relu_(self.conv1(x))
        z = self.conv2(y)
        z += y
        return self.fc(torch.cat([z, y], 1).mean((2, 3)))


def _register_tiny(monkeypatch, name: str, data_dependent: bool = False) -> None:
    spec = registry.ModelSpec(
        name=name, source="builtin", default_image_size=8, min_image_size=1,
        builder=lambda num_classes=1000, image_size=8: _Tiny(num_classes, data_dependent),
    )
    registry._load_sources()
    monkeypatch.setitem(registry._SPECS, name, spec)


# Hand counts for _Tiny at 8x8 with 1000 classes (per image):
_MACS = 64 * 4 * 3 * 9 + 64 * 4 * 1 * 9 + 8 * 1000  # conv1, depthwise conv2, fc
_TRAIN = 2 * _MACS + 2 * (64 * 4 * 3 * 9) + 2 * 2 * (64 * 4 * 9) + 2 * 2 * (8 * 1000)
# ^ forward; conv1 weight grad only (the image needs no grad); conv2 and fc input + weight grads
_FEATURES = 4 * (256 + 256 + 256 + 512 + 8 + 1000)  # conv1, conv2, z += y, cat, mean, fc (relu_: 0)
_PARAMS = 3 * 4 * 9 + 4 * 9 + 8 * 1000 + 1000


@pytest.mark.parametrize("data_dependent", [False, True], ids=["meta", "real-fallback"])
def test_counts_follow_the_definitions(monkeypatch, data_dependent):
    name = f"tiny_cost_{data_dependent}"
    _register_tiny(monkeypatch, name, data_dependent)
    cost = model_cost(name)
    assert cost.method == (METHOD_REAL if data_dependent else METHOD_META)
    assert (cost.params, cost.forward_macs, cost.train_flops) == (_PARAMS, _MACS, _TRAIN)
    assert cost.feature_memory_bytes == _FEATURES
    assert cost.param_memory_bytes == 4 * _PARAMS
    assert cost.top1_error is None and cost.top5_error is None


def test_meta_trace_and_real_forward_agree():
    spec = get_model_spec("resnet18")
    assert _measure(spec, 64, real=False)[:4] == _measure(spec, 64, real=True)[:4]


def test_aliases_share_the_cached_cost_and_rows_are_json_safe():
    cost = model_cost("resnet50_v1.5")
    assert cost is model_cost("resnet50", 224) and cost.name == "resnet50"
    row = json.loads(json.dumps(cost.to_dict()))
    assert row == cost.to_dict()
    assert row["input_size"] == [3, 224, 224] and isinstance(row["forward_macs"], int)
    assert set(row) >= {
        "name", "input_size", "params", "param_memory_mib", "feature_memory_mib", "forward_macs",
        "forward_flops", "train_flops", "top1_error", "top5_error", "method", "image_size",
    }


def test_reference_error_only_at_the_reference_size():
    cost = model_cost("resnet18", 112)
    assert cost.input_size == (3, 112, 112) and cost.top1_error is None and cost.top5_error is None
    assert model_cost("resnet18").forward_macs / 4 < cost.forward_macs < model_cost("resnet18").forward_macs / 3


def test_inception_aux_head_counts_in_training_only():
    import torchvision

    cost = model_cost("inception_v3")
    no_aux = registry.ModelSpec(
        name="inception_v3_no_aux", source="torchvision",
        builder=lambda num_classes=1000, image_size=299: torchvision.models.inception_v3(
            weights=None, aux_logits=False, init_weights=True, num_classes=num_classes),
    )
    params, _, forward_flops, train_flops, _ = _measure(no_aux, 299, real=False)
    assert forward_flops == cost.forward_flops  # evaluation never runs the auxiliary head
    assert train_flops < cost.train_flops and params < cost.params


def test_too_small_image_sizes_are_one_line_config_errors(monkeypatch):
    with pytest.raises(ConfigError) as below_min:
        model_cost("inception_v3", 32)
    assert below_min.value.field == "image_size" and "32x32" in str(below_min.value)

    _register_tiny(monkeypatch, "tiny_cost_small")
    monkeypatch.setattr(_Tiny, "forward",
                        lambda self, x: nn.functional.conv2d(x, torch.zeros(1, 3, 7, 7, device=x.device)))
    with pytest.raises(ConfigError) as shape:
        model_cost("tiny_cost_small", 4)
    text = str(shape.value)
    assert shape.value.field == "image_size" and "4x4" in text and "tiny_cost_small" in text and "\n" not in text


def test_unknown_model():
    with pytest.raises(UnknownModelError):
        model_cost("resnet5")


# --- CLI ---------------------------------------------------------------------------------


def test_cli_json_and_csv_keep_exact_integers(capsys):
    assert main(["models", "resnet18", "--image-size", "64", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [model_cost("resnet18", 64).to_dict()]

    assert main(["models", "resnet1*", "--image-size", "64", "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["name"] for r in table] == ["resnet18", "resnet101", "resnet152"]  # natural order
    assert int(table[0]["forward_macs"]) == model_cost("resnet18", 64).forward_macs
    assert table[0]["input_size"] == "3x64x64" and table[0]["top1_error"] == ""


def test_cli_table_and_markdown_name_their_units(capsys):
    assert main(["models", "resnet50"]) == 0
    out = capsys.readouterr().out
    for unit in ("MiB", "GMACs", "GFLOPs", "2 x MACs"):
        assert unit in out
    assert "resnet50" in out and "23.87" in out and "4.09" in out

    assert main(["models", "resnet5*", "--format", "md"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| model | input | params (M)") and "fwd GMACs" in lines[0]
    assert len([line for line in lines if line.startswith("| resnet50 ")]) == 1  # alias folded in


def test_cli_list_still_lists_names(capsys):
    assert main(["models", "--list", "resnet5*"]) == 0
    assert capsys.readouterr().out.split() == ["resnet50", "resnet50_v1.5"]


@pytest.mark.parametrize("argv", [
    ["models", "resnet5"],
    ["models", "inception_v3", "--image-size", "32"],
    ["models", "resnet50", "--image-size", "0"],
])
def test_cli_errors_are_one_line_and_exit_2(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


# --- peaks and MFU -------------------------------------------------------------------------


def test_known_gpu_peaks():
    assert peak_flops("NVIDIA H100 80GB HBM3", "amp_bf16") == pytest.approx(989.4e12)
    assert peak_flops("NVIDIA H200", "tf32") == pytest.approx(494.7e12)
    assert peak_flops("NVIDIA A100-SXM4-80GB", "fp32") == pytest.approx(19.5e12)
    assert peak_flops("NVIDIA L4", "fp16") == pytest.approx(121e12)
    assert peak_flops("Tesla V100-SXM2-32GB", "tf32") == pytest.approx(15.7e12)  # no TF32: FP32 math
    assert peak_flops("NVIDIA GeForce RTX 4090", "bf16") == pytest.approx(165.2e12)
    assert known_gpu("NVIDIA A10G") is None and known_gpu("NVIDIA GeForce RTX 4090 D") is None


def test_unknown_devices_and_precisions_give_none():
    assert peak_flops("Tesla V100-SXM2-32GB", "bf16") is None
    assert peak_flops("Some Future GPU", "bf16") is None
    assert peak_flops(None, "fp32") is None
    assert peak_flops("NVIDIA H100 80GB HBM3", "int8") is None
    assert mfu(1e12, "cpu", "fp32") is None


def test_mfu_from_achieved_flops():
    cost = model_cost("resnet50")
    achieved = achieved_flops_per_s(cost.train_flops, 2000.0)
    assert achieved == pytest.approx(cost.train_flops * 2000.0)
    assert mfu(achieved, "NVIDIA H100 80GB HBM3", "amp_bf16") == pytest.approx(achieved / 989.4e12)
    assert mfu(achieved, "NVIDIA H100 80GB HBM3", "amp_bf16", num_devices=8) == pytest.approx(achieved / 989.4e12 / 8)
    assert achieved_flops_per_s(None, 10.0) is None


def test_model_cost_is_a_frozen_dataclass():
    cost = model_cost("trivial")
    assert isinstance(cost, ModelCost)
    with pytest.raises(AttributeError):
        cost.params = 0  # type: ignore[misc]
