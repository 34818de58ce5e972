"""Loading media items (inline base64, ``file://``, ``http(s)://``) and decoding images.

Every failure raises a typed :class:`schemas.errors.AuditError`
(``URINotAllowed``, ``MediaTooLarge``, ``MediaUndecodable``,
``MediaFetchFailed``) so the worker can route the item to the DLQ with a reason.
Images are decoded with Pillow, EXIF orientation applied, and returned as
``uint8[height, width, 3]`` RGB arrays.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from schemas.errors import MediaFetchFailed, MediaTooLarge, MediaUndecodable, URINotAllowed
from schemas.messages import MediaItem


@dataclass(frozen=True)
class MediaPolicy:
    """Limits on media the fleet will load.

    Attributes:
        max_bytes: largest encoded media item, bytes.
        max_pixels: largest decoded image, width × height pixels (decompression-bomb guard).
        allowed_file_roots: directories ``file://`` URIs may point into (resolved, no ``..`` escape).
        allowed_http_hosts: host names ``http(s)://`` URIs may name; empty means none.
        fetch_timeout_s: connect + read timeout of one HTTP fetch, seconds.
    """

    max_bytes: int = 8 * 1024 * 1024
    max_pixels: int = 40_000_000
    allowed_file_roots: tuple[Path, ...] = field(default_factory=tuple)
    allowed_http_hosts: tuple[str, ...] = field(default_factory=tuple)
    fetch_timeout_s: float = 5.0


def file_path_of(uri: str) -> Path:
    """The local path a ``file://`` URI names (percent-decoded, not yet checked)."""
    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost"):
        raise URINotAllowed(f"file URI with a remote host {parts.netloc!r} is not allowed")
    return Path(unquote(parts.path))


def check_uri(uri: str, policy: MediaPolicy) -> None:
    """Raise :class:`URINotAllowed` unless ``uri`` is inside the policy's allowlist."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        path = file_path_of(uri).resolve()
        if not any(path.is_relative_to(root.resolve()) for root in policy.allowed_file_roots):
            raise URINotAllowed(f"{uri} is outside the allowed file roots")
    elif parts.scheme in ("http", "https"):
        if (parts.hostname or "") not in policy.allowed_http_hosts:
            raise URINotAllowed(f"host {parts.hostname!r} is not in the allowed HTTP hosts")
    else:
        raise URINotAllowed(f"scheme {parts.scheme!r} is not allowed")


def _fetch_http(uri: str, policy: MediaPolicy) -> bytes:
    try:
        with httpx.stream("GET", uri, timeout=policy.fetch_timeout_s, follow_redirects=False) as resp:
            resp.raise_for_status()
            declared = int(resp.headers.get("content-length") or 0)
            if declared > policy.max_bytes:
                raise MediaTooLarge(f"{uri} declares {declared} bytes, limit {policy.max_bytes}")
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > policy.max_bytes:
                    raise MediaTooLarge(f"{uri} is over {policy.max_bytes} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.HTTPError as exc:
        raise MediaFetchFailed(f"fetching {uri} failed: {exc}") from None


def load_bytes(item: MediaItem, policy: MediaPolicy) -> bytes:
    """The encoded bytes of a media item.

    Raises:
        URINotAllowed: the URI is outside the allowlist.
        MediaTooLarge: more than ``policy.max_bytes``.
        MediaFetchFailed: the file or URL could not be read (retriable).
    """
    if item.data_b64 is not None:
        data = base64.b64decode(item.data_b64)
    else:
        uri = item.uri or ""
        check_uri(uri, policy)
        if uri.startswith("file:"):
            path = file_path_of(uri)
            try:
                size = path.stat().st_size
                if size > policy.max_bytes:
                    raise MediaTooLarge(f"{path} is {size} bytes, limit {policy.max_bytes}")
                data = path.read_bytes()
            except OSError as exc:
                raise MediaFetchFailed(f"reading {path} failed: {exc.strerror or exc}") from None
        else:
            data = _fetch_http(uri, policy)
    if len(data) > policy.max_bytes:
        raise MediaTooLarge(f"media item is {len(data)} bytes, limit {policy.max_bytes}")
    return data


def decode_image(data: bytes, policy: MediaPolicy) -> np.ndarray:
    """Decode encoded image bytes to ``uint8[height, width, 3]`` RGB, EXIF orientation applied.

    Palette, 1-bit, grey and RGBA images are converted; transparency is composited
    onto white (so dark text on a transparent background stays readable for OCR).

    Raises:
        MediaUndecodable: not an image Pillow can read, or truncated.
        MediaTooLarge: more than ``policy.max_pixels`` pixels.
    """
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
            if width * height > policy.max_pixels:
                raise MediaTooLarge(f"image is {width}x{height} pixels, limit {policy.max_pixels} pixels")
            img = ImageOps.exif_transpose(img)
            if img.mode.startswith("I") or img.mode == "F":
                # 16/32-bit grey: scale to 8 bits instead of letting convert() clip at 255
                wide = np.asarray(img, dtype=np.float32)
                top = 65535.0 if img.mode.startswith("I;16") else max(float(wide.max()), 1.0)
                img = Image.fromarray((wide * (255.0 / top)).clip(0, 255).astype(np.uint8))
            if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
                rgba = img.convert("RGBA")
                canvas = Image.new("RGB", rgba.size, (255, 255, 255))
                canvas.paste(rgba, mask=rgba.getchannel("A"))
                img = canvas
            else:
                img = img.convert("RGB")
            return np.asarray(img, dtype=np.uint8)
    except Image.DecompressionBombError as exc:
        raise MediaTooLarge(f"image rejected as a decompression bomb: {exc}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise MediaUndecodable(f"not a decodable image: {exc}") from None


def load_image_bgr(item: MediaItem | None, policy: MediaPolicy) -> np.ndarray:
    """Load and decode an image item to ``uint8[height, width, 3]`` **BGR** (OpenCV order,
    what NudeNet and RapidOCR take). Raises as :func:`load_bytes` and :func:`decode_image`."""
    if item is None:
        raise MediaUndecodable("image task without a media item")
    rgb = decode_image(load_bytes(item, policy), policy)
    return np.ascontiguousarray(rgb[:, :, ::-1])
