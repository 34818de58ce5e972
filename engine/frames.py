"""Frames of time-based images: animated GIF, APNG and WebP (Pillow) and video (PyAV), sampled at
a fixed interval plus scene changes, capped per item.

Sampling rule (:class:`FrameSampler`), frame by frame in display order:

* **interval**: the first frame at or after each multiple of ``interval_s`` is kept. When the
  item's duration is known (a video's header) the interval widens so these frames fit in half
  the cap, spread over the whole item instead of its first seconds.
* **scene change**: a frame that differs from the frame *before it* by at least
  ``scene_threshold`` (the share of its 32×32 grey thumbnail's pixels that moved by more than
  :data:`PIXEL_DELTA` of full scale) is kept, at least ``min_gap_s`` after the last kept frame:
  a cut or a caption appearing; not motion (consecutive frames of a moving scene differ little)
  nor a fade or flicker (which moves every pixel a little).
* at most ``max_frames`` in all.
"""

from __future__ import annotations

from typing import Any

import io
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

from rtaudit.schemas.errors import MediaTooLarge, MediaUndecodable, describe

#: side of the grey thumbnails compared for scene changes, pixels.
THUMB_PX = 32
#: change of one thumbnail pixel (0-1 of full scale) that counts it as changed. Measured on a
#: 480×200 frame: "STUPID IDIOT" in 56 px type appearing changes 16 % of the thumbnail, a
#: background shift of 12 grey levels 0 % (the mean absolute difference was 0.079 against 0.047).
PIXEL_DELTA = 0.1
#: display time of an animation frame that declares none (or 0 ms), seconds (what browsers use).
DEFAULT_FRAME_S = 0.1


@dataclass(frozen=True)
class SamplingParams:
    """How frames are sampled (see the module docstring).

    Attributes:
        interval_s: a frame is kept at least this often, seconds.
        scene_threshold: share of thumbnail pixels changed (0-1) that counts as a scene change.
        max_frames: most frames kept per item.
        min_gap_s: a scene change is kept only this long after the last kept frame, seconds.
    """

    interval_s: float = 1.0
    scene_threshold: float = 0.05
    max_frames: int = 12
    min_gap_s: float = 0.2


@dataclass(frozen=True)
class Frame:
    """One sampled frame.

    Attributes:
        index: position of the frame in the decoded stream (0-based).
        start_s: when it is first shown, seconds from the start of the item.
        end_s: when its own display ends (``start_s`` + its duration), seconds.
        rgb: ``uint8[height, width, 3]`` RGB.
    """

    index: int
    start_s: float
    end_s: float
    rgb: np.ndarray


def thumbnail(grey: np.ndarray) -> np.ndarray:
    """``float32[32, 32]`` in ``[0, 1]`` of a ``uint8[h, w]`` grey image (area average)."""
    img = Image.fromarray(grey).resize((THUMB_PX, THUMB_PX), Image.Resampling.BOX)
    return np.asarray(img, dtype=np.float32) / 255.0


def changed_share(a: np.ndarray, b: np.ndarray) -> float:
    """Share (0-1) of the pixels of two ``float32[32, 32]`` thumbnails that differ by more than :data:`PIXEL_DELTA`."""
    return float(np.mean(np.abs(a - b) > PIXEL_DELTA))


