"""Audio, video and animated images through the real broker, with timestamps in the evidence.

* audio: router → ``audit.audio.hi`` → audio worker (PyAV, Silero VAD, Whisper tiny.en, text
  model) → fusion;
* video: router → ``audit.video.hi`` → video worker, which splits each video into frame tasks
  (``audit.image.hi``: image and OCR workers) and an audio-track task (``audit.audio.hi``) and
  tells fusion the new parts → one verdict once every part answered;
* an animated GIF: the image and OCR workers score its sampled frames.

A fleet of its own (router, video, image, ocr, audio, fusion) on a fresh embedded broker."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator

import numpy as np
import pytest

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.messages import AuditRequest, MediaItem
from rtaudit.workers.client import AuditClient, dlq_reader, verdict_reader
from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.settings import Settings, load_settings
from tests.unit.media_builders import clip, encode_audio, encode_video, speech_with_insult, text_frame

from .conftest import free_port

pytestmark = pytest.mark.integration
TENANT = "itest-audio"


@pytest.fixture(scope="module")
def audio_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, Settings]]:
    root = tmp_path_factory.mktemp("audio-fleet")
    config = root / "rtaudit.toml"
    config.write_text(f"""
embedded_port = {free_port()}
state_dir = "{root / 'state'}"
fusion_grace_ms = 5000

