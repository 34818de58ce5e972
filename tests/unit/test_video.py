"""The video stage: PyAV decoding, frame sampling (interval + scene changes, capped), the split into
frame and audio-track tasks that fusion is told about, and the outcome of hostile video. Videos are
rendered in the test with PyAV (H.264 + AAC in MP4); the shared videos are read when present."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from rtaudit.engine.fusion import Fusion
from rtaudit.engine.frames import SamplingParams
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.models.ocr import OCRStage
from rtaudit.engine.models.video import VideoStage
from rtaudit.engine.policy import PolicyBook
from rtaudit.engine.stage import process_batch
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.schemas.errors import MediaTooLarge
from rtaudit.schemas.messages import Manifest, MediaItem, ModalityTask
from tests.unit.media_builders import encode_audio, encode_video, speech_with_insult, text_frame

#: the insult is on screen from 5.3 s to 6.7 s: off the 1 s sampling grid, found as scene changes.
SHOWN = (5.3, 6.7)


def insult_frame(t: float):  # type: ignore[no-untyped-def]
    return text_frame("STUPID IDIOT" if SHOWN[0] <= t < SHOWN[1] else None)


def task(data: bytes, rid: str = "v1", mime: str | None = None) -> ModalityTask:
    # 0 bytes is refused by the schema at the router; built unvalidated, the stage must still answer it
    make = MediaItem if data else MediaItem.model_construct
    media = make(type="video", data_b64=base64.b64encode(data).decode(), mime=mime, name="clip.mp4")
    return ModalityTask(request_id=rid, tenant_id="t", part="video:0", modality="video", lane="hi",
                        created_at_ms=1, deadline_ms=10**13, routed_at_ms=1, media=media)


@pytest.fixture(scope="module")
def stage() -> VideoStage:
    return VideoStage(MediaPolicy(), SamplingParams(interval_s=1.0, max_frames=24), max_duration_s=60.0)


def test_a_video_splits_into_sampled_frames_and_its_audio_track(stage):
    data = encode_video(insult_frame, seconds=10, audio=clip_audio())
    result = process_batch(stage, [task(data)])
    p = result.partials[0]
    assert p.status == "ok" and p.scores == {}
    assert [i for i, _ in result.subtasks] == [0]
    subtasks = result.subtasks[0][1]
    frames = [s for s in subtasks if s.modality == "image"]
    times = [s.time_s[0] for s in frames]
    assert times[:5] == [0.0, 1.0, 2.0, 3.0, 4.0] and SHOWN[0] in times and SHOWN[1] in times  # grid + both cuts
    assert all(s.part == f"video:0#frame:{s.frame}" and s.media.mime == "image/jpeg" for s in frames)
    audio = [s for s in subtasks if s.modality == "audio"]
    assert [s.part for s in audio] == ["video:0#audio"] and audio[0].media == task(data).media
    assert p.expands == [f"{st}/{s.part}" for s in subtasks for st in ({"image": ("image", "ocr"), "audio": ("audio",)}[s.modality])]
    assert all(s.deadline_ms == 10**13 and s.lane == "hi" and s.request_id == "v1" for s in subtasks)
    note = next(e for e in p.evidence if e.label == "video")
    assert "of 100 frames sampled from 10.00 s" in note.text and "audio track: yes" in note.text


def clip_audio() -> np.ndarray:
    return speech_with_insult(lead_s=1.0, gap_s=1.0)[0]


def test_the_frame_with_the_insult_is_flagged_with_its_time(stage):
    """The frame tasks through the OCR stage, as the OCR worker would score them."""
    subtasks = process_batch(stage, [task(encode_video(insult_frame, seconds=10))]).subtasks[0][1]
    shown = [s for s in subtasks if s.time_s[0] in SHOWN[:1]]
    ocr = OCRStage(MediaPolicy(), TextScorer(prefer_gpu=False, intra_op_threads=1), intra_op_threads=1)
    p = process_batch(ocr, shown).partials[0]
    assert p.status == "ok" and p.scores["offensive"] >= 0.9
    flagged = [e for e in p.evidence if e.category == "offensive" and e.score >= 0.9]
    assert flagged and all(SHOWN[0] <= e.time_s[0] < SHOWN[1] and e.frame == shown[0].frame for e in flagged)


def test_a_video_without_audio_has_frame_parts_only(stage):
    p = process_batch(stage, [task(encode_video(insult_frame, seconds=3))])
    subtasks = p.subtasks[0][1]
    assert subtasks and all(s.modality == "image" for s in subtasks)
    assert "audio track: none" in p.partials[0].evidence[0].text


def test_an_audio_only_container_sent_as_video_has_its_audio_part_only(stage):
    result = process_batch(stage, [task(encode_audio(clip_audio(), fmt="ipod", codec="aac"), mime="video/mp4")])
    assert [s.part for s in result.subtasks[0][1]] == ["video:0#audio"]


@pytest.mark.parametrize("cut", ["empty", "header", "truncated"])
def test_broken_videos_get_a_clear_outcome(stage, cut):
    data = encode_video(insult_frame, seconds=4)
    broken = {"empty": b"", "header": data[:32], "truncated": data[: len(data) // 2]}[cut]
    result = process_batch(stage, [task(broken, mime="video/mp4")])
    p = result.partials[0]
    assert (p.status, p.error_code) == ("error", "media_undecodable"), p
    assert "declared video/mp4" in p.error and result.failures


def test_a_video_over_the_duration_limit_is_refused():
    short = VideoStage(MediaPolicy(), SamplingParams(), max_duration_s=2.0)
    with pytest.raises(MediaTooLarge, match="limit 2 s"):
        short.prepare(task(encode_video(insult_frame, seconds=4)))


def test_variable_frame_rate_keeps_real_times(stage):
    """A WebM (VP9) whose frames come at 10 fps, then at 2 fps: sampled times are the frames' own."""
    import io
    from fractions import Fraction

    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="webm") as c:
        v = c.add_stream("libvpx-vp9", rate=10)
        v.width, v.height, v.pix_fmt = 320, 120, "yuv420p"
        v.time_base = Fraction(1, 1000)
        times = [i / 10 for i in range(20)] + [2.0 + i / 2 for i in range(1, 7)]
        for t in times:
            frame = av.VideoFrame.from_image(text_frame(f"{t:.1f}" if t >= 3 else None, size=(320, 120)))
            frame.pts, frame.time_base = round(t * 1000), Fraction(1, 1000)
            for pkt in v.encode(frame):
                c.mux(pkt)
        for pkt in v.encode(None):
            c.mux(pkt)
    item = stage.prepare(task(buf.getvalue()))
    sampled = [round(f.start_s, 2) for f in item.video.frames]
    # the first frame after 2 s comes at 2.5 s (frame 20: 2.0 s at a constant 10 fps), the last at 5 s
    assert set(sampled) <= {round(t, 2) for t in times} and {2.5, 5.0} <= set(sampled)


