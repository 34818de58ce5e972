"""The audio stage on real decoded audio: PyAV decoding of every common container, Silero VAD,
Whisper tiny.en word times and the text model, and the outcome of hostile audio. Media is made in
the test (PyAV encoders) from the project's own speech clips (``workers/media``)."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from rtaudit.engine.audio.asr import WhisperRecognizer
from rtaudit.engine.audio.decode import SAMPLE_RATE_HZ, decode_audio, has_audio_stream
from rtaudit.engine.audio.transcript import Transcript
from rtaudit.engine.audio.asr import Word
from rtaudit.engine.audio.vad import speech_segments
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.models.audio import AudioLimits, AudioStage, SpeechScorer
from rtaudit.engine.stage import process_batch
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.schemas.errors import MediaTooLarge, MediaUndecodable
from rtaudit.schemas.messages import MediaItem, ModalityTask
from tests.unit.media_builders import clip, encode_audio, speech_with_insult

#: (container, codec, channels, rate Hz) of each format the stage must read.
FORMATS = [
    ("wav", "pcm_s16le", 1, 16_000),
    ("wav", "pcm_s24le", 2, 22_050),
    ("flac", "flac", 2, 44_100),
    ("mp3", "libmp3lame", 2, 44_100),
    ("ogg", "libopus", 1, 48_000),
    ("wav", "pcm_u8", 1, 8_000),
    ("ipod", "aac", 2, 44_100),  # .m4a
]


@pytest.fixture(scope="module")
def stage() -> AudioStage:
    speech = SpeechScorer(WhisperRecognizer(cpu_threads=1), TextScorer(prefer_gpu=False, intra_op_threads=1))
    return AudioStage(MediaPolicy(), speech, AudioLimits(min_duration_s=0.1, max_duration_s=60.0))


def task(data: bytes, rid: str = "a1", mime: str | None = None) -> ModalityTask:
    # 0 bytes is refused by the schema at the router; built unvalidated, the stage must still answer it
    make = MediaItem if data else MediaItem.model_construct
    media = make(type="audio", data_b64=base64.b64encode(data).decode(), mime=mime)
    return ModalityTask(request_id=rid, tenant_id="t", part="audio:0", modality="audio", lane="hi",
                        created_at_ms=1, deadline_ms=10**13, routed_at_ms=1, media=media)


@pytest.mark.parametrize("fmt, codec, channels, rate", FORMATS, ids=[f"{f}-{c}-{n}ch-{r}" for f, c, n, r in FORMATS])
def test_every_container_decodes_to_mono_16k(fmt, codec, channels, rate):
    reference = clip("benign")
    data = encode_audio(reference, fmt=fmt, codec=codec, channels=channels, out_rate=rate)
    audio = decode_audio(data, max_duration_s=60.0)
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1
    assert not audio.truncated
    # lossy codecs add encoder delay/padding of a few ms
    assert abs(audio.duration_s - len(reference) / SAMPLE_RATE_HZ) < 0.12, audio.source
    rms = lambda x: float(np.sqrt(np.mean(np.square(x))))  # noqa: E731
    assert rms(audio.samples) == pytest.approx(rms(reference), rel=0.2)


def test_content_decides_not_the_declared_type(stage):
    """An Ogg/Opus file declared (and named) as MP3 decodes as what it is."""
    data = encode_audio(clip("insult"), fmt="ogg", codec="libopus", out_rate=48_000)
    prepared = stage.prepare(task(data, mime="audio/mpeg"))
    assert prepared.audio.source.startswith("ogg/opus") and not prepared.video_track


@pytest.mark.parametrize("data, why", [
    (b"", "empty media item"),
    (b"RIFF\x24\x00\x00\x00WAVEfmt ", "not a media container"),  # a WAV header cut inside its fmt chunk
    (bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8)), "not a media container"),
], ids=["zero-bytes", "header-only", "random-bytes"])
def test_undecodable_audio_says_why(data, why):
    with pytest.raises(MediaUndecodable, match=why):
        decode_audio(data, max_duration_s=60.0)


def test_an_image_has_no_audio_stream():
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(buf, format="PNG")
    assert not has_audio_stream(buf.getvalue())
    with pytest.raises(MediaUndecodable, match="no audio stream"):
        decode_audio(buf.getvalue(), max_duration_s=60.0)


def test_duration_limits():
    tone = np.sin(np.arange(SAMPLE_RATE_HZ * 3) * 2 * np.pi * 440 / SAMPLE_RATE_HZ).astype(np.float32) * 0.3
    with pytest.raises(MediaTooLarge, match="limit 2 s"):
        decode_audio(encode_audio(tone), max_duration_s=2.0)
    with pytest.raises(MediaUndecodable, match="10 ms .* shorter than the minimum 0.1 s"):
        decode_audio(encode_audio(tone[:160]), max_duration_s=2.0, min_duration_s=0.1)


def test_a_truncated_stream_keeps_what_decoded():
    data = encode_audio(clip("benign"), fmt="ogg", codec="libopus", out_rate=48_000)
    audio = decode_audio(data[: len(data) // 2], max_duration_s=60.0)
    assert 0.5 < audio.duration_s < 3.5


def test_vad_finds_speech_after_a_second_of_silence_and_nothing_in_silence():
    signal = np.concatenate([np.zeros(SAMPLE_RATE_HZ, np.float32), clip("benign")])
    speech = speech_segments(signal)
    assert speech.segments and 0.5 <= speech.segments[0].start_s <= 1.1
    assert speech.original_time(0.0) == pytest.approx(speech.segments[0].start_s, abs=0.01)
    assert speech_segments(np.zeros(SAMPLE_RATE_HZ * 3, np.float32)).segments == ()


def test_transcript_span_times():
    words = [Word(" You", 1.0, 1.2, 0.9), Word(" are", 1.2, 1.4, 0.9), Word(" stupid.", 1.5, 2.0, 0.9)]
    t = Transcript.of(words)
    assert t.text == "You are stupid."
    assert t.span_times(8, 14) == (1.5, 2.0)
    assert t.span_times(0, 7) == (1.0, 1.4)
    assert t.span_times(40, 42) is None


def test_insult_is_flagged_with_its_time(stage):
    signal, insult_at = speech_with_insult(lead_s=1.0, gap_s=2.0)
    insult = clip("insult")
    voiced = np.flatnonzero(np.abs(insult) > 0.02)
    truth_start, truth_end = insult_at + voiced[0] / SAMPLE_RATE_HZ, insult_at + voiced[-1] / SAMPLE_RATE_HZ
    result = process_batch(stage, [task(encode_audio(signal, fmt="flac", codec="flac"))])
    p = result.partials[0]
    assert p.status == "ok", p.error
    assert max(p.scores["offensive"], p.scores["targeted_insult"]) >= 0.9
    flagged = [e for e in p.evidence if e.category in ("offensive", "targeted_insult") and e.score >= 0.9]
    assert flagged and all(e.time_s is not None and e.part == "audio:0" for e in flagged)
    assert all(truth_start - 0.5 <= e.time_s[0] and e.time_s[1] <= truth_end + 0.5 for e in flagged)
    idiot = [e for e in flagged if "idiot" in (e.text or "").lower()]
    assert idiot and abs(idiot[0].time_s[1] - truth_end) <= 0.5
    transcript = next(e for e in p.evidence if e.label == "transcript")
    assert "good morning" in transcript.text.lower() and "idiot" in transcript.text.lower()
    assert transcript.time_s[0] >= 0.5  # the leading second of silence is not speech


def test_benign_speech_is_scored_clean(stage):
    p = process_batch(stage, [task(encode_audio(clip("benign")))]).partials[0]
    assert p.status == "ok" and max(p.scores.values()) < 0.5
    assert any(e.label == "transcript" and "morning" in e.text.lower() for e in p.evidence)


def test_silence_is_no_speech_not_clean(stage):
    result = process_batch(stage, [task(encode_audio(np.zeros(SAMPLE_RATE_HZ * 3, np.float32)))])
    p = result.partials[0]
    assert (p.status, p.error_code, p.scores) == ("error", "no_speech", {})
    assert result.failures == []  # not bad input: no DLQ record


def test_hostile_items_fail_alone_and_the_stage_keeps_serving(stage):
    """500 items of 10 ms each (refused by the minimum duration), a 0-byte item and a PNG named
    audio, in one batch with a real clip: each bad one gets its own error, the clip its score."""
    tone = (np.sin(np.arange(160) * 0.3) * 0.3).astype(np.float32)
    tiny = encode_audio(tone)
    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, format="PNG")
    tasks = [task(tiny, f"tiny-{i}") for i in range(500)] + [task(b"", "empty"), task(png.getvalue(), "png", "audio/wav")]
    tasks.append(task(encode_audio(clip("insult")), "good"))
    result = process_batch(stage, tasks)
    codes = [p.error_code for p in result.partials[:-1]]
    assert codes == ["media_undecodable"] * 502
    assert len(result.failures) == 502  # each bad input goes to the DLQ with its reason
    assert "(declared audio/wav)" in result.partials[-2].error
    assert result.partials[-1].status == "ok" and result.partials[-1].scores["offensive"] >= 0.9


def test_wer_on_the_shared_clips(data_dir):
    from rtaudit.modelbuild.audio.evaluation import evaluate, overall_wer

    manifest = data_dir / "audio" / "manifest.csv"
    if not manifest.is_file():
        pytest.skip(f"shared evaluation data not found: {manifest}")
    results = evaluate(manifest, WhisperRecognizer(cpu_threads=1))
    assert len(results) == 14
    assert overall_wer(results) <= 0.15


def test_a_video_audio_track_is_scored_and_its_silence_is_no_fault(stage):
    """The ``<part>#audio`` task the video stage splits off: speech is flagged in the video's time;
    a silent track is an ordinary answer (a note, no scores), since the frames carry the video."""
    from tests.unit.media_builders import encode_video, text_frame

    signal, insult_at = speech_with_insult(lead_s=1.0, gap_s=1.0)
    video = encode_video(lambda t: text_frame(None), seconds=len(signal) / SAMPLE_RATE_HZ, audio=signal)
    track = task(video).model_copy(update={"part": "video:0#audio"})
    p = process_batch(stage, [track]).partials[0]
    assert p.status == "ok" and p.scores["offensive"] >= 0.9
    assert all(insult_at - 0.5 <= e.time_s[0] for e in p.evidence if e.category == "offensive" and e.score >= 0.9)
    silent = encode_video(lambda t: text_frame(None), seconds=2, audio=np.zeros(SAMPLE_RATE_HZ * 2, np.float32))
    p = process_batch(stage, [task(silent).model_copy(update={"part": "video:0#audio"})]).partials[0]
    assert (p.status, p.scores, [e.label for e in p.evidence]) == ("ok", {}, ["no_speech"])


def test_a_two_hour_silent_file_is_refused_by_its_header_in_well_under_a_second():
    """A real 2-hour silent WAV (8 kHz mono 8-bit, every sample present: 57.6 MB): refused by the
    duration limit before a sample is decoded."""
    import time

    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="wav") as c:
        s = c.add_stream("pcm_u8", rate=8_000, layout="mono")
        minute = np.full((1, 8_000 * 60), 128, np.uint8)  # unsigned 8-bit silence
        for m in range(120):
            frame = av.AudioFrame.from_ndarray(minute, format="u8", layout="mono")
            frame.sample_rate, frame.pts = 8_000, m * 8_000 * 60
            for p in s.encode(frame):
                c.mux(p)
        for p in s.encode(None):
            c.mux(p)
    two_hours = buf.getvalue()
    assert len(two_hours) > 7200 * 8_000
    started = time.perf_counter()
    with pytest.raises(MediaTooLarge, match=r"audio is 7200.0 s .* limit 1800 s"):
        decode_audio(two_hours, max_duration_s=1800.0)
    assert time.perf_counter() - started < 1.0


def test_the_installed_speech_models_are_the_manifest_s():
    import hashlib
    from importlib.util import find_spec
    from pathlib import Path

    from rtaudit.engine.audio.asr import manifest_entry

    for name in ("whisper-tiny.en", "silero-vad-v6"):
        entry = manifest_entry(name)
        package_dir = Path(find_spec(entry["path"].split("/")[0]).origin).parent
        data = (package_dir.parent / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert entry["licence"].startswith("MIT") and entry["source"]