[tenants.{TENANT}]
version = "itest-audio-1"
slo_ms = 300000
on_incomplete = "review"
""")
    settings = load_settings(config)
    fleet = Fleet(settings, config=config, roles=("router", "video", "image", "ocr", "audio", "fusion"), log_dir=root / "logs")
    fleet.launch()
    try:
        yield fleet, settings
    finally:
        fleet.stop()


def request(data: bytes, name: str, mime: str | None = None, kind: str = "audio") -> AuditRequest:
    return AuditRequest(
        request_id=f"{kind}-{name}-{uuid.uuid4().hex[:8]}", tenant_id=TENANT, created_at_ms=now_ms(), priority="high",
        media=[MediaItem(type=kind, data_b64=base64.b64encode(data).decode(), mime=mime, name=name)],  # type: ignore[arg-type]
    )


def submit_and_wait(settings: Settings, requests: list[AuditRequest], timeout_s: float = 300) -> dict:  # type: ignore[type-arg]
    verdicts = verdict_reader(settings)
    client = AuditClient(settings)
    for r in requests:
        client.submit(r)
    client.flush()
    got = verdicts.wait_for({r.request_id for r in requests}, timeout_s=timeout_s)
    verdicts.close()
    return {rid: v for rid, (v, _) in got.items()}


def test_audio_requests_get_verdicts_with_timestamps(audio_fleet) -> None:  # type: ignore[no-untyped-def]
    fleet, settings = audio_fleet
    signal, insult_at = speech_with_insult(lead_s=1.0, gap_s=2.0)
    insult = request(encode_audio(signal, fmt="mp3", codec="libmp3lame", channels=2, out_rate=44_100), "insult.mp3")
    silence = request(encode_audio(np.zeros(48_000, np.float32)), "silence.wav")
    corrupt = request(b"RIFF\x24\x00\x00\x00WAVEfmt ", "corrupt.wav", mime="audio/wav")
    dlq = dlq_reader(settings)
    got = {rid: (v, 0) for rid, v in submit_and_wait(settings, [insult, silence, corrupt]).items()}
    dead = dlq.wait_for({corrupt.request_id}, timeout_s=30)
    dlq.close()
    assert not fleet.exited()
    assert set(got) == {insult.request_id, silence.request_id, corrupt.request_id}

    v = got[insult.request_id][0]
    assert (v.decision, v.complete, v.parts) == ("block", True, {"audio/audio:0": "ok"})
    timed = [e for e in v.evidence if e.category in v.flagged and e.score >= 0.9]
    assert timed and all(e.time_s is not None for e in timed), v.evidence
    assert all(insult_at - 0.5 <= e.time_s[0] < e.time_s[1] <= insult_at + 2.3 for e in timed), (insult_at, timed)
    assert any(e.label == "transcript" and "idiot" in (e.text or "").lower() for e in v.evidence)

    v = got[silence.request_id][0]
    assert v.decision == "review" and not v.complete  # never scored as clean
    assert any("no_speech" in r for r in v.reasons), v.reasons

    v = got[corrupt.request_id][0]
    assert v.decision == "review" and not v.complete
    assert any("media_undecodable" in r and "declared audio/wav" in r for r in v.reasons), v.reasons
    record = dead[corrupt.request_id][0]
    assert record.error_code == "media_undecodable" and record.source_topic == "audit.audio.hi"


def test_videos_and_an_animated_gif_get_verdicts_with_frame_times(audio_fleet) -> None:  # type: ignore[no-untyped-def]
    """A video with an insult on screen from 5.3 to 6.7 s is blocked with that time; a video whose
    only abuse is in its audio track is flagged through the audio stage; a clean video is
    allowed, complete, with every frame part answered; a GIF whose third frame carries the
    insult is blocked, naming that frame."""
    from tests.unit.test_animation import animation
    from tests.unit.test_video import SHOWN, insult_frame

    fleet, settings = audio_fleet
    blank = lambda t: text_frame(None)  # noqa: E731
    signal, insult_at = speech_with_insult(lead_s=1.0, gap_s=1.0)
    on_screen = request(encode_video(insult_frame, seconds=10), "insult-frames.mp4", kind="video")
    in_audio = request(encode_video(blank, seconds=len(signal) / 16_000, audio=signal), "insult-audio.mp4", kind="video")
    clean = request(encode_video(blank, seconds=3, audio=clip("benign")), "clean.mp4", kind="video")
    gif = request(animation("GIF"), "insult.gif", kind="image")
    got = submit_and_wait(settings, [on_screen, in_audio, clean, gif])
    assert not fleet.exited()
    assert set(got) == {r.request_id for r in (on_screen, in_audio, clean, gif)}

    v = got[on_screen.request_id]
    assert v.decision == "block" and v.complete, v.reasons
    frame_parts = [p for p in v.parts if "#frame:" in p]
    assert len(frame_parts) >= 2 * 10 and all(v.parts[p] == "ok" for p in frame_parts)  # image + ocr per frame
    timed = [e for e in v.evidence if e.category in v.flagged and e.score >= 0.9]
    assert timed and all(e.frame is not None and SHOWN[0] <= e.time_s[0] < SHOWN[1] for e in timed), timed

    v = got[in_audio.request_id]
    assert v.decision == "block" and v.complete and v.parts["audio/video:0#audio"] == "ok", v.reasons
    timed = [e for e in v.evidence if e.category in v.flagged and e.score >= 0.9]
    assert timed and all(e.part == "video:0#audio" and insult_at - 0.5 <= e.time_s[0] for e in timed)

    v = got[clean.request_id]
    assert (v.decision, v.complete) == ("allow", True), v.reasons
    assert any(e.label == "transcript" and "morning" in (e.text or "").lower() for e in v.evidence)

    v = got[gif.request_id]
    assert v.decision == "block" and v.complete
    assert all(e.time_s == (1.0, 1.5) and e.frame is not None for e in v.evidence if e.category in v.flagged and e.score >= 0.9)


def camera_video(photos: tuple[str, str], *, seconds: float, fps: int, audio_codec: str, audio_rate: int, channels: int,
                 size: tuple[int, int] = (1280, 720)) -> bytes:
    """An H.264 MP4 shaped like the shared clips (1280×720, 20-25 fps, a compressed audio track):
    a slow pan across one of scikit-image's photos (CC0), a cut to a second one halfway, and the
    project's benign speech clip as ``audio_codec`` at ``audio_rate`` Hz, ``channels`` channels."""
    import io
    from fractions import Fraction

    import av
    from PIL import Image

    from rtaudit.tools.demo.corpus import skimage_file

    width, height = size
    scenes = [Image.open(io.BytesIO(skimage_file(n))).convert("RGB").resize((width * 5 // 4, height * 5 // 4)) for n in photos]
    n_frames = int(seconds * fps)
    speech = clip("benign")
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as c:
        v = c.add_stream("libx264", rate=fps, options={"preset": "veryfast"})
        v.width, v.height, v.pix_fmt = width, height, "yuv420p"
        layout = "mono" if channels == 1 else "stereo"
        a = c.add_stream(audio_codec, rate=audio_rate, layout=layout)
        for i in range(n_frames):
            scene = scenes[0] if i < n_frames // 2 else scenes[1]
            dx = (scene.width - width) * i // max(1, n_frames - 1)  # the camera pans left to right
            frame = av.VideoFrame.from_image(scene.crop((dx, 0, dx + width, height)))
            frame.pts, frame.time_base = i, Fraction(1, fps)
            for pkt in v.encode(frame):
                c.mux(pkt)
        for pkt in v.encode(None):
            c.mux(pkt)
        formats = a.codec_context.codec.audio_formats
        r = av.AudioResampler(format=formats[0].name if formats else "fltp", layout=layout, rate=audio_rate)
        block = av.AudioFrame.from_ndarray((np.clip(speech, -1, 1) * 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono")
        block.sample_rate = 16_000
        for g in r.resample(block) + r.resample(None):
            for pkt in a.encode(g):
                c.mux(pkt)
        for pkt in a.encode(None):
            c.mux(pkt)
    return buf.getvalue()


def test_camera_like_videos_get_complete_verdicts_with_frame_evidence(audio_fleet) -> None:  # type: ignore[no-untyped-def]
    """The generated twin of the shared-video test below (which needs ../shared/data): two videos
    shaped like those clips (1280×720 H.264, AAC stereo 48 kHz / MP3 mono 16 kHz), rendered here
    with PyAV, get complete verdicts with frame and audio evidence; their benign content is allowed."""
    fleet, settings = audio_fleet
    videos = {
        "pan-aac.mp4": camera_video(("astronaut.png", "coffee.png"), seconds=5.3, fps=25, audio_codec="aac",
                                    audio_rate=48_000, channels=2),
        "pan-mp3.mp4": camera_video(("rocket.jpg", "chelsea.png"), seconds=6.0, fps=20, audio_codec="libmp3lame",
                                    audio_rate=16_000, channels=1),
    }
    requests = [request(data, name, kind="video") for name, data in videos.items()]
    got = submit_and_wait(settings, requests)
    assert not fleet.exited()
    for r in requests:
        v = got[r.request_id]
        name = r.media[0].name
        assert v.complete and v.decision == "allow", (name, v.decision, v.categories, v.reasons)
        frames = sorted({p.split("#frame:")[1] for p in v.parts if "#frame:" in p}, key=int)
        assert len(frames) >= 5, (name, v.parts)  # one a second at least, and the cut
        assert all(v.parts[f"{stage}/video:0#frame:{f}"] == "ok" for f in frames for stage in ("image", "ocr")), v.parts
        assert v.parts["audio/video:0#audio"] == "ok", v.parts
        sampled = [e for e in v.evidence if e.label == "video"]
        assert sampled and "1280x720" in (sampled[0].text or "") and "audio track: yes" in (sampled[0].text or ""), sampled
        assert any(e.label == "transcript" and "morning" in (e.text or "").lower() for e in v.evidence), v.evidence


def test_the_shared_videos_get_complete_verdicts_with_frame_evidence(audio_fleet, data_dir) -> None:  # type: ignore[no-untyped-def]
    fleet, settings = audio_fleet
    paths = sorted((data_dir / "video").glob("*.mp4"))
    if not paths:
        pytest.skip(f"shared evaluation data not found: {data_dir / 'video'}")
    requests = [request(p.read_bytes(), p.name, kind="video") for p in paths]
    got = submit_and_wait(settings, requests)
    for r in requests:
        v = got[r.request_id]
        assert v.complete, (r.media[0].name, v.reasons)
        assert any("#frame:" in p for p in v.parts) and any(e.frame is not None and e.time_s for e in v.evidence)
