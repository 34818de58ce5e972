"""How good a heatmap is: localization against reference boxes and faithfulness (deletion and
insertion curves). Evaluation only: serving never imports this module.

* **IoU**: the heatmap's peak box (:meth:`rtaudit.engine.explain.cam.Heatmap.peak_box`) against
  the best-matching reference box of the image; mean over images and the share at IoU ≥ 0.5.
* **Pointing game** (Zhang et al. 2016, arXiv:1608.00507): a hit when the heatmap's maximum lies
  inside a reference box.
* **Deletion / insertion** (Petsiuk et al. 2018, RISE, arXiv:1806.07421), from
  ``torchcam.metrics.DeletionInsertionMetric``: the target class's probability as the most
  salient input pixels are replaced by the baseline (deletion, lower is better) or restored
  from it (insertion, higher is better), area under the curve over the fraction of pixels, in
  ``[0, 1]``. The baseline is the model's zero input, i.e. the training set's mean colour.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch

from rtaudit.engine.explain.cam import DEFAULT_BOX_THRESHOLD, CamExplainer
from rtaudit.engine.explain.classifier import CLASSES, preprocess

Box = tuple[int, int, int, int]


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two ``(x, y, width, height)`` boxes, in ``[0, 1]`` (0 for empty boxes)."""
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    iw = max(0, min(ax1, bx1) - max(a[0], b[0]))
    ih = max(0, min(ay1, by1) - max(a[1], b[1]))
    inter = iw * ih
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def inside(point: tuple[int, int], box: Box) -> bool:
    """Whether ``(x, y)`` lies in the ``(x, y, width, height)`` box (edges included)."""
    return box[0] <= point[0] <= box[0] + box[2] and box[1] <= point[1] <= box[1] + box[3]


@dataclass(frozen=True)
class LabelledImage:
    """An image with reference boxes. ``rgb``: ``uint8[h, w, 3]``; ``boxes``: ``(x, y, w, h)`` pixels;
    ``source``: where the image and its licence come from."""

    name: str
    rgb: np.ndarray
    boxes: tuple[Box, ...]
    source: str = ""


@dataclass(frozen=True)
class Localization:
    """One method's localization over a set of images (those with at least one box)."""

    method: str
    images: int
    mean_iou: float
    share_iou_50: float
    pointing: float
    per_image: tuple[tuple[str, float, bool], ...]  # (name, best IoU, pointing hit)


def localization(explainer: CamExplainer, images: list[LabelledImage], target: str = "nsfw",
                 threshold: float = DEFAULT_BOX_THRESHOLD) -> Localization:
    """Localization of ``explainer``'s maps of ``target`` against each image's boxes.

    Raises:
        ValueError: no image has a box.
    """
    rows = []
    for img in images:
        if not img.boxes:
            continue
        heat = explainer.explain(img.rgb, target)
        box, peak = heat.peak_box(threshold), heat.peak()
        rows.append((img.name, max(iou(box, b) for b in img.boxes), any(inside(peak, b) for b in img.boxes)))
    if not rows:
        raise ValueError("no image with a reference box")
    ious = np.array([r[1] for r in rows])
    return Localization(explainer.method, len(rows), float(ious.mean()), float((ious >= 0.5).mean()),
                        float(np.mean([r[2] for r in rows])), tuple(rows))


def centre_baseline(images: list[LabelledImage], side: float = 0.5) -> Localization:
    """The localization a map with no information about the image gets: the centred box covering
    ``side`` of the image's width and height, and the image centre as the pointing-game point
    (photographers centre their subject, so this prior is the bar a heatmap must clear).

    Raises:
        ValueError: no image has a box; ``side`` outside ``(0, 1]``.
    """
    if not 0.0 < side <= 1.0:
        raise ValueError(f"side {side} outside (0, 1]")
    rows = []
    for img in images:
        if not img.boxes:
            continue
        h, w = img.rgb.shape[:2]
        box = (int(w * (1 - side) / 2), int(h * (1 - side) / 2), int(w * side), int(h * side))
        rows.append((img.name, max(iou(box, b) for b in img.boxes), any(inside((w // 2, h // 2), b) for b in img.boxes)))
    if not rows:
        raise ValueError("no image with a reference box")
    ious = np.array([r[1] for r in rows])
    return Localization(f"centre {side:.0%} box", len(rows), float(ious.mean()), float((ious >= 0.5).mean()),
                        float(np.mean([r[2] for r in rows])), tuple(rows))


@dataclass(frozen=True)
class Faithfulness:
    """Mean deletion and insertion AUC of one method over ``images`` images."""

    method: str
    images: int
    deletion_auc: float
    insertion_auc: float


def deletion_insertion(explainer: CamExplainer, images: list[np.ndarray], target: str = "nsfw",
                       steps: int = 20) -> Faithfulness:
    """Deletion and insertion AUC of ``explainer``'s maps of ``target`` on ``uint8[h, w, 3]`` images,
    each perturbed in ``steps`` steps (``torchcam.metrics.DeletionInsertionMetric``)."""
    from torchcam.metrics import DeletionInsertionMetric

    metric = DeletionInsertionMetric(explainer.extractor, partial(torch.softmax, dim=-1), steps=steps, batch_size=steps + 1)
    for rgb in images:
        x = torch.from_numpy(preprocess(rgb)).permute(2, 0, 1)[None].to(explainer.copy.device).requires_grad_(True)
        with torch.enable_grad():
            metric.update(x, class_idx=CLASSES.index(target))
    summary = metric.summary()
    return Faithfulness(explainer.method, metric.total, summary["deletion_auc"], summary["insertion_auc"])


def photo_corpus(extra: Path | None = None) -> list[tuple[str, np.ndarray]]:
    """``(file name, uint8[h, w, 3] RGB)`` of every colour or grey 8-bit image of at least 64 px a
    side that scikit-image ships in its wheel (CC0 / public domain, ``skimage/data/README.txt``),
    then those of ``extra`` (e.g. ``../shared/data/images/photos``) not already in, when it exists."""
    import skimage
    from skimage import io

    root = Path(skimage.__file__).parent / "data"
    paths = sorted(root.glob("*.png")) + sorted(root.glob("*.jpg"))
    if extra is not None and extra.is_dir():
        paths += sorted(p for p in extra.iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"})
    out, seen = [], set()
    for p in paths:
        img = np.asarray(io.imread(p))
        if img.dtype != np.uint8 or img.ndim not in (2, 3) or min(img.shape[:2]) < 64:
            continue
        img = np.stack([img] * 3, axis=-1) if img.ndim == 2 else img[..., :3]
        if (p.name, img.shape) in seen:
            continue
        seen.add((p.name, img.shape))
        out.append((p.name, np.ascontiguousarray(img)))
    return out


def detector_labelled(images: list[tuple[str, np.ndarray]]) -> list[LabelledImage]:
    """The images NudeNet 320n (the served image stage's detector, every class) finds a box in,
    with those boxes ``(x, y, w, h)``; ``source`` lists the classes."""
    from nudenet import NudeDetector

    detector = NudeDetector()
    out = []
    for name, rgb in images:
        dets = detector.detect(np.ascontiguousarray(rgb[..., ::-1]))
        if dets:
            boxes = tuple(tuple(int(v) for v in d["box"]) for d in dets)
            out.append(LabelledImage(name, rgb, boxes, ",".join(d["class"] for d in dets)))  # type: ignore[arg-type]  # NudeNet's box is 4 ints (x, y, w, h); the tuple() loses the length
    return out
