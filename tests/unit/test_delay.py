"""``over_quota = "delay"``: reservations with debt (engine/quota.py), the held queue and the
decision (engine/delay.py), and the router holding requests on a fake clock (time passed in,
ms): FIFO release at the quota rate, other tenants unaffected, max_delay_ms and the deadline
falling back to ``throttled``, commits that never pass a held record, revoked partitions
replayed by their next owner, the memory bound, and the settings keys."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from rtaudit.engine.delay import HeldQueue, offer
from rtaudit.engine.policy import PolicyBook, QuotaPolicy, TenantPolicy
from rtaudit.engine.quota import QuotaLimit, TenantQuotas, TokenBucket
from rtaudit.topics.catalog import DLQ, SCORES, VERDICTS
from tests.unit.builders import FakeMessage
from rtaudit.workers.router import RouterHandler
from rtaudit.workers.settings import SettingsError, load_settings

from .builders import audit_request
from .roles import RoleUnderTest

T0 = 1_700_000_000_000


# -- reservations -------------------------------------------------------------------------


def test_reservations_go_into_debt_one_interval_apart():
    b = TokenBucket.full(QuotaLimit(rate_per_s=10, burst=2), T0)
    rs = [b.reserve(T0) for _ in range(5)]
    assert all(r.granted for r in rs)
    assert [r.wait_ms for r in rs] == pytest.approx([0, 0, 100, 200, 300])  # 1000 / 10 ms apart
    assert b.tokens == pytest.approx(-3)
    assert not b.try_take(T0 + 250)  # in debt: nothing else is admitted...
    assert b.try_take(T0 + 400)  # ...until the debt is paid and a token earned
    r = b.reserve(T0 + 400)
    assert r.ready_at_ms == pytest.approx(T0 + 500) and r.wait_ms == pytest.approx(100)


def test_a_refused_reservation_takes_nothing():
    b = TokenBucket.full(QuotaLimit(rate_per_s=4, burst=1), T0)
    assert b.reserve(T0).granted
    r = b.reserve(T0, max_wait_ms=200)  # would wait 250 ms
    assert not r.granted and r.refusal == "max_wait" and r.wait_ms == pytest.approx(250)
    r = b.reserve(T0, not_after_ms=T0 + 249)
    assert not r.granted and r.refusal == "deadline"
    assert b.tokens == pytest.approx(0)
    assert b.reserve(T0, max_wait_ms=250, not_after_ms=T0 + 250).granted  # boundaries included
    assert TokenBucket.full(QuotaLimit(), T0).reserve(T0).wait_ms == 0  # unlimited


def test_refund_gives_back_unused_reservations_up_to_the_burst():
    q = TenantQuotas()
    lim = QuotaLimit(rate_per_s=10, burst=1)
    assert [q.reserve("t", lim, T0).wait_ms for _ in range(3)] == pytest.approx([0, 100, 200])
    q.refund("t")
    q.refund("t")
    assert q.reserve("t", lim, T0).wait_ms == pytest.approx(100)
    for _ in range(5):
        q.refund("t")
    assert q.buckets["t"].tokens == 1  # capped at the burst
    q.refund("nobody")  # no bucket: nothing to do


@given(
    rate=st.floats(1, 1000), burst=st.floats(1, 20),
    gaps=st.lists(st.floats(0, 30), min_size=1, max_size=200),
)
@settings(max_examples=150, deadline=None)
def test_granted_reservations_are_in_order_and_within_the_bucket_contract(rate, burst, gaps):
    """Ready times never go backwards, each request is ready no earlier than it arrived, and by
    any time t at most burst + rate·(t − T0) requests are ready: held requests leave at the rate."""
    b = TokenBucket.full(QuotaLimit(rate_per_s=rate, burst=burst), T0)
    t, ready = float(T0), []
    for gap in gaps:
        t += gap
        r = b.reserve(t, max_wait_ms=5_000)
        if r.granted:
            assert r.ready_at_ms >= t and (not ready or r.ready_at_ms >= ready[-1] - 1e-6)
            ready.append(r.ready_at_ms)
    for i, at in enumerate(ready):
        assert i + 1 <= burst + rate * (at - T0) / 1000.0 + 1e-3  # ms near 1.7e12 are exact to ~2e-4
    assert b.tokens >= -rate * 5.0 - 1e-3  # the debt is bounded by rate x max_wait


# -- the held queue -----------------------------------------------------------------------


def test_held_queue_releases_by_ready_time_fifo_per_tenant():
    q: HeldQueue[str] = HeldQueue()
    q.hold("a", 0, 10, T0 + 300, T0, "a1")
    q.hold("b", 0, 11, T0 + 100, T0, "b1")
    q.hold("a", 1, 5, T0 + 200, T0, "a2")  # a raised rate: still behind a1
    assert q.holds("a") == 2 and len(q) == 3 and q.next_ready_ms() == T0 + 100
    assert [h.item for h in q.due(T0 + 299)] == ["b1"]
    assert [h.item for h in q.due(T0 + 300)] == ["a1", "a2"]
    assert len(q) == 0 and q.holds("a") == 0 and q.next_ready_ms() is None


def test_held_queue_oldest_offset_per_partition_and_drop():
    q: HeldQueue[str] = HeldQueue()
    q.hold("a", 0, 10, T0 + 500, T0, "a")
    q.hold("b", 0, 12, T0 + 100, T0, "b")
    q.hold("c", 3, 7, T0 + 100, T0, "c")
    assert (q.oldest_offset(0), q.oldest_offset(3), q.oldest_offset(1)) == (10, 7, None)
    q.due(T0 + 100)  # b and c go, a (older) stays
    assert (q.oldest_offset(0), q.oldest_offset(3)) == (10, None)
    q.hold("d", 0, 13, T0 + 200, T0, "d")
    assert [h.item for h in q.drop([0])] == ["a", "d"]
    assert q.oldest_offset(0) is None and len(q) == 0 and q.due(T0 + 10_000) == []


def test_held_queue_is_bounded_in_records_and_bytes():
    q: HeldQueue[str] = HeldQueue(max_held=2, max_bytes=100)
    q.hold("a", 0, 1, T0, T0, "x", size=60)
    assert q.room(40) and not q.room(41)
    q.hold("a", 0, 2, T0, T0, "y", size=10)
    assert not q.room(0)
    with pytest.raises(OverflowError):
        q.hold("a", 0, 3, T0, T0, "z")
    q.due(T0)
    assert q.held_bytes == 0 and q.room(100)


def test_offer_outcomes():
    quotas, q = TenantQuotas(), HeldQueue[int](max_held=1)
    lim = QuotaLimit(rate_per_s=10, burst=1)
    kw = dict(limit=lim, max_delay_ms=150, deadline_ms=T0 + 10_000, partition=0, item=0)
    assert offer(quotas, q, tenant_id="t", arrived_ms=T0, now_ms=T0, offset=0, **kw).outcome == "within"
    assert offer(quotas, q, tenant_id="t", arrived_ms=T0, now_ms=T0, offset=1, **kw).outcome == "held"
    o = offer(quotas, q, tenant_id="u", arrived_ms=T0, now_ms=T0, offset=2, **kw)
    assert o.outcome == "within"  # another tenant
    o = offer(quotas, q, tenant_id="u", arrived_ms=T0, now_ms=T0, offset=3, **kw)
    assert o.outcome == "throttled_max_held" and o.throttled and quotas.buckets["u"].tokens == 0  # refunded
    o = offer(quotas, q, tenant_id="t", arrived_ms=T0, now_ms=T0, offset=4, **kw)
    assert o.outcome == "throttled_max_delay" and o.reason == "a wait of 200 ms exceeds max_delay_ms 150"
    # arrived long ago (a backlog): the wait passed in the topic, routed at once
    late = offer(quotas, HeldQueue(), tenant_id="v", arrived_ms=T0, now_ms=T0 + 5_000, offset=5, **kw)
    late = offer(quotas, HeldQueue(), tenant_id="v", arrived_ms=T0, now_ms=T0 + 5_000, offset=6, **kw)
    assert late.outcome == "routed" and late.route_now and late.wait_ms == pytest.approx(100)


# -- the router ---------------------------------------------------------------------------


SLOW = TenantPolicy(lane="hi", quota=QuotaPolicy(rate_per_s=10, burst=1, over_quota="delay", max_delay_ms=1000))


@pytest.fixture
def make_loop(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    media = load_settings().media.policy()

    def make(tenants: dict[str, TenantPolicy] | None = None, held: HeldQueue | None = None) -> RoleUnderTest:
        book = PolicyBook(tenants=tenants if tenants is not None else {"slow": SLOW})
        return RoleUnderTest(RouterHandler(lambda: book, media, held), "router")

    return make


class Feed:
    """Records of one partition with consecutive offsets."""

    def __init__(self, partition: int = 0) -> None:
        self.partition, self.offset = partition, 0

    def msg(self, tenant: str, ts: int, rid: str | None = None, **fields) -> FakeMessage:  # type: ignore[no-untyped-def]
        rid = rid or f"{tenant}-{self.partition}-{self.offset}"
        req = audit_request(request_id=rid, tenant_id=tenant, created_at_ms=ts, **fields)
        m = FakeMessage(req.model_dump_json().encode(), rid.encode(), self.offset, ts, self.partition)
        self.offset += 1
        return m


def manifests(loop: RoleUnderTest) -> list[dict]:  # type: ignore[type-arg]
    """What the router answered, in order: the manifests it sent fusion and, as
    ``{"request_id", "rejection_code", "rejection", "decision"}``, the verdicts it gave itself."""
    out = [rejection_of(v) if t == VERDICTS else v for t, _, v in loop.outputs if t in (SCORES, VERDICTS)]
    loop.outputs.clear()
    return out


def rejection_of(verdict: dict) -> dict:  # type: ignore[type-arg]
    """A router verdict's rejection, from its first reason ``rejected: <code>: <message>``."""
    code, _, message = verdict["reasons"][0].removeprefix("rejected: ").partition(": ")
    return {"request_id": verdict["request_id"], "rejection_code": code, "rejection": message, "decision": verdict["decision"]}


