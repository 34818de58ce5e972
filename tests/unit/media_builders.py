"""Media made in the test (PyAV and Pillow), so the audio/video/animation tests run from a fresh
clone: mono float32 signals encoded into real containers, speech clips from ``tests/data``
(espeak-ng 1.51 output shipped in ``workers/demo_media``, see its README), frames with rendered text."""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont

DATA = Path(__file__).resolve().parents[2] / "workers" / "demo_media"
#: the committed speech clips: ``benign`` ("Good morning everyone, thanks for joining the call today.")
#: and ``insult`` ("You are a stupid idiot.").
SPEECH = {"benign": DATA / "speech_benign.ogg", "insult": DATA / "speech_insult.ogg"}


def decode_mono(data: bytes, rate: int = 16_000) -> np.ndarray:
    """``float32[n]`` mono at ``rate`` of any audio PyAV decodes (the test's own reference decoder)."""
    with av.open(io.BytesIO(data)) as c:
        r = av.AudioResampler(format="flt", layout="mono", rate=rate)
        chunks = [o.to_ndarray().reshape(-1) for f in c.decode(audio=0) for o in r.resample(f)]
        chunks += [o.to_ndarray().reshape(-1) for o in r.resample(None)]
    return np.concatenate(chunks)


def clip(name: str) -> np.ndarray:
    """A committed speech clip as ``float32[n]`` mono 16 kHz."""
    return decode_mono(SPEECH[name].read_bytes())


def encode_audio(samples: np.ndarray, *, rate: int = 16_000, fmt: str = "wav", codec: str = "pcm_s16le",
                 channels: int = 1, out_rate: int | None = None) -> bytes:
    """Encode ``float32[n]`` mono at ``rate`` into container ``fmt`` with ``codec``, ``channels``
    channels at ``out_rate`` Hz (default ``rate``), through PyAV's encoders."""
    out_rate = out_rate or rate
    layout = "mono" if channels == 1 else "stereo"
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as c:
        s = c.add_stream(codec, rate=out_rate, layout=layout)
        fmt_in = s.codec_context.codec.audio_formats[0].name if s.codec_context.codec.audio_formats else "s16"
        r = av.AudioResampler(format=fmt_in, layout=layout, rate=out_rate)
        pcm = np.clip(samples, -1, 1)
        frame_len = 1024
        for i in range(0, len(pcm), frame_len * 8):
            block = (pcm[i:i + frame_len * 8] * 32767).astype(np.int16).reshape(1, -1)
            f = av.AudioFrame.from_ndarray(block, format="s16", layout="mono")
            f.sample_rate = rate
            for g in r.resample(f):
                for p in s.encode(g):
                    c.mux(p)
        for g in r.resample(None):
            for p in s.encode(g):
                c.mux(p)
        for p in s.encode(None):
            c.mux(p)
    return buf.getvalue()


def speech_with_insult(lead_s: float = 1.0, gap_s: float = 2.0, rate: int = 16_000) -> tuple[np.ndarray, float]:
    """``lead_s`` of silence, the benign clip, ``gap_s`` of silence, the insult clip, 0.5 s of silence;
    returns the signal (``float32[n]`` mono 16 kHz) and the time the insult clip starts, seconds."""
    benign, insult = clip("benign"), clip("insult")
    lead, gap, tail = (np.zeros(int(s * rate), np.float32) for s in (lead_s, gap_s, 0.5))
    at = (len(lead) + len(benign) + len(gap)) / rate
    return np.concatenate([lead, benign, gap, insult, tail]), at


def font(size: int) -> ImageFont.ImageFont:
    """DejaVu Sans Bold at ``size`` px when the system has it, else Pillow's scalable default."""
    for path in ("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",):
        if Path(path).is_file():
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size)


def text_frame(text: str | None, size: tuple[int, int] = (480, 200), bg: tuple[int, int, int] = (235, 235, 235)) -> Image.Image:
    """An RGB frame of ``size`` px with ``text`` in large black type (or a plain background)."""
    img = Image.new("RGB", size, bg)
    if text:
        ImageDraw.Draw(img).text((20, size[1] // 2 - 30), text, fill=(0, 0, 0), font=font(56))
    return img


def encode_video(frame_at, *, seconds: float, fps: int = 10, size: tuple[int, int] = (480, 200),
                 audio: np.ndarray | None = None, fmt: str = "mp4", codec: str = "libx264") -> bytes:
    """A video of ``seconds`` at ``fps`` whose frame at time ``t`` is ``frame_at(t)`` (a PIL image of
    ``size``), with ``audio`` (``float32[n]`` mono 16 kHz) as an AAC track when given."""
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as c:
        v = c.add_stream(codec, rate=fps)
        v.width, v.height, v.pix_fmt = size[0], size[1], "yuv420p"
        a = c.add_stream("aac", rate=16_000, layout="mono") if audio is not None else None
        for i in range(int(seconds * fps)):
            frame = av.VideoFrame.from_image(frame_at(i / fps).convert("RGB"))
            frame.pts = i
            frame.time_base = Fraction(1, fps)
            for p in v.encode(frame):
                c.mux(p)
        for p in v.encode(None):
            c.mux(p)
        if a is not None:
            r = av.AudioResampler(format="fltp", layout="mono", rate=16_000)
            block = (np.clip(audio, -1, 1) * 32767).astype(np.int16).reshape(1, -1)
            f = av.AudioFrame.from_ndarray(block, format="s16", layout="mono")
            f.sample_rate = 16_000
            for g in r.resample(f) + r.resample(None):
                for p in a.encode(g):
                    c.mux(p)
            for p in a.encode(None):
                c.mux(p)
    return buf.getvalue()
