"""The model registry: every torchvision model builds and runs, aliases, wildcards, errors."""

from __future__ import annotations

import pytest
import torch

from cnnbench.config import ConfigError
from cnnbench.models import UnknownModelError, canonical_name, create_model, get_model_spec, list_models

TORCHVISION = [n for n in list_models(include_aliases=False) if get_model_spec(n).source == "torchvision"]

# The smallest side each model takes in a test forward (patch sizes must divide it).
_SIZE_OVERRIDES = {"vit_h_14": 56, "vit_b_32": 64, "vit_l_32": 64}


def _test_size(name: str) -> int:
    spec = get_model_spec(name)
    return _SIZE_OVERRIDES.get(name, max(spec.min_image_size, 64))


def test_zoo_is_complete():
    import torchvision

    assert set(TORCHVISION) == set(torchvision.models.list_models(module=torchvision.models))
    assert len(TORCHVISION) >= 80


@pytest.mark.parametrize("name", TORCHVISION)
def test_every_torchvision_model_builds_and_runs_a_forward(name):
    size = _test_size(name)
    torch.manual_seed(0)
    model = create_model(name, num_classes=10, image_size=size).eval()
    with torch.inference_mode():
        out = model(torch.randn(1, 3, size, size))
    assert out.shape == (1, 10)
    assert torch.isfinite(out).all()


def test_trivial_model_trains():
    model = create_model("trivial", num_classes=5)
    loss = torch.nn.functional.cross_entropy(model(torch.randn(2, 3, 32, 32)), torch.tensor([0, 1]))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize(
    ("alias", "target", "size", "batch"),
    [
        ("inception3", "inception_v3", 299, 32),
        ("resnet50_v1.5", "resnet50", 224, 64),
        ("mobilenet", "mobilenet_v2", 224, 32),
        ("vgg16", "vgg16", 224, 64),
        ("alexnet", "alexnet", 224, 512),
        ("googlenet", "googlenet", 224, 32),
        ("trivial", "trivial", 32, 32),
    ],
)
def test_tf_cnn_benchmarks_names(alias, target, size, batch):
    spec = get_model_spec(alias)
    assert (spec.name, spec.default_image_size, spec.default_batch_size) == (target, size, batch)
    assert canonical_name(alias) == target


def test_unknown_name_names_the_three_nearest():
    with pytest.raises(UnknownModelError) as info:
        get_model_spec("resnet5")
    assert len(info.value.nearest) == 3
    assert "resnet50" in info.value.nearest
    assert isinstance(info.value, ConfigError) and str(info.value).startswith("--model:")


def test_wildcards():
    assert list_models("resnet5*") == ["resnet50", "resnet50_v1.5"]
    assert "inception3" in list_models("incep*")
    assert list_models("nothing-like-this*") == []


def test_timm_names_without_timm_are_a_clear_error():
    pytest.importorskip("torch")
    try:
        import timm  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="needs timm"):
            get_model_spec("timm/resnet50")
    else:
        assert get_model_spec("timm/resnet50").source == "timm"


def test_reference_metadata_is_read_from_torchvision():
    ref = get_model_spec("resnet50").reference
    assert ref["num_params"] == 25557032 and ref["acc1"] == pytest.approx(76.13)
