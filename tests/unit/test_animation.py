"""Animated GIF and WebP: sampled frames (interval + scene changes) go through NudeNet and OCR, and
a later frame's text is read and flagged, its evidence naming the frame and its display time.
The animations are built in the test with Pillow."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from rtaudit.engine.frames import FrameSampler, changed_share, SamplingParams, animation_frames, thumbnail
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.models.frameset import FrameSet
from rtaudit.engine.models.nudity import NudityStage
from rtaudit.engine.models.ocr import OCRStage
from rtaudit.engine.stage import process_batch
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.schemas.errors import MediaUndecodable
from rtaudit.schemas.messages import MediaItem, ModalityTask
from tests.unit.media_builders import text_frame

FRAME_MS = 500
#: the third frame (index 2) carries the insult, shown from 1.0 s to 1.5 s.
TEXTS = (None, None, "STUPID IDIOT", None)


def animation(fmt: str, texts=TEXTS, frame_ms: int = FRAME_MS) -> bytes:  # type: ignore[no-untyped-def]
    # each frame a shade apart (no scene change), so Pillow's encoders keep identical-looking frames apart
    frames = [text_frame(t, bg=(235 - 4 * i, 235, 235)) for i, t in enumerate(texts)]
    buf = io.BytesIO()
    frames[0].save(buf, format=fmt, save_all=True, append_images=frames[1:], duration=frame_ms, loop=0)
    return buf.getvalue()


def task(data: bytes, rid: str = "g1") -> ModalityTask:
    media = MediaItem(type="image", data_b64=base64.b64encode(data).decode())
    return ModalityTask(request_id=rid, tenant_id="t", part="image:0", modality="image", lane="hi",
                        created_at_ms=1, deadline_ms=10**13, routed_at_ms=1, media=media)


@pytest.fixture(scope="module")
def ocr_stage() -> OCRStage:
    return OCRStage(MediaPolicy(), TextScorer(prefer_gpu=False, intra_op_threads=1), intra_op_threads=1)


def test_sampler_keeps_the_interval_and_scene_changes_up_to_its_cap():
    flat, other = np.zeros((32, 32), np.float32), np.ones((32, 32), np.float32)
    assert changed_share(flat, flat + 0.05) == 0.0  # a fade is not a cut
    s = FrameSampler(SamplingParams(interval_s=1.0, scene_threshold=0.1, max_frames=3))
    kept = [s.offer(t, th) for t, th in [(0.0, flat), (0.4, flat), (0.5, other), (0.9, other), (1.6, other), (3.0, flat)]]
    assert kept == [True, False, True, False, True, False]  # first, scene change, interval; then the cap


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])
def test_animation_frames_have_their_index_and_display_time(fmt):
    frames = animation_frames(animation(fmt), SamplingParams(interval_s=10.0), max_pixels=10**7)
    assert frames is not None
    # the first frame, the text frame (a scene change), the frame after it (another); WebP's encoder
    # merges the two first frames into one of 1 s, so indices are the decoder's own
    assert [f.start_s for f in frames] == [0.0, 1.0, 1.5] and frames[0].end_s in (0.5, 1.0)
    assert [(f.start_s, f.end_s) for f in frames[1:]] == [(1.0, 1.5), (1.5, 2.0)]
    assert frames[0].index == 0 and frames[1].index >= 1 and frames[2].index == frames[1].index + 1
    assert frames[1].rgb.shape == (200, 480, 3) and frames[1].rgb.dtype == np.uint8
    assert thumbnail(frames[1].rgb[:, :, 0]).shape == (32, 32)


def test_a_still_image_is_not_an_animation_and_a_cut_animation_says_why():
    buf = io.BytesIO()
    text_frame("hello").save(buf, format="GIF")
    assert animation_frames(buf.getvalue(), SamplingParams(), max_pixels=10**7) is None
    data = animation("GIF")
    with pytest.raises(MediaUndecodable):
        animation_frames(data[: len(data) * 2 // 3], SamplingParams(interval_s=0.1), max_pixels=10**7)


@pytest.mark.parametrize("fmt", ["GIF", "WEBP"])
def test_text_on_a_later_frame_is_read_and_flagged_with_its_frame_and_time(ocr_stage, fmt):
    data = animation(fmt)
    text_frame_index = animation_frames(data, SamplingParams(), max_pixels=10**7)[1].index
    result = process_batch(ocr_stage, [task(data)])
    p = result.partials[0]
    assert p.status == "ok", p.error
    assert p.scores["offensive"] >= 0.9
    lines = [e for e in p.evidence if e.category == "ocr"]
    assert lines and all(e.frame == text_frame_index and e.time_s == (1.0, 1.5) for e in lines)
    assert "IDIOT" in " ".join(e.text or "" for e in lines).upper()
    flagged = [e for e in p.evidence if e.category == "offensive" and e.score >= 0.9]
    assert flagged and all(e.frame == text_frame_index and e.time_s == (1.0, 1.5) for e in flagged)


def test_the_first_frame_alone_is_clean(ocr_stage):
    """The same animation without its third frame is allowed: the flag above came from that frame."""
    p = process_batch(ocr_stage, [task(animation("GIF", texts=(None, None, None, None)))]).partials[0]
    assert p.status == "ok" and p.scores["offensive"] < 0.5


def test_nudenet_sees_every_sampled_frame():
    stage = NudityStage(MediaPolicy(), prefer_gpu=False, intra_op_threads=1)
    prepared = stage.prepare(task(animation("GIF")))
    assert isinstance(prepared, FrameSet) and [t.frame for t in prepared.images] == [0, 2, 3]
    out = stage.infer([prepared])[0]
    assert set(out.scores) == {"sexual", "suggestive"} and max(out.scores.values()) < 0.5


def test_a_still_image_that_fails_is_not_called_an_animation():
    """Pillow refuses a decompression bomb before the frame count is read: a still one is named an image, with the
    configured pixel limit, not an animation with Pillow's number alone."""
    import warnings

    from PIL import Image

    from rtaudit.schemas.errors import MediaTooLarge

    params = SamplingParams(interval_s=1.0, scene_threshold=0.05, max_frames=4)
    bomb = io.BytesIO()
    Image.new("1", (12_000, 12_000)).save(bomb, format="PNG")  # 144 Mpx: over Pillow's bomb limit, a small file
    with warnings.catch_warnings(), pytest.raises(MediaTooLarge) as large:
        animation_frames(bomb.getvalue(), params, max_pixels=40_000_000)
    assert str(large.value).startswith("image is over the limit of 40000000 pixels")
