"""A hostile-media corpus, generated here (no binary files), through every stage that takes images.

Each input gets either a normal score or a clear error (a stable code, a message
naming the cause in words, the item's own request id), from decoding alone and
from the real NudeNet and OCR stages, and no input fails another: the whole
corpus runs as one micro-batch per stage, and each item's outcome there is its
outcome alone.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import dataclass

import cv2
import numpy as np
import pytest
from PIL import Image

from rtaudit.engine.media import FittedImage, MediaPolicy, decode_image
from rtaudit.engine.stage import process_batch
from rtaudit.schemas.errors import AuditError

from .builders import CREATED_MS, encoded_image, inline_media, task

POLICY = MediaPolicy()
EXIF_ORIENTATION, EXIF_DESCRIPTION = 0x0112, 0x010E
RED = (230, 20, 20)
OK = "ok"


@dataclass(frozen=True)
class Hostile:
    """One corpus input: ``expect`` is ``"ok"`` or the error code every stage must answer with,
    ``says`` a piece of text its error message must contain."""

    id: str
    data: bytes
    expect: str = OK
    mime: str | None = None
    says: str = ""


def noise(width: int, height: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    shape = (height, width, channels) if channels > 1 else (height, width)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def with_png_size(png: bytes, width: int, height: int) -> bytes:
    """``png`` whose IHDR claims ``width``×``height`` pixels (CRC fixed): a tiny file declaring a huge image."""
    return png[:8] + png_chunk(b"IHDR", struct.pack(">II", width, height) + png[24:29]) + png[33:]


def after_ihdr(png: bytes, chunk: bytes) -> bytes:
    return png[:33] + chunk + png[33:]


def palette_with_transparency() -> bytes:
    img = Image.new("P", (16, 16))
    img.putpalette([0, 0, 0, *RED] + [0] * 254 * 3)
    img.paste(1, (0, 0, 8, 16))
    return encoded_image(img, transparency=0)


def rgb48_png() -> bytes:
    """A 16-bit-per-channel RGB PNG (Pillow cannot write one; OpenCV writes ``uint16`` arrays as such)."""
    ok, data = cv2.imencode(".png", (noise(16, 16).astype(np.uint16) * 257))
    assert ok
    return data.tobytes()


def with_orientation(orientation: int) -> bytes:
    """A 40×20 JPEG, its top-left 16×8 red on white, tagged with an EXIF orientation."""
    img = Image.new("RGB", (40, 20), "white")
    img.paste(RED, (0, 0, 16, 8))
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    return encoded_image(img, "JPEG", exif=exif, quality=95)


def huge_exif(fmt: str, description_bytes: int) -> bytes:
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = 6
    exif[EXIF_DESCRIPTION] = "x" * description_bytes
    return encoded_image(Image.fromarray(noise(24, 12)), fmt, exif=exif)


def garbage_exif_jpeg() -> bytes:
    """A JPEG whose APP1 EXIF segment is a TIFF header pointing nowhere, then junk."""
    jpeg = encoded_image(Image.fromarray(noise(24, 24)), "JPEG")
    body = b"Exif\x00\x00MM\x00\x2a\xff\xff\xff\xff" + b"junk" * 20
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + jpeg[2:]


def png_then_zip() -> bytes:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("payload.txt", "not for the image decoder " * 50)
    return encoded_image(Image.fromarray(noise(24, 24))) + archive.getvalue()


def corpus() -> list[Hostile]:
    png = encoded_image(Image.fromarray(noise(48, 48)))
    jpeg = encoded_image(Image.fromarray(noise(48, 48)), "JPEG")
    text_png = b"This is plain text, not a PNG at all.\n"
    return [
        # every mode Pillow decodes
        Hostile("mode-L", encoded_image(Image.fromarray(noise(24, 24, 1), "L"))),
        Hostile("mode-LA", encoded_image(Image.fromarray(noise(24, 24, 2), "LA"))),
        Hostile("mode-P-transparent", palette_with_transparency()),
        Hostile("mode-I16", encoded_image(Image.fromarray(noise(24, 24, 1).astype(np.uint16) * 257))),
        Hostile("mode-RGB48", rgb48_png()),
        Hostile("mode-RGBA", encoded_image(Image.fromarray(noise(24, 24, 4), "RGBA"))),
        Hostile("mode-CMYK-jpeg", encoded_image(Image.new("CMYK", (24, 24), (0, 200, 200, 0)), "JPEG")),
        Hostile("mode-1bit", encoded_image(Image.fromarray(noise(24, 24, 1) > 127))),
        Hostile("mode-I32-tiff", encoded_image(Image.fromarray(noise(8, 8, 1).astype(np.int32) * 1000), "TIFF")),
        Hostile("mode-F-tiff", encoded_image(Image.fromarray(noise(8, 8, 1).astype(np.float32) / 255), "TIFF")),
        Hostile("animated-gif", animated_gif()),
        # degenerate and extreme shapes
        Hostile("1x1", encoded_image(Image.new("RGB", (1, 1), RED))),
        Hostile("1x10000", encoded_image(Image.fromarray(noise(1, 10_000)))),
        Hostile("10000x1", encoded_image(Image.fromarray(noise(10_000, 1)))),
        Hostile("3x2000", encoded_image(Image.fromarray(noise(3, 2_000)))),
        Hostile("40000x2", encoded_image(Image.new("RGB", (40_000, 2), "white"))),
        # declared sizes past the limits
        Hostile("bomb-30000x30000-header", with_png_size(png, 30_000, 30_000), "media_too_large",
                says="900000000 pixels"),
        Hostile("bomb-8000x8000-real", encoded_image(Image.new("L", (8_000, 8_000))), "media_too_large",
                says="8000x8000"),
        Hostile("bomb-zTXt-chunk", after_ihdr(png, png_chunk(b"zTXt", b"c\x00\x00" + zlib.compress(bytes(20_000_000)))),
                "media_undecodable", says="MAX_TEXT_CHUNK"),
        # broken bytes
        Hostile("empty", b"", "media_undecodable", says="0 bytes"),
        Hostile("truncated-png", png[: len(png) // 2], "media_undecodable", says="bytes"),
        Hostile("truncated-jpeg", jpeg[: len(jpeg) // 2], "media_undecodable", says="bytes"),
        Hostile("png-signature-only", png[:8], "media_undecodable", says="8 bytes"),
        Hostile("corrupt-idat", png[:-30] + bytes(b ^ 0xFF for b in png[-30:-20]) + png[-20:], "media_undecodable"),
        Hostile("text-declared-png", text_png, "media_undecodable", mime="image/png", says="declared image/png"),
        Hostile("svg", b'<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>', "media_undecodable"),
        Hostile("zip-then-png", zip_then(png), "media_undecodable"),
        Hostile("polyglot-png-then-zip", png_then_zip()),
        # EXIF
        *(Hostile(f"exif-orientation-{o}", with_orientation(o)) for o in range(1, 9)),
        Hostile("exif-orientation-0-invalid", with_orientation(0)),
        Hostile("exif-orientation-9-invalid", with_orientation(9)),
        Hostile("exif-garbage", garbage_exif_jpeg()),
        Hostile("exif-64k-jpeg", huge_exif("JPEG", 65_000)),
        Hostile("exif-2MB-png", huge_exif("PNG", 2_000_000)),
    ]


def animated_gif() -> bytes:
    frames = [Image.fromarray(noise(16, 16, 1, seed=i), "L").convert("P") for i in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:])
    return buf.getvalue()


def zip_then(data: bytes) -> bytes:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.txt", "hello")
    return archive.getvalue() + data


CORPUS = corpus()
IDS = [h.id for h in CORPUS]


def hostile_tasks(items: list[Hostile]) -> list:
    return [
        task(f"image:{n}", text=None, request_id=f"req-{h.id}", media=inline_media(h.data, mime=h.mime, name=h.id))
        for n, h in enumerate(items)
    ]


def run(stage, items: list[Hostile]):
    return process_batch(stage, hostile_tasks(items), now_ms=lambda: CREATED_MS)


@pytest.fixture(scope="module")
def nudenet_batch(nudity_stage):
    """The whole corpus as one NudeNet micro-batch."""
    return run(nudity_stage, CORPUS)


@pytest.fixture(scope="module")
def ocr_batch(ocr_stage):
    """The whole corpus as one OCR micro-batch."""
    return run(ocr_stage, CORPUS)


def assert_clear_error(message: str, case: Hostile) -> None:
    assert message and message.strip() == message, "an error message is never empty"
    assert "object at 0x" not in message, message
    assert case.says in message, message


def assert_outcome(result, index: int, case: Hostile, categories: set[str]) -> None:
    partial = result.partials[index]
    assert partial.request_id == f"req-{case.id}"
    failures = dict(result.failures)
    if case.expect == OK:
        assert partial.status == "ok", f"{case.id}: {partial.error_code} {partial.error}"
        assert categories <= set(partial.scores) and all(0.0 <= s <= 1.0 for s in partial.scores.values())
        assert index not in failures
        for ev in partial.evidence:
            if ev.box is not None:
                x, y, w, h = ev.box
                assert x >= 0 and y >= 0 and w >= 0 and h >= 0
    else:
        assert (partial.status, partial.error_code) == ("error", case.expect), f"{case.id}: {partial.error}"
        assert_clear_error(partial.error, case)
        error = failures[index]
        assert error.request_id == f"req-{case.id}", "each failure carries its own request id"
        assert (error.code, error.message) == (case.expect, partial.error)


@pytest.mark.parametrize("case", CORPUS, ids=IDS)
def test_decoding_gives_rgb_or_a_clear_error(case):
    try:
        rgb = decode_image(case.data, POLICY)
    except AuditError as exc:
        assert case.expect != OK, f"{case.id} should decode: {exc.code} {exc.message}"
        assert exc.code == case.expect
        if case.mime is None:  # the declared type is added by load_image_bgr, not decode_image
            assert_clear_error(exc.message, case)
        return
    assert case.expect == OK, f"{case.id} decoded to {rgb.shape}, expected {case.expect}"
    assert rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.dtype == np.uint8 and min(rgb.shape[:2]) >= 1


@pytest.mark.parametrize("index, case", list(enumerate(CORPUS)), ids=IDS)
def test_nudenet_in_one_batch_scores_or_fails_each_item_alone(nudenet_batch, index, case):
    assert_outcome(nudenet_batch, index, case, {"sexual", "suggestive"})


@pytest.mark.parametrize("index, case", list(enumerate(CORPUS)), ids=IDS)
def test_ocr_in_one_batch_scores_or_fails_each_item_alone(ocr_batch, index, case):
    assert_outcome(ocr_batch, index, case, {"offensive"})


def test_each_failure_is_its_own_error_instance(nudenet_batch, ocr_batch):
    for result in (nudenet_batch, ocr_batch):
        errors = [e for _, e in result.failures]
        assert len({id(e) for e in errors}) == len(errors) == sum(h.expect != OK for h in CORPUS)


def test_nudenet_scores_in_a_batch_equal_scores_alone(nudity_stage, nudenet_batch):
    for index, case in enumerate(CORPUS):
        if case.expect == OK:
            (alone,) = run(nudity_stage, [case]).partials
            assert alone.scores == pytest.approx(nudenet_batch.partials[index].scores, abs=1e-3), case.id


def test_the_reported_ocr_pair_scores_alone_and_together(ocr_stage):
    """The issue's repro: a 1×10000 PNG made RapidOCR raise ``ResizeImgError`` and failed the CMYK
    JPEG batched with it, under the other request's id."""
    strip, cmyk = (h for h in CORPUS if h.id in ("1x10000", "mode-CMYK-jpeg"))
    together = run(ocr_stage, [strip, cmyk])
    assert [p.status for p in together.partials] == ["ok", "ok"]
    for index, case in enumerate((strip, cmyk)):
        (alone,) = run(ocr_stage, [case]).partials
        assert alone.scores == together.partials[index].scores


