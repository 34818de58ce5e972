"""Routing findings of ``rtaudit fuzz``: a request valid per the contract never makes the
router build an invalid task (that raised a pydantic ValidationError, not an AuditError, and
crashed the router on every replay of the record)."""

from __future__ import annotations

import pytest

from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.policy import PolicyBook, TenantPolicy
from rtaudit.engine.routing import MAX_DEADLINE_AHEAD_MS, Router
from rtaudit.schemas.messages import AuditRequest, MediaItem

NOW_MS = 1_700_000_000_000
ROUTER = Router(policies=PolicyBook(default=TenantPolicy(slo_ms=3000)), media_policy=MediaPolicy())


@pytest.mark.parametrize("fields", [
    dict(created_at_ms=10**14),                          # the contract's largest time + the tenant SLO
    dict(created_at_ms=10**14, slo_ms=3_600_000),
    dict(created_at_ms=NOW_MS, deadline_ms=10**14),      # a deadline thousands of years ahead
    dict(created_at_ms=NOW_MS + 10**9),                  # a producer clock far ahead
])
def test_far_deadlines_are_capped_an_hour_after_routing(fields):
    req = AuditRequest(request_id="r", tenant_id="t", text="hi", media=[MediaItem(type="image", data_b64="")], **fields)
    plan = ROUTER.plan(req, NOW_MS)
    assert plan.manifest.deadline_ms == NOW_MS + MAX_DEADLINE_AHEAD_MS
    assert {t.deadline_ms for t in plan.tasks} == {NOW_MS + MAX_DEADLINE_AHEAD_MS}


def test_near_deadlines_are_kept():
    req = AuditRequest(request_id="r", tenant_id="t", text="hi", created_at_ms=NOW_MS, slo_ms=3_600_000)
    assert ROUTER.plan(req, NOW_MS).manifest.deadline_ms == NOW_MS + 3_600_000
    past = AuditRequest(request_id="r", tenant_id="t", text="hi", created_at_ms=0)
    assert ROUTER.plan(past, NOW_MS).manifest.deadline_ms == 3000
