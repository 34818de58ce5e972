"""Grad-CAM and Grad-CAM++ heatmaps of the open_nsfw torch copy, and the evidence they give.

Methods from ``torchcam`` (Apache-2.0, frgfm/torch-cam; no torchvision needed):
``GradCAM`` (Selvaraju et al. 2017, arXiv:1610.02391) and ``GradCAMpp`` (Chattopadhay et al.
2018, arXiv:1710.11063), both on :data:`rtaudit.engine.explain.classifier.TARGET_LAYER`
(``float32[1, 1024, 7, 7]``), differentiating the target class's logit. The 7×7 map is
upsampled bilinearly to the model's 224×224 crop and placed on the 256×256 canvas the
image is stretched to (:func:`rtaudit.engine.explain.classifier.crop_box_in_original`): the
16-pixel border the model never sees stays 0.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image
from scipy import ndimage
from torch.nn import functional as F

from rtaudit.engine.explain.classifier import CLASSES, CROP_PX, RESIZE_PX, TARGET_LAYER, TorchCopy, preprocess

#: method name → torchcam class name.
METHODS = {"gradcam++": "GradCAMpp", "gradcam": "GradCAM"}
#: fraction of the heatmap's peak above which a pixel belongs to the peak's region (the
#: Grad-CAM paper's localization used 0.15 of the maximum; a tighter 0.5 marks the hot spot).
DEFAULT_BOX_THRESHOLD = 0.5
#: longest side of the evidence PNG, pixels.
DEFAULT_HEATMAP_SIDE_PX = 64
#: most bytes the evidence PNG may take (before base64); the side halves until it fits.
DEFAULT_HEATMAP_MAX_BYTES = 8 * 1024


@dataclass(frozen=True)
class Heatmap:
    """One explanation.

    Attributes:
        canvas: ``float32[256, 256]`` in ``[0, 1]``, the map over the whole image stretched to
            256×256 (0 in the border outside the model's crop).
        image_size: ``(width, height)`` of the explained image, pixels.
        method: ``"gradcam++"`` or ``"gradcam"``.
        target: the class explained (``"nsfw"``).
        layer: the layer the map was read from.
        score: the target class's probability from the torch copy, in ``[0, 1]``.
        compute_ms: forward, backward and map time, ms (preprocessing excluded).
    """

    canvas: np.ndarray
    image_size: tuple[int, int]
    method: str
    target: str
    layer: str
    score: float
    compute_ms: float

    def in_original(self) -> np.ndarray:
        """``float32[height, width]``: the map resized to the explained image."""
        w, h = self.image_size
        return np.asarray(Image.fromarray(self.canvas, mode="F").resize((w, h), Image.Resampling.BILINEAR), dtype=np.float32)

    def peak(self) -> tuple[int, int]:
        """``(x, y)`` of the map's maximum in image pixels (the pointing-game point)."""
        cy, cx = np.unravel_index(int(np.argmax(self.canvas)), self.canvas.shape)
        w, h = self.image_size
        return int((cx + 0.5) * w / RESIZE_PX), int((cy + 0.5) * h / RESIZE_PX)

    def peak_box(self, threshold: float = DEFAULT_BOX_THRESHOLD) -> tuple[int, int, int, int]:
        """``(x, y, width, height)`` in image pixels around the connected region of the map at or
        above ``threshold`` × its maximum that holds the maximum.

        Raises:
            ValueError: ``threshold`` outside ``(0, 1]``.
        """
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold {threshold} outside (0, 1]")
        peak = float(self.canvas.max())
        if peak <= 0.0:
            return 0, 0, 0, 0
        labels, _ = ndimage.label(self.canvas >= threshold * peak)
        cy, cx = np.unravel_index(int(np.argmax(self.canvas)), self.canvas.shape)
        ys, xs = np.nonzero(labels == labels[cy, cx])
        w, h = self.image_size
        sx, sy = w / RESIZE_PX, h / RESIZE_PX
        x0, y0 = int(xs.min() * sx), int(ys.min() * sy)
        x1, y1 = int(np.ceil((xs.max() + 1) * sx)), int(np.ceil((ys.max() + 1) * sy))
        return x0, y0, min(x1, w) - x0, min(y1, h) - y0

    def png(self, max_side_px: int = DEFAULT_HEATMAP_SIDE_PX, max_bytes: int = DEFAULT_HEATMAP_MAX_BYTES) -> bytes:
        """The map as an 8-bit grayscale PNG in the image's aspect ratio, longest side at most
        ``max_side_px`` pixels and at most ``max_bytes`` bytes (the side halves until it fits).

        Raises:
            ValueError: not even a 1-pixel PNG fits in ``max_bytes``.
        """
        w, h = self.image_size
        side = max_side_px
        gray = Image.fromarray(np.clip(self.canvas * 255.0 + 0.5, 0, 255).astype(np.uint8), mode="L")
        while side >= 1:
            scale = side / max(w, h)
            size = (max(1, round(w * scale)), max(1, round(h * scale)))
            buf = io.BytesIO()
            gray.resize(size, Image.Resampling.BILINEAR).save(buf, format="PNG", optimize=True)
            if buf.tell() <= max_bytes:
                return buf.getvalue()
            side //= 2
        raise ValueError(f"no heatmap PNG fits in {max_bytes} bytes")


def overlay(rgb: np.ndarray, heatmap: Heatmap, alpha: float = 0.5) -> Image.Image:
    """The image with the map drawn over it in the ``jet`` colour map (``torchcam.utils.overlay_mask``).

    ``rgb``: ``uint8[h, w, 3]``; ``alpha``: the image's weight in the blend.
    """
    from torchcam.utils import overlay_mask

    mask = Image.fromarray(heatmap.in_original(), mode="F")  # overlay_mask reads values in [0, 1]
    return overlay_mask(Image.fromarray(rgb), mask, alpha=alpha)


class CamExplainer:
    """Grad-CAM or Grad-CAM++ maps of one class of the torch copy.

    Args:
        copy: the torch copy (:meth:`rtaudit.engine.explain.classifier.OpenNSFW.torch_copy`).
        method: a key of :data:`METHODS`.

    Raises:
        ValueError: unknown method.
        ModuleNotFoundError: ``torchcam`` is not installed (the ``explain`` extra).

    Not thread-safe (the extractor's hooks hold one forward pass): one per thread.
    """

    def __init__(self, copy: TorchCopy, method: str = "gradcam++") -> None:
        if method not in METHODS:
            raise ValueError(f"unknown CAM method {method!r}; one of {sorted(METHODS)}")
        import torchcam.methods

        self.copy = copy
        self.method = method
        self.layer = f"graph.{TARGET_LAYER}"
        self.extractor = getattr(torchcam.methods, METHODS[method])(copy, target_layer=self.layer, input_shape=(3, CROP_PX, CROP_PX))

    def close(self) -> None:
        """Remove the extractor's hooks from the model."""
        self.extractor.remove_hooks()

    def explain_input(self, x: np.ndarray, image_size: tuple[int, int], target: str = "nsfw") -> Heatmap:
        """The map of ``target`` for one preprocessed input ``float32[224, 224, 3]`` (NHWC,
        :func:`rtaudit.engine.explain.classifier.preprocess`) of an image of ``image_size``.

        Raises:
            ValueError: ``target`` is not one of :data:`rtaudit.engine.explain.classifier.CLASSES`.
        """
        if target not in CLASSES:
            raise ValueError(f"unknown target {target!r}; one of {CLASSES}")
        class_idx = CLASSES.index(target)
        started = time.perf_counter()
        tensor = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).permute(2, 0, 1)[None].to(self.copy.device)
        tensor.requires_grad_(True)  # the weights need no gradient: this is what builds the autograd graph
        with torch.enable_grad():
            logits = self.copy(tensor)
            (cam,) = self.extractor(class_idx=class_idx, scores=logits)
        score = float(torch.softmax(logits.detach(), dim=-1)[0, class_idx])
        cam = torch.nan_to_num(cam, nan=0.0)[None]  # [1, 1, 7, 7], 0 where the map is flat
        crop = F.interpolate(cam, size=(CROP_PX, CROP_PX), mode="bilinear", align_corners=False)[0, 0].clamp_(0, 1)
        canvas = np.zeros((RESIZE_PX, RESIZE_PX), dtype=np.float32)
        off = (RESIZE_PX - CROP_PX) // 2
        canvas[off:off + CROP_PX, off:off + CROP_PX] = crop.cpu().numpy()
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        return Heatmap(canvas, image_size, self.method, target, TARGET_LAYER, score, elapsed_ms)

    def explain(self, rgb: np.ndarray, target: str = "nsfw") -> Heatmap:
        """The map of ``target`` for one ``uint8[h, w, 3]`` RGB image.

        Raises:
            ValueError: as :meth:`explain_input`, or ``rgb`` is not ``[h, w, 3]``.
        """
        if rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"expected an RGB image [h, w, 3], got shape {rgb.shape}")
        return self.explain_input(preprocess(rgb), (rgb.shape[1], rgb.shape[0]), target)
