from __future__ import annotations


import pytest

from rtaudit.engine.fusion import Fusion, FusionState
from rtaudit.engine.policy import PolicyBook, TenantPolicy

from .builders import CREATED_MS, DEADLINE_MS, REQUEST_ID, TENANT, evidence, manifest, partial, tick

GRACE_MS = 250
RETENTION_MS = 60_000
TEXT, IMAGE, OCR = "text/text:0", "image/image:1", "ocr/image:1"


def fusion(**policy_fields) -> Fusion:
    return Fusion(policies=PolicyBook(default=TenantPolicy(**policy_fields)), grace_ms=GRACE_MS, retention_ms=RETENTION_MS)


def run(fusion_: Fusion, records, start_ms: int = CREATED_MS + 10, state: FusionState | None = None):
    """Apply ``records`` one ms apart; returns the final state and every verdict emitted."""
    verdicts = []
    for n, record in enumerate(records):
        state, verdict = fusion_.apply(state, record, start_ms + n)
        if verdict is not None:
            verdicts.append(verdict)
    return state, verdicts


def test_verdict_when_the_last_expected_partial_arrives():
    f = fusion()
    state, verdict = f.apply(None, manifest(TEXT, IMAGE), CREATED_MS + 1)
    assert verdict is None
    state, verdict = f.apply(state, partial(TEXT, scores={"profanity": 0.1}), CREATED_MS + 2)
    assert verdict is None
    state, verdict = f.apply(state, partial(IMAGE, scores={"sexual": 0.0}), CREATED_MS + 3)
    assert verdict is not None
    assert (verdict.request_id, verdict.tenant_id) == (REQUEST_ID, TENANT)
    assert verdict.decision == "allow" and verdict.complete is True
    assert verdict.parts == {TEXT: "ok", IMAGE: "ok"}
    assert verdict.reasons == []
    assert verdict.model_versions == {"text": "text-model@1", "image": "image-model@1"}
    assert state.decided_at_ms == CREATED_MS + 3


def test_partials_before_the_manifest_wait_for_it():
    state, verdicts = run(fusion(), [partial(TEXT), partial(IMAGE)])
    assert verdicts == []
    assert state.deadline_ms == DEADLINE_MS
    state, verdicts = run(fusion(), [manifest(TEXT, IMAGE)], state=state)
    assert len(verdicts) == 1 and verdicts[0].complete


def test_partial_not_in_the_manifest_does_not_count():
    _, verdicts = run(fusion(), [manifest(TEXT, IMAGE), partial(OCR), partial(TEXT)])
    assert verdicts == []


@pytest.mark.parametrize("late", [partial(TEXT, scores={"profanity": 0.99}), partial(OCR), manifest(TEXT)])
def test_no_second_verdict_for_duplicates_or_late_records(late):
    f = fusion()
    state, verdicts = run(f, [manifest(TEXT), partial(TEXT)])
    decided_at = state.decided_at_ms
    state, verdict = f.apply(state, late, decided_at + 5)
    assert verdict is None
    assert state.decided_at_ms == decided_at
    assert len(verdicts) == 1 and verdicts[0].decision == "allow"


def test_ok_partial_replaces_an_earlier_error():
    failed = partial(TEXT, status="error", error_code="inference_failed", error="boom")
    state, verdicts = run(fusion(), [manifest(TEXT, IMAGE), failed, partial(TEXT, scores={"profanity": 0.7})])
    assert state.partials[TEXT].status == "ok"
    state, verdicts = run(fusion(), [partial(IMAGE)], state=state)
    assert verdicts[0].complete is True
    assert verdicts[0].categories == {"profanity": 0.7}


def test_error_duplicate_does_not_replace_an_ok_partial():
    failed = partial(TEXT, status="error", error_code="inference_failed", error="boom")
    state, _ = run(fusion(), [manifest(TEXT, IMAGE), partial(TEXT, scores={"profanity": 0.7}), failed])
    assert state.partials[TEXT].status == "ok"


def test_deadline_tick_before_deadline_plus_grace_does_nothing():
    f = fusion()
    state, _ = run(f, [manifest(TEXT, IMAGE), partial(TEXT)])
    state, verdict = f.apply(state, tick("deadline", DEADLINE_MS), DEADLINE_MS + GRACE_MS - 1)
    assert verdict is None
    assert state.decided_at_ms is None


