"""Audio and video the project makes itself, for the demo, the audio warm-up and the tests:
speech clips synthesized with eSpeak NG and shipped in ``workers/media`` (see its README),
signals encoded into real containers with PyAV's encoders, and videos rendered frame by frame.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from fractions import Fraction
from importlib import resources
from typing import cast

import av
from av.audio.stream import AudioStream
from av.video.stream import VideoStream
import numpy as np
from PIL import Image, ImageDraw, ImageFont

#: the shipped clips: ``benign`` ("Good morning everyone, thanks for joining the call today.", 4.1 s)
#: and ``insult`` ("You are a stupid idiot.", 1.8 s), Ogg/Opus.
SPEECH = {"benign": "speech_benign.ogg", "insult": "speech_insult.ogg"}
RATE_HZ = 16_000


def speech_bytes(name: str) -> bytes:
    """The encoded bytes of a shipped speech clip (``benign`` or ``insult``)."""
    return resources.files("rtaudit.workers").joinpath("media", SPEECH[name]).read_bytes()


def decode_mono(data: bytes, rate: int = RATE_HZ) -> np.ndarray:
    """``float32[n]`` mono at ``rate`` Hz of any audio PyAV decodes."""
    with av.open(io.BytesIO(data), "r") as c:
        r = av.AudioResampler(format="flt", layout="mono", rate=rate)
        chunks = [o.to_ndarray().reshape(-1) for f in c.decode(audio=0) for o in r.resample(f)]
        chunks += [o.to_ndarray().reshape(-1) for o in r.resample(None)]
    return np.concatenate(chunks)


def clip(name: str) -> np.ndarray:
    """A shipped speech clip as ``float32[n]`` mono 16 kHz."""
    return decode_mono(speech_bytes(name))


def speech_with_insult(lead_s: float = 1.0, gap_s: float = 2.0) -> tuple[np.ndarray, float]:
    """``lead_s`` of silence, the benign clip, ``gap_s`` of silence, the insult clip, 0.5 s of silence:
    the signal (``float32[n]`` mono 16 kHz) and the time the insult clip starts, seconds."""
    benign, insult = clip("benign"), clip("insult")
    lead, gap, tail = (np.zeros(int(s * RATE_HZ), np.float32) for s in (lead_s, gap_s, 0.5))
    at = (len(lead) + len(benign) + len(gap)) / RATE_HZ
    return np.concatenate([lead, benign, gap, insult, tail]), at


def _s16_frame(samples: np.ndarray) -> av.AudioFrame:
    block = (np.clip(samples, -1, 1) * 32767).astype(np.int16).reshape(1, -1)
    frame = av.AudioFrame.from_ndarray(block, format="s16", layout="mono")
    frame.sample_rate = RATE_HZ
    return frame


def encode_audio(samples: np.ndarray, *, fmt: str = "wav", codec: str = "pcm_s16le", channels: int = 1,
                 out_rate: int | None = None) -> bytes:
    """Encode ``float32[n]`` mono 16 kHz into container ``fmt`` with ``codec``, ``channels`` channels at
    ``out_rate`` Hz (default 16 kHz), resampled by PyAV (``ipod`` is the M4A container)."""
    out_rate = out_rate or RATE_HZ
    layout = "mono" if channels == 1 else "stereo"
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as c:
        s = cast(AudioStream, c.add_stream(codec, rate=out_rate, layout=layout))
        formats = s.codec_context.codec.audio_formats
        r = av.AudioResampler(format=formats[0].name if formats else "s16", layout=layout, rate=out_rate)
        for i in range(0, max(1, len(samples)), 8192):
            for g in r.resample(_s16_frame(samples[i:i + 8192])):
                for p in s.encode(g):
                    c.mux(p)
        for g in r.resample(None):
            for p in s.encode(g):
                c.mux(p)
        for p in s.encode(None):
            c.mux(p)
    return buf.getvalue()


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans Bold at ``size`` px when the system has it, else Pillow's bundled scalable font."""
    try:
        return ImageFont.truetype("DejaVuSans-Bold.ttf", size)
    except OSError:
        return ImageFont.load_default(size)


def text_frame(text: str | None, size: tuple[int, int] = (480, 200), bg: tuple[int, int, int] = (235, 235, 235)) -> Image.Image:
    """An RGB frame of ``size`` px with ``text`` in large black type (or the plain background)."""
    img = Image.new("RGB", size, bg)
    if text:
        ImageDraw.Draw(img).text((20, size[1] // 2 - 30), text, fill=(0, 0, 0), font=font(56))
    return img


def encode_video(frame_at: Callable[[float], Image.Image], *, seconds: float, fps: int = 10, size: tuple[int, int] = (480, 200),
                 audio: np.ndarray | None = None, fmt: str = "mp4", codec: str = "libx264") -> bytes:
    """A video of ``seconds`` at ``fps`` whose frame at time ``t`` (s) is ``frame_at(t)`` (an image of
    ``size`` px), with ``audio`` (``float32[n]`` mono 16 kHz) as an AAC track when given."""
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as c:
        v = cast(VideoStream, c.add_stream(codec, rate=fps))
        v.width, v.height, v.pix_fmt = size[0], size[1], "yuv420p"
        a = c.add_stream("aac", rate=RATE_HZ, layout="mono") if audio is not None else None
        for i in range(int(seconds * fps)):
            frame = av.VideoFrame.from_image(frame_at(i / fps).convert("RGB"))
            frame.pts, frame.time_base = i, Fraction(1, fps)
            for p in v.encode(frame):
                c.mux(p)
        for p in v.encode(None):
            c.mux(p)
        if a is not None and audio is not None:
            r = av.AudioResampler(format="fltp", layout="mono", rate=RATE_HZ)
            for g in r.resample(_s16_frame(audio)) + r.resample(None):
                for p in a.encode(g):
                    c.mux(p)
            for p in a.encode(None):
                c.mux(p)
    return buf.getvalue()
