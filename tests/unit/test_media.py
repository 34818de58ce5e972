from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from rtaudit.engine.media import MediaPolicy, check_uri, decode_image, fit_image, load_bytes, load_image_bgr
from rtaudit.schemas.errors import MediaFetchFailed, MediaTooLarge, MediaUndecodable, URINotAllowed
from rtaudit.schemas.messages import MediaItem

from .builders import encoded_image, inline_media

POLICY = MediaPolicy()
RED, WHITE, BLACK = (255, 0, 0), (255, 255, 255), (0, 0, 0)
EXIF_ORIENTATION = 0x0112


def with_png_size(png: bytes, width: int, height: int) -> bytes:
    """``png`` with its IHDR claiming another size (CRC fixed), so only the header is believable."""
    chunk = b"IHDR" + struct.pack(">II", width, height) + png[24:29]
    return png[:8] + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk)) + png[33:]


def noisy_png(width: int = 64, height: int = 64) -> bytes:
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return encoded_image(Image.fromarray(pixels))


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_decode_image_returns_rgb_uint8_height_width_3(fmt):
    decoded = decode_image(encoded_image(Image.new("RGB", (30, 20), RED), fmt), POLICY)
    assert decoded.shape == (20, 30, 3)
    assert decoded.dtype == np.uint8
    assert np.abs(decoded[10, 15].astype(int) - RED).max() <= 3


def test_decode_image_composites_transparency_onto_white():
    img = Image.new("RGBA", (4, 1), (0, 0, 0, 0))
    img.putpixel((1, 0), (0, 0, 0, 255))
    img.putpixel((2, 0), (255, 0, 0, 255))
    decoded = decode_image(encoded_image(img), POLICY)
    assert decoded[0].tolist() == [list(WHITE), list(BLACK), list(RED), list(WHITE)]


def test_decode_image_converts_one_bit_images():
    img = Image.new("1", (3, 2), 0)
    img.putpixel((2, 1), 1)
    decoded = decode_image(encoded_image(img), POLICY)
    assert decoded.shape == (2, 3, 3)
    assert decoded[0, 0].tolist() == list(BLACK)
    assert decoded[1, 2].tolist() == list(WHITE)


def test_decode_image_converts_palette_images():
    img = Image.new("P", (2, 1))
    img.putpalette([*RED, 0, 0, 255] + [0] * (256 - 2) * 3)
    img.putpixel((1, 0), 1)
    decoded = decode_image(encoded_image(img), POLICY)
    assert decoded[0].tolist() == [list(RED), [0, 0, 255]]


def test_decode_image_paints_transparent_palette_entries_white():
    img = Image.new("P", (2, 1))
    img.putpalette([*BLACK, *RED] + [0] * (256 - 2) * 3)
    img.putpixel((1, 0), 1)
    decoded = decode_image(encoded_image(img, transparency=0), POLICY)
    assert decoded[0].tolist() == [list(WHITE), list(RED)]


def test_decode_image_converts_greyscale():
    decoded = decode_image(encoded_image(Image.new("L", (2, 2), 77)), POLICY)
    assert decoded.shape == (2, 2, 3)
    assert (decoded == 77).all()


def test_decode_image_scales_sixteen_bit_greyscale():
    mid_grey = Image.fromarray(np.full((2, 2), 32768, dtype=np.uint16))
    decoded = decode_image(encoded_image(mid_grey), POLICY)
    assert np.abs(decoded.astype(int) - 128).max() <= 1


def test_decode_image_applies_exif_orientation():
    img = Image.new("RGB", (40, 20), WHITE)
    img.paste(RED, (0, 0, 20, 20))
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = 6
    decoded = decode_image(encoded_image(img, "JPEG", exif=exif, quality=95), POLICY)
    assert decoded.shape == (40, 20, 3)
    top, bottom = decoded[5, 10].astype(int), decoded[35, 10].astype(int)
    assert top[0] > 200 and top[1] < 60, "the left (red) half belongs on top after a 90° clockwise turn"
    assert bottom.min() > 200


@pytest.mark.parametrize(
    "data", [b"", b"definitely not an image", b"\x89PNG\r\n\x1a\n" + b"\x00" * 20], ids=["empty", "text", "png-signature-only"]
)
def test_decode_image_rejects_undecodable_bytes(data):
    with pytest.raises(MediaUndecodable):
        decode_image(data, POLICY)