@pytest.mark.parametrize("on_incomplete", ["allow", "review", "block"])
def test_deadline_tick_after_grace_gives_an_incomplete_verdict(on_incomplete):
    f = fusion(on_incomplete=on_incomplete)
    state, _ = run(f, [manifest(TEXT, IMAGE), partial(TEXT, scores={"profanity": 0.1})])
    now = DEADLINE_MS + GRACE_MS
    state, verdict = f.apply(state, tick("deadline", now), now)
    assert verdict.complete is False
    assert verdict.decision == on_incomplete
    assert verdict.parts == {TEXT: "ok", IMAGE: "missing"}
    assert f"{IMAGE}: no result by the deadline" in verdict.reasons
    assert f"incomplete: policy on_incomplete={on_incomplete}" in verdict.reasons
    assert verdict.decided_at_ms == now and state.decided_at_ms == now


def test_incomplete_verdict_still_blocks_on_high_scores_when_fail_open():
    f = fusion(on_incomplete="allow")
    state, _ = run(f, [manifest(TEXT, IMAGE), partial(TEXT, scores={"profanity": 0.95})])
    _, verdict = f.apply(state, tick("deadline", DEADLINE_MS + GRACE_MS), DEADLINE_MS + GRACE_MS)
    assert verdict.decision == "block"


def test_error_and_expired_partials_make_an_incomplete_verdict_with_reasons():
    failed = partial(TEXT, status="error", error_code="media_undecodable", error="not an image", scores={"profanity": 0.99})
    _, verdicts = run(fusion(on_incomplete="allow"), [manifest(TEXT, IMAGE), failed, partial(IMAGE, status="expired")])
    verdict, = verdicts
    assert verdict.complete is False
    assert verdict.parts == {TEXT: "error", IMAGE: "expired"}
    assert f"{TEXT}: media_undecodable: not an image" in verdict.reasons
    assert f"{IMAGE}: expired before inference (deadline passed)" in verdict.reasons
    assert verdict.categories == {}, "scores of failed parts must not count"
    assert verdict.decision == "allow"


def test_skipped_parts_make_the_verdict_incomplete():
    _, verdicts = run(fusion(), [manifest(TEXT, skipped=[("audio:1", "no audio worker in this fleet")]), partial(TEXT)])
    verdict, = verdicts
    assert verdict.complete is False
    assert verdict.parts == {TEXT: "ok", "audio:1": "skipped"}
    assert "audio:1: skipped: no audio worker in this fleet" in verdict.reasons
    assert verdict.decision == "review"


def test_rejection_manifest_gives_an_immediate_verdict():
    rejected = manifest(rejection="host 'evil' is not allowed", rejection_code="uri_not_allowed")
    state, verdict = fusion(on_rejected="block").apply(None, rejected, CREATED_MS + 7)
    assert verdict.decision == "block"
    assert verdict.complete is False
    assert verdict.reasons[0] == "rejected: uri_not_allowed: host 'evil' is not allowed"
    assert state.decided_at_ms == CREATED_MS + 7


def test_missing_manifest_is_reported_at_the_deadline():
    f = fusion(on_incomplete="review")
    state, verdicts = run(f, [partial(TEXT, scores={"profanity": 0.2}), partial(IMAGE)])
    assert verdicts == []
    now = DEADLINE_MS + GRACE_MS
    _, verdict = f.apply(state, tick("deadline", now), now)
    assert verdict.complete is False
    assert verdict.decision == "review"
    assert any("manifest missing" in r for r in verdict.reasons)
    assert verdict.parts == {TEXT: "ok", IMAGE: "ok"}
    assert verdict.categories == {"profanity": 0.2}


def test_tick_for_an_unknown_request_does_nothing():
    assert fusion().apply(None, tick("deadline", DEADLINE_MS + GRACE_MS), DEADLINE_MS + GRACE_MS) == (None, None)
    assert fusion().apply(None, tick("expire", 10**12), 10**12) == (None, None)


def test_expire_tick_drops_a_decided_state_only_after_retention():
    f = fusion()
    state, _ = run(f, [manifest(TEXT), partial(TEXT)])
    decided = state.decided_at_ms
    kept, verdict = f.apply(state, tick("expire", decided), decided + RETENTION_MS - 1)
    assert kept is state and verdict is None
    assert f.apply(state, tick("expire", decided), decided + RETENTION_MS) == (None, None)


def test_expire_tick_keeps_an_undecided_state():
    f = fusion()
    state, _ = run(f, [manifest(TEXT, IMAGE)])
    kept, verdict = f.apply(state, tick("expire", 10**12), 10**12)
    assert kept is state and verdict is None


def test_categories_are_the_max_over_partials():
    records = [
        manifest(TEXT, IMAGE, OCR),
        partial(TEXT, scores={"profanity": 0.3}),
        partial(OCR, scores={"profanity": 0.71234}),
        partial(IMAGE, scores={"sexual": 0.2, "suggestive": 0.05}),
    ]
    _, (verdict,) = run(fusion(), records)
    assert verdict.categories == {"profanity": 0.7123, "sexual": 0.2, "suggestive": 0.05}
    assert verdict.flagged == ["profanity"]
    assert verdict.decision == "review"
    assert "profanity 0.71 >= review threshold 0.50" in verdict.reasons


