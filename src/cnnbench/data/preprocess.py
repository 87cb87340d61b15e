"""Preprocessing of one image on the host: where to crop, then crop, resize and flip, in uint8.

* Evaluation (no ``--distortions``): resize the shorter side to ``size / crop_fraction`` and
  take the centre ``size × size``; done as one crop of the centre square (``crop_fraction``
  of the shorter side) resized to ``size``. ``crop_fraction`` is 0.875 for photographs (224
  of 256, the usual ImageNet evaluation) and 1 for CIFAR (the whole 32 × 32 image).
* ``--distortions``: a random resized crop (area 8%–100% of the image, aspect ratio 3/4–4/3,
  ten tries then the centre: torchvision's ``RandomResizedCrop`` rule) and a horizontal flip
  with probability 1/2; the colour jitter factors (brightness, contrast, saturation, each in
  0.6–1.4) are drawn here too and applied with the normalisation (:mod:`cnnbench.data.normalize`:
  on a GPU there, on the CPU in the loader processes).

Every random choice comes from the image's own seed (:mod:`cnnbench.data.sharding`), so a
run is repeatable whatever the number of loader processes. Resizing runs on the cropped
pixels only, with torch's uint8 kernels (antialiased for bilinear and bicubic, as Pillow
and torchvision's v2 transforms do): the result stays uint8, ``3 × size × size``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from cnnbench.data.decode import Box

CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3 / 4, 4 / 3)
JITTER = 0.4
"""Brightness, contrast and saturation factors are drawn from [1 - JITTER, 1 + JITTER]."""
PHOTO_CROP_FRACTION = 0.875


@dataclass(frozen=True)
class Augmentation:
    """The random choices for one image: its crop, whether it is flipped, its colour jitter."""

    box: Box
    flip: bool
    jitter: tuple[float, float, float]
    """Brightness, contrast, saturation factors."""


@dataclass(frozen=True)
class Preprocessing:
    """How the images of one split become ``3 × size × size`` uint8 tensors."""

    size: int
    distortions: bool
    resize_method: str = "bilinear"
    crop_fraction: float = PHOTO_CROP_FRACTION

    def eval_box(self, width: int, height: int) -> Box:
        side = min(width, height) * self.crop_fraction
        return Box((width - side) / 2, (height - side) / 2, side, side)

    def augmentation(self, width: int, height: int, seed: int) -> Augmentation:
        """The random crop, flip and jitter of an image of ``width`` × ``height`` for ``seed``."""
        rng = random.Random(seed)
        box = random_resized_crop(width, height, rng)
        flip = rng.random() < 0.5
        jitter = (rng.uniform(1 - JITTER, 1 + JITTER), rng.uniform(1 - JITTER, 1 + JITTER),
                  rng.uniform(1 - JITTER, 1 + JITTER))
        return Augmentation(box, flip, jitter)

    def resize(self, pixels: np.ndarray, box: Box, *, channels_first: bool = False, flip: bool = False,
               out: torch.Tensor | None = None) -> torch.Tensor:
        """Crop ``box`` out of ``pixels`` (``H × W × 3``, or ``3 × H × W`` with ``channels_first``),
        resize it to ``size × size`` and flip it; returns (or writes into ``out``) ``3 × size × size`` uint8."""
        if not (pixels.flags.c_contiguous and pixels.flags.writeable):  # Pillow's arrays are read-only views
            pixels = np.array(pixels)
        image = torch.from_numpy(pixels)
        chw = image if channels_first else image.permute(2, 0, 1)
        x0, y0, x1, y1 = box.pixels(chw.shape[2], chw.shape[1])
        region = chw[:, y0:y1, x0:x1].unsqueeze(0)
        if region.shape[2:] != (self.size, self.size):
            mode = self.resize_method
            region = F.interpolate(region, size=(self.size, self.size), mode=mode,
                                   antialias=mode != "nearest",
                                   **({} if mode == "nearest" else {"align_corners": False}))
        result = region[0].flip(-1) if flip else region[0]
        if out is None:
            return result.contiguous()
        out.copy_(result)
        return out


def random_resized_crop(width: int, height: int, rng: random.Random) -> Box:
    """torchvision's RandomResizedCrop box (area in :data:`CROP_SCALE`, aspect in :data:`CROP_RATIO`)."""
    area = width * height
    log_ratio = (math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1]))
    for _ in range(10):
        target = area * rng.uniform(*CROP_SCALE)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return Box(rng.randint(0, width - w), rng.randint(0, height - h), w, h)
    ratio = width / height
    if ratio < CROP_RATIO[0]:
        w, h = width, int(round(width / CROP_RATIO[0]))
    elif ratio > CROP_RATIO[1]:
        w, h = int(round(height * CROP_RATIO[1])), height
    else:
        w, h = width, height
    return Box((width - w) // 2, (height - h) // 2, w, h)
