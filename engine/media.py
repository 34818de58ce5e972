"""Loading media items (inline base64, ``file://``, ``http(s)://``) and decoding images.

URIs are checked before anything is read (:func:`check_uri`, also at the router):
``file://`` only inside the allowed roots (no ``..``, symlinks resolved, what is opened
is checked again), ``http(s)://`` only to allowed hosts, never to a loopback, private,
link-local or reserved address, whether named literally (IPv6-mapped forms too), by a
name that resolves there (resolved once, connected to the checked address), or by a
redirect (each hop checked again, at most :data:`MAX_REDIRECTS`).

Every failure raises a typed :class:`rtaudit.schemas.errors.AuditError`
(``URINotAllowed``, ``MediaTooLarge``, ``MediaUndecodable``,
``MediaFetchFailed``) so the worker can route the item to the DLQ with a reason.
Images are decoded with Pillow, EXIF orientation applied, and returned as
``uint8[height, width, 3]`` RGB arrays; :func:`fit_image` fits one to a model's
size policy (scale down, pad extreme aspect ratios).
"""

from __future__ import annotations

import base64
import errno
import io
import ipaddress
import math
import os
import socket
import stat
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import SplitResult, unquote, urljoin, urlsplit

import cv2
import httpx
import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from rtaudit.schemas.errors import MediaFetchFailed, MediaTooLarge, MediaUndecodable, URINotAllowed, describe
from rtaudit.schemas.messages import MediaItem


@dataclass(frozen=True)
class MediaPolicy:
    """Limits on media the fleet will load.

    Attributes:
        max_bytes: largest encoded media item, bytes.
        max_pixels: largest decoded image, width × height pixels (decompression-bomb guard).
        allowed_file_roots: directories ``file://`` URIs may point into (resolved, no ``..`` escape).
        allowed_http_hosts: host names ``http(s)://`` URIs may name; empty means none. Each
            must resolve to public addresses: non-public ones are refused even when listed.
        fetch_timeout_s: connect + read timeout of one HTTP fetch, seconds.
    """

    max_bytes: int = 8 * 1024 * 1024
    max_pixels: int = 40_000_000
    allowed_file_roots: tuple[Path, ...] = field(default_factory=tuple)
    allowed_http_hosts: tuple[str, ...] = field(default_factory=tuple)
    fetch_timeout_s: float = 5.0


#: Most redirects one HTTP fetch follows; every hop is checked like the first URI.
MAX_REDIRECTS = 3
#: Characters no media URI may hold (whitespace, controls, backslash): parsers disagree on them.
_BAD_URI_CHARS = frozenset("\\ \t\r\n\x00\x0b\x0c") | frozenset(map(chr, range(0x20))) | {"\x7f"}


def _shown(uri: str, limit: int = 200) -> str:
    """``uri`` as error messages (verdicts, DLQ, logs) show it: no user info, query or
    fragment (signed URLs carry tokens there), at most ``limit`` characters."""
    try:
        parts = urlsplit(uri)
        host = parts.netloc.rpartition("@")[2]
        text = f"{parts.scheme}://{host}{parts.path}" if parts.scheme else uri
    except ValueError:
        text = uri.split("?", 1)[0].split("#", 1)[0]
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def address_problem(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why the fleet must not connect to ``ip`` (``"loopback"``, ``"private"``…), or ``None``
    for a public unicast address. IPv4 addresses inside IPv6 (mapped ``::ffff:a.b.c.d``,
    6to4, Teredo) are judged by the IPv4 address they carry."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is not None:
            problem = address_problem(inner)
            return f"{problem} (IPv4 {inner} inside IPv6)" if problem else None
    for name in ("loopback", "unspecified", "link_local", "multicast", "reserved", "private"):
        if getattr(ip, f"is_{name}"):
            return name.replace("_", "-")
    if not ip.is_global:
        return "not globally routable"
    return None


def _literal_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver, once per fetch hop).
    Raises ``OSError`` (``socket.gaierror``) when it does not resolve. Tests replace it."""
    return list(dict.fromkeys(str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)))


def file_path_of(uri: str) -> Path:
    """The local path a ``file://`` URI names (percent-decoded), not yet resolved.

    Raises:
        URINotAllowed: a remote host, a relative path, a NUL byte or a ``..`` segment.
    """
    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost"):
        raise URINotAllowed(f"file URI with a remote host {parts.netloc[:100]!r} is not allowed")
    path = unquote(parts.path)
    if "\x00" in path:
        raise URINotAllowed(f"{_shown(uri)}: the path holds a NUL byte")
    if not path.startswith("/"):
        raise URINotAllowed(f"{_shown(uri)}: a file URI needs an absolute path (file:///...)")
    if ".." in path.split("/"):
        raise URINotAllowed(f"{_shown(uri)}: '..' segments are not allowed in file URIs")
    return Path(path)


def _allowed_file(uri: str, policy: MediaPolicy) -> Path:
    """The resolved (symlinks followed) path of a ``file://`` URI inside an allowed root."""
    path = file_path_of(uri)
    resolved = path.resolve()
    roots = [root.resolve() for root in policy.allowed_file_roots]
    if not any(resolved.is_relative_to(root) for root in roots):
        if any(path.is_relative_to(root) for root in roots):
            raise URINotAllowed(f"{_shown(uri)} leads through a symlink out of the allowed file roots")
        raise URINotAllowed(f"{_shown(uri)} is outside the allowed file roots")
    return resolved


