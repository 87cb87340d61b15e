"""What to run: the model, its input, and the numerics it runs in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cnnbench.config.options import option

DATA_FORMATS = ("NCHW", "NHWC")
PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16")
MIN_IMAGE_SIZE = 16
MAX_IMAGE_SIZE = 8192
MAX_BATCH_SIZE = 65536
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


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
    compile_mode: str | None = option(
        None,
        "torch.compile's mode: default, reduce-overhead (CUDA graphs), max-autotune or "
        "max-autotune-no-cudagraphs; implies --compile [default: default, with --compile].",
        choices=COMPILE_MODES, unnamed=("default",), depends_on=("compile",),
    )
    cudnn_benchmark: bool | None = option(
        True,
        "On CUDA, cuDNN autotuning (torch.backends.cudnn.benchmark) picks each convolution's fastest "
        "algorithm during warm-up, as tf_cnn_benchmarks and timm do; --no-cudnn-benchmark keeps "
        "cuDNN's heuristic choice. Not used on CPU.",
        unnamed=(True,),
    )

    def check_model_options(self) -> None:
        pass  # each field's range is declared with it

    def model_defaults(self, device: str) -> dict[str, Any]:
        """``--compile-mode`` implies ``--compile``, which runs in the default mode unless told;
        cuDNN's autotuning is unused (None) off CUDA."""
        filled: dict[str, Any] = {}
        if self.compile_mode is not None and not self.compile:
            filled["compile"] = True
        elif self.compile and self.compile_mode is None:
            filled["compile_mode"] = "default"
        if device == "cpu" and self.cudnn_benchmark is not None:
            filled["cudnn_benchmark"] = None
        return filled
