"""The shipped models on real, benign images: they load offline and answer sensibly."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from rtaudit.engine.policy import DEFAULT_THRESHOLDS
from rtaudit.engine.stage import process_batch

from .builders import CREATED_MS, inline_media, task

def run_stage(stage, paths):
    tasks = [task(f"image:{n}", text=None, media=inline_media(p.read_bytes(), name=p.name)) for n, p in enumerate(paths)]
    return process_batch(stage, tasks, now_ms=lambda: CREATED_MS)


#: the 12 benign photos bundled in scikit-image's ``skimage/data`` (installed: no ../shared needed).
SKIMAGE_PHOTOS = (
    "astronaut.png", "brick.png", "camera.png", "chelsea.png", "clock_motion.png", "coffee.png",
    "coins.png", "grass.png", "gravel.png", "hubble_deep_field.jpg", "retina.jpg", "rocket.jpg",
)


@pytest.fixture(scope="module")
def photos():
    root = resources.files("skimage").joinpath("data")
    paths = [Path(str(root.joinpath(name))) for name in SKIMAGE_PHOTOS]
    missing = [p.name for p in paths if not p.is_file()]
    assert not missing, f"scikit-image no longer bundles {missing}"
    return paths


@pytest.fixture(scope="module")
def phototest_partial(data_dir, ocr_stage):
    page = data_dir / "images" / "ocr" / "tesseract" / "phototest.tif"
    (partial,) = run_stage(ocr_stage, [page]).partials
    assert partial.status == "ok", partial.error
    return partial


def test_nudity_stage_does_not_flag_benign_photos(nudity_stage, photos):
    review = DEFAULT_THRESHOLDS["sexual"].review
    result = run_stage(nudity_stage, photos)
    assert [p.status for p in result.partials] == ["ok"] * len(photos)
    sexual = {path.name: p.scores["sexual"] for path, p in zip(photos, result.partials)}
    assert all(score < review for score in sexual.values()), sexual
    for p in result.partials:
        assert set(p.scores) == {"sexual", "suggestive"}
        assert all(ev.box is not None and ev.label and ev.part == p.part for ev in p.evidence)


def ocr_lines(partial) -> list[str]:
    return [ev.text for ev in partial.evidence if ev.category == "ocr"]


def test_ocr_stage_reads_the_tesseract_test_page(phototest_partial):
    lines = ocr_lines(phototest_partial)
    assert "This is a lot of 12 point text to test the" in lines
    assert lines[-1] == "brown dog jumped over the lazy fox."
    for ev in phototest_partial.evidence:
        if ev.category == "ocr":
            x, y, w, h = ev.box
            assert w > 0 and h > 0 and 0.0 <= ev.score <= 1.0


def test_ocr_text_spans_point_into_the_transcript(phototest_partial):
    transcript = "\n".join(ocr_lines(phototest_partial))
    for ev in phototest_partial.evidence:
        if ev.span is not None:
            assert transcript[slice(*ev.span)] == ev.text
    assert set(phototest_partial.scores) == {"offensive", "hate", "targeted_insult", "violence", "self-harm"}
    assert max(phototest_partial.scores.values()) < DEFAULT_THRESHOLDS["offensive"].review


#: a page the test renders itself (Pillow's bundled font): the same OCR guarantees on a bare clone.
RENDERED_LINES = ("The quick brown fox jumps over", "the lazy dog near the river bank.")


@pytest.fixture(scope="module")
def rendered_partial(ocr_stage, tmp_path_factory):
    import io

    from PIL import Image

    from rtaudit.tools.demo.corpus import render_text_image

    lines = [Image.open(io.BytesIO(render_text_image(line))) for line in RENDERED_LINES]
    page = Image.new("RGB", (max(i.width for i in lines), sum(i.height for i in lines)), "white")
    for k, line in enumerate(lines):
        page.paste(line, (0, sum(i.height for i in lines[:k])))
    path = tmp_path_factory.mktemp("ocr") / "page.png"
    page.save(path)
    (partial,) = run_stage(ocr_stage, [path]).partials
    assert partial.status == "ok", partial.error
    return partial


def _words(text: str) -> list[str]:
    return "".join(c if c.isalnum() else " " for c in text.lower()).split()


def test_ocr_stage_reads_a_rendered_page(rendered_partial):
    lines = ocr_lines(rendered_partial)  # PP-OCR may cut a rendered line at its wider word gaps: compare words
    assert _words(" ".join(lines)) == _words(" ".join(RENDERED_LINES)), lines
    for ev in rendered_partial.evidence:
        if ev.category == "ocr":
            x, y, w, h = ev.box
            assert w > 0 and h > 0 and 0.0 <= ev.score <= 1.0


def test_ocr_text_spans_of_a_rendered_page_point_into_the_transcript(rendered_partial):
    transcript = "\n".join(ocr_lines(rendered_partial))
    for ev in rendered_partial.evidence:
        if ev.span is not None:
            assert transcript[slice(*ev.span)] == ev.text
    assert set(rendered_partial.scores) == {"offensive", "hate", "targeted_insult", "violence", "self-harm"}
    assert max(rendered_partial.scores.values()) < DEFAULT_THRESHOLDS["offensive"].review


def test_ocr_scales_huge_images_down_before_recognition(ocr_stage):
    import base64 as b64
    import io

    from PIL import Image

    from rtaudit.schemas.messages import MediaItem, ModalityTask

    buf = io.BytesIO()
    Image.new("RGB", (6000, 3000), "white").save(buf, format="PNG")
    task = ModalityTask(
        request_id="r", tenant_id="t", part="image:0", modality="image", lane="lo", created_at_ms=0,
        deadline_ms=10**13, routed_at_ms=0, media=MediaItem(type="image", data_b64=b64.b64encode(buf.getvalue()).decode()),
    )
    fitted = ocr_stage.prepare(task)
    assert fitted.bgr.shape == (1024, 2048, 3) and fitted.scale == 2048 / 6000


def test_text_stage_sees_through_evasions_and_points_at_what_was_written(text_stage):
    written = ["you are a 5h\u0456t and a b.i.t.c.h", "have a lovely day in Scunthorpe"]
    evasive, benign = text_stage.infer(written)
    assert evasive.scores["offensive"] >= DEFAULT_THRESHOLDS["offensive"].review
    assert max(benign.scores.values()) < DEFAULT_THRESHOLDS["offensive"].review and not benign.evidence
    spans = {ev.text: ev.span for ev in evasive.evidence}
    assert {"5h\u0456t", "b.i.t.c.h"} <= set(spans)
    for text, span in spans.items():
        assert written[0][slice(*span)] == text


def test_worker_stages_get_the_configured_inference_threads(text_scorer):
    """The thread count from the settings reaches every onnxruntime session a worker builds."""
    from rtaudit.engine.media import MediaPolicy
    from rtaudit.engine.models.ocr import OCRStage
    from rtaudit.workers.image import stage_factory as image_stage
    from rtaudit.workers.settings import Settings

    image = image_stage(Settings(inference_threads=1, prefer_gpu=False))
    assert image._detector.onnx_session.get_session_options().intra_op_num_threads == 1
    ocr = OCRStage(MediaPolicy(), text_scorer, intra_op_threads=1)
    assert ocr._ocr.text_det.infer.session.get_session_options().intra_op_num_threads == 1