def _allowed_host(uri: str, parts: SplitResult, policy: MediaPolicy) -> tuple[str, int]:
    """``(host, port)`` of an ``http(s)://`` URI the policy allows, before name resolution."""
    if parts.username is not None or parts.password is not None:
        raise URINotAllowed(f"{_shown(uri)}: user info (credentials) is not allowed in media URIs")
    host = (parts.hostname or "").rstrip(".")
    port = parts.port or (443 if parts.scheme == "https" else 80)  # ValueError on a bad port: malformed
    if not host:
        raise URINotAllowed(f"{_shown(uri)} names no host")
    if not host.isascii():
        raise URINotAllowed(f"host {host[:100]!r} is not ASCII: use its IDNA (xn--) form")
    ip = _literal_ip(host)
    problem = address_problem(ip) if ip is not None else ("loopback" if host == "localhost" or host.endswith(".localhost") else None)
    if problem:
        raise URINotAllowed(f"{_shown(uri)}: host {host} is a {problem} address")
    if host not in {h.lower().rstrip(".") for h in policy.allowed_http_hosts}:
        raise URINotAllowed(f"host {host!r} is not in the allowed HTTP hosts")
    return host, port


def check_uri(uri: str, policy: MediaPolicy) -> None:
    """Raise :class:`URINotAllowed` unless ``uri`` is inside the policy's allowlist.

    Static checks, the router's and the fetcher's (no network: names are resolved at
    fetch time, :func:`load_bytes`): scheme ``file``, ``http`` or ``https``; no whitespace,
    control characters or backslashes; ``file://`` local, absolute, without ``..``, and
    resolved (symlinks followed) inside an allowed root; ``http(s)://`` without user
    info, naming an allowed host that is not a loopback/private/link-local/reserved
    address literal (IPv6-mapped IPv4 included) or ``localhost``.
    """
    if any(c in _BAD_URI_CHARS for c in uri):
        raise URINotAllowed(f"{_shown(uri)}: whitespace, control characters and backslashes are not allowed in media URIs")
    try:
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        if scheme == "file":
            _allowed_file(uri, policy)
        elif scheme in ("http", "https"):
            _allowed_host(uri, parts, policy)
        else:
            raise URINotAllowed(f"scheme {parts.scheme[:40]!r} is not allowed (file, http, https)")
    except ValueError as exc:  # urlsplit, .port and Path raise it on malformed input
        raise URINotAllowed(f"malformed URI {_shown(uri)}: {exc}") from None


def _pinned(uri: str, policy: MediaPolicy) -> tuple[httpx.URL, str, str]:
    """Check ``uri``, resolve its host once and return ``(url with the address, Host header,
    host name)``: the connection goes to an address that was checked (no second lookup a
    rebinding DNS server could answer differently).

    Raises:
        URINotAllowed: the URI, or any address its host resolves to, is not allowed.
        MediaFetchFailed: the host does not resolve (retriable).
    """
    check_uri(uri, policy)
    parts = urlsplit(uri)
    if parts.scheme.lower() not in ("http", "https"):
        raise URINotAllowed(f"{_shown(uri)}: only http and https may be fetched over the network")
    host, port = _allowed_host(uri, parts, policy)
    try:
        url = httpx.URL(uri)
    except httpx.InvalidURL as exc:
        raise URINotAllowed(f"malformed URI {_shown(uri)}: {exc}") from None
    if url.host.rstrip(".") != host:  # our parser and httpx's must agree on the host
        raise URINotAllowed(f"{_shown(uri)}: ambiguous host ({url.host!r} vs {host!r})")
    ip = _literal_ip(host)
    if ip is not None:
        addresses = [str(ip)]
    else:
        try:
            addresses = resolve_host(host, port)
        except (OSError, UnicodeError) as exc:
            raise MediaFetchFailed(f"host {host} does not resolve: {exc}") from None
        if not addresses:
            raise MediaFetchFailed(f"host {host} resolves to no address")
    for address in addresses:
        problem = address_problem(ipaddress.ip_address(address))
        if problem:
            raise URINotAllowed(f"host {host} resolves to {address}, a {problem} address")
    default_port = 443 if parts.scheme.lower() == "https" else 80
    host_header = host if port == default_port else f"{host}:{port}"
    return url.copy_with(host=addresses[0]), host_header, host


