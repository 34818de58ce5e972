"""Audio through the real broker: router → ``audit.audio.hi`` → audio worker (PyAV, Silero VAD,
Whisper tiny.en, text model) → fusion → one verdict per request, with timestamps in its evidence.
A fleet of its own (router, audio, fusion) on a fresh embedded broker, so the test pays for no
image or OCR model."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator

import numpy as np
import pytest

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.messages import AuditRequest, MediaItem
from rtaudit.workers.client import AuditClient, dlq_reader, verdict_reader
from rtaudit.workers.fleet import Fleet
from rtaudit.workers.settings import Settings, load_settings
from tests.unit.media_builders import encode_audio, speech_with_insult

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
    fleet = Fleet(settings, config=config, roles=("router", "audio", "fusion"), log_dir=root / "logs")
    fleet.launch()
    try:
        yield fleet, settings
    finally:
        fleet.stop()


def request(data: bytes, name: str, mime: str | None = None) -> AuditRequest:
    return AuditRequest(
        request_id=f"audio-{name}-{uuid.uuid4().hex[:8]}", tenant_id=TENANT, created_at_ms=now_ms(), priority="high",
        media=[MediaItem(type="audio", data_b64=base64.b64encode(data).decode(), mime=mime, name=name)],
    )


def test_audio_requests_get_verdicts_with_timestamps(audio_fleet) -> None:  # type: ignore[no-untyped-def]
    fleet, settings = audio_fleet
    signal, insult_at = speech_with_insult(lead_s=1.0, gap_s=2.0)
    insult = request(encode_audio(signal, fmt="mp3", codec="libmp3lame", channels=2, out_rate=44_100), "insult.mp3")
    silence = request(encode_audio(np.zeros(48_000, np.float32)), "silence.wav")
    corrupt = request(b"RIFF\x24\x00\x00\x00WAVEfmt ", "corrupt.wav", mime="audio/wav")
    verdicts, dlq = verdict_reader(settings), dlq_reader(settings)
    client = AuditClient(settings)
    for r in (insult, silence, corrupt):
        client.submit(r)
    client.flush()
    got = verdicts.wait_for({r.request_id for r in (insult, silence, corrupt)}, timeout_s=240)
    verdicts.close()
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