def routed(loop: RoleUnderTest) -> list[str]:
    return [m["request_id"] for m in manifests(loop) if not m.get("rejection")]


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_held_requests_go_out_fifo_at_the_quota_rate_on_their_lane(make_loop):  # type: ignore[no-untyped-def]
    loop, feed = make_loop(), Feed()
    before = sample("rtaudit_quota_delayed_requests_total", tenant="slow", outcome="routed")
    loop.handle([feed.msg("slow", T0) for _ in range(5)], now=T0)
    assert routed(loop) == ["slow-0-0"]  # the burst; 4 held
    assert len(loop.held) == 4
    released: list[tuple[int, list[str]]] = []
    for t in range(T0, T0 + 501, 10):  # the loop ticks at least every 20 ms
        loop.tick(now=t)
        ids = [m["request_id"] for m in [v for tp, _, v in loop.outputs if tp in (SCORES, VERDICTS)]]
        lanes = {tp for tp, _, _ in loop.outputs if tp not in (SCORES, VERDICTS)}
        if ids:
            assert lanes == {"audit.text.hi"}  # its normal lane, not lo
            released.append((t, ids))
            loop.outputs.clear()
    assert released == [(T0 + 100, ["slow-0-1"]), (T0 + 200, ["slow-0-2"]), (T0 + 300, ["slow-0-3"]), (T0 + 400, ["slow-0-4"])]
    assert len(loop.held) == 0 and loop.commit_offsets()[0] == 5
    assert sample("rtaudit_quota_delayed_requests_total", tenant="slow", outcome="routed") - before == 4


