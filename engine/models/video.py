"""The ``video`` stage: a splitter. It decodes a video with PyAV, samples frames (an interval plus
scene changes, capped: :mod:`rtaudit.engine.frames`) and splits the item into parts known only
now: one ``image`` task per sampled frame (scored by the image and OCR stages in their own
micro-batches) and one ``audio`` task for the audio track (the audio stage decodes the same
media item's audio stream). Its own partial scores nothing; it lists the new parts in
``expands`` so fusion waits for them (under the request's unchanged deadline), and its evidence
says what was sampled.

Part names: ``<part>#frame:<index>`` (``index`` in the decoded stream; the task carries
``frame`` and ``time_s``, which the scoring stage copies onto its evidence) and ``<part>#audio``.
Outcomes: a video without an audio stream gets frame parts only; an audio-only container gets the
audio part only; neither, or nothing decodable, is ``media_undecodable``; over the duration
limit, ``media_too_large``; a stream that breaks off is sampled up to the break and says so.
"""

from __future__ import annotations

from typing import Any

import base64
import io
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata

from PIL import Image

from rtaudit.engine.frames import Frame, SamplingParams, VideoFrames, video_frames
from rtaudit.engine.isolation import Isolated
from rtaudit.engine.media import MediaPolicy, load_bytes
from rtaudit.engine.models import StageOutput
from rtaudit.engine.routing import DEFAULT_STAGES
from rtaudit.schemas.errors import MediaUndecodable
from rtaudit.schemas.messages import Evidence, MediaItem, ModalityTask, ModelRef

#: JPEG quality of the frames handed to the image stages (NudeNet and OCR read q90 as the original).
JPEG_QUALITY = 90
#: the suffix of the part a video's audio track is scored under.
AUDIO_TRACK = "#audio"


def frame_part(part: str, index: int) -> str:
    """The part name of frame ``index`` of item ``part``: ``"<part>#frame:<index>"``."""
    return f"{part}#frame:{index}"


@dataclass(frozen=True)
class VideoItem:
    """A prepared video: its task and what was decoded from it."""

    task: ModalityTask
    video: VideoFrames


class VideoStage:
    """The ``video`` stage (see the module docstring).

    Args:
        media_policy: loading limits.
        sampling: frame sampling (interval, scene threshold, cap per video).
        max_duration_s: longer videos are refused (``media_too_large``), seconds.
        stages_of: modality → the stages that score its tasks (the router's table), for ``expands``.
        frame_max_side_px: sampled frames are scaled to at most this longer side, pixels.
        decoder: decode in a child process with a time limit (FFmpeg parsing hostile bytes costs
            the item, not the worker); ``None``: in this process.
    """

    stage = "video"

    def __init__(self, media_policy: MediaPolicy, sampling: SamplingParams, *, max_duration_s: float = 1800.0,
                 stages_of: Mapping[str, tuple[str, ...]] = DEFAULT_STAGES, frame_max_side_px: int = 1280,
                 decoder: Isolated | None = None) -> None:
        self.media_policy, self.sampling, self.max_duration_s, self.decoder = media_policy, sampling, max_duration_s, decoder
        self.stages_of, self.frame_max_side_px = stages_of, frame_max_side_px
        self.model = ModelRef(name="pyav-frame-sampler", version=f"av-{metadata.version('av')}")

    def prepare(self, task: ModalityTask) -> VideoItem:
        """Load, decode and sample the task's video.

        Raises:
            MediaUndecodable: no media item, not decodable, neither a video nor an audio stream; the
                decoder's child process crashed or overran its time limit.
            MediaTooLarge: over ``policy.max_bytes`` or ``max_duration_s``.
            URINotAllowed, MediaFetchFailed: as :func:`rtaudit.engine.media.load_bytes`.
        """
        if task.media is None:
            raise MediaUndecodable("video task without a media item")
        try:
            data = load_bytes(task.media, self.media_policy)
            limits: dict[str, Any] = dict(max_duration_s=self.max_duration_s, max_side_px=self.frame_max_side_px)
            video = (self.decoder(video_frames, data, self.sampling, **limits) if self.decoder
                     else video_frames(data, self.sampling, **limits))
            if not video.frames and not video.has_audio:
                raise MediaUndecodable(f"neither a video nor an audio stream ({video.source})")
        except MediaUndecodable as exc:
            if task.media.mime:
                raise MediaUndecodable(f"{exc.message} (declared {task.media.mime[:100]})") from None
            raise
        return VideoItem(task, video)

    def infer(self, inputs: list[VideoItem]) -> list[StageOutput]:
        """One output per video: no scores, the split's tasks and the part keys they add."""
        return [self.split(item) for item in inputs]

    def split(self, item: VideoItem) -> StageOutput:
        """The frame and audio-track tasks of one video, and the evidence of what was sampled."""
        task, video = item.task, item.video
        common = dict(request_id=task.request_id, tenant_id=task.tenant_id, lane=task.lane,
                      created_at_ms=task.created_at_ms, deadline_ms=task.deadline_ms, routed_at_ms=task.routed_at_ms)
        name = (task.media.name if task.media and task.media.name else task.part)[:200]
        subtasks = [
            ModalityTask(part=frame_part(task.part, f.index), modality="image", media=self._jpeg(f, name),
                         frame=f.index, time_s=(round(f.start_s, 3), round(f.end_s, 3)), **common)
            for f in video.frames
        ]
        if video.has_audio:
            subtasks.append(ModalityTask(part=task.part + AUDIO_TRACK, modality="audio", media=task.media, **common))
        expands = [f"{stage}/{sub.part}" for sub in subtasks for stage in self.stages_of.get(sub.modality, ())]
        note = (f"{len(video.frames)} of {video.decoded} frames sampled from {video.duration_s:.2f} s ({video.source}); "
                f"audio track: {'yes' if video.has_audio else 'none'}{'; the stream broke off: sampled up to the break' if video.truncated else ''}")
        evidence = [Evidence(part="", category="neutral", label="video", score=0.0, text=note,
                             time_s=(0.0, round(video.duration_s, 3)))]
        return StageOutput(scores={}, evidence=evidence, subtasks=subtasks, expands=expands)

    @staticmethod
    def _jpeg(frame: Frame, name: str) -> MediaItem:
        buf = io.BytesIO()
        Image.fromarray(frame.rgb).save(buf, format="JPEG", quality=JPEG_QUALITY)
        return MediaItem(type="image", data_b64=base64.b64encode(buf.getvalue()).decode(), mime="image/jpeg",
                         name=f"{name}@{frame.start_s:.2f}s")
