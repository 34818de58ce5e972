"""``rtaudit submit`` of audio, video and animated images: the kind and MIME come from the content,
not the file name; a verdict line shows the evidence's times."""

from __future__ import annotations

import base64

import pytest

from rtaudit.engine.media_kind import sniff
from rtaudit.schemas.messages import Evidence, Verdict
from rtaudit.workers.client import InputFileError, request_from_path
from rtaudit.tools.demo.corpus import verdict_line
from tests.unit.media_builders import clip, encode_audio, encode_video, text_frame
from tests.unit.test_animation import animation


@pytest.mark.parametrize("name, make, kind, mime", [
    ("talk.wav", lambda: encode_audio(clip("insult")), "audio", "audio/wav"),
    ("talk.txt", lambda: encode_audio(clip("insult"), fmt="mp3", codec="libmp3lame"), "audio", "audio/mpeg"),  # lies
    ("song.mp4", lambda: encode_audio(clip("insult"), fmt="ipod", codec="aac"), "audio", "audio/mp4"),  # audio-only MP4
    ("clip.mp3", lambda: encode_video(lambda t: text_frame("hi"), seconds=1), "video", "video/mp4"),  # lies
    ("anim.bin", lambda: animation("GIF"), "image", "image/gif"),
], ids=["wav", "mp3-named-txt", "m4a-named-mp4", "mp4-named-mp3", "gif-named-bin"])
def test_submit_judges_media_by_content(tmp_path, name, make, kind, mime):
    data = make()
    path = tmp_path / name
    path.write_bytes(data)
    (request,) = request_from_path(path, "t")
    item = request.media[0]
    assert (item.type, item.mime, item.name) == (kind, mime, name)
    assert base64.b64decode(item.data_b64) == data
    assert sniff(data) == (kind, mime)


def test_binary_that_is_no_media_is_refused_with_the_reason(tmp_path):
    path = tmp_path / "blob.dat"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InputFileError, match="not UTF-8 text .* not an image, audio or video"):
        request_from_path(path, "t")


def test_text_stays_text_whatever_its_name(tmp_path):
    path = tmp_path / "notes.mp3"
    path.write_text("see you at noon")
    assert request_from_path(path, "t")[0].text == "see you at noon"


def test_verdict_line_shows_when():
    ev = [Evidence(part="video:0#frame:53", category="offensive", score=0.99, text="idiot", time_s=(5.3, 5.4), frame=53)]
    v = Verdict(request_id="r", tenant_id="t", decision="block", complete=True, categories={"offensive": 0.99},
                flagged=["offensive"], evidence=ev, policy_version="p", created_at_ms=1, deadline_ms=2,
                decided_at_ms=2, latency_ms=1)
    assert "offensive:idiot(0.99)@5.30-5.40s#53" in verdict_line(v)
