"""Decode any audio PyAV (FFmpeg's libraries, inside the ``av`` wheel) can read into mono 16 kHz.

WAV, FLAC, MP3, Ogg/Opus/Vorbis, M4A/AAC and the audio track of a video container all go
through one path: demux the first audio stream, decode, and downmix + resample with FFmpeg's
libswresample (``av.AudioResampler``, format ``flt``, layout ``mono``), the resampler FFmpeg
itself uses. The content decides, never the file name: a ``.mp3`` that holds Ogg decodes as Ogg.
"""

from __future__ import annotations

from typing import Any

import io
from dataclasses import dataclass

import numpy as np

from rtaudit.schemas.errors import MediaTooLarge, MediaUndecodable, describe

#: sample rate every stage after decoding works at, Hz (Whisper's and Silero VAD's input rate).
SAMPLE_RATE_HZ = 16_000


@dataclass(frozen=True)
class DecodedAudio:
    """One item's audio, ready for VAD and recognition.

    Attributes:
        samples: ``float32[n]``, mono, :data:`SAMPLE_RATE_HZ`, nominally in ``[-1, 1]``.
        source: what was decoded, for evidence and logs: container, codec, rate (Hz), channels.
        truncated: decoding stopped at a corrupt or missing part; ``samples`` holds what came before.
    """

    samples: np.ndarray
    source: str
    truncated: bool = False

    @property
    def duration_s(self) -> float:
        """Length of ``samples``, seconds."""
        return len(self.samples) / SAMPLE_RATE_HZ


def open_container(data: bytes) -> Any:
    """``av.open`` over the bytes of one media item (an ``av.container.InputContainer``; use it as a
    context manager).

    Raises:
        MediaUndecodable: 0 bytes, or not a container FFmpeg can open (the message names the size and
            FFmpeg's reason, never the bytes).
    """
    import av

    if not data:
        raise MediaUndecodable("empty media item (0 bytes)")
    try:
        return av.open(io.BytesIO(data), mode="r")
    except av.FFmpegError as exc:
        raise MediaUndecodable(f"not a media container FFmpeg can read ({len(data)} bytes): {describe(exc)}") from None


def has_audio_stream(data: bytes) -> bool:
    """Whether the container in ``data`` holds at least one audio stream (header only, nothing decoded).

    Raises:
        MediaUndecodable: not a container FFmpeg can open.
    """
    with open_container(data) as container:
        return bool(container.streams.audio)


def decode_audio(data: bytes, *, max_duration_s: float, min_duration_s: float = 0.0) -> DecodedAudio:
    """Decode the first audio stream of ``data`` to mono ``float32`` at :data:`SAMPLE_RATE_HZ`.

    Args:
        data: the encoded file, any container PyAV opens (the format is probed from the bytes).
        max_duration_s: longest audio accepted, seconds; checked on the header's duration
            before decoding, and again on the samples decoded (a header can lie or be absent).
        min_duration_s: shortest audio accepted, seconds.

    Returns:
        :class:`DecodedAudio`; ``truncated`` when the stream broke off after some audio decoded.

    Raises:
        MediaUndecodable: empty, not a container, no audio stream, nothing decodable, or
            shorter than ``min_duration_s`` (the message names the cause, never the bytes).
        MediaTooLarge: longer than ``max_duration_s``.
    """
    import av

    with open_container(data) as container:
        if not container.streams.audio:
            kinds = ", ".join(sorted({s.type for s in container.streams})) or "no streams"
            raise MediaUndecodable(f"no audio stream in the {container.format.name} container ({kinds})")
        stream = container.streams.audio[0]
        ctx = stream.codec_context
        source = f"{container.format.name}/{ctx.name} {ctx.sample_rate or '?'} Hz {ctx.channels or '?'} ch"
        if container.duration is not None and container.duration / 1e6 > max_duration_s:
            raise MediaTooLarge(f"audio is {container.duration / 1e6:.1f} s ({source}), limit {max_duration_s:g} s")
        max_samples = int(max_duration_s * SAMPLE_RATE_HZ)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE_HZ)
        chunks: list[np.ndarray] = []
        total, truncated = 0, False
        try:
            for frame in container.decode(stream):
                frame.pts = None  # resample by the samples themselves: broken timestamps must not drop audio
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
                    total += chunks[-1].size
                if total > max_samples:
                    raise MediaTooLarge(f"audio is over {max_duration_s:g} s ({source}; the header said "
                                        f"{'nothing' if container.duration is None else f'{container.duration / 1e6:.1f} s'})")
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
        except av.FFmpegError as exc:
            if not chunks:
                raise MediaUndecodable(f"audio stream ({source}) does not decode: {describe(exc)}") from None
            truncated = True
    samples = np.concatenate(chunks).astype(np.float32, copy=False) if chunks else np.zeros(0, np.float32)
    if samples.size == 0:
        raise MediaUndecodable(f"audio stream ({source}) decoded to no samples")
    duration = samples.size / SAMPLE_RATE_HZ
    if duration > max_duration_s:
        raise MediaTooLarge(f"audio is {duration:.1f} s ({source}), limit {max_duration_s:g} s")
    if duration < min_duration_s:
        raise MediaUndecodable(f"audio is {duration * 1000:.0f} ms ({source}), shorter than the minimum {min_duration_s:g} s")
    return DecodedAudio(np.ascontiguousarray(samples), source, truncated)