@pytest.mark.parametrize(
    "orientation, size, red_corner",
    [(1, (20, 40), "top-left"), (2, (20, 40), "top-right"), (3, (20, 40), "bottom-right"),
     (4, (20, 40), "bottom-left"), (5, (40, 20), "top-left"), (6, (40, 20), "top-right"),
     (7, (40, 20), "bottom-right"), (8, (40, 20), "bottom-left")],
)
def test_exif_orientation_is_honoured(orientation, size, red_corner):
    """EXIF 2.3 orientations: 2 mirrors, 3 turns 180°, 4 flips, 5 transposes, 6 turns 90° clockwise,
    7 transverses, 8 turns 90° counter-clockwise (what a viewer shows)."""
    rgb = decode_image(with_orientation(orientation), POLICY).astype(int)
    assert rgb.shape[:2] == size
    height, width = size
    corners = {"top-left": rgb[4, 4], "top-right": rgb[4, width - 5],
               "bottom-left": rgb[height - 5, 4], "bottom-right": rgb[height - 5, width - 5]}
    reds = {name for name, px in corners.items() if px[0] > 180 and px[1] < 90}
    assert reds == {red_corner}


def test_sixteen_bit_colour_keeps_its_high_byte():
    rgb = decode_image(rgb48_png(), POLICY)
    assert np.array_equal(rgb, noise(16, 16)[:, :, ::-1]), "OpenCV wrote BGR; 16-bit x·257 decodes to x"


