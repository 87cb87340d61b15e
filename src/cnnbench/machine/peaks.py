"""Peak dense FLOP/s of known GPUs, achieved FLOP/s and MFU (model FLOPs utilisation).

Peaks are the vendor's figures for dense math (no 2:4 structured sparsity; where a
datasheet prints only the sparse figure, marked ``*`` in NVIDIA's tables, the dense one
is half of it). FP16/BF16 peaks are tensor-core peaks with FP32 accumulation, which is
what PyTorch's matmuls and convolutions use. A GPU that is not in the table, or a
precision the GPU has no peak for, gives ``None``: never a guess.

A MIG slice (``"NVIDIA A100-SXM4-80GB MIG 3g.40gb"``, as CUDA names it) has the share of the
chip's peak that its SMs are of the chip's: pass the slice's SM count (``sm_count``, CUDA's
multiprocessor count). Without it, or for a chip whose SM count is not in the table, a slice
gets ``None``.

Precision names are cnnbench's ``--precision`` values; ``amp_fp16``/``amp_bf16`` count
as ``fp16``/``bf16``. ``fp32`` means true FP32 math: a caller that lets cuDNN or cuBLAS
use TF32 (PyTorch lets cuDNN convolutions use TF32 by default) should pass ``tf32``.
``tf32`` on a GPU without TF32 (Volta, Turing) runs in FP32 and gets the FP32 peak.

    >>> peak_flops("NVIDIA H100 80GB HBM3", "amp_bf16")
    989400000000000.0
    >>> mfu(4.947e14, "NVIDIA H100 80GB HBM3", "bf16")
    0.5
    >>> peak_flops("Some Future GPU", "bf16") is None
    True
    >>> peak_flops("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "bf16", sm_count=14) / 1e12
    40.44444444444444
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TERA = 1e12

# Dense peak TFLOP/s per precision. Sources (vendor documents, as published):
_PEAKS_TFLOPS: dict[str, dict[str, float]] = {
    # NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5 (boost clock):
    # FP32 66.9, TF32 494.7, FP16/BF16 989.4 (dense).
    "H100 SXM": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    # NVIDIA H100 datasheet, H100 PCIe: FP32 51, TF32 756*, BF16/FP16 1,513* (sparse).
    "H100 PCIe": {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5},
    # NVIDIA H100 datasheet, H100 NVL (per GPU): FP32 60, TF32 835*, BF16/FP16 1,671*.
    "H100 NVL": {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5},
    # NVIDIA H200 datasheet, H200 SXM: same GH100 compute as H100 SXM5 (FP32 67,
    # TF32 989*, BF16/FP16 1,979*); the whitepaper's unrounded figures are used.
    "H200 SXM": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    # NVIDIA H200 datasheet, H200 NVL: FP32 60, TF32 835*, BF16/FP16 1,671*.
    "H200 NVL": {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5},
    # NVIDIA A100 datasheet (SXM4 and PCIe, 40 and 80 GB): FP32 19.5, TF32 156,
    # BF16/FP16 312 (dense; 312/624 with sparsity).
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    # NVIDIA A10 datasheet: FP32 31.2, TF32 62.5, BF16/FP16 125 (dense).
    "A10": {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0},
    # NVIDIA L4 datasheet: FP32 30.3, TF32 120*, BF16/FP16 242*.
    "L4": {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0},
    # NVIDIA L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*).
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05},
    # NVIDIA L40 datasheet: FP32 90.5, TF32 90.5 (181*), BF16/FP16 181.05 (362.1*).
    "L40": {"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05},
    # NVIDIA V100 datasheet: SXM2 FP32 15.7 / tensor (FP16) 125; PCIe 14 / 112;
    # V100S PCIe 16.4 / 130. No TF32 or BF16 hardware.
    "V100 SXM2": {"fp32": 15.7, "fp16": 125.0},
    "V100 PCIe": {"fp32": 14.0, "fp16": 112.0},
    "V100S PCIe": {"fp32": 16.4, "fp16": 130.0},
    # NVIDIA T4 datasheet: FP32 8.1, mixed precision (FP16/FP32) 65.
    "T4": {"fp32": 8.1, "fp16": 65.0},
    # NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090: FP32 82.6,
    # TF32 82.6, FP16/BF16 with FP32 accumulate 165.2 (dense).
    "RTX 4090": {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2},
    # NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090: FP32 35.6, TF32 35.6,
    # FP16/BF16 with FP32 accumulate 71 (dense).
    "RTX 3090": {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0},
}

# SMs of the full chip each peak above is for (the same whitepapers and datasheets): the
# chips that MIG can slice.
_CHIP_SMS: dict[str, int] = {
    "H100 SXM": 132, "H100 PCIe": 114, "H100 NVL": 132, "H200 SXM": 132, "H200 NVL": 132, "A100": 108,
}

_MIG_SUFFIX = re.compile(r"\s+MIG\s+(\S+)\s*$", re.IGNORECASE)

# torch.cuda.get_device_name() spellings -> table key; first match wins. Variants with
# other peaks (A10G, RTX 4090 D, laptop GPUs, GH200, V100 FHHL...) deliberately match nothing.
_NAME_RULES: tuple[tuple[str, str], ...] = (
    (r"(?<![a-z0-9])h100\b.*\bpcie\b", "H100 PCIe"),
    (r"(?<![a-z0-9])h100\b.*\bnvl\b", "H100 NVL"),
    (r"(?<![a-z0-9])h100\b.*\b(sxm\w*|hbm3)\b", "H100 SXM"),
    (r"(?<![a-z0-9])h200\b.*\bnvl\b", "H200 NVL"),
    (r"(?<![a-z0-9])h200\b", "H200 SXM"),
    (r"(?<![a-z0-9])a100\b", "A100"),
    (r"(?<![a-z0-9])a10$", "A10"),
    (r"(?<![a-z0-9])l4$", "L4"),
    (r"(?<![a-z0-9])l40s$", "L40S"),
    (r"(?<![a-z0-9])l40$", "L40"),
    (r"(?<![a-z0-9])v100s\b.*\bpcie\b", "V100S PCIe"),
    (r"(?<![a-z0-9])v100\b.*\bsxm2\b", "V100 SXM2"),
    (r"(?<![a-z0-9])v100\b.*\bpcie\b", "V100 PCIe"),
    (r"(?<![a-z0-9])t4$", "T4"),
    (r"\brtx 4090$", "RTX 4090"),
    (r"\brtx 3090$", "RTX 3090"),
)

_PRECISION = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "amp_fp16": "fp16", "bf16": "bf16", "amp_bf16": "bf16"}


def mig_profile(gpu_name: str | None) -> str | None:
    """The MIG profile in a device name (``"... MIG 3g.40gb"`` -> ``"3g.40gb"``), or None."""
    found = _MIG_SUFFIX.search(gpu_name or "")
    return found.group(1) if found else None


def known_gpu(gpu_name: str | None) -> str | None:
    """The table key for a device name (``"NVIDIA A100-SXM4-80GB"`` -> ``"A100"``; a MIG
    slice's name gives its chip's key), or None."""
    if not gpu_name:
        return None
    name = " ".join(_MIG_SUFFIX.sub("", gpu_name).lower().replace("-", " ").split())
    for pattern, key in _NAME_RULES:
        if re.search(pattern, name):
            return key
    return None


def peak_share(gpu_name: str | None, sm_count: int | None) -> float | None:
    """The share of its chip's peak a device has: 1 for a whole GPU; for a MIG slice its SMs
    over the chip's (None when either count is unknown)."""
    if mig_profile(gpu_name) is None:
        return 1.0
    chip_sms = _CHIP_SMS.get(known_gpu(gpu_name) or "")
    if not chip_sms or not sm_count or sm_count <= 0:
        return None
    return min(1.0, sm_count / chip_sms)


