"""The ``[av]`` settings section: audio, video and animated images (a field of
:class:`rtaudit.workers.settings.Settings`; read by the audio, video, image and OCR workers)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rtaudit.engine.frames import SamplingParams
from rtaudit.engine.isolation import Isolated


class TimedMediaSettings(BaseModel):
    """Audio, video and animated images (``engine/audio``, ``engine/frames.py``).

    Attributes:
        min_duration_s: shorter audio is refused as undecodable, seconds.
        max_duration_s: longer audio or video is refused (``media_too_large``), seconds.
        asr_threads: CTranslate2 threads of the recognizer; 0 = :meth:`Settings.model_threads`.
        asr_beam_size: Whisper's decoding beam (1: greedy).
        frame_interval_s: a frame is sampled at least this often, seconds.
        scene_threshold: share (0-1) of a 32×32 grey thumbnail's pixels changed by more than 10 %
            since the last sampled frame at or above which a frame is sampled as a scene change.
        max_frames_video: most frames sampled from one video (the interval widens to fit).
        max_frames_animation: most frames sampled from one animated image.
        isolate_decoding: decode audio and video in a child process per item (a crash or hang
            in FFmpeg costs the item, not the worker).
        decode_timeout_s: longest decoding of one item in that child, seconds.
    """

    model_config = ConfigDict(extra="forbid")
    min_duration_s: float = Field(default=0.1, ge=0.0)
    max_duration_s: float = Field(default=1800.0, gt=0)
    asr_threads: int = Field(default=0, ge=0, le=64)
    asr_beam_size: int = Field(default=1, ge=1, le=10)
    frame_interval_s: float = Field(default=1.0, gt=0)
    scene_threshold: float = Field(default=0.05, gt=0, le=1)
    max_frames_video: int = Field(default=24, ge=1, le=1000)
    max_frames_animation: int = Field(default=12, ge=1, le=1000)
    isolate_decoding: bool = True
    decode_timeout_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _durations_leave_room(self) -> "TimedMediaSettings":
        """Refuse ``min_duration_s`` at or above ``max_duration_s`` (every audio would be refused). Raises ValueError."""
        if self.min_duration_s >= self.max_duration_s:
            raise ValueError(f"av.min_duration_s = {self.min_duration_s:g} is not below av.max_duration_s = "
                             f"{self.max_duration_s:g}: every audio and video would be refused")
        return self

    def decoder(self, *preload: str) -> Isolated | None:
        """The child-process decoder of an audio or video worker (``None`` when not isolating)."""
        return Isolated(self.decode_timeout_s, preload) if self.isolate_decoding else None

    def sampling(self, kind: Literal["video", "animation"]) -> SamplingParams:
        """Frame sampling of a video or an animated image."""
        cap = self.max_frames_video if kind == "video" else self.max_frames_animation
        return SamplingParams(interval_s=self.frame_interval_s, scene_threshold=self.scene_threshold, max_frames=cap)
