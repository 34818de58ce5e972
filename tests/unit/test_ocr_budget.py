"""The OCR detector's pixel budget: small wide images (rendered lines, video frames) are no longer
blown up to a 736-pixel short side, photos and pages keep RapidOCR's default, and the text is
still read."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from rtaudit.tools.demo.corpus import render_text_image


def rgb_of(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def test_a_large_wide_image_is_not_scaled_down(ocr_stage) -> None:
    assert ocr_stage.detector_short_side(600, 2400) <= 600  # at or under its own short side: RapidOCR keeps it


@pytest.mark.parametrize(("h", "w"), [(512, 512), (400, 600), (736, 1104), (1000, 1500), (2048, 2048), (133, 259), (736, 1472)])
def test_photos_and_pages_keep_rapidocrs_detector_scale(ocr_stage, h: int, w: int) -> None:
    assert ocr_stage.detector_short_side(h, w) == ocr_stage.det_short_side_px


@pytest.mark.parametrize(("h", "w"), [(95, 322), (165, 658), (200, 480), (300, 1200), (1, 4)])
def test_wide_small_images_stay_within_the_pixel_budget(ocr_stage, h: int, w: int) -> None:
    short = ocr_stage.detector_short_side(h, w)
    assert 32 <= short < ocr_stage.det_short_side_px
    scale = max(short, min(h, w)) / min(h, w)  # RapidOCR never scales down in its "min" mode
    assert h * w * scale**2 <= ocr_stage.det_max_pixels * 1.01 or short == 32  # the budget bounds upscaling only


def test_rapidocr_reads_the_short_side_per_call(ocr_stage) -> None:
    """The stage sets the detector's ``limit_side_len`` before each image; RapidOCR must read it then."""
    fitted = ocr_stage.fit(rgb_of(render_text_image("you stupid bitch"))[:, :, ::-1].copy())
    lines = ocr_stage.recognize(fitted.bgr)
    assert ocr_stage._ocr.text_det.limit_side_len == ocr_stage.detector_short_side(*fitted.bgr.shape[:2]) < 736
    assert [t for t, _, _ in lines] == ["you stupid bitch"]


@pytest.mark.parametrize("text", ["shut the fuck up you idiot", "Meeting notes: budget review at 3pm"])
def test_rendered_lines_are_read_within_the_budget(ocr_stage, text: str) -> None:
    fitted = ocr_stage.fit(rgb_of(render_text_image(text))[:, :, ::-1].copy())
    (line,) = ocr_stage.recognize(fitted.bgr)
    assert line[0] == text
    x, y, w, h = fitted.to_original(line[2])
    assert w > 0.8 * fitted.original_size[0] - 60 and 20 <= h <= fitted.original_size[1]  # the box is the line, in original pixels
