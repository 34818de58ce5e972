"""What kind of media a file holds, judged by its bytes (never by its name): an image Pillow
reads, else a container FFmpeg (PyAV) opens, holding video (not just cover art) or audio.

Used by clients (``rtaudit submit``) to label what they send: the fleet itself decodes by
content anyway, so a wrong label costs nothing but a misleading ``mime`` in a reason.
"""

from __future__ import annotations

import io
from typing import Literal

from PIL import Image, UnidentifiedImageError

MediaKind = Literal["image", "audio", "video"]

#: FFmpeg demuxer name → MIME type, for the containers a producer commonly sends.
_AV_MIME: dict[str, tuple[str, str]] = {  # name: (as audio, as video)
    "mov,mp4,m4a,3gp,3g2,mj2": ("audio/mp4", "video/mp4"),
    "matroska,webm": ("audio/webm", "video/webm"),
    "ogg": ("audio/ogg", "video/ogg"),
    "mp3": ("audio/mpeg", "audio/mpeg"),
    "wav": ("audio/wav", "audio/wav"),
    "flac": ("audio/flac", "audio/flac"),
    "aac": ("audio/aac", "audio/aac"),
    "avi": ("video/x-msvideo", "video/x-msvideo"),
    "mpegts": ("video/mp2t", "video/mp2t"),
    "flv": ("video/x-flv", "video/x-flv"),
}


def sniff(data: bytes) -> tuple[MediaKind, str] | None:
    """``(kind, mime)`` of ``data`` judged by its content, or ``None`` when it is neither an image
    Pillow identifies nor a container FFmpeg opens with a video or audio stream. An animated GIF
    or WebP is an ``image``; an MP3 with cover art is ``audio`` (the picture is an attached one)."""
    if not data:
        return None
    try:
        with Image.open(io.BytesIO(data)) as img:
            return "image", Image.MIME.get(img.format or "", f"image/{(img.format or 'unknown').lower()}")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        pass
    import av

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            name = container.format.name
            video = [s for s in container.streams.video if not s.disposition & av.stream.Disposition.attached_pic]
            kind: MediaKind | None = "video" if video else "audio" if container.streams.audio else None
            if kind is None:
                return None
            audio_mime, video_mime = _AV_MIME.get(name, (f"audio/x-{name.split(',')[0]}", f"video/x-{name.split(',')[0]}"))
            return kind, video_mime if kind == "video" else audio_mime
    except (av.FFmpegError, ValueError):
        return None
