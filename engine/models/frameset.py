"""Time-based images through the still-image stages: an animated image (or a video's sampled
frames) is a :class:`FrameSet`; a stage flattens the micro-batch's frames into one model batch,
and folds the per-frame outputs back into one output per item (the highest score per category;
every frame's evidence, named by frame index and ``time_s``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rtaudit.engine.frames import Frame, SamplingParams, animation_frames
from rtaudit.engine.media import FittedImage, MediaPolicy, decode_image, load_bytes
from rtaudit.engine.models import StageOutput
from rtaudit.schemas.errors import MediaUndecodable
from rtaudit.schemas.messages import Evidence, MediaItem


@dataclass(frozen=True)
class TimedImage:
    """A fitted frame, its index in the decoded stream and its display interval ``[start_s, end_s)``."""

    fitted: FittedImage
    frame: int
    time_s: tuple[float, float]


@dataclass(frozen=True)
class FrameSet:
    """The sampled frames of one item, in display order."""

    images: tuple[TimedImage, ...]


def frame_set(frames: Sequence[Frame], fit: Callable[[np.ndarray], FittedImage]) -> FrameSet:
    """Fit each sampled frame (``fit`` takes ``uint8[h, w, 3]`` BGR) for a stage."""
    return FrameSet(tuple(
        TimedImage(fit(np.ascontiguousarray(f.rgb[:, :, ::-1])), f.index, (round(f.start_s, 3), round(f.end_s, 3)))
        for f in frames
    ))


def load_image_or_frames(item: MediaItem | None, policy: MediaPolicy, sampling: SamplingParams,
                         fit: Callable[[np.ndarray], FittedImage]) -> FittedImage | FrameSet:
    """A still image fitted for a stage, or the sampled frames of an animated GIF/APNG/WebP.

    Raises:
        MediaUndecodable, MediaTooLarge, URINotAllowed, MediaFetchFailed: as
            :func:`rtaudit.engine.media.load_bytes`, :func:`rtaudit.engine.media.decode_image` and
            :func:`rtaudit.engine.frames.animation_frames`; an undecodable item's message names its declared type.
    """
    if item is None:
        raise MediaUndecodable("image task without a media item")
    data = load_bytes(item, policy)
    try:
        frames = animation_frames(data, sampling, max_pixels=policy.max_pixels) if data else None
        if frames is None:
            return fit(np.ascontiguousarray(decode_image(data, policy)[:, :, ::-1]))
    except MediaUndecodable as exc:
        if item.mime:
            raise MediaUndecodable(f"{exc.message} (declared {item.mime[:100]})") from None
        raise
    return frame_set(frames, fit)


def flatten(inputs: Sequence[FittedImage | FrameSet]) -> tuple[list[FittedImage], list[int]]:
    """Every image of the batch, and the index of the input each came from."""
    images, owners = [], []
    for i, x in enumerate(inputs):
        for fitted in ([x] if isinstance(x, FittedImage) else [t.fitted for t in x.images]):
            images.append(fitted)
            owners.append(i)
    return images, owners


def fold(inputs: Sequence[FittedImage | FrameSet], outputs: Sequence[StageOutput | BaseException]) -> list[StageOutput | BaseException]:
    """One output per input from :func:`flatten`'s per-image ``outputs``: for a frame set, the
    highest score per category over its frames and every frame's evidence with ``frame`` and
    ``time_s`` set; an item one of whose frames raised fails with that frame's exception."""
    result: list[StageOutput | BaseException] = []
    it = iter(outputs)
    for x in inputs:
        if isinstance(x, FittedImage):
            result.append(next(it))
            continue
        scores: dict[str, float] = {}
        evidence: list[Evidence] = []
        failed: BaseException | None = None
        for timed in x.images:
            out = next(it)
            if isinstance(out, BaseException):
                failed = failed or out
                continue
            for category, score in out.scores.items():
                scores[category] = max(scores.get(category, 0.0), score)
            evidence += [e.model_copy(update={"frame": timed.frame, "time_s": timed.time_s}) for e in out.evidence]
        result.append(failed if failed is not None else StageOutput(scores=scores, evidence=evidence))
    return result