def fetch_http(uri: str, policy: MediaPolicy, transport: httpx.BaseTransport | None = None) -> bytes:
    """GET ``uri``, at most ``policy.max_bytes``, following up to :data:`MAX_REDIRECTS`
    redirects, each hop checked and resolved again (:func:`_pinned`). Environment proxies
    are ignored (they would connect by name). ``transport``: tests.

    Raises:
        URINotAllowed: the URI or a redirect target is not allowed.
        MediaTooLarge: more than ``policy.max_bytes``.
        MediaFetchFailed: network error, HTTP error status, too many redirects (retriable).
    """
    current = uri
    with httpx.Client(transport=transport, timeout=policy.fetch_timeout_s, follow_redirects=False, trust_env=False) as client:
        for hop in range(MAX_REDIRECTS + 1):
            try:
                url, host_header, host = _pinned(current, policy)
            except URINotAllowed as exc:
                if hop == 0:
                    raise
                raise URINotAllowed(f"redirect {hop} from {_shown(uri)} refused: {exc.message}") from None
            try:
                with client.stream("GET", url, headers={"Host": host_header}, extensions={"sni_hostname": host}) as resp:
                    if resp.is_redirect:
                        location = resp.headers.get("location", "")
                        if not location:
                            raise MediaFetchFailed(f"{_shown(current)} answered {resp.status_code} without a Location")
                        current = urljoin(current, location)  # relative to the named URL, not the address
                        continue
                    if resp.status_code >= 400:
                        raise MediaFetchFailed(f"fetching {_shown(current)} failed: HTTP {resp.status_code}")
                    return _read_limited(resp, current, policy)
            except httpx.HTTPError as exc:
                raise MediaFetchFailed(f"fetching {_shown(current)} failed: {describe(exc)}") from None
    raise MediaFetchFailed(f"{_shown(uri)}: more than {MAX_REDIRECTS} redirects")


def _read_limited(resp: httpx.Response, uri: str, policy: MediaPolicy) -> bytes:
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > policy.max_bytes:
        raise MediaTooLarge(f"{_shown(uri)} declares {declared} bytes, limit {policy.max_bytes}")
    chunks, size = [], 0
    for chunk in resp.iter_bytes():
        size += len(chunk)
        if size > policy.max_bytes:
            raise MediaTooLarge(f"{_shown(uri)} is over {policy.max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def read_file(uri: str, policy: MediaPolicy) -> bytes:
    """The bytes of an allowed ``file://`` URI, at most ``policy.max_bytes``.

    The resolved path is opened without following a final symlink and without blocking
    (a FIFO), then judged by what was opened: a regular file, whose real path (Linux
    ``/proc/self/fd``) is still inside an allowed root, so a symlink swapped in after the
    check cannot lead out.

    Raises:
        URINotAllowed: outside the roots, or not a regular file.
        MediaTooLarge: more than ``policy.max_bytes``.
        MediaFetchFailed: the file cannot be read (retriable).
    """
    path = _allowed_file(uri, policy)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the resolved path became a symlink after the check
            raise URINotAllowed(f"{_shown(uri)} changed into a symlink after the check") from None
        raise MediaFetchFailed(f"reading {_shown(uri)} failed: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise URINotAllowed(f"{_shown(uri)} is not a regular file")
        real = Path(f"/proc/self/fd/{fd}")
        if real.exists():
            opened = Path(os.readlink(real))
            if not any(opened.is_relative_to(root.resolve()) for root in policy.allowed_file_roots):
                raise URINotAllowed(f"{_shown(uri)} changed to lead out of the allowed file roots")
        if info.st_size > policy.max_bytes:
            raise MediaTooLarge(f"{_shown(uri)} is {info.st_size} bytes, limit {policy.max_bytes}")
        chunks, size = [], 0
        while size <= policy.max_bytes:
            chunk = os.read(fd, min(1 << 20, policy.max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise MediaFetchFailed(f"reading {_shown(uri)} failed: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > policy.max_bytes:
        raise MediaTooLarge(f"{_shown(uri)} is over {policy.max_bytes} bytes")
    return data


def load_bytes(item: MediaItem, policy: MediaPolicy, transport: httpx.BaseTransport | None = None) -> bytes:
    """The encoded bytes of a media item (inline, :func:`read_file` or :func:`fetch_http`).

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
        data = read_file(uri, policy) if urlsplit(uri).scheme.lower() == "file" else fetch_http(uri, policy, transport)
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
        # Pillow refuses these in Image.open, before the header check above could name our limit
        raise MediaTooLarge(f"image is over the limit of {policy.max_pixels} pixels (Pillow: {exc})") from None
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
