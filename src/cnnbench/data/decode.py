"""Decoding an image file at the smallest size that still serves its crop.

A JPEG stores 8 × 8 blocks of frequencies, so libjpeg(-turbo) can decode it directly at
1/2, 1/4 or 1/8 of its size for a fraction of the work (DCT scaling). :func:`decode_for_crop`
first reads the header (width and height), lets the caller choose the crop box in those
coordinates, then decodes at the largest reduction that keeps the box at least ``size``
pixels on each side, and returns the pixels with the box scaled to them: the crop is taken
before anything is resized, and nothing is ever decoded bigger than needed.

Back ends, chosen by measurement (``benchmarks/input_pipeline.py``, figures in
``benchmarks/README.md``): ``simplejpeg`` (libjpeg-turbo's TurboJPEG API, its own
libjpeg-turbo build) for JPEG files, and Pillow for every other format, for JPEGs
simplejpeg declines (CMYK), or when simplejpeg is not installed (Pillow's ``draft`` mode
does the same DCT scaling). Files are recognised by their first bytes, not their
extension. Any failure to decode is a :class:`BadImage` naming the reason. No torch here.
"""

from __future__ import annotations

import io
import logging
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

log = logging.getLogger(__name__)

JPEG_MAGIC = b"\xff\xd8\xff"
JPEG_DECODERS = ("simplejpeg", "pillow")


class BadImage(Exception):
    """An image that cannot be decoded; the message says why (one line)."""


@dataclass(frozen=True)
class Box:
    """A crop box: left, top, width, height (in the pixels of some decoding of the image)."""

    x: float
    y: float
    w: float
    h: float

    def scaled(self, sx: float, sy: float) -> Box:
        return Box(self.x * sx, self.y * sy, self.w * sx, self.h * sy)

    def pixels(self, width: int, height: int) -> tuple[int, int, int, int]:
        """Whole-pixel bounds ``(x0, y0, x1, y1)`` inside a ``width`` × ``height`` image, at least 1 × 1."""
        x0 = min(max(0, int(round(self.x))), width - 1)
        y0 = min(max(0, int(round(self.y))), height - 1)
        x1 = min(width, max(x0 + 1, int(round(self.x + self.w))))
        y1 = min(height, max(y0 + 1, int(round(self.y + self.h))))
        return x0, y0, x1, y1


ChooseBox = Callable[[int, int], Box]
"""``choose(width, height) -> Box``: the crop, given the image's full size (called once per image)."""


def simplejpeg_available() -> bool:
    try:
        import simplejpeg  # noqa: F401
    except ImportError:
        return False
    return True


def default_jpeg_decoder() -> str:
    """``simplejpeg`` when installed (it measured faster), else ``pillow``."""
    return "simplejpeg" if simplejpeg_available() else "pillow"


def decode_for_crop(data: bytes, size: int, choose: ChooseBox, *, jpeg_decoder: str = "simplejpeg",
                    fast_dct: bool = False) -> tuple[np.ndarray, Box]:
    """Decode ``data`` (any format Pillow reads) to RGB; returns the pixels (``H × W × 3`` uint8)
    and the box ``choose`` picked, in those pixels' coordinates. Raises :class:`BadImage`.

    ``fast_dct``: libjpeg's fast integer inverse DCT and plain (not "fancy") chroma upsampling
    (simplejpeg only), a little less exact, as tf_cnn_benchmarks decodes its images
    (``dct_method="INTEGER_FAST"``, ``fancy_upscaling=False``).
    """
    chosen: list[Box] = []

    def choose_once(width: int, height: int) -> Box:
        if not chosen:  # a fallback decoder must crop where the first one would have
            if width < 1 or height < 1:
                raise BadImage(f"empty image ({width} × {height})")
            chosen.append(choose(width, height))
        return chosen[0]

    if jpeg_decoder == "simplejpeg" and data[:3] == JPEG_MAGIC:
        try:
            return _simplejpeg(data, size, choose_once, fast_dct)
        except ValueError as exc:  # CMYK, arithmetic coding, a damaged file: Pillow decides
            log.debug("simplejpeg declined (%s); trying Pillow", exc)
    return _pillow(data, size, choose_once)


DCT_REDUCTIONS = (8, 4, 2)
"""Decode at 1/8, 1/4 or 1/2: libjpeg-turbo's SIMD code covers these; its other M/8 scales
(3/8, 5/8, ...) run slower than decoding the whole image (measured)."""


def reduced_size(width: int, height: int, box: Box, size: int) -> tuple[int, int]:
    """The size (width, height) to decode at: the smallest of 1/8, 1/4, 1/2 (or the full size)
    at which ``box`` still spans ``size`` pixels both ways."""
    for k in DCT_REDUCTIONS:
        if box.w / k >= size and box.h / k >= size:
            return math.ceil(width / k), math.ceil(height / k)
    return width, height


def _simplejpeg(data: bytes, size: int, choose: ChooseBox, fast_dct: bool) -> tuple[np.ndarray, Box]:
    import simplejpeg

    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    box = choose(width, height)
    min_w, min_h = reduced_size(width, height, box, size)
    # simplejpeg picks the largest reduction M/8 that keeps these sizes: exactly 1/k here
    pixels = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=fast_dct, fastupsample=fast_dct,
                                    min_width=min_w, min_height=min_h)
    return pixels, box.scaled(pixels.shape[1] / width, pixels.shape[0] / height)


def _pillow(data: bytes, size: int, choose: ChooseBox) -> tuple[np.ndarray, Box]:
    if not data:
        raise BadImage("empty file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow's advice on a file (a palette's transparency), once per read
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            width, height = image.size
            box = choose(width, height)
            if image.format == "JPEG":
                image.draft("RGB", reduced_size(width, height, box, size))
            pixels = _rgb(image)
    except BadImage:
        raise
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError,
            Image.DecompressionBombWarning) as exc:
        raise BadImage(_reason(exc)) from None
    return pixels, box.scaled(pixels.shape[1] / width, pixels.shape[0] / height)


_SIXTEEN_BITS = frozenset(("I;16", "I;16L", "I;16B", "I;16N"))


def _rgb(image: Image.Image) -> np.ndarray:
    """The image's pixels as 8-bit RGB. A 16-bit grey image (a PNG of 16 bits) is scaled to 8 bits
    (its top byte): Pillow's own conversion clips it to 255 above 255, white almost everywhere."""
    if image.mode in _SIXTEEN_BITS or image.mode == "I":  # Pillow before 10.3 opens a 16-bit PNG as "I"
        values = np.asarray(image)
        if image.mode in _SIXTEEN_BITS or values.size and values.max() > 255:
            grey = (np.clip(values, 0, 65535).astype(np.uint16) >> 8).astype(np.uint8)
        else:
            grey = np.clip(values, 0, 255).astype(np.uint8)
        return np.repeat(grey[:, :, None], 3, axis=2)
    return np.asarray(image.convert("RGB"))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnidentifiedImageError):  # its text names a BytesIO object, not the file
        return "not an image file Pillow can read (unknown format, or damaged header)"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
