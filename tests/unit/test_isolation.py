"""Decoding in a child process: a crash or a hang costs the item, not the worker."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rtaudit.engine.audio.decode import decode_audio
from rtaudit.engine.isolation import Isolated
from rtaudit.schemas.errors import MediaTooLarge, MediaUndecodable
from tests.unit.media_builders import clip, encode_audio


def crash(_: bytes) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(_: bytes) -> None:
    time.sleep(60)


@pytest.fixture(scope="module")
def isolated() -> Isolated:
    return Isolated(timeout_s=3.0, preload=["rtaudit.engine.audio.decode"])


def test_a_crash_costs_the_item_and_the_next_call_works(isolated):
    with pytest.raises(MediaUndecodable, match="the decoder crashed on this item .killed by SIGSEGV"):
        isolated(crash, b"")
    audio = isolated(decode_audio, encode_audio(clip("insult")), max_duration_s=60.0)
    assert abs(audio.duration_s - len(clip("insult")) / 16_000) < 0.01


def test_a_hang_is_stopped_at_the_limit(isolated):
    started = time.monotonic()
    with pytest.raises(MediaUndecodable, match="decoding took over 3 s"):
        isolated(hang, b"")
    assert time.monotonic() - started < 6.0


def test_errors_raised_in_the_child_come_back_typed(isolated):
    with pytest.raises(MediaUndecodable, match="empty media item"):
        isolated(decode_audio, b"", max_duration_s=60.0)
    with pytest.raises(MediaTooLarge, match="limit 1 s"):
        isolated(decode_audio, encode_audio(clip("benign")), max_duration_s=1.0)


def test_the_audio_stage_decodes_in_the_child(monkeypatch):
    """The worker's audio stage with its child-process decoder: same audio as in-process."""
    import base64

    from rtaudit.engine.media import MediaPolicy
    from rtaudit.engine.models.audio import AudioStage
    from rtaudit.schemas.messages import MediaItem, ModalityTask
    from rtaudit.workers.settings import Settings

    stage = AudioStage(MediaPolicy(), speech=type("S", (), {"model": None})(),  # type: ignore[arg-type]
                       decoder=Settings().av.decoder("rtaudit.engine.audio.decode"))
    data = encode_audio(clip("insult"), fmt="mp3", codec="libmp3lame")
    t = ModalityTask(request_id="r", tenant_id="t", part="video:0#audio", modality="audio", lane="hi", created_at_ms=1,
                     deadline_ms=10**13, routed_at_ms=1, media=MediaItem(type="video", data_b64=base64.b64encode(data).decode()))
    prepared = stage.prepare(t)
    assert prepared.video_track and abs(prepared.audio.duration_s - decode_audio(data, max_duration_s=60).duration_s) < 1e-6