def test_decode_image_rejects_truncated_png():
    png = noisy_png()
    with pytest.raises(MediaUndecodable):
        decode_image(png[: len(png) // 2], POLICY)


def test_decode_image_rejects_more_pixels_than_the_policy_allows():
    png = encoded_image(Image.new("RGB", (20, 10)))
    assert decode_image(png, MediaPolicy(max_pixels=200)).shape == (10, 20, 3)
    with pytest.raises(MediaTooLarge, match="20x10"):
        decode_image(png, MediaPolicy(max_pixels=199))


def test_decode_image_checks_pixels_from_the_header_before_decoding():
    huge = with_png_size(encoded_image(Image.new("RGB", (1, 1))), 10_000, 5_000)
    with pytest.raises(MediaTooLarge):
        decode_image(huge, POLICY)


def test_decode_image_reports_decompression_bombs_as_too_large():
    bomb = with_png_size(encoded_image(Image.new("RGB", (1, 1))), 20_000, 10_000)
    with pytest.raises(MediaTooLarge, match=f"over the limit of {POLICY.max_pixels} pixels"):  # ours, not only Pillow's
        decode_image(bomb, POLICY)


def test_load_image_bgr_reverses_channels():
    bgr = load_image_bgr(inline_media(encoded_image(Image.new("RGB", (2, 2), RED))), POLICY)
    assert bgr[0, 0].tolist() == [0, 0, 255]
    assert bgr.flags["C_CONTIGUOUS"]


def test_load_image_bgr_without_media_is_undecodable():
    with pytest.raises(MediaUndecodable):
        load_image_bgr(None, POLICY)


def test_load_bytes_decodes_inline_base64():
    assert load_bytes(inline_media(b"\x00\x01payload"), POLICY) == b"\x00\x01payload"


def test_load_bytes_rejects_inline_media_over_max_bytes():
    item = inline_media(b"x" * 101)
    assert load_bytes(item, MediaPolicy(max_bytes=101)) == b"x" * 101
    with pytest.raises(MediaTooLarge):
        load_bytes(item, MediaPolicy(max_bytes=100))


def file_item(path) -> MediaItem:
    return MediaItem(type="image", uri=path.as_uri())


def test_load_bytes_reads_allowed_files(tmp_path):
    (tmp_path / "a.png").write_bytes(b"png bytes")
    assert load_bytes(file_item(tmp_path / "a.png"), MediaPolicy(allowed_file_roots=(tmp_path,))) == b"png bytes"


def test_load_bytes_rejects_files_over_max_bytes(tmp_path):
    (tmp_path / "big.png").write_bytes(b"x" * 11)
    with pytest.raises(MediaTooLarge):
        load_bytes(file_item(tmp_path / "big.png"), MediaPolicy(max_bytes=10, allowed_file_roots=(tmp_path,)))


def test_load_bytes_of_missing_allowed_file_is_a_retriable_fetch_failure(tmp_path):
    with pytest.raises(MediaFetchFailed) as info:
        load_bytes(file_item(tmp_path / "gone.png"), MediaPolicy(allowed_file_roots=(tmp_path,)))
    assert info.value.retriable is True
    assert info.value.to_dlq is True


def test_load_bytes_checks_the_allowlist_before_reading(tmp_path):
    (tmp_path / "a.png").write_bytes(b"png bytes")
    with pytest.raises(URINotAllowed):
        load_bytes(file_item(tmp_path / "a.png"), MediaPolicy())


@pytest.fixture
def file_roots(tmp_path):
    root = tmp_path / "media"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "media-evil").mkdir()
    return MediaPolicy(allowed_file_roots=(root,)), root


def test_check_uri_allows_files_inside_a_root(file_roots):
    policy, root = file_roots
    check_uri((root / "sub" / "a.png").as_uri(), policy)
    check_uri(f"file://localhost{root}/a.png", policy)


@pytest.mark.parametrize("relative", ["../outside.png", "sub/../../outside.png", "../media-evil/a.png"])
def test_check_uri_rejects_escapes_from_the_root(file_roots, relative):
    policy, root = file_roots
    with pytest.raises(URINotAllowed):
        check_uri(f"file://{root}/{relative}", policy)


def test_check_uri_rejects_files_outside_every_root(file_roots):
    policy, _ = file_roots
    with pytest.raises(URINotAllowed):
        check_uri("file:///etc/passwd", policy)


def test_check_uri_rejects_file_uris_naming_a_remote_host(file_roots):
    policy, root = file_roots
    with pytest.raises(URINotAllowed, match="remote host"):
        check_uri(f"file://fileserver{root}/a.png", policy)


def test_check_uri_allows_only_listed_http_hosts():
    policy = MediaPolicy(allowed_http_hosts=("cdn.example.com",))
    check_uri("https://cdn.example.com/a.png", policy)
    check_uri("http://cdn.example.com:8080/a.png", policy)
    for uri in ("https://evil.example.com/a.png", "https://cdn.example.com.evil.net/a.png"):
        with pytest.raises(URINotAllowed, match="not in the allowed HTTP hosts"):
            check_uri(uri, policy)


def test_check_uri_allows_no_http_host_by_default():
    with pytest.raises(URINotAllowed):
        check_uri("https://cdn.example.com/a.png", POLICY)


@pytest.mark.parametrize("uri", ["ftp://cdn.example.com/a.png", "data:image/png;base64,AAAA", "s3://bucket/a.png"])
def test_check_uri_rejects_unsupported_schemes(uri):
    with pytest.raises(URINotAllowed, match="scheme"):
        check_uri(uri, MediaPolicy(allowed_http_hosts=("cdn.example.com",)))


def test_undecodable_messages_name_the_cause_not_an_object_repr():
    with pytest.raises(MediaUndecodable) as info:
        decode_image(b"definitely not an image", POLICY)
    assert info.value.message == "not an image format Pillow can read (23 bytes)"
    with pytest.raises(MediaUndecodable, match=r"^empty media item \(0 bytes\)$"):
        decode_image(b"", POLICY)


def test_load_image_bgr_names_the_declared_type_of_undecodable_media():
    with pytest.raises(MediaUndecodable, match=r"\(declared image/png\)$"):
        load_image_bgr(inline_media(b"plain text", mime="image/png"), POLICY)


@pytest.mark.parametrize(
    "width, height, max_side_px, max_aspect, fitted_wh",
    [
        (30, 20, 100, None, (30, 20)),  # small enough: untouched, never scaled up
        (400, 100, 200, None, (200, 50)),
        (1, 10_000, 2048, 4.0, (512, 2048)),  # 1×2048 after scaling (no side below 1 px), padded to 4:1
        (10_000, 1, 2048, 4.0, (2048, 512)),
        (1, 1, 2048, 4.0, (1, 1)),
        (5, 500, 2048, 4.0, (125, 500)),
        (100, 400, 2048, 4.0, (100, 400)),  # exactly 4:1: no padding
    ],
)
def test_fit_image_scales_down_then_pads_to_the_aspect_limit(width, height, max_side_px, max_aspect, fitted_wh):
    bgr = np.zeros((height, width, 3), np.uint8)
    fitted = fit_image(bgr, max_side_px=max_side_px, max_aspect=max_aspect)
    assert fitted.bgr.shape == (fitted_wh[1], fitted_wh[0], 3) and fitted.bgr.flags["C_CONTIGUOUS"]
    assert fitted.original_size == (width, height)
    assert fitted.scale == min(1.0, max_side_px / max(width, height))


def test_fit_image_pads_bottom_and_right_with_the_pad_value():
    fitted = fit_image(np.zeros((8, 1, 3), np.uint8), max_side_px=100, max_aspect=2.0, pad_value=255)
    assert fitted.bgr.shape == (8, 4, 3)
    assert (fitted.bgr[:, 0] == 0).all() and (fitted.bgr[:, 1:] == 255).all(), "the image stays at (0, 0)"


def test_fitted_boxes_map_back_to_original_pixels_clipped_to_the_image():
    fitted = fit_image(np.zeros((1000, 4000, 3), np.uint8), max_side_px=400)
    assert fitted.scale == 0.1
    assert fitted.to_original((10, 20, 30, 40)) == (100, 200, 300, 400)
    assert fitted.to_original((390, 90, 50, 50)) == (3900, 900, 100, 100)
