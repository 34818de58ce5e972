"""Image stage: NudeNet 320n detector (YOLOv8n-style, 18 body-part classes) on onnxruntime.

Source: ``nudenet`` 3.4 (notAI-tech/NudeNet), whose ``320n.onnx`` ships in the
package. Input ``float32[batch, 3, 320, 320]``; the package's own pre- and
post-processing (letterbox pad, NMS at IoU 0.45, score ≥ 0.2) is reused through
``NudeDetector.detect_batch``. Boxes come back as ``[x, y, width, height]`` pixels.
"""

from __future__ import annotations

import os
from importlib import metadata
from typing import Any

import numpy as np

from rtaudit.engine.frames import SamplingParams
from rtaudit.engine.media import FittedImage, MediaPolicy, fit_image
from rtaudit.engine.models import StageOutput
from rtaudit.engine.models.frameset import FrameSet, flatten, fold, load_image_or_frames
from rtaudit.engine.models.onnx import CudaOptions, session
from rtaudit.schemas.messages import Evidence, ModalityTask, ModelRef

#: NudeNet class → moderation category. Classes not listed (faces, feet, covered
#: belly...) are kept as evidence under ``"neutral"`` and score nothing.
CATEGORY_OF_CLASS: dict[str, str] = {
    "FEMALE_GENITALIA_EXPOSED": "sexual",
    "MALE_GENITALIA_EXPOSED": "sexual",
    "FEMALE_BREAST_EXPOSED": "sexual",
    "BUTTOCKS_EXPOSED": "sexual",
    "ANUS_EXPOSED": "sexual",
    "FEMALE_GENITALIA_COVERED": "suggestive",
    "FEMALE_BREAST_COVERED": "suggestive",
    "BUTTOCKS_COVERED": "suggestive",
    "ANUS_COVERED": "suggestive",
}
CATEGORIES = ("sexual", "suggestive")


class NudityStage:
    """The ``image`` stage. ``prepare`` loads, decodes and fits (``uint8[h, w, 3]`` BGR, longest side
    at most :attr:`max_side_px` pixels) for the detector.

    ``intra_op_threads``: onnxruntime intra-op threads of the detector session (0: onnxruntime's default).
    ``model_path``: the detector's ONNX file (a model bundle's ``320n.onnx``); ``None``: the one in the ``nudenet`` package.
    ``prefer_gpu``, ``cuda``: CUDA execution provider and its options (:func:`rtaudit.engine.models.onnx.session`).
    ``sampling``: how frames of an animated image are sampled (each sampled frame is detected on).
    """

    stage = "image"

    def __init__(self, media_policy: MediaPolicy, *, prefer_gpu: bool = True, intra_op_threads: int = 0,
                 model_path: str | os.PathLike[str] | None = None, cuda: CudaOptions | None = None,
                 sampling: SamplingParams = SamplingParams()) -> None:
        import nudenet
        from nudenet import NudeDetector

        path = os.fspath(model_path) if model_path else os.path.join(os.path.dirname(nudenet.__file__), "320n.onnx")
        self._detector = NudeDetector(model_path=path)
        # nudenet 3.4 ignores its providers argument: give it a session that may use CUDA.
        self._detector.onnx_session = session(path, prefer_gpu=prefer_gpu, intra_op_threads=intra_op_threads, cuda=cuda)
        self.media_policy, self.sampling = media_policy, sampling
        self.model = ModelRef(name="nudenet-320n", version=metadata.version("nudenet"))

    #: longest side, pixels, an image is scaled down to before detection. The detector sees a
    #: 320×320 letterbox anyway; scaling first (area interpolation) bounds memory: NudeNet pads
    #: to a square of the longest side, which for a 40000×1000 image would be 4.8 GB.
    max_side_px = 640

    def prepare(self, task: ModalityTask) -> FittedImage | FrameSet:
        """Load and decode the task's image, scaled to :attr:`max_side_px` (any shape: a 1×1 or
        1×10000 image is letterboxed by NudeNet like any other); an animated image's sampled frames.

        Raises:
            AuditError: as :func:`rtaudit.engine.models.frameset.load_image_or_frames`.
        """
        return load_image_or_frames(task.media, self.media_policy, self.sampling, self.fit)

    def fit(self, bgr: np.ndarray) -> FittedImage:
        """``uint8[h, w, 3]`` BGR scaled to :attr:`max_side_px`."""
        return fit_image(bgr, max_side_px=self.max_side_px)

    def infer(self, inputs: list[FittedImage | FrameSet]) -> list[StageOutput | BaseException]:
        """Detections per item (every sampled frame of an animation in the same model batch);
        evidence boxes are ``(x, y, width, height)`` in original-image pixels."""
        flat, _ = flatten(inputs)
        return fold(inputs, self.detect(flat))

    def detect(self, inputs: list[FittedImage]) -> list[StageOutput]:
        """Detections per image, one NudeNet batch."""
        if not inputs:
            return []
        images = [f.bgr for f in inputs]
        detections: list[list[dict[str, Any]]] = self._detector.detect_batch(images, batch_size=max(1, len(images)))
        outputs = []
        for fitted, dets in zip(inputs, detections):
            scores = {c: 0.0 for c in CATEGORIES}
            evidence = []
            for d in dets:
                category = CATEGORY_OF_CLASS.get(d["class"], "neutral")
                score = round(float(d["score"]), 4)
                if category in scores:
                    scores[category] = max(scores[category], score)
                box = fitted.to_original(tuple(int(v) for v in d["box"]))  # type: ignore[arg-type]  # NudeNet's box is 4 ints (x, y, w, h); the tuple() loses the length
                evidence.append(Evidence(part="", category=category, score=score, label=d["class"], box=box))
            outputs.append(StageOutput(scores=scores, evidence=evidence))
        return outputs
