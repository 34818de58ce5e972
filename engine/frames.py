"""Frames of time-based images: animated GIF, APNG and WebP (Pillow) and video (PyAV), sampled at
a fixed interval plus scene changes, capped per item.

Sampling rule (:class:`FrameSampler`), frame by frame in display order: the first frame is
kept; a later frame is kept when at least ``interval_s`` passed since the last kept one, or when
it differs from the last kept one by at least ``scene_threshold``: the share of its 32×32 grey
thumbnail's pixels that moved by more than :data:`PIXEL_DELTA` of full scale (a cut, a new
caption; not a global fade or flicker, which moves every pixel a little); at most ``max_frames`` are kept. A video
whose duration is known widens its interval to ``duration / max_frames`` so the cap spreads over
the whole video instead of its first seconds.
"""

from __future__ import annotations

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
    """

    interval_s: float = 1.0
    scene_threshold: float = 0.05
    max_frames: int = 12


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
    """Decides, frame by frame, which to keep (the rule of the module docstring)."""

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        self.kept = 0
        self._last_t: float | None = None
        self._last_thumb: np.ndarray | None = None

    @property
    def full(self) -> bool:
        return self.kept >= self.params.max_frames

    def offer(self, start_s: float, thumb: np.ndarray) -> bool:
        """Whether the frame shown at ``start_s`` (seconds) with grey thumbnail ``thumb`` is kept."""
        if self.full:
            return False
        keep = (
            self._last_thumb is None
            or start_s - (self._last_t or 0.0) >= self.params.interval_s - 1e-9
            or changed_share(thumb, self._last_thumb) >= self.params.scene_threshold
        )
        if keep:
            self.kept += 1
            self._last_t, self._last_thumb = start_s, thumb
        return keep


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
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                if getattr(img, "n_frames", 1) <= 1:
                    return None
                width, height = img.size
                if width * height > max_pixels:
                    raise MediaTooLarge(f"animation is {width}x{height} pixels, limit {max_pixels} pixels")
                return list(_sample_animation(img, params))
    except (MediaTooLarge, MediaUndecodable):
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaTooLarge(f"animation is over the pixel limit (Pillow: {exc})") from None
    except UnidentifiedImageError:
        raise MediaUndecodable(f"not an image format Pillow can read ({len(data)} bytes)") from None
    except Exception as exc:  # Pillow raises OSError, EOFError, ValueError... on corrupt frames
        raise MediaUndecodable(f"animation frame does not decode ({len(data)} bytes): {describe(exc)}") from None


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