def test_a_released_request_keeps_its_deadline_and_is_stamped_when_routed(make_loop):  # type: ignore[no-untyped-def]
    loop, feed = make_loop(), Feed()
    loop.handle([feed.msg("slow", T0), feed.msg("slow", T0)], now=T0)
    first = manifests(loop)[0]
    loop.tick(now=T0 + 100)
    task = next(v for t, _, v in loop.outputs if t == "audit.text.hi")
    second = manifests(loop)[0]
    assert second["deadline_ms"] == first["deadline_ms"] == T0 + SLOW.slo_ms
    assert task["routed_at_ms"] == T0 + 100 and task["lane"] == "hi"


def test_other_tenants_keep_flowing_in_the_same_partition(make_loop):  # type: ignore[no-untyped-def]
    loop, feed = make_loop(), Feed()
    batch = [feed.msg("slow", T0) for _ in range(3)] + [feed.msg("quiet", T0) for _ in range(3)]
    loop.handle(batch, now=T0)
    assert routed(loop) == ["slow-0-0", "quiet-0-3", "quiet-0-4", "quiet-0-5"]  # not behind slow's held ones
    loop.handle([feed.msg("quiet", T0 + 50)], now=T0 + 50)
    loop.tick(now=T0 + 50)
    assert routed(loop) == ["quiet-0-6"] and len(loop.held) == 2
    loop.tick(now=T0 + 100)
    assert routed(loop) == ["slow-0-1"]