def peak_flops(gpu_name: str | None, precision: str, *, sm_count: int | None = None) -> float | None:
    """Dense peak FLOP/s of one device at a ``--precision`` (a MIG slice: its share of the
    chip's, from ``sm_count``); None when unknown."""
    key = known_gpu(gpu_name)
    math = _PRECISION.get(precision)
    share = peak_share(gpu_name, sm_count)
    if key is None or math is None or share is None:
        return None
    peaks = _PEAKS_TFLOPS[key]
    if math == "tf32" and "tf32" not in peaks:
        math = "fp32"  # no TF32 hardware: the math runs in FP32
    value = peaks.get(math)
    return None if value is None else value * TERA * share


def achieved_flops_per_s(flops_per_image: int | float | None, images_per_sec: float | None) -> float | None:
    """FLOP/s actually delivered: FLOPs per image x images/sec (None if either is unknown)."""
    if flops_per_image is None or images_per_sec is None:
        return None
    return float(flops_per_image) * float(images_per_sec)


def mfu(
    achieved_flops: float | None, gpu_name: str | None, precision: str, num_devices: int = 1,
    *, sm_count: int | None = None,
) -> float | None:
    """Model FLOPs utilisation: achieved FLOP/s over the peak of ``num_devices`` such GPUs."""
    peak = peak_flops(gpu_name, precision, sm_count=sm_count)
    if achieved_flops is None or peak is None or num_devices < 1:
        return None
    return achieved_flops / (peak * num_devices)


def total_peak_flops(devices: Sequence[tuple[str | None, int | None]], precision: str) -> float | None:
    """The summed peak of several devices, each ``(name, sm_count)`` (one per rank); None
    when there are none or any one's peak is unknown."""
    peaks = [peak_flops(name, precision, sm_count=sms) for name, sms in devices]
    if not peaks or any(p is None for p in peaks):
        return None
    return float(sum(p for p in peaks if p is not None))