class FrameSampler:
    """Decides, frame by frame, which to keep (the rule of the module docstring).

    ``duration_s``: the item's duration when known (seconds): the interval then widens to fit
    half of ``max_frames`` over it, the other half left to scene changes.
    """

    def __init__(self, params: SamplingParams, duration_s: float | None = None) -> None:
        self.params = params
        self.interval_s = params.interval_s
        #: scene changes kept at most: what the interval frames leave of the cap
        self.scene_budget = params.max_frames
        if duration_s:
            self.interval_s = max(params.interval_s, duration_s / max(1, params.max_frames - params.max_frames // 2))
            self.scene_budget = max(0, params.max_frames - int(np.ceil(duration_s / self.interval_s - 1e-9)))
        self.kept = 0
        self.scenes = 0
        self._next_grid_s = 0.0
        self._last_kept_s: float | None = None
        self._previous: np.ndarray | None = None

    @property
    def full(self) -> bool:
        return self.kept >= self.params.max_frames

    def offer(self, start_s: float, thumb: np.ndarray) -> bool:
        """Whether the frame shown at ``start_s`` (seconds) with grey thumbnail ``thumb`` is kept."""
        previous, self._previous = self._previous, thumb
        if self.full:
            return False
        if start_s >= self._next_grid_s - 1e-9:
            self._next_grid_s = float((np.floor(start_s / self.interval_s + 1e-9) + 1) * self.interval_s)
        elif (previous is not None and self.scenes < self.scene_budget
              and start_s - (self._last_kept_s or 0.0) >= self.params.min_gap_s - 1e-9
              and changed_share(thumb, previous) >= self.params.scene_threshold):
            self.scenes += 1
        else:
            return False
        self.kept += 1
        self._last_kept_s = start_s
        return True


def _composited(frame: Image.Image) -> Image.Image:
    """An animation frame as RGB, transparency composited onto white (as still images are)."""
    rgba = frame.convert("RGBA")
    canvas = Image.new("RGB", rgba.size, (255, 255, 255))
    canvas.paste(rgba, mask=rgba.getchannel("A"))
    return canvas


def animation_frames(data: bytes, params: SamplingParams, *, max_pixels: int) -> list[Frame] | None:
    """Sampled frames of an animated GIF, APNG or WebP; ``None`` for a still image (one frame).

    Raises:
        MediaUndecodable: not an image Pillow reads, or a frame that does not decode.
        MediaTooLarge: a frame over ``max_pixels`` pixels.
    """
    what = "image"  # until the frame count is read, a still image is as likely: the messages say "image"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                if getattr(img, "n_frames", 1) <= 1:
                    return None
                what = "animation"
                width, height = img.size
                if width * height > max_pixels:
                    raise MediaTooLarge(f"animation is {width}x{height} pixels, limit {max_pixels} pixels")
                return list(_sample_animation(img, params))
    except (MediaTooLarge, MediaUndecodable):
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow refuses these in Image.open, before the header check above could name our limit
        raise MediaTooLarge(f"{what} is over the limit of {max_pixels} pixels (Pillow: {exc})") from None
    except UnidentifiedImageError:
        raise MediaUndecodable(f"not an image format Pillow can read ({len(data)} bytes)") from None
    except Exception as exc:  # Pillow raises OSError, EOFError, ValueError... on corrupt frames
        thing = "animation frame" if what == "animation" else "image"
        raise MediaUndecodable(f"{thing} does not decode ({len(data)} bytes): {describe(exc)}") from None


def _sample_animation(img: Image.Image, params: SamplingParams) -> Iterator[Frame]:
    sampler = FrameSampler(params)
    t = 0.0
    pending: tuple[int, float, np.ndarray] | None = None
    for index, frame in enumerate(ImageSequence.Iterator(img)):
        frame.load()  # WebP sets the frame's duration when it is loaded
        duration_s = (frame.info.get("duration") or 0) / 1000.0 or DEFAULT_FRAME_S
        if pending is not None:
            yield Frame(pending[0], pending[1], t, pending[2])
            pending = None
        if sampler.full:
            break
        rgb = _composited(ImageOps.exif_transpose(frame) if index == 0 else frame)
        grey = np.asarray(rgb.convert("L"))
        if sampler.offer(t, thumbnail(grey)):
            pending = (index, t, np.asarray(rgb, dtype=np.uint8))
        t += duration_s
    if pending is not None:
        yield Frame(pending[0], pending[1], t, pending[2])


@dataclass(frozen=True)
class VideoFrames:
    """What :func:`video_frames` read from a video.

    Attributes:
        frames: the sampled frames, in display order (``rgb`` scaled to at most ``max_side_px``).
        duration_s: the container's duration, else the last frame's end, seconds.
        has_audio: the container holds an audio stream.
        decoded: frames decoded (sampled or not).
        truncated: decoding stopped at a corrupt or missing part; ``frames`` holds what came before.
        source: container, codec and size, for evidence and logs.
    """

    frames: tuple[Frame, ...]
    duration_s: float
    has_audio: bool
    decoded: int
    truncated: bool
    source: str


def video_frames(data: bytes, params: SamplingParams, *, max_duration_s: float, max_side_px: int = 1280) -> VideoFrames:
    """Decode the first video stream of ``data`` with PyAV and sample its frames.

    Frame times come from each frame's own timestamp (variable frame rates keep their real
    times), else from its position at the stream's average rate. When the duration is known, the
    sampling interval widens to ``duration / max_frames`` so the cap covers the whole video.

    Raises:
        MediaUndecodable: empty, not a container FFmpeg reads, or no video frame decodes.
        MediaTooLarge: longer than ``max_duration_s`` (header, or the frames' own times).
    """
    import av

    from rtaudit.engine.audio.decode import open_container

    with open_container(data) as container:
        has_audio = bool(container.streams.audio)
        if not container.streams.video:
            return VideoFrames((), _seconds(container.duration) or 0.0, has_audio, 0, False,
                               f"{container.format.name} without a video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        ctx = stream.codec_context
        source = f"{container.format.name}/{ctx.name} {ctx.width}x{ctx.height}"
        duration = _seconds(container.duration)
        if duration is not None and duration > max_duration_s:
            raise MediaTooLarge(f"video is {duration:.1f} s ({source}), limit {max_duration_s:g} s")
        rate = float(stream.average_rate) if stream.average_rate else 25.0
        sampler = FrameSampler(params, duration)
        frames: list[Frame] = []
        pending: tuple[int, float, np.ndarray] | None = None
        decoded, truncated, last_t = 0, False, 0.0
        try:
            for frame in container.decode(stream):
                t = float(frame.time) if frame.time is not None else decoded / rate
                if t > max_duration_s:
                    raise MediaTooLarge(f"video is over {max_duration_s:g} s ({source}; frame at {t:.1f} s)")
                decoded += 1
                last_t = max(last_t, t)
                if pending is not None:
                    frames.append(Frame(pending[0], pending[1], t, pending[2]))
                    pending = None
                if sampler.full:
                    continue  # keep counting: the duration and the time limit still apply
                if sampler.offer(t, thumbnail(frame.to_ndarray(format="gray"))):
                    pending = (decoded - 1, t, _scaled_rgb(frame, max_side_px))
        except av.FFmpegError as exc:
            if decoded == 0:
                raise MediaUndecodable(f"video stream ({source}) does not decode: {describe(exc)}") from None
            truncated = True
        if decoded == 0:
            raise MediaUndecodable(f"video stream ({source}) decoded to no frames")
        end = max(duration or 0.0, last_t + 1.0 / rate)
        if pending is not None:
            frames.append(Frame(pending[0], pending[1], round(last_t + 1.0 / rate, 3), pending[2]))
        return VideoFrames(tuple(frames), end, has_audio, decoded, truncated, source)


def _seconds(duration_us: int | None) -> float | None:
    return duration_us / 1e6 if duration_us is not None and duration_us > 0 else None


def _scaled_rgb(frame: Any, max_side_px: int) -> np.ndarray:
    """``uint8[h, w, 3]`` RGB of a PyAV video frame, longer side at most ``max_side_px`` (FFmpeg's scaler)."""
    scale = min(1.0, max_side_px / max(frame.width, frame.height, 1))
    if scale < 1.0:
        rgb: np.ndarray = frame.to_ndarray(format="rgb24", width=max(1, round(frame.width * scale)),
                                           height=max(1, round(frame.height * scale)))
        return rgb
    full: np.ndarray = frame.to_ndarray(format="rgb24")
    return full