@pytest.mark.parametrize("size", [(1, 10_000), (10_000, 1), (40_000, 2), (1, 1)], ids=str)
def test_stages_fit_degenerate_shapes_on_purpose(nudity_stage, ocr_stage, size):
    """NudeNet: longest side scaled to its ``max_side_px``; OCR: to its ``max_side_px``, then padded
    to ``max_aspect``: the model input stays bounded whatever the shape."""
    (t,) = hostile_tasks([Hostile("shape", encoded_image(Image.new("RGB", size, "white")))])
    for stage in (nudity_stage, ocr_stage):
        fitted = stage.prepare(t)
        height, width = fitted.bgr.shape[:2]
        assert max(height, width) <= stage.max_side_px and min(height, width) >= 1
        assert fitted.original_size == size
    fitted = ocr_stage.prepare(t)
    height, width = fitted.bgr.shape[:2]
    assert max(height, width) / min(height, width) <= ocr_stage.max_aspect


def test_ocr_reads_an_image_too_thin_for_text_as_no_text_without_the_detector(ocr_stage, monkeypatch):
    strip = ocr_stage.prepare(hostile_tasks([Hostile("strip", encoded_image(Image.fromarray(noise(1, 100_000))))])[0])
    thin_page = FittedImage(np.full((5, 400, 3), 255, np.uint8), 1.0, (400, 5))
    monkeypatch.setattr(ocr_stage, "recognize", lambda bgr: pytest.fail("the detector ran on an image too thin for text"))
    for out in ocr_stage.infer([strip, thin_page]):
        assert not isinstance(out, BaseException) and out.scores == {"offensive": 0.0} and out.evidence == []