def test_a_wait_beyond_max_delay_or_the_deadline_is_throttled(make_loop):  # type: ignore[no-untyped-def]
    policy = TenantPolicy(quota=QuotaPolicy(rate_per_s=10, burst=1, over_quota="delay", max_delay_ms=250, on_throttled="allow"))
    loop, feed = make_loop({"slow": policy}), Feed()
    before = sample("rtaudit_quota_delayed_requests_total", tenant="slow", outcome="throttled_max_delay")
    # a request whose own deadline comes before its turn (100 ms): throttled, and it reserves nothing
    loop.handle([feed.msg("slow", T0), feed.msg("slow", T0, deadline_ms=T0 + 99)], now=T0)
    out = manifests(loop)
    assert [m["request_id"] for m in out] == ["slow-0-0", "slow-0-1"]
    assert out[1]["rejection"] == "over quota 10 req/s: a wait of 100 ms would end after the deadline"
    loop.handle([feed.msg("slow", T0) for _ in range(3)], now=T0)  # waits 100, 200 (held), 300 ms
    out = manifests(loop)
    assert DLQ not in {t for t, _, _ in loop.outputs}
    assert [m["request_id"] for m in out] == ["slow-0-4"] and len(loop.held) == 2
    rejected = out[0]
    assert rejected["rejection_code"] == "throttled"
    assert rejected["rejection"] == "over quota 10 req/s: a wait of 300 ms exceeds max_delay_ms 250"
    assert sample("rtaudit_quota_delayed_requests_total", tenant="slow", outcome="throttled_max_delay") - before == 1
    assert rejected["decision"] == "allow"  # the tenant's on_throttled, answered by the router itself
    loop.tick(now=T0 + 200)
    assert routed(loop) == ["slow-0-2", "slow-0-3"]


def test_the_commit_never_passes_a_held_record(make_loop):  # type: ignore[no-untyped-def]
    loop, p0, p1 = make_loop(), Feed(0), Feed(1)
    loop.handle([p0.msg("slow", T0), p0.msg("slow", T0), p0.msg("quiet", T0), p0.msg("quiet", T0),
                 p1.msg("quiet", T0), p1.msg("slow", T0)], now=T0)
    assert loop.commit_offsets() == {0: 1, 1: 1}  # held: p0@1, p1@1
    assert list(loop.commit_offsets([1]).values()) == [1]
    loop.tick(now=T0 + 100)  # p0@1 goes first (FIFO), p1@1 stays
    assert loop.commit_offsets() == {0: 4, 1: 1}
    loop.handle([p1.msg("quiet", T0 + 150), p1.msg("quiet", T0 + 150)], now=T0 + 150)
    assert loop.commit_offsets() == {0: 4, 1: 1}
    loop.tick(now=T0 + 200)
    assert loop.commit_offsets() == {0: 4, 1: 4}


def test_a_revoked_partition_drops_its_held_records_and_the_next_owner_replays_them(make_loop):  # type: ignore[no-untyped-def]
    loop, p0, p1 = make_loop(), Feed(0), Feed(1)
    records0 = [p0.msg("slow", T0), p0.msg("quiet", T0), p0.msg("slow", T0), p0.msg("quiet", T0)]
    records1 = [p1.msg("slow", T0)]
    loop.handle(records0 + records1, now=T0)
    assert routed(loop) == ["slow-0-0", "quiet-0-1", "quiet-0-3"] and len(loop.held) == 2
    before = sample("rtaudit_quota_delayed_requests_total", tenant="slow", outcome="dropped")
    committed = loop.commit_offsets([0])
    assert committed == {0: 2}
    loop.revoke([0])  # checkpointed first, as the batch loop does
    assert len(loop.held) == 1 and loop.held.oldest_offset(0) is None and 0 not in loop.next_offset
    assert sample("rtaudit_quota_delayed_requests_total", tenant="slow", outcome="dropped") - before == 1
    assert loop.quotas.buckets["slow"].tokens == pytest.approx(-1)  # the token p0@2 had reserved was given back
    loop.tick(now=T0 + 200)
    assert routed(loop) == ["slow-1-0"]
    # the next owner consumes partition 0 from the committed offset: the held record is not lost
    owner = make_loop()
    owner.handle(records0[committed[0]:], now=T0 + 1_000)
    assert routed(owner) == ["slow-0-2", "quiet-0-3"]  # quiet-0-3 twice in all: at-least-once
    assert owner.commit_offsets()[0] == 4