def test_fusion_waits_for_the_parts_a_split_adds():
    fusion = Fusion(PolicyBook())
    manifest = Manifest(request_id="v1", tenant_id="t", created_at_ms=1, deadline_ms=10**13, lane="hi",
                        expected=["video/video:0"])
    data = encode_video(insult_frame, seconds=2)
    state, verdict = fusion.apply(None, manifest, 10)
    split = process_batch(VideoStage(MediaPolicy(), SamplingParams()), [task(data)]).partials[0]
    state, verdict = fusion.apply(state, split, 20)
    assert verdict is None and len(split.expands) >= 2  # the frames' parts are now awaited
    for key in split.expands:
        stage_name, part = key.split("/", 1)
        frame = split.model_copy(update={"stage": stage_name, "part": part, "expands": [], "scores": {"offensive": 0.1}})
        assert verdict is None
        state, verdict = fusion.apply(state, frame, 30)
    assert verdict is not None and verdict.complete and set(verdict.parts) == {"video/video:0", *split.expands}


def test_shared_videos_are_sampled_over_their_whole_length(data_dir, stage):
    video_dir = data_dir / "video"
    if not video_dir.is_dir():
        pytest.skip(f"shared evaluation data not found: {video_dir}")
    for path in sorted(video_dir.glob("*.mp4")):
        item = stage.prepare(task(path.read_bytes()))
        frames = item.video.frames
        assert 1 <= len(frames) <= 24 and item.video.has_audio
        assert frames[-1].start_s >= item.video.duration_s - 2.0, path.name  # the cap spreads over the video


def test_fusion_decides_at_the_split_when_its_parts_came_first_and_a_replayed_split_adds_nothing():
    """Frame partials may beat the video partial to fusion (other workers, other lanes): the split
    then completes the request at once; the same split replayed (at-least-once) changes nothing."""
    fusion = Fusion(PolicyBook())
    manifest = Manifest(request_id="v1", tenant_id="t", created_at_ms=1, deadline_ms=10**13, lane="hi",
                        expected=["video/video:0"])
    split = process_batch(VideoStage(MediaPolicy(), SamplingParams()), [task(encode_video(insult_frame, seconds=2))]).partials[0]
    state, verdict = fusion.apply(None, manifest, 10)
    for key in split.expands:
        stage_name, part = key.split("/", 1)
        state, verdict = fusion.apply(state, split.model_copy(update={"stage": stage_name, "part": part, "expands": []}), 20)
        assert verdict is None
    state, verdict = fusion.apply(state, split, 30)
    assert verdict is not None and verdict.complete
    assert len(state.expanded) == len(split.expands)
    _, again = fusion.apply(state, split, 40)
    assert again is None