def test_evidence_lists_flagged_categories_first():
    text_evidence = [evidence("profanity", 0.95, text="darn"), evidence("profanity", 0.6, text="heck")]
    image_evidence = [
        evidence("neutral", 0.8, part="image:1", label="FACE_FEMALE"),
        evidence("suggestive", 0.3, part="image:1"),
        evidence("sexual", 0.5, part="image:1"),
    ]
    ocr_evidence = [evidence("ocr", 0.99, part="image:1", text="a line")]
    records = [
        manifest(OCR, IMAGE, TEXT),
        partial(OCR, scores={"profanity": 0.0}, evidence=ocr_evidence),
        partial(IMAGE, scores={"sexual": 0.5, "suggestive": 0.3}, evidence=image_evidence),
        partial(TEXT, scores={"profanity": 0.95}, evidence=text_evidence),
    ]
    _, (verdict,) = run(fusion(), records)
    assert verdict.flagged == ["profanity", "sexual"]
    assert [(e.category, e.score) for e in verdict.evidence] == [
        ("profanity", 0.95), ("profanity", 0.6), ("sexual", 0.5), ("suggestive", 0.3), ("ocr", 0.99), ("neutral", 0.8),
    ]
    assert verdict.decision == "block"


def test_evidence_is_capped():
    many = [evidence("profanity", 0.9, text=str(n)) for n in range(10)]
    f = Fusion(policies=PolicyBook(), max_evidence=3)
    _, (verdict,) = run(f, [manifest(TEXT), partial(TEXT, scores={"profanity": 0.9}, evidence=many)])
    assert len(verdict.evidence) == 3


def test_latency_runs_from_created_to_decided():
    f = fusion()
    state, _ = run(f, [manifest(TEXT)])
    _, verdict = f.apply(state, partial(TEXT), CREATED_MS + 1_234)
    assert verdict.created_at_ms == CREATED_MS
    assert verdict.decided_at_ms == CREATED_MS + 1_234
    assert verdict.latency_ms == 1_234
    assert verdict.deadline_ms == DEADLINE_MS


def test_verdict_records_the_tenant_policy_version():
    book = PolicyBook(tenants={TENANT: TenantPolicy(version="acme-7")})
    _, (verdict,) = run(Fusion(policies=book), [manifest(TEXT), partial(TEXT)])
    assert verdict.policy_version == "acme-7"


def test_the_router_s_rejection_verdict_is_the_one_fusion_would_give() -> None:
    """:func:`rejection_verdict` (the router answers a rejected request itself) decides as fusion does on
    a rejection manifest: same decision, reasons, parts and policy version."""
    from rtaudit.engine.fusion import rejection_verdict
    from rtaudit.engine.policy import QuotaPolicy
    from rtaudit.schemas.messages import Manifest

    book = PolicyBook(tenants={"t": TenantPolicy(on_rejected="block", quota=QuotaPolicy(rate_per_s=1, on_throttled="allow"))})
    for code, decision in (("throttled", "allow"), ("schema_invalid", "block")):
        m = Manifest(request_id=f"r-{code}", tenant_id="t", created_at_ms=1_000, deadline_ms=1_500,
                     rejection="why", rejection_code=code)
        own = rejection_verdict(book, m, now_ms=1_200)
        _, via_fusion = Fusion(book).apply(None, m, now_ms=1_200)
        assert via_fusion is not None
        assert own == via_fusion and own.decision == decision
        assert own.reasons[0] == f"rejected: {code}: why" and not own.complete
    with pytest.raises(ValueError, match="not a rejection"):
        rejection_verdict(book, Manifest(request_id="r", tenant_id="t", created_at_ms=1, deadline_ms=2, expected=["text/0"]), 2)


def test_a_request_whose_deadline_passed_before_it_arrived_says_so():
    f = fusion()
    late_by = 5_000
    state, _ = run(f, [manifest(TEXT)], start_ms=DEADLINE_MS + late_by)
    now = DEADLINE_MS + late_by + GRACE_MS
    _, verdict = f.apply(state, tick("deadline", now), now)
    assert verdict.reasons[0] == f"deadline passed before the request reached fusion ({late_by} ms late)"
    assert f"{TEXT}: no result by the deadline" in verdict.reasons


def test_an_on_time_request_carries_no_late_arrival_reason():
    f = fusion()
    state, _ = run(f, [manifest(TEXT, IMAGE), partial(TEXT)])
    now = DEADLINE_MS + GRACE_MS
    _, verdict = f.apply(state, tick("deadline", now), now)
    assert not [r for r in verdict.reasons if "before the request reached fusion" in r]