def test_ocr_fails_an_unreadable_image_alone(ocr_stage):
    """RapidOCR has no cross-image batching: one image raising gives that image's exception, not the batch's."""
    blank = FittedImage(np.full((40, 40, 3), 255, np.uint8), 1.0, (40, 40))
    empty = FittedImage(np.zeros((0, 4, 3), np.uint8), 1.0, (4, 0))
    good, bad = ocr_stage.infer([blank, empty])
    assert good.scores == {"offensive": 0.0}
    assert isinstance(bad, Exception)


class Poisoned:
    """A real stage whose ``prepare`` hands the model an empty array for the task named ``poison``."""

    def __init__(self, inner, poison_request_id: str) -> None:
        self.inner, self.poison = inner, poison_request_id
        self.stage, self.model = inner.stage, inner.model

    def prepare(self, t):
        if t.request_id == self.poison:
            return FittedImage(np.zeros((0, 0, 3), np.uint8), 1.0, (0, 0))
        return self.inner.prepare(t)

    def infer(self, inputs):
        return self.inner.infer(inputs)


@pytest.mark.parametrize("stage_name", ["nudity_stage", "ocr_stage"])
def test_a_model_failure_on_one_image_fails_only_that_image(request, stage_name):
    stage = request.getfixturevalue(stage_name)
    cases = [h for h in CORPUS if h.id in ("mode-L", "mode-CMYK-jpeg", "1x1")]
    result = run(Poisoned(stage, "req-mode-CMYK-jpeg"), cases)
    assert [p.status for p in result.partials] == ["ok", "error", "ok"]
    ((index, error),) = result.failures
    assert (index, error.request_id, error.code) == (1, "req-mode-CMYK-jpeg", "inference_failed")
    assert error.message.split(":")[0] in {"error", "ZeroDivisionError", "ValueError", "IndexError"}, error.message
    assert "object at 0x" not in error.message
