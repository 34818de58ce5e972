from __future__ import annotations

import pytest

from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.policy import PolicyBook, TenantPolicy
from rtaudit.engine.routing import Router
from rtaudit.schemas.errors import URINotAllowed
from rtaudit.schemas.messages import MediaItem

from .builders import CREATED_MS, audit_request, inline_media

NOW_MS = CREATED_MS + 42
BOOK = PolicyBook(
    default=TenantPolicy(slo_ms=10_000, lane="lo"),
    tenants={"vip": TenantPolicy(slo_ms=2_000, lane="hi")},
)


def router(**fields) -> Router:
    return Router(policies=BOOK, media_policy=MediaPolicy(), **fields)


def mixed_request(**fields):
    media = [inline_media(b"img0"), inline_media(b"img1"), inline_media(b"wav", type_="audio")]
    return audit_request(text="some words", media=media, **fields)


def test_plan_fans_out_text_images_and_audio():
    plan = router().plan(mixed_request(), NOW_MS)
    assert [(t.modality, t.part) for t in plan.tasks] == [
        ("text", "text:0"), ("image", "image:0"), ("image", "image:1"), ("audio", "audio:2"),
    ]
    assert plan.manifest.expected == [
        "text/text:0", "image/image:0", "ocr/image:0", "image/image:1", "ocr/image:1", "audio/audio:2",
    ]
    assert plan.manifest.skipped == []
    assert plan.manifest.rejection is None


def test_plan_skips_a_modality_the_fleet_does_not_serve():
    plan = router(stages={"text": ("text",), "image": ("image", "ocr")}).plan(mixed_request(), NOW_MS)
    assert [(s.part, s.reason) for s in plan.manifest.skipped] == [("audio:2", "no audio worker in this fleet")]


def test_plan_tasks_carry_their_content_and_timing():
    req = mixed_request()
    plan = router().plan(req, NOW_MS)
    text_task, first_image, second_image, audio = plan.tasks
    assert audio.media == req.media[2]
    assert text_task.text == "some words" and text_task.media is None
    assert first_image.media == req.media[0] and first_image.text is None
    assert second_image.media == req.media[1]
    for t in plan.tasks:
        assert (t.request_id, t.tenant_id) == (req.request_id, req.tenant_id)
        assert t.created_at_ms == CREATED_MS
        assert t.routed_at_ms == NOW_MS
        assert t.deadline_ms == plan.manifest.deadline_ms == CREATED_MS + 10_000


def test_plan_without_a_text_worker_skips_the_text():
    plan = router(stages={"image": ("image",)}).plan(mixed_request(), NOW_MS)
    assert plan.manifest.expected == ["image/image:0", "image/image:1"]
    assert [s.part for s in plan.manifest.skipped] == ["text:0", "audio:2"]


def test_plan_of_only_unsupported_media_expects_nothing():
    plan = router(stages={"text": ("text",), "image": ("image", "ocr")}).plan(audit_request(text=None, media=[inline_media(b"v", type_="video")]), NOW_MS)
    assert plan.tasks == []
    assert plan.manifest.expected == []
    assert [s.part for s in plan.manifest.skipped] == ["video:0"]


@pytest.mark.parametrize(
    "tenant, priority, lane",
    [
        ("acme", "high", "hi"),
        ("acme", "low", "lo"),
        ("acme", None, "lo"),
        ("acme", "normal", "lo"),
        ("vip", None, "hi"),
        ("vip", "normal", "hi"),
        ("vip", "low", "lo"),
    ],
)
def test_lane_follows_priority_else_tenant(tenant, priority, lane):
    req = audit_request(tenant_id=tenant, priority=priority)
    assert router().lane(req) == lane
    assert {t.lane for t in router().plan(req, NOW_MS).tasks} == {lane}


@pytest.mark.parametrize(
    "tenant, fields, deadline",
    [
        ("acme", dict(deadline_ms=CREATED_MS + 5, slo_ms=700), CREATED_MS + 5),
        ("acme", dict(slo_ms=700), CREATED_MS + 700),
        ("acme", dict(), CREATED_MS + 10_000),
        ("vip", dict(), CREATED_MS + 2_000),
        ("vip", dict(slo_ms=700), CREATED_MS + 700),
    ],
)
def test_deadline_precedence(tenant, fields, deadline):
    req = audit_request(tenant_id=tenant, **fields)
    assert router().deadline_ms(req, NOW_MS) == deadline
    assert router().plan(req, NOW_MS).manifest.deadline_ms == deadline


def test_plan_rejects_a_disallowed_uri(tmp_path):
    allowed = Router(policies=BOOK, media_policy=MediaPolicy(allowed_file_roots=(tmp_path,)))
    good = MediaItem(type="image", uri=(tmp_path / "a.png").as_uri())
    bad = MediaItem(type="image", uri="file:///etc/passwd")
    assert allowed.plan(audit_request(media=[good]), NOW_MS).manifest.expected[-1] == "ocr/image:0"
    with pytest.raises(URINotAllowed):
        allowed.plan(audit_request(media=[good, bad]), NOW_MS)
    with pytest.raises(URINotAllowed):
        allowed.plan(audit_request(media=[MediaItem(type="audio", uri="https://elsewhere.example/a.wav")]), NOW_MS)


def test_a_producer_clock_ahead_buys_no_time_and_no_negative_latency():
    """A request stamped 30 s (or 11 days) in the future is counted as made when the router read it: its deadline
    is that time plus the SLO, and its manifest (the verdict's ``created_at_ms`` and latency) says so."""
    for ahead in (30_000, 1_000_000_000):
        req = audit_request(tenant_id="acme", created_at_ms=NOW_MS + ahead)
        assert router().deadline_ms(req, NOW_MS) == NOW_MS + 10_000
        plan = router().plan(req, NOW_MS)
        assert plan.manifest.created_at_ms == NOW_MS and plan.manifest.deadline_ms == NOW_MS + 10_000
        assert all(t.created_at_ms == NOW_MS for t in plan.tasks)
    behind = audit_request(tenant_id="acme", created_at_ms=NOW_MS - 400)
    assert router().plan(behind, NOW_MS).manifest.created_at_ms == NOW_MS - 400  # a clock behind is kept
