"""What to run: the model, its input, and the numerics it runs in."""

from __future__ import annotations

from dataclasses import dataclass

from cnnbench.config.options import option

DATA_FORMATS = ("NCHW", "NHWC")
PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16")
MIN_IMAGE_SIZE = 16
MAX_IMAGE_SIZE = 8192
MAX_BATCH_SIZE = 65536


@dataclass(frozen=True)
class ModelOptions:
    """model and numerics"""

    model: str = option(
        "resnet18",
        "Model name: any torchvision classification model, a tf_cnn_benchmarks alias "
        "(inception3, resnet50_v1.5, vgg16, ...), timm/<name> when timm is installed, "
        "or 'trivial'. See `cnnbench models --list`.",
    )
    batch_size: int | None = option(
        None, "Images per device per step (default: the model's default batch size).", metavar="N",
        minimum=1, maximum=MAX_BATCH_SIZE,
    )
    image_size: int | None = option(
        None, "Input height and width in pixels (default: the model's own, e.g. 224, 299).", metavar="PX",
        minimum=MIN_IMAGE_SIZE, maximum=MAX_IMAGE_SIZE,
    )
    forward_only: bool = option(False, "Benchmark inference (no backward pass, no optimizer step).")
    data_format: str = option(
        "NCHW", "Tensor layout: NCHW (contiguous) or NHWC (torch.channels_last).", choices=DATA_FORMATS
    )
    precision: str = option(
        "fp32",
        "Numeric precision: fp32 (TF32 off), tf32 (TF32 matmul/conv on CUDA), amp_fp16 / amp_bf16 "
        "(autocast; amp_fp16 with a gradient scaler), fp16 / bf16 (weights and inputs cast).",
        choices=PRECISIONS,
    )
    compile: bool = option(
        False, "Run the model through torch.compile; compilation time is reported apart from throughput."
    )

    def check_model_options(self) -> None:
        pass  # each field's range is declared with it
