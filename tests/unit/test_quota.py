"""Per-tenant quotas: the token bucket on a fake clock (ms passed in), the tenant registry, the
policy keys, and the router's hook (lower lane, throttled verdict without a DLQ record)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtaudit.engine.policy import PolicyBook, QuotaPolicy, TenantPolicy
from rtaudit.engine.quota import QuotaLimit, TenantQuotas, TokenBucket
from rtaudit.schemas.messages import Verdict
from rtaudit.topics.catalog import DLQ, SCORES, VERDICTS
from tests.unit.builders import FakeMessage
from rtaudit.workers.router import RouterHandler
from rtaudit.workers.settings import load_settings

from .builders import audit_request
from .roles import RoleUnderTest

T0 = 1_700_000_000_000.0


# -- the bucket ---------------------------------------------------------------------------


def test_burst_then_rate():
    b = TokenBucket.full(QuotaLimit(rate_per_s=10, burst=5), T0)
    assert [b.try_take(T0) for _ in range(6)] == [True] * 5 + [False]
    assert not b.try_take(T0 + 99)  # 0.99 token earned
    assert b.try_take(T0 + 100)  # one token per 100 ms
    assert not b.try_take(T0 + 100)
    assert b.try_take(T0 + 10_000) and b.tokens == pytest.approx(4)  # refill capped at the burst


def test_time_never_moves_a_bucket_backwards():
    b = TokenBucket.full(QuotaLimit(rate_per_s=1, burst=1), T0)
    assert b.try_take(T0 + 5_000)
    assert not b.try_take(T0)  # an earlier timestamp refills nothing...
    assert not b.try_take(T0 + 5_500)  # ...and does not rewind the clock
    assert b.try_take(T0 + 6_000)


def test_wait_ms_and_full_at():
    b = TokenBucket.full(QuotaLimit(rate_per_s=4, burst=2), T0)
    assert b.wait_ms(T0) == 0
    b.try_take(T0)
    b.try_take(T0)
    assert b.wait_ms(T0) == pytest.approx(250)
    assert b.wait_ms(T0, n=3) == math.inf
    assert b.full_at_ms() == pytest.approx(T0 + 500)


def test_reconfigure_keeps_earned_tokens_up_to_the_new_burst():
    b = TokenBucket.full(QuotaLimit(rate_per_s=10, burst=10), T0)
    for _ in range(10):
        b.try_take(T0)
    b.reconfigure(QuotaLimit(rate_per_s=100, burst=3), T0 + 200)  # 2 earned at the old rate
    assert b.tokens == pytest.approx(2)
    assert b.try_take(T0 + 200) and b.try_take(T0 + 200) and not b.try_take(T0 + 200)
    assert b.try_take(T0 + 210)  # the new rate: one per 10 ms
    b.reconfigure(QuotaLimit(rate_per_s=100, burst=1), T0 + 10_000)  # lowered burst applies at once
    assert b.tokens == 1


def test_limit_validation():
    with pytest.raises(ValueError, match="rate_per_s"):
        QuotaLimit(rate_per_s=-1)
    with pytest.raises(ValueError, match="burst"):
        QuotaLimit(rate_per_s=1, burst=0.5)
    with pytest.raises(ValueError, match="rate_per_s"):
        QuotaLimit(rate_per_s=float("nan"))
    assert TokenBucket.full(QuotaLimit(), T0).try_take(T0)  # rate 0 = unlimited


@given(
    rate=st.floats(0.5, 5_000), burst=st.floats(1, 500),
    gaps=st.lists(st.floats(0, 50), min_size=1, max_size=300),
)
@settings(max_examples=200, deadline=None)
def test_admitted_never_exceeds_burst_plus_rate_times_elapsed(rate, burst, gaps):
    """Over any run, admitted <= burst + rate·elapsed (the token-bucket contract), and a
    caller sending slower than the rate, after the first burst, is never refused."""
    b = TokenBucket.full(QuotaLimit(rate_per_s=rate, burst=burst), T0)
    t, admitted = T0, 0
    for gap in gaps:
        t += gap
        admitted += b.try_take(t)
        assert admitted <= math.floor(burst + rate * (t - T0) / 1000.0 + 1e-6)
    slow = TokenBucket.full(QuotaLimit(rate_per_s=rate, burst=burst), T0)
    t = T0
    for _ in range(50):
        assert slow.try_take(t)
        t += 1000.0 / rate * 1.001


# -- the registry -------------------------------------------------------------------------


def test_tenants_have_separate_buckets_and_idle_ones_are_pruned():
    q = TenantQuotas()
    lim = QuotaLimit(rate_per_s=1, burst=2)
    assert [q.admit("flood", lim, T0) for _ in range(3)] == [True, True, False]
    assert q.admit("quiet", lim, T0)  # its own bucket
    assert q.prune(T0 + 999) == 0
    assert q.prune(T0 + 1_000) == 1 and list(q.buckets) == ["flood"]  # quiet held 1 of 2: full after 1 s
    assert q.prune(T0 + 2_000) == 1 and not q.buckets  # flood held 0: full after 2 s
    assert q.admit("flood", QuotaLimit(), T0) and "flood" not in q.buckets  # unlimited: no bucket


def test_a_changed_limit_replaces_the_bucket_parameters_on_the_next_request():
    q = TenantQuotas()
    assert q.admit("t", QuotaLimit(rate_per_s=1, burst=1), T0)
    assert not q.admit("t", QuotaLimit(rate_per_s=1, burst=1), T0 + 10)
    assert not q.admit("t", QuotaLimit(rate_per_s=1000, burst=1), T0 + 20)  # 0.02 earned at the old rate...
    assert q.admit("t", QuotaLimit(rate_per_s=1000, burst=1), T0 + 21)  # ...then 1 per ms at the new one
    q.reconfigure("t", QuotaLimit(rate_per_s=1, burst=1), T0 + 20)
    assert q.buckets["t"].limit.rate_per_s == 1


def test_quota_policy_defaults_and_validation():
    assert QuotaPolicy().limit.unlimited and QuotaPolicy().over_quota == "lower_lane"
    assert QuotaPolicy(rate_per_s=50).limit == QuotaLimit(50, 50)  # burst: one second's worth
    assert QuotaPolicy(rate_per_s=0.5).limit == QuotaLimit(0.5, 1)
    with pytest.raises(ValueError):
        QuotaPolicy(rate_per_s=10, over_quota="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        QuotaPolicy(rate_per_s=10, burst=0.5)
    assert QuotaPolicy().max_delay_ms == 2000 and QuotaPolicy(rate_per_s=10, over_quota="delay").over_quota == "delay"
    for bad in (0, 30_001):
        with pytest.raises(ValueError, match="max_delay_ms"):
            QuotaPolicy(rate_per_s=10, over_quota="delay", max_delay_ms=bad)


def test_settings_file_quota_keys(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("RTAUDIT_TENANTS__ACME__QUOTA__RATE_PER_S", "7")
    s = load_settings()  # ./rtaudit.toml: acme throttles; the environment sets its rate
    acme = s.policies.for_tenant("acme").quota
    assert acme.rate_per_s == 7 and acme.over_quota == "throttle" and acme.on_throttled == "allow"
    assert s.policies.for_tenant("someone").quota.limit.unlimited


# -- the router's hook --------------------------------------------------------------------


def router_loop(policy: TenantPolicy) -> RoleUnderTest:
    settings = load_settings()
    book = PolicyBook(tenants={"flood": policy})  # no control topic: the policies given here stay
    return RoleUnderTest(RouterHandler(lambda: book, settings.media.policy()), "router")


def send(loop: RoleUnderTest, n: int, ts_ms: int, tenant: str = "flood") -> None:
    msgs = []
    for i in range(n):
        rid = f"{tenant}-{ts_ms}-{i}"
        req = audit_request(request_id=rid, tenant_id=tenant, priority="high")
        msgs.append(FakeMessage(req.model_dump_json().encode(), rid.encode(), i, ts_ms))
    loop.handle(msgs)  # type: ignore[arg-type]


def test_router_lower_lane_beyond_the_quota(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    loop = router_loop(TenantPolicy(quota=QuotaPolicy(rate_per_s=2, burst=2, over_quota="lower_lane")))
    send(loop, 4, ts_ms=1_700_000_000_000)
    lanes = [t for t, _, _ in loop.outputs if t.startswith("audit.text.")]
    assert lanes == ["audit.text.hi", "audit.text.hi", "audit.text.lo", "audit.text.lo"]
    manifests = [v for t, _, v in loop.outputs if t == SCORES]
    assert [m["lane"] for m in manifests] == ["hi", "hi", "lo", "lo"]
    loop.outputs.clear()
    send(loop, 2, ts_ms=1_700_000_000_500)  # one token earned in 500 ms at 2/s
    assert [t for t, _, _ in loop.outputs if t.startswith("audit.text.")] == ["audit.text.hi", "audit.text.lo"]
    loop.outputs.clear()
    send(loop, 3, ts_ms=1_700_000_000_500, tenant="quiet")  # another tenant: the default policy, no quota
    assert [t for t, _, _ in loop.outputs if t.startswith("audit.text.")] == ["audit.text.hi"] * 3


def test_router_meters_at_the_record_timestamp_capped_at_now(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    """A backlog replayed at once is metered at the producer's pace (broker timestamps); a
    timestamp from the future cannot buy tokens (capped at the router's clock)."""
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    loop = router_loop(TenantPolicy(quota=QuotaPolicy(rate_per_s=1, burst=1, over_quota="lower_lane")))
    for i in range(5):  # five records sent one second apart, routed in one batch
        send(loop, 1, ts_ms=1_700_000_000_000 + 1000 * i)
    assert [t for t, _, _ in loop.outputs if t.startswith("audit.text.")] == ["audit.text.hi"] * 5
    loop.outputs.clear()
    far = 4_000_000_000_000  # year 2096
    for i in range(3):
        send(loop, 1, ts_ms=far + 1000 * i)
    assert [t for t, _, _ in loop.outputs if t.startswith("audit.text.")].count("audit.text.lo") >= 2


def test_router_throttle_gives_a_verdict_and_no_dlq_record(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    policy = TenantPolicy(quota=QuotaPolicy(rate_per_s=3, burst=1, over_quota="throttle", on_throttled="allow"))
    loop = router_loop(policy)
    send(loop, 3, ts_ms=1_700_000_000_000)
    topics = [t for t, _, _ in loop.outputs]
    # the one within quota goes to fusion; the router answers the two throttled ones itself
    assert DLQ not in topics and topics.count("audit.text.hi") == 1 and topics.count(SCORES) == 1
    assert topics.count(VERDICTS) == 2
    assert loop.next_offset == {0: 3}
    rejected = [Verdict.model_validate(v) for t, _, v in loop.outputs if t == VERDICTS]
    assert all(v.decision == "allow" and not v.complete for v in rejected)  # the tenant's on_throttled
    assert rejected[0].reasons[0] == "rejected: throttled: over quota 3 req/s"
    assert rejected[0].parts == {} and rejected[0].policy_version
