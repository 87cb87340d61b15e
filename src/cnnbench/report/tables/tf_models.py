"""Model costs for the model names of imported tf_cnn_benchmarks logs.

Imported logs carry no model cost, so the report takes it from the torchvision model of the
same architecture, measured once with :func:`cnnbench.models.cost.model_cost` (torch 2.14.1,
torchvision 0.29.1; the report itself never imports torch) and kept here. Where the two are
not the same network, :data:`TF_MODELS` says how they differ and the report's note repeats it.
A name with no equivalent measured here (``inception4`` needs timm) keeps its ``—`` row, and so
does one whose torchvision namesake is a different size (see :data:`UNMAPPED`).

Regenerate with ``python -m cnnbench.report.tables.tf_models`` (needs torch and torchvision).
"""

from __future__ import annotations

from typing import Any

# tf_cnn_benchmarks names whose torchvision namesake has other layer widths, so its cost would
# mislead; they keep their ``—`` row. Name -> why.
UNMAPPED: dict[str, str] = {
    "alexnet": "tf's convolutions are 64-192-384-384-256 wide on 227 px input, torchvision's "
               "64-192-384-256-256 on 224 px: about 0.7 M more parameters and 17% more FLOPs",
    "googlenet": "torchvision's GoogLeNet has batch normalisation, 3x3 instead of 5x5 convolutions in "
                 "one branch and two auxiliary classifiers (6.4 M of its 13 M parameters)",
}

# tf_cnn_benchmarks name -> (cnnbench/torchvision name, how they differ or "" when the same network)
# (checked against tf_cnn_benchmarks' models/*.py and torchvision 0.29.1)
TF_MODELS: dict[str, tuple[str, str]] = {
    "inception3": ("inception_v3", "torchvision's counts include its auxiliary classifier (3.3 M parameters, "
                                   "and its FLOPs in training), which tf's builds only when asked"),
    "inception4": ("timm/inception_v4", ""),
    "mobilenet": ("mobilenet_v2", ""),
    "resnet50": ("resnet50", "torchvision's is v1.5 (stride in the 3x3 convolution), tf's is v1: same parameters, "
                             "somewhat different FLOPs"),
    "resnet50_v1.5": ("resnet50", ""),
    "resnet101": ("resnet101", "torchvision's is v1.5, tf's is v1: same parameters, somewhat different FLOPs"),
    "resnet152": ("resnet152", "torchvision's is v1.5, tf's is v1: same parameters, somewhat different FLOPs"),
    "vgg11": ("vgg11", ""),
    "vgg16": ("vgg16", ""),
    "vgg19": ("vgg19", ""),
}

_KEYS = ("input_size", "params", "param_memory_mib", "feature_memory_mib", "forward_flops", "train_flops",
         "top1_error", "top5_error")

# Measured with cnnbench.models.cost.model_cost (method "meta"), see the module docstring.
COSTS: dict[str, dict[str, Any]] = {
    "inception_v3": {"input_size": [3, 299, 299], "params": 27161264, "param_memory_mib": 103.612,
                     "feature_memory_mib": 88.9538, "forward_flops": 11426432192, "train_flops": 34275032448,
                     "top1_error": 22.706, "top5_error": 6.55},
    "mobilenet_v2": {"input_size": [3, 224, 224], "params": 3504872, "param_memory_mib": 13.37,
                     "feature_memory_mib": 51.7841, "forward_flops": 601548544, "train_flops": 1782969600,
                     "top1_error": 28.122, "top5_error": 9.714},
    "resnet50": {"input_size": [3, 224, 224], "params": 25557032, "param_memory_mib": 97.4923,
                 "feature_memory_mib": 106.6249, "forward_flops": 8178368512, "train_flops": 24299077632,
                 "top1_error": 23.87, "top5_error": 7.138},
    "resnet101": {"input_size": [3, 224, 224], "params": 44549160, "param_memory_mib": 169.9416,
                  "feature_memory_mib": 158.6874, "forward_flops": 15602810880, "train_flops": 46572404736,
                  "top1_error": 22.626, "top5_error": 6.454},
    "resnet152": {"input_size": [3, 224, 224], "params": 60192808, "param_memory_mib": 229.6173,
                  "feature_memory_mib": 222.9999, "forward_flops": 23027253248, "train_flops": 68845731840,
                  "top1_error": 21.688, "top5_error": 5.954},
    "vgg11": {"input_size": [3, 224, 224], "params": 132863336, "param_memory_mib": 506.8334,
              "feature_memory_mib": 34.2968, "forward_flops": 15218180096, "train_flops": 45481132032,
              "top1_error": 30.98, "top5_error": 11.372},
    "vgg16": {"input_size": [3, 224, 224], "params": 138357544, "param_memory_mib": 527.7921,
              "feature_memory_mib": 57.6483, "forward_flops": 30940528640, "train_flops": 92648177664,
              "top1_error": 28.408, "top5_error": 9.618},
    "vgg19": {"input_size": [3, 224, 224], "params": 143667240, "param_memory_mib": 548.047,
              "feature_memory_mib": 62.6249, "forward_flops": 39264124928, "train_flops": 117618966528,
              "top1_error": 27.624, "top5_error": 9.124},
}


def tf_cost(name: Any) -> tuple[dict[str, Any], str, str] | None:
    """For a tf_cnn_benchmarks model name: the cost, the model it was measured on and how the two
    differ (empty when they are the same network); ``None`` when there is nothing for it."""
    entry = TF_MODELS.get(str(name))
    if entry is None or entry[0] not in COSTS:
        return None
    return COSTS[entry[0]], entry[0], entry[1]


def _regenerate() -> None:  # pragma: no cover - a maintenance tool, needs torch
    from cnnbench.models.cost import model_cost

    for target in sorted({t for t, _ in TF_MODELS.values()}):
        try:
            cost = model_cost(target).to_dict()
        except Exception as exc:  # timm not installed, ...
            print(f"# {target}: {exc}")
            continue
        print(f"    {target!r}: {({k: cost[k] for k in _KEYS})!r},")


if __name__ == "__main__":  # pragma: no cover
    _regenerate()
