"""The last step of the input pipeline, on the device: uint8 batch → the model's input.

Batches cross from the loader to the device as uint8 (a quarter of float32's bytes, pinned
when the device is a GPU, copied without blocking). On the device they become float, get
the colour jitter of ``--distortions``, are normalised with the ImageNet mean and standard
deviation, and take the model's dtype and memory format (``torch.channels_last`` for NHWC).

The jitter (factors drawn on the host with the crop) changes brightness ``b``, contrast
``c`` and saturation ``s`` of each image. Applied one after the other without clamping in
between, the three are one affine colour map per image::

    out = b·c·(s·x + (1 − s)·gray(x)) + (1 − c)·b·mean(gray(x))

(``gray`` = ITU-R 601 luma, as torchvision's), computed as one batched 3 × 3 matrix
product and clamped once to [0, 1]: a few passes over the batch, where torchvision's
``ColorJitter`` (which clamps after each step) makes a dozen.
"""

from __future__ import annotations

import torch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_GRAY = (0.299, 0.587, 0.114)  # ITU-R 601 luma, as torchvision's rgb_to_grayscale


class DeviceNormalize:
    """``(uint8 images, labels[, jitter]) on the host`` → ``(images, labels)`` ready for the model."""

    def __init__(self, device: torch.device, dtype: torch.dtype, channels_last: bool) -> None:
        self.device = device
        self.dtype = dtype
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)
        mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
        self.scale = 1.0 / std
        self.shift = mean / std
        self.gray = torch.tensor(_GRAY, device=device).view(1, 3, 1, 1)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor,
                 jitter: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        x = images.to(self.device, non_blocking=True)
        if jitter is not None and x.shape[0] > 0:
            x = self._jitter(x, jitter.to(self.device, non_blocking=True))
        else:
            x = x.to(torch.float32, memory_format=self.memory_format).div_(255.0)
        x = x.mul_(self.scale).sub_(self.shift)
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        return x, labels.to(self.device, non_blocking=True)

    def _jitter(self, images: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
        """Brightness, contrast and saturation per image as one colour map; uint8 in, float in [0, 1] out."""
        n, _, h, w = images.shape
        b, c, s = (factors[:, i].float().view(n, 1, 1) for i in range(3))
        x = images.reshape(n, 3, h * w).float()
        gray = self.gray.view(1, 1, 3)
        mean_gray = (x.mean(dim=2).unsqueeze(1) * gray).sum(dim=2, keepdim=True) / 255.0  # n × 1 × 1
        eye = torch.eye(3, device=x.device).unsqueeze(0)
        matrix = (b * c / 255.0) * (s * eye + (1 - s) * gray.expand(n, 3, 3))  # rows: out channel
        bias = (1 - c) * b * mean_gray
        out = torch.baddbmm(bias.expand(n, 3, 1), matrix, x).clamp_(0, 1).view(n, 3, h, w)
        return out.contiguous(memory_format=self.memory_format)
