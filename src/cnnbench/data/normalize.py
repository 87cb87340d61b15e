"""The last step of the input pipeline: uint8 pixels → the model's input.

The images become float, get the colour jitter of ``--distortions``, are normalised with the
ImageNet mean and standard deviation, and take the model's dtype and memory format
(``torch.channels_last`` for NHWC). Where that float work runs depends on the device:

* a GPU: on the GPU, a batch at a time (:meth:`Normalize.batch`). Batches cross from the
  loader as uint8, a quarter of float32's bytes, pinned and copied without blocking;
* the CPU: in the DataLoader processes, an image at a time (:meth:`Normalize.image_into`),
  in parallel, while the image is still in cache, rather than in the process that trains.

The jitter (factors drawn on the host with the crop) changes brightness ``b``, contrast
``c`` and saturation ``s`` of each image. Applied one after the other without clamping in
between, the three are one affine colour map per image::

    out = b·c·(s·x + (1 − s)·gray(x)) + (1 − c)·b·mean(gray(x))

(``gray`` = ITU-R 601 luma, as torchvision's), clamped once to [0, 1]; the normalisation
folds into the same map (the clamp then uses each channel's normalised bounds). So a jittered
image costs one 3 × 3 matrix product over its pixels, where torchvision's ``ColorJitter``
(which clamps after each step) makes a dozen passes.
"""

from __future__ import annotations

import torch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_GRAY = (0.299, 0.587, 0.114)  # ITU-R 601 luma, as torchvision's rgb_to_grayscale


class Normalize:
    """uint8 images (and jitter factors) → normalised images in the model's dtype and layout."""

    straight_into_slots = True
    """Write an image's map straight into a float32 contiguous batch slot (False: through a
    temporary image and a copy, as every other slot; ``benchmarks/input_pipeline.py`` compares)."""

    def __init__(self, device: torch.device, dtype: torch.dtype, channels_last: bool) -> None:
        self.device = device
        self.dtype = dtype
        self.channels_last = channels_last
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        mean = torch.tensor(IMAGENET_MEAN, device=device).view(3, 1)
        std = torch.tensor(IMAGENET_STD, device=device).view(3, 1)
        self.inv_std = 1.0 / std
        self.scale = self.inv_std / 255.0  # uint8 → normalised: x · scale − shift
        self.shift = mean / std
        self._bounds = [(-mu / sd, (1.0 - mu) / sd) for mu, sd in zip(IMAGENET_MEAN, IMAGENET_STD, strict=True)]
        """The normalised values of 0 and 1, per channel."""
        self.gray = torch.tensor(_GRAY, device=device)
        self.eye = torch.eye(3, device=device)

    # --- a batch on the device ------------------------------------------------------
    def batch(self, images: torch.Tensor, labels: torch.Tensor,
              jitter: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Move a uint8 batch to the device and normalise it there (jitter: ``n × 3`` or ``None``)."""
        n, _, h, w = images.shape
        u8 = images.to(self.device, non_blocking=True)
        x = u8.reshape(n, 3, h * w).float()
        if jitter is not None and n > 0:
            matrix, bias = self._maps(jitter.to(self.device, non_blocking=True).float(), x.mean(dim=2))
            x = self._clamp(torch.baddbmm(bias, matrix, x), 1)
        else:
            x = x.mul_(self.scale).sub_(self.shift)
        out = x.view(n, 3, h, w).to(self.dtype, memory_format=self.memory_format)
        return out, labels.to(self.device, non_blocking=True)

    # --- one image in a loader process ----------------------------------------------------
    def image_into(self, image: torch.Tensor, out: torch.Tensor, jitter: tuple[float, float, float] | None) -> None:
        """Normalise one ``3 × H × W`` uint8 image into ``out`` (a slot of a batch in the model's dtype).

        The same map as :meth:`batch`, its 3 × 3 matrix computed in plain Python: for one image,
        a dozen tiny tensor operations would cost more than the pixels. Where ``out`` is float32
        and contiguous (a CPU run's NCHW batch), the map writes straight into it: the same values,
        without an image-sized temporary and its copy.
        """
        x = image.reshape(3, -1).float()
        straight = (self.straight_into_slots and out.dtype == torch.float32 and out.is_contiguous()
                    and out.shape == image.shape)
        dest = out.view(3, -1) if straight else None
        if jitter is not None:
            b, c, s = jitter
            means = x.mean(dim=1).tolist()
            mean_gray = sum(g * m for g, m in zip(_GRAY, means, strict=True)) / 255.0
            matrix = [[b * c / 255.0 / sd * (s * (r == k) + (1 - s) * _GRAY[k]) for k in range(3)]
                      for r, sd in enumerate(IMAGENET_STD)]
            bias = [((1 - c) * b * mean_gray - mu) / sd for mu, sd in zip(IMAGENET_MEAN, IMAGENET_STD, strict=True)]
            shift, weights = torch.tensor(bias).view(3, 1), torch.tensor(matrix)
            mapped = torch.addmm(shift, weights, x) if dest is None else torch.addmm(shift, weights, x, out=dest)
            x = self._clamp(mapped, 0)
        elif dest is not None:
            x = torch.mul(x, self.scale, out=dest).sub_(self.shift)
        else:
            x = x.mul_(self.scale).sub_(self.shift)
        if dest is None:
            out.copy_(x.view(image.shape))

    def _clamp(self, x: torch.Tensor, channel_dim: int) -> torch.Tensor:
        """Clamp each channel to the normalised values of 0 and 1 (one scalar clamp per channel:
        a clamp with tensor bounds is several times slower on the CPU)."""
        for channel, (low, high) in enumerate(self._bounds):
            x.select(channel_dim, channel).clamp_(low, high)
        return x

    def _maps(self, factors: torch.Tensor, channel_means: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per image, the normalised colour map of its jitter: matrix ``n × 3 × 3`` (on uint8 values)
        and bias ``n × 3 × 1``; ``channel_means``: ``n × 3`` in uint8 units."""
        b, c, s = (factors[:, i].view(-1, 1, 1) for i in range(3))
        mean_gray = (channel_means @ self.gray).view(-1, 1, 1) / 255.0
        colour = (b * c / 255.0) * (s * self.eye + (1 - s) * self.gray.view(1, 1, 3))  # rows: out channel
        matrix = self.inv_std.view(1, 3, 1) * colour
        bias = ((1 - c) * b * mean_gray) * self.inv_std.view(1, 3, 1) - self.shift.view(1, 3, 1)
        return matrix, bias
