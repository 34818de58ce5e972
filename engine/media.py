"""Loading media items (inline base64, ``file://``, ``http(s)://``) and decoding images.

Every failure raises a typed :class:`schemas.errors.AuditError`
(``URINotAllowed``, ``MediaTooLarge``, ``MediaUndecodable``,
``MediaFetchFailed``) so the worker can route the item to the DLQ with a reason.
Images are decoded with Pillow, EXIF orientation applied, and returned as
``uint8[height, width, 3]`` RGB arrays; :func:`fit_image` fits one to a model's
size policy (scale down, pad extreme aspect ratios).
"""

from __future__ import annotations

import base64
import io
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import cv2
import httpx
import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from schemas.errors import MediaFetchFailed, MediaTooLarge, MediaUndecodable, URINotAllowed, describe
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

    Palette, 1-bit, grey and RGBA images are converted; 16-bit grey and colour are
    scaled to 8 bits; transparency is composited onto white (so dark text on a
    transparent background stays readable for OCR). Only the first frame of an
    animation is decoded; bytes after the image (a polyglot's trailing archive) are
    ignored, as Pillow does. Any shape Pillow decodes is returned, 1 px sides included:
    fitting it to a model is each stage's job (:func:`fit_image`).

    Raises:
        MediaUndecodable: empty, not an image Pillow can read, truncated or corrupt
            (the message names the cause, never the bytes).
        MediaTooLarge: more than ``policy.max_pixels`` pixels (checked on the header,
            before decoding), or a decompression bomb by Pillow's own limit.
    """
    if not data:
        raise MediaUndecodable("empty media item (0 bytes)")
    try:
        with warnings.catch_warnings():
            # Pillow only warns between MAX_IMAGE_PIXELS and twice that: refuse those too
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                width, height = img.size
                if width * height > policy.max_pixels:
                    raise MediaTooLarge(f"image is {width}x{height} pixels, limit {policy.max_pixels} pixels")
                return np.asarray(_to_rgb(ImageOps.exif_transpose(img)), dtype=np.uint8)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaTooLarge(f"image rejected as a decompression bomb: {exc}") from None
    except UnidentifiedImageError:
        raise MediaUndecodable(f"not an image format Pillow can read ({len(data)} bytes)") from None
    except MediaTooLarge:
        raise
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, struct.error... on corrupt files
        raise MediaUndecodable(f"not a decodable image ({len(data)} bytes): {describe(exc)}") from None


def _to_rgb(img: Image.Image) -> Image.Image:
    """``img`` in mode ``RGB``: wide modes scaled to 8 bits, transparency composited onto white."""
    if img.mode.startswith("I") or img.mode == "F":
        # 16/32-bit grey: scale to 8 bits instead of letting convert() clip at 255
        wide = np.asarray(img, dtype=np.float32)
        top = 65535.0 if img.mode.startswith("I;16") else max(float(wide.max()), 1.0)
        img = Image.fromarray((wide * (255.0 / top)).clip(0, 255).astype(np.uint8))
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, (255, 255, 255))
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    return img.convert("RGB")


@dataclass(frozen=True)
class FittedImage:
    """An image fitted to a model's size policy by :func:`fit_image`.

    Attributes:
        bgr: ``uint8[height, width, 3]`` BGR, the image scaled by ``scale`` and padded
            at the bottom or right (so coordinates of the original start at ``(0, 0)``).
        scale: fitted pixels per original pixel (``1.0`` when not scaled).
        original_size: ``(width, height)`` of the original image, pixels.
    """

    bgr: np.ndarray
    scale: float
    original_size: tuple[int, int]

    def to_original(self, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """An ``(x, y, width, height)`` box in fitted pixels as original pixels, clipped to the image."""
        x, y, w, h = (v / self.scale for v in box)
        width, height = self.original_size
        x0, y0 = min(max(0, round(x)), width), min(max(0, round(y)), height)
        return x0, y0, max(0, min(round(x + w), width) - x0), max(0, min(round(y + h), height) - y0)


def fit_image(
    bgr: np.ndarray, *, max_side_px: int, max_aspect: float | None = None, pad_value: int = 255,
) -> FittedImage:
    """Scale ``bgr`` down (never up) so its longer side is at most ``max_side_px`` pixels, then,
    when ``max_aspect`` is given, pad its shorter side with ``pad_value`` until
    ``longer / shorter <= max_aspect``.

    This is how a stage handles degenerate shapes on purpose: a 1×10000 strip
    becomes 1×``max_side_px`` (no side is scaled below 1 px), then is padded to
    ``max_side_px / max_aspect`` × ``max_side_px``, so a model that resizes by the
    short side (RapidOCR) neither divides by zero nor builds a 736×73600 input, and a
    model that pads to a square (NudeNet) never allocates ``longer²`` pixels of a
    huge image. Scaling uses area interpolation (no aliasing); shape in, shape out:
    ``uint8[h, w, 3]``.
    """
    height, width = bgr.shape[:2]
    scale = min(1.0, max_side_px / max(height, width))
    if scale < 1.0:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        bgr = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)
    if max_aspect is not None:
        h, w = bgr.shape[:2]
        min_short = math.ceil(max(h, w) / max_aspect)
        pad_bottom, pad_right = max(0, min_short - h), max(0, min_short - w)
        if pad_bottom or pad_right:
            bgr = cv2.copyMakeBorder(bgr, 0, pad_bottom, 0, pad_right, cv2.BORDER_CONSTANT, value=(pad_value,) * 3)
    return FittedImage(np.ascontiguousarray(bgr), scale, (width, height))


def load_image_bgr(item: MediaItem | None, policy: MediaPolicy) -> np.ndarray:
    """Load and decode an image item to ``uint8[height, width, 3]`` **BGR** (OpenCV order,
    what NudeNet and RapidOCR take). Raises as :func:`load_bytes` and :func:`decode_image`."""
    if item is None:
        raise MediaUndecodable("image task without a media item")
    try:
        rgb = decode_image(load_bytes(item, policy), policy)
    except MediaUndecodable as exc:
        if item.mime:  # the producer's claim, next to what the bytes turned out to be
            raise MediaUndecodable(f"{exc.message} (declared {item.mime[:100]})") from None
        raise
    return np.ascontiguousarray(rgb[:, :, ::-1])
