"""Pictures of an evidence record: its heatmap PNG over the image (or alone), with its peak box."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

#: colour of the peak box outline (RGB).
BOX_RGB = (255, 255, 255)


def heatmap_values(png: bytes, size: tuple[int, int]) -> np.ndarray:
    """The 8-bit grayscale heatmap PNG as ``float32[height, width]`` in ``[0, 1]``, resized
    (bilinear) to ``size`` = ``(width, height)`` pixels.

    Raises:
        ValueError: ``png`` is not a decodable image.
    """
    try:
        gray = Image.open(io.BytesIO(png)).convert("L")
    except OSError as exc:
        raise ValueError(f"heatmap is not a PNG: {exc}") from None
    values = np.asarray(gray.resize(size, Image.Resampling.BILINEAR), dtype=np.float32) / 255.0
    return values


def render(png: bytes, size: tuple[int, int], peak_box: tuple[int, int, int, int] | None = None,
           image: Image.Image | None = None, alpha: float = 0.5) -> Image.Image:
    """The heatmap in the ``jet`` colour map at ``size`` (``(width, height)``), blended over
    ``image`` (resized to ``size`` when it differs) with the image's weight ``alpha``
    (``torchcam.utils.overlay_mask``), or alone; the peak box outlined.

    Raises:
        ValueError: as :func:`heatmap_values`.
    """
    from matplotlib import colormaps

    values = heatmap_values(png, size)
    if image is not None:
        from torchcam.utils import overlay_mask

        base = image.convert("RGB")
        if base.size != size:
            base = base.resize(size, Image.Resampling.BILINEAR)
        out = overlay_mask(base, Image.fromarray(values, mode="F"), alpha=alpha)
    else:
        out = Image.fromarray((colormaps["jet"](values)[..., :3] * 255).astype(np.uint8))
    if peak_box is not None and peak_box[2] > 0 and peak_box[3] > 0:
        x, y, w, h = peak_box
        ImageDraw.Draw(out).rectangle((x, y, x + w - 1, y + h - 1), outline=BOX_RGB, width=max(1, min(size) // 150))
    return out