@given(ops=st.lists(st.tuples(st.sampled_from(["slow", "quiet", "tick"]), st.integers(0, 1), st.integers(0, 60)), max_size=80))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_record_before_the_commit_offset_was_answered(ops, make_loop):  # type: ignore[no-untyped-def]
    """Whatever the interleaving, a router killed at any point loses nothing: every record below
    each partition's commit offset has its manifest (routed) or its verdict (throttled) with the producer."""
    loop, feeds, t = make_loop(), [Feed(0), Feed(1)], T0
    answered: set[str] = set()
    records: dict[int, list[str]] = {0: [], 1: []}
    for kind, partition, gap in ops:
        t += gap
        if kind == "tick":
            loop.tick(now=t)
        else:
            m = feeds[partition].msg(kind, t)
            records[partition].append(m.key().decode())
            loop.handle([m], now=t)
        answered |= {v["request_id"] for tp, _, v in loop.outputs if tp in (SCORES, VERDICTS)}
        for p, offset in loop.commit_offsets().items():
            assert set(records[p][:offset]) <= answered


def test_beyond_max_held_the_router_throttles(make_loop):  # type: ignore[no-untyped-def]
    loop, feed = make_loop(held=HeldQueue(max_held=2)), Feed()
    loop.handle([feed.msg("slow", T0) for _ in range(4)], now=T0)
    out = manifests(loop)
    assert [m["request_id"] for m in out] == ["slow-0-0", "slow-0-3"]
    assert out[1]["rejection"] == "over quota 10 req/s: the router holds 2 delayed requests already"
    assert loop.quotas.buckets["slow"].tokens == pytest.approx(-2)  # its reservation was given back


def test_lower_lane_and_throttle_tenants_are_not_held(make_loop):  # type: ignore[no-untyped-def]
    loop, feed = make_loop({
        "lo": TenantPolicy(lane="hi", quota=QuotaPolicy(rate_per_s=10, burst=1)),
        "th": TenantPolicy(quota=QuotaPolicy(rate_per_s=10, burst=1, over_quota="throttle")),
    }), Feed()
    loop.handle([feed.msg("lo", T0), feed.msg("lo", T0), feed.msg("th", T0), feed.msg("th", T0)], now=T0)
    assert len(loop.held) == 0 and loop.commit_offsets()[0] == 4
    assert [t for t, _, _ in loop.outputs if t.startswith("audit.text.")] == ["audit.text.hi", "audit.text.lo", "audit.text.lo"]
    assert [m.get("rejection_code") for m in manifests(loop)] == [None, None, None, "throttled"]


# -- settings -----------------------------------------------------------------------------


def test_settings_file_delay_keys(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    config = tmp_path / "rtaudit.toml"
    config.write_text('[tenants.slow.quota]\nrate_per_s = 50.0\nover_quota = "delay"\nmax_delay_ms = 500\n')
    s = load_settings(config)
    quota = s.policies.for_tenant("slow").quota
    assert (quota.over_quota, quota.max_delay_ms, quota.limit) == ("delay", 500, QuotaLimit(50, 50))
    assert s.policies.for_tenant("other").quota.max_delay_ms == 2000  # the default
    monkeypatch.setenv("RTAUDIT_TENANTS__SLOW__QUOTA__MAX_DELAY_MS", "60000")
    with pytest.raises(SettingsError, match="max_delay_ms"):
        load_settings(config)
    with pytest.raises(ValueError):
        QuotaPolicy(over_quota="delay", max_delay_ms=0)
