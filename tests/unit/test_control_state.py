"""The control plane's pure core: messages, compare-and-swap, tombstones, views, canary slices and judge."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rtaudit.engine.control import ControlState, Rejected, encode
from rtaudit.engine.policy import PolicyBook, QuotaPolicy, TenantPolicy, Threshold
from rtaudit.engine.rollout import (
    STEPS,
    CanaryJudge,
    Hold,
    Promote,
    Rollback,
    disagree,
    in_canary,
    next_step,
    phase_for,
    serves_candidate,
    slice_pct,
)
from rtaudit.schemas.control import (
    BundleRef,
    CanaryTriggers,
    ControlMessage,
    ModelPayload,
    PolicyPayload,
    PriorityPayload,
    RolloutPayload,
)

SHA = "ab" * 32


def ref(version: str = "v2", stage: str = "text") -> BundleRef:
    return BundleRef(stage=stage, version=version, sha256=SHA, uri=f"file:///models/{stage}/{version}")  # type: ignore[arg-type]


def msg(subject: str, version: int, expects: int, payload, at_ms: int = 1_700_000_000_000) -> ControlMessage:  # type: ignore[no-untyped-def]
    return ControlMessage(subject=subject, version=version, expects=expects, author="test", at_ms=at_ms, payload=payload)


def apply(state: ControlState, m: ControlMessage):  # type: ignore[no-untyped-def]
    key, value = encode(m)
    return state.apply(state.offset, key, value)


def test_versions_advance_by_compare_and_swap() -> None:
    s = ControlState()
    assert apply(s, msg("model:text", 1, 0, ModelPayload(bundle=ref("v1")))).message is not None
    assert s.version("model:text") == 1 and s.model("text").bundle.version == "v1"  # type: ignore[union-attr]
    conflict = apply(s, msg("model:text", 3, 0, ModelPayload(bundle=ref("v3"))))
    assert isinstance(conflict, Rejected) and conflict.code == "cas_conflict" and conflict.in_force == 1
    assert "version 1 is in force" in conflict.message
    stale = apply(s, msg("model:text", 1, 1, ModelPayload(bundle=ref("v9"))))
    assert isinstance(stale, Rejected) and stale.code == "stale"
    assert apply(s, msg("model:text", 2, 1, ModelPayload(bundle=ref("v2")))).message is not None
    assert s.model("text").bundle.version == "v2" and s.rejected_total == 2  # type: ignore[union-attr]
    assert s.offset == 4


@pytest.mark.parametrize("key,value,why", [
    (b"model:text", b"{not json", "not a control message"),
    (b"model:text", b'{"subject": "model:text"}', "not a control message"),
    (b"policy:acme", encode(msg("model:text", 1, 0, ModelPayload(bundle=ref())))[1], "differs from the subject"),
    (b"bogus:x", None, "unknown control subject"),
    (None, encode(msg("model:text", 1, 0, ModelPayload(bundle=ref())))[1], "record has no key"),
])
def test_malformed_records_are_rejected_with_a_reason_and_never_raise(key: bytes | None, value: bytes | None, why: str) -> None:
    s = ControlState()
    r = s.apply(0, key, value)
    assert isinstance(r, Rejected) and r.code == "malformed" and why in r.message
    assert s.offset == 1 and list(s.rejections) == [r]


def test_payload_must_match_the_subject() -> None:
    with pytest.raises(ValidationError, match="needs a policy payload"):
        msg("policy:acme", 1, 0, ModelPayload(bundle=ref()))
    with pytest.raises(ValidationError, match="carries a image bundle"):
        msg("model:text", 1, 0, ModelPayload(bundle=ref(stage="image")))


def test_a_tombstone_clears_the_subject_and_keeps_old_versions_stale() -> None:
    s = ControlState()
    apply(s, msg("policy:acme", 4, 0, PolicyPayload(policy=TenantPolicy(lane="hi"))))
    assert s.apply(s.offset, b"policy:acme", None).message is None
    assert s.version("policy:acme") == 0 and s.policy_book(PolicyBook(), 0).for_tenant("acme").lane == "lo"
    replay = apply(s, msg("policy:acme", 4, 0, PolicyPayload(policy=TenantPolicy(lane="hi"))))
    assert isinstance(replay, Rejected) and replay.code == "stale"
    assert apply(s, msg("policy:acme", 5, 0, PolicyPayload(policy=TenantPolicy(lane="hi")))).message is not None


def test_an_offset_already_applied_is_ignored() -> None:
    s = ControlState()
    key, value = encode(msg("model:text", 1, 0, ModelPayload(bundle=ref())))
    s.apply(0, key, value)
    r = s.apply(0, key, value)
    assert isinstance(r, Rejected) and r.code == "stale" and s.version("model:text") == 1


def test_policy_and_priority_views_merge_over_the_toml_policies() -> None:
    base = PolicyBook(tenants={"acme": TenantPolicy(version="toml-1", slo_ms=5000)})
    s = ControlState()
    strict = {"hate": Threshold(review=0.1, block=0.2)}
    apply(s, msg("policy:acme", 1, 0, PolicyPayload(policy=TenantPolicy(thresholds=strict, slo_ms=3000))))
    apply(s, msg("priority:acme", 1, 0, PriorityPayload(lane="hi", quota=QuotaPolicy(rate_per_s=5), until_ms=2_000)))
    book = s.policy_book(base, now_ms=1_000)
    acme = book.for_tenant("acme")
    assert (acme.lane, acme.slo_ms, acme.quota.rate_per_s) == ("hi", 3000, 5)
    assert acme.thresholds == strict and acme.version == "control-1+priority-1"
    assert s.next_expiry_ms(1_000) == 2_000 and s.next_expiry_ms(2_000) is None
    expired = s.policy_book(base, now_ms=2_000).for_tenant("acme")
    assert (expired.lane, expired.version) == ("lo", "control-1")
    assert book.for_tenant("other") == base.default


def test_rollout_weights_are_validated() -> None:
    with pytest.raises(ValidationError):
        RolloutPayload(candidate=ref(), weight_pct=101)
    with pytest.raises(ValidationError):
        RolloutPayload(candidate=ref(), weight_pct=-1)
    with pytest.raises(ValidationError, match="must have weight_pct 0"):
        RolloutPayload(candidate=ref(), weight_pct=5, phase="rolled_back")
    zero = RolloutPayload(candidate=ref(), weight_pct=0.0)
    assert not any(serves_candidate(f"req-{i}", zero) for i in range(2000))  # 0 means nobody, never "unset"


@given(st.text(min_size=1, max_size=64))
def test_the_slice_is_stable_and_in_range(request_id: str) -> None:
    p = slice_pct(request_id)
    assert 0.0 <= p < 100.0 and p == slice_pct(request_id)
    # a request in the 5 % canary stays in it at 50 % and 100 %
    if in_canary(request_id, 5.0):
        assert in_canary(request_id, 50.0) and in_canary(request_id, 100.0)


def test_the_slice_matches_its_weight_within_sampling_error() -> None:
    n = 20_000
    for weight in STEPS:
        share = sum(in_canary(f"req-{i}", weight) for i in range(n)) / n * 100
        sigma = (weight * (100 - weight) / n) ** 0.5
        assert abs(share - weight) <= 4 * sigma + 1e-9, (weight, share)


def test_steps_and_phases() -> None:
    assert [next_step(0), next_step(5), next_step(50), next_step(100)] == [5.0, 50.0, 100.0, None]
    assert [phase_for(5), phase_for(50), phase_for(100)] == ["precheck", "rollout", "full"]


def judge(**kw) -> CanaryJudge:  # type: ignore[no-untyped-def]
    return CanaryJudge(CanaryTriggers(**{"min_items": 10, "promote_after_items": 100, "promote_after_s": 60, **kw}), 0.0)


def test_the_judge_rolls_back_on_errors_latency_disagreement_and_verification() -> None:
    j = judge()
    j.record_batch("candidate", 5, items=10, errors=1)
    assert isinstance(j.decide(1), Rollback) and "error rate 1/10" in j.decide(1).reason
    j = judge()
    for _ in range(20):
        j.record_batch("stable", 10, items=8)
        j.record_batch("candidate", 400, items=8)
    assert isinstance(j.decide(1), Rollback) and "margin" in j.decide(1).reason
    j = judge()
    j.record_shadow(items=1000, disagreements=2)
    assert isinstance(j.decide(1), Rollback) and "2/1000" in j.decide(1).reason
    j = judge()
    j.record_failure("sha256 mismatch")
    assert j.decide(0) == Rollback("verification failed: sha256 mismatch")


def test_the_judge_holds_then_promotes() -> None:
    j = judge()
    j.record_batch("stable", 10, items=8)
    j.record_batch("candidate", 12, items=8)
    assert isinstance(j.decide(1), Hold)  # below min_items: no latency verdict yet
    for _ in range(12):
        j.record_batch("candidate", 12, items=8)
    assert isinstance(j.decide(1), Promote)
    slow_start = judge(promote_after_items=10**6)
    slow_start.record_batch("candidate", 12, items=10)
    assert isinstance(slow_start.decide(59), Hold) and isinstance(slow_start.decide(60), Promote)


def test_disagreement_is_a_changed_decision_not_a_changed_number() -> None:
    assert not disagree({"hate": 0.7, "offensive": 0.1}, {"hate": 0.9, "offensive": 0.2})
    assert disagree({"hate": 0.7}, {"hate": 0.3})


def test_control_messages_round_trip_as_json() -> None:
    m = msg("rollout:text", 2, 1, RolloutPayload(candidate=ref(), stable=ref("v1"), weight_pct=5, shadow=True))
    key, value = encode(m)
    assert key == b"rollout:text" and ControlMessage.model_validate(orjson.loads(value)) == m


def test_an_invalid_weight_is_rejected_and_the_last_good_rollout_stays_in_force() -> None:
    s = ControlState()
    apply(s, msg("rollout:text", 1, 0, RolloutPayload(candidate=ref(), weight_pct=5)))
    good = orjson.loads(encode(msg("rollout:text", 2, 1, RolloutPayload(candidate=ref(), weight_pct=50)))[1])
    for bad_weight in (150, -5, "half", None):
        value = orjson.dumps({**good, "payload": {**good["payload"], "weight_pct": bad_weight}})
        r = s.apply(s.offset, b"rollout:text", value)
        assert isinstance(r, Rejected) and r.code == "malformed" and "weight_pct" in r.message
    assert s.rollout("text").weight_pct == 5 and s.version("rollout:text") == 1  # type: ignore[union-attr]


def test_a_version_must_be_an_integer_and_a_bundle_version_a_name() -> None:
    good = orjson.loads(encode(msg("model:text", 1, 0, ModelPayload(bundle=ref())))[1])
    r = ControlState().apply(0, b"model:text", orjson.dumps({**good, "version": "1"}))
    assert isinstance(r, Rejected) and r.code == "malformed" and "valid integer" in r.message
    for bad in ("..", "-x", ".hidden", "a b"):
        with pytest.raises(ValidationError):
            ref(bad)
