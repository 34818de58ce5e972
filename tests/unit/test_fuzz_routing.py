"""Routing findings of ``rtaudit fuzz``: a request valid per the contract never makes the
router build an invalid task (that raised a pydantic ValidationError, not an AuditError, and
crashed the router on every replay of the record)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.policy import PolicyBook, TenantPolicy
from rtaudit.engine.routing import MAX_DEADLINE_AHEAD_MS, Router
from rtaudit.schemas.codec import decode, encode
from rtaudit.schemas.messages import AuditRequest, MediaItem

NOW_MS = 1_700_000_000_000
ROUTER = Router(policies=PolicyBook(default=TenantPolicy(slo_ms=3000)), media_policy=MediaPolicy())


@pytest.mark.parametrize("fields, deadline", [
    # a producer clock ahead counts as the router's clock (Router.created_ms): now + the tenant SLO
    (dict(created_at_ms=10**14), NOW_MS + 3000),
    (dict(created_at_ms=10**14, slo_ms=3_600_000), NOW_MS + MAX_DEADLINE_AHEAD_MS),
    (dict(created_at_ms=NOW_MS, deadline_ms=10**14), NOW_MS + MAX_DEADLINE_AHEAD_MS),  # thousands of years ahead
    (dict(created_at_ms=NOW_MS + 10**9), NOW_MS + 3000),
])
def test_far_deadlines_are_capped_an_hour_after_routing(fields, deadline):
    req = AuditRequest(request_id="r", tenant_id="t", text="hi", media=[MediaItem(type="image", data_b64="AA==")], **fields)
    plan = ROUTER.plan(req, NOW_MS)
    assert plan.manifest.deadline_ms == deadline <= NOW_MS + MAX_DEADLINE_AHEAD_MS
    assert {t.deadline_ms for t in plan.tasks} == {deadline}


def test_near_deadlines_are_kept():
    req = AuditRequest(request_id="r", tenant_id="t", text="hi", created_at_ms=NOW_MS, slo_ms=3_600_000)
    assert ROUTER.plan(req, NOW_MS).manifest.deadline_ms == NOW_MS + 3_600_000
    past = AuditRequest(request_id="r", tenant_id="t", text="hi", created_at_ms=0)
    assert ROUTER.plan(past, NOW_MS).manifest.deadline_ms == 3000


REQUEST_IDS = st.from_regex(r"\A[A-Za-z0-9._:\-]{1,128}\Z")
TENANT_IDS = st.from_regex(r"\A[A-Za-z0-9._\-]{1,64}\Z")
EPOCH_MS = st.integers(0, 10**14)
MEDIA = st.builds(MediaItem, type=st.sampled_from(["image", "audio", "video"]), data_b64=st.just("AA=="))


@st.composite
def requests(draw: st.DrawFn) -> AuditRequest:
    media = draw(st.lists(MEDIA, max_size=16))
    text = draw(st.one_of(st.none(), st.text(max_size=200))) if media else draw(st.text(min_size=1, max_size=200))
    return AuditRequest(
        request_id=draw(REQUEST_IDS), tenant_id=draw(TENANT_IDS), created_at_ms=draw(EPOCH_MS),
        priority=draw(st.one_of(st.none(), st.sampled_from(["high", "normal", "low"]))),
        slo_ms=draw(st.one_of(st.none(), st.integers(1, 3_600_000))), deadline_ms=draw(st.one_of(st.none(), EPOCH_MS)),
        text=text, media=media,
    )


@settings(max_examples=300, deadline=None)
@given(requests(), st.integers(0, 10**14 - MAX_DEADLINE_AHEAD_MS), st.sampled_from([None, "hi", "lo"]))  # a router clock
# an hour inside the contract's time range: beyond it, routed_at_ms + the cap leaves the range
def test_every_plan_of_a_valid_request_is_valid_per_the_contracts(req: AuditRequest, now_ms: int, lane) -> None:
    """The router builds tasks and manifests without re-validating them (``model_construct``);
    what it builds must decode at the consumer exactly as built."""
    plan = ROUTER.plan(req, now_ms, lane)
    for record in (*plan.tasks, plan.manifest):
        assert decode(encode(record), type(record)) == record
