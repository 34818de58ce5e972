"""The two-lane micro-batcher, with time driven explicitly (a fake clock and waiter, no sleeps)."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtaudit.engine.batcher import Batch, Batcher, BatcherFull, split_slots
from rtaudit.engine.batcher_config import BatcherConfig


class FakeTime:
    """Epoch ms that only moves when told; its waiter jumps to the timeout instead of sleeping."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.t

    async def wait(self, event: asyncio.Event, timeout_s: float) -> None:
        self.waits.append(timeout_s)
        if not event.is_set():
            self.t += timeout_s * 1000.0
        await asyncio.sleep(0)


def make(clock: FakeTime | None = None, **cfg) -> tuple[Batcher[str], FakeTime]:
    clock = clock or FakeTime()
    cfg.setdefault("max_size", 4)
    return Batcher(BatcherConfig(**cfg), clock=clock, waiter=clock.wait), clock


FAR = 10**13  # a deadline that never matters


def payloads(batch: Batch[str]) -> list[str]:
    return [p.payload for p in batch.items]


# -- when a batch closes --------------------------------------------------------------


def test_closes_on_size_at_once():
    b, _ = make(max_size=3)
    for i in range(3):
        b.put_nowait(f"x{i}", "lo", FAR)
    batch = b.poll()
    assert batch is not None and batch.reason == "size" and payloads(batch) == ["x0", "x1", "x2"]
    assert b.poll() is None and b.queued() == 0


def test_closes_on_window_from_the_first_item():
    b, t = make(window_ms=15.0)
    b.put_nowait("a", "hi", FAR)
    t.t += 10
    b.put_nowait("b", "hi", FAR)
    t.t += 4.9
    assert b.poll() is None
    t.t += 0.1
    batch = b.poll()
    assert batch is not None and batch.reason == "window" and payloads(batch) == ["a", "b"]


async def test_next_batch_waits_exactly_the_window():
    b, t = make(window_ms=15.0)
    start = t.t
    b.put_nowait("a", "lo", FAR)
    batch = await b.next_batch()
    assert payloads(batch) == ["a"] and batch.reason == "window"
    assert t.t - start == pytest.approx(15.0)


async def test_next_batch_wakes_when_the_batch_fills():
    b, _ = make(max_size=2, window_ms=1000.0)
    b.put_nowait("a", "lo", FAR)
    waiter = asyncio.create_task(b.next_batch())
    await asyncio.sleep(0)
    b.put_nowait("b", "lo", FAR)
    batch = await asyncio.wait_for(waiter, 1.0)
    assert payloads(batch) == ["a", "b"] and batch.reason == "size"


def test_closes_before_the_earliest_deadline_minus_expected_duration():
    # prior: 10 ms per item + 5 ms per batch; margin 2 ms
    b, t = make(window_ms=100.0, prior_a_s=0.010, prior_b_s=0.005, deadline_margin_ms=2.0)
    t0 = t.t
    b.put_nowait("late", "lo", t0 + 1000)
    b.put_nowait("soon", "lo", t0 + 40)
    due = b.close_at_ms()
    assert due == (pytest.approx(t0 + 40 - (2 * 10 + 5) - 2), "deadline")
    t.t = t0 + 12.9
    assert b.poll() is None
    t.t = t0 + 13
    batch = b.poll()
    assert batch is not None and batch.reason == "deadline" and payloads(batch) == ["late", "soon"]


def test_expired_items_are_separated_and_take_no_slot():
    b, t = make(max_size=2, window_ms=15.0)
    b.put_nowait("dead", "hi", t.t + 5)
    b.put_nowait("a", "hi", FAR)
    t.t += 5
    batch = b.poll()  # only the expired one is due: it comes out alone, at once
    assert batch is not None and batch.reason == "expired" and batch.items == []
    assert [p.payload for p in batch.expired] == ["dead"]
    b.put_nowait("b", "lo", FAR)
    batch = b.poll()
    assert batch is not None and payloads(batch) == ["a", "b"] and batch.expired == []


def test_deadline_exactly_now_is_expired():
    b, t = make()
    b.put_nowait("x", "lo", t.t)
    batch = b.poll()
    assert batch is not None and [p.payload for p in batch.expired] == ["x"]


# -- lanes -----------------------------------------------------------------------------


def test_high_lane_first():
    b, _ = make(max_size=3, lo_share=0.0)
    b.put_nowait("lo1", "lo", FAR)
    b.put_nowait("lo2", "lo", FAR)
    b.put_nowait("hi1", "hi", FAR)
    b.put_nowait("hi2", "hi", FAR)
    batch = b.poll()
    assert batch is not None and payloads(batch) == ["hi1", "hi2", "lo1"]
    assert batch.lanes == {"hi": 2, "lo": 1}


def test_low_lane_gets_its_share_when_both_are_backlogged():
    b, _ = make(max_size=10, lo_share=0.2, max_queued=100)
    for i in range(100):
        b.put_nowait(f"h{i}", "hi", FAR)
        b.put_nowait(f"l{i}", "lo", FAR)
    batch = b.poll()
    assert batch is not None and batch.lanes == {"hi": 8, "lo": 2}
    assert payloads(batch) == [f"h{i}" for i in range(8)] + ["l0", "l1"]


def test_low_lane_share_with_batches_of_one():
    b, _ = make(max_size=1, lo_share=0.2, max_queued=50)
    for i in range(50):
        b.put_nowait(f"h{i}", "hi", FAR)
        b.put_nowait(f"l{i}", "lo", FAR)
    lanes = []
    for _ in range(20):
        batch = b.poll()
        assert batch is not None
        lanes.append(batch.items[0].lane)
    assert lanes.count("lo") == 4 and lanes[:5] == ["hi", "hi", "hi", "hi", "lo"]


def test_pause_low_lane_with_hysteresis():
    b, _ = make(max_size=4, lo_share=0.25, pause_hi_lag=8, resume_hi_lag=2)
    assert b.config.lo_reserve == 2
    b.put_nowait("l0", "lo", FAR)
    b.put_nowait("l1", "lo", FAR)
    b.set_lag("hi", 8)
    assert b.update_lo_pause() is False  # not above pause_hi_lag
    b.set_lag("hi", 9)
    assert b.update_lo_pause() is True
    b.set_lag("hi", 3)
    assert b.update_lo_pause() is True  # hysteresis: still above resume_hi_lag
    b.set_lag("hi", 2)
    assert b.update_lo_pause() is False
    b.set_lag("hi", 100)
    assert b.update_lo_pause() is True
    b._lanes["lo"].popleft()  # the share drained the reserve: resume to refill it
    assert b.update_lo_pause() is False


# -- lag adaptation ------------------------------------------------------------------------


def test_window_and_size_grow_with_lag():
    b, _ = make(max_size=64, min_size=8, window_ms=5.0, max_window_ms=45.0, lag_low=0, lag_high=100)
    assert (b.window_ms(), b.size_limit()) == (5.0, 8)
    b.set_lag("lo", 50)
    assert b.window_ms() == pytest.approx(25.0) and b.size_limit() == 36
    b.set_lag("hi", 200)
    assert (b.window_ms(), b.size_limit(), b.lag) == (45.0, 64, 250)
    b.set_lag("hi", -5)  # clamped
    assert b.lag == 50
    s = b.stats()
    assert (s.window_ms, s.size_limit, s.lag, s.queued_hi, s.queued_lo) == (pytest.approx(25.0), 36, 50, 0, 0)


def test_queued_items_count_as_lag():
    b, _ = make(max_size=8, min_size=1, lag_high=16, max_queued=16)
    for i in range(8):
        b.put_nowait(str(i), "lo", FAR)
    assert b.lag == 8 and b.size_limit() == 1 + round(0.5 * 7)


# -- back-pressure ----------------------------------------------------------------------


async def test_put_waits_for_room_on_its_own_lane_only():
    b, _ = make(max_size=2, max_queued=2)
    b.put_nowait("l0", "lo", FAR)
    b.put_nowait("l1", "lo", FAR)
    with pytest.raises(BatcherFull):
        b.put_nowait("l2", "lo", FAR)
    blocked = asyncio.create_task(b.put("l2", "lo", FAR))
    await asyncio.sleep(0)
    assert not blocked.done()
    await b.put("h0", "hi", FAR)  # the high lane is not blocked by the full low lane
    batch = b.poll()
    assert batch is not None
    await asyncio.wait_for(blocked, 1.0)
    assert b.queued() >= 1


def test_bad_config_and_lane_raise():
    with pytest.raises(ValueError, match="max_size"):
        BatcherConfig(max_size=0)
    with pytest.raises(ValueError, match="lo_share"):
        BatcherConfig(max_size=4, lo_share=1.5)
    with pytest.raises(ValueError, match="lag_low"):
        BatcherConfig(max_size=4, lag_low=10, lag_high=10)
    b, _ = make()
    with pytest.raises(ValueError, match="lane"):
        b.put_nowait("x", "mid", FAR)  # type: ignore[arg-type]


async def test_close_ends_next_batch():
    b, _ = make()
    b.close()
    with pytest.raises(EOFError):
        await b.next_batch()


# -- properties ------------------------------------------------------------------------------


@given(
    hi=st.integers(0, 200), lo=st.integers(0, 200), cap=st.integers(1, 64),
    share=st.floats(0.0, 1.0), credit=st.floats(0.0, 0.999),
)
def test_split_slots_fills_without_overdraw(hi, lo, cap, share, credit):
    n_hi, n_lo, new_credit = split_slots(hi, lo, cap, share, credit)
    assert 0 <= n_hi <= hi and 0 <= n_lo <= lo
    assert n_hi + n_lo == min(hi + lo, cap)
    assert 0.0 <= new_credit < 1.0
    if hi + lo > cap and lo > 0 and hi > 0:
        assert n_lo >= min(lo, math.floor(share * cap + credit + 1e-9))


@given(cap=st.integers(1, 32), share=st.floats(0.0, 1.0), k=st.integers(1, 60))
def test_low_lane_share_is_honoured_over_many_batches(cap, share, k):
    credit, lo_total = 0.0, 0
    for _ in range(k):
        _, n_lo, credit = split_slots(10_000, 10_000, cap, share, credit)
        lo_total += n_lo
    assert lo_total >= math.floor(k * cap * share - 1e-6)
    assert lo_total <= math.ceil(k * cap * share + 1e-6)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(["hi", "lo"]), st.integers(-5, 80)),  # deadline offset, ms
        st.tuples(st.just("tick"), st.integers(0, 30)),
        st.tuples(st.just("lag"), st.sampled_from(["hi", "lo"]), st.integers(-10, 300)),
        st.tuples(st.just("poll")),
    ),
    max_size=120,
)


@given(
    script=ops, max_size=st.integers(1, 8), share=st.sampled_from([0.0, 0.2, 0.5]),
    window=st.sampled_from([1.0, 15.0]), a_ms=st.sampled_from([0.0, 2.0]),
)
@settings(max_examples=200, deadline=None)
def test_batcher_invariants(script, max_size, share, window, a_ms):
    """Nothing lost or duplicated; lane order kept among live items; high lane first;
    expired items are exactly those past their deadline; sizes within limits."""
    t = FakeTime()
    b: Batcher[int] = Batcher(
        BatcherConfig(max_size=max_size, min_size=1, window_ms=window, max_window_ms=window * 3,
                      lo_share=share, lag_high=50, max_queued=10**6, prior_a_s=a_ms / 1000.0),
        clock=t, waiter=t.wait,
    )
    lane_of: dict[int, str] = {}
    out: list[int] = []
    live_seen = {"hi": -1, "lo": -1}

    def check(batch: Batch[int]) -> None:
        # a deadline close takes what its expected duration was computed for; others drain up to max_size
        cap = batch.size_limit if batch.reason == "deadline" else max_size
        assert batch.size_limit <= max_size and len(batch.items) <= cap
        lanes = [p.lane for p in batch.items]
        assert lanes == sorted(lanes)  # "hi" < "lo": every hi item before every lo item
        for p in batch.items:
            assert p.deadline_ms > batch.formed_ms
            assert p.payload > live_seen[p.lane]  # arrival order within a lane
            live_seen[p.lane] = p.payload
        for p in batch.expired:
            assert p.deadline_ms <= batch.formed_ms
        if batch.lanes["lo"] and b.queued("hi"):  # lo served while hi waited: only its share
            assert batch.lanes["lo"] <= max(1, math.ceil(share * cap))
        out.extend(p.payload for p in batch.items + batch.expired)

    seq = 0
    for op in script:
        if op[0] == "put":
            lane_of[seq] = op[1]
            b.put_nowait(seq, op[1], t.t + op[2])
            seq += 1
        elif op[0] == "tick":
            t.t += op[1]
        elif op[0] == "lag":
            b.set_lag(op[1], op[2])
        else:
            batch = b.poll()
            if batch is not None:
                check(batch)
    b.set_lag("hi", 0)
    b.set_lag("lo", 0)

    async def drain() -> None:
        while b.queued():
            check(await b.next_batch())

    asyncio.run(drain())
    assert sorted(out) == list(range(seq)) and len(out) == len(set(out))


def test_a_closing_batch_takes_every_queued_item_up_to_max_size():
    """The size limit (4 at zero lag) closes the batch; the batch then takes all 10 queued items
    (those queued while the model ran), not 4 now and 6 one whole batch later."""
    t = FakeTime()
    b: Batcher[int] = Batcher(BatcherConfig(max_size=16, min_size=4, window_ms=15.0, lag_high=1000), clock=t, waiter=t.wait)
    for i in range(10):
        b.put_nowait(i, "lo", deadline_ms=t() + 60_000)
    batch = b.poll()
    assert batch is not None and batch.reason == "size" and batch.size_limit == 4
    assert [p.payload for p in batch.items] == list(range(10))
    for i in range(20):
        b.put_nowait(i, "lo", deadline_ms=t() + 60_000)
    assert len(b.poll().items) == 16 and b.queued() == 4  # never beyond max_size


def test_a_low_lane_backlog_does_not_inflate_batches_that_carry_high_lane_items():
    """Low lane saturated (pressure 1: size limit = max), one high-lane item queued: its batch is
    sized by the high lane's own lag (the floor, 4), filled with low-lane items; the next,
    low-lane-only batch drains up to max_size."""
    t = FakeTime()
    b: Batcher[int] = Batcher(
        BatcherConfig(max_size=32, min_size=4, window_ms=15.0, lag_high=64, lo_share=0.25), clock=t, waiter=t.wait,
    )
    b.set_lag("lo", 500)
    for i in range(40):
        b.put_nowait(i, "lo", deadline_ms=t() + 60_000)
    b.put_nowait(100, "hi", deadline_ms=t() + 1_000)
    first = b.poll()
    assert first is not None and b.size_limit() == 32
    assert [p.payload for p in first.items] == [100, 0, 1, 2]  # high lane first, then the low lane fills it
    second = b.poll()
    assert second is not None and len(second.items) == 32 and second.lanes == {"hi": 0, "lo": 32}


# -- tenants: fair sharing inside a lane ------------------------------------------------------


def test_a_backlogged_tenant_does_not_sit_ahead_of_a_quiet_one():
    b, _ = make(max_size=4, max_queued=1000)
    for i in range(100):
        b.put_nowait(f"f{i}", "lo", FAR, tenant="flood")
    b.put_nowait("q0", "lo", FAR, tenant="quiet")
    batch = b.poll()
    assert batch is not None and payloads(batch) == ["f0", "q0", "f1", "f2"]
    assert b._lanes["lo"].tenants() == {"flood": 97}


def test_round_robin_turn_carries_over_between_batches():
    b, _ = make(max_size=2, max_queued=100)
    for t in "abc":
        for i in range(3):
            b.put_nowait(f"{t}{i}", "hi", FAR, tenant=t)
    got = [payloads(b.poll()) for _ in range(4)]  # type: ignore[arg-type]
    assert got == [["a0", "b0"], ["c0", "a1"], ["b1", "c1"], ["a2", "b2"]]


def test_items_without_a_tenant_share_one_fifo_and_deadline_close_takes_what_it_timed():
    # prior 10 ms/item + 5 ms/batch, margin 2: the close is timed for the round-robin candidates
    b, t = make(max_size=4, window_ms=100.0, prior_a_s=0.010, prior_b_s=0.005, deadline_margin_ms=2.0)
    t0 = t.t
    b.put_nowait("f0", "lo", t0 + 1000, tenant="flood")
    b.put_nowait("f1", "lo", t0 + 1000, tenant="flood")
    b.put_nowait("q0", "lo", t0 + 60, tenant="quiet")
    due = b.close_at_ms()
    assert due == (pytest.approx(t0 + 60 - (3 * 10 + 5) - 2), "deadline")
    t.t = due[0]
    batch = b.poll()
    assert batch is not None and batch.reason == "deadline" and payloads(batch) == ["f0", "q0", "f1"]
    b.put_nowait("x", "lo", FAR)
    b.put_nowait("y", "lo", FAR, tenant=None)
    assert b._lanes["lo"].tenants() == {"": 2}


tenant_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(["hi", "lo"]), st.integers(-5, 80), st.sampled_from("abcd")),
        st.tuples(st.just("burst"), st.sampled_from(["hi", "lo"]), st.integers(1, 20)),  # tenant "a" floods
        st.tuples(st.just("tick"), st.integers(0, 30)),
        st.tuples(st.just("poll")),
    ),
    max_size=100,
)


@given(script=tenant_ops, max_size=st.integers(1, 8), share=st.sampled_from([0.0, 0.2, 0.5]))
@settings(max_examples=200, deadline=None)
def test_fair_sharing_invariants(script, max_size, share):
    """With tenants: nothing lost or duplicated; each tenant's items in arrival order within a
    lane; in every batch, no tenant of a lane gets more than one slot above a tenant of that
    lane still holding items (round robin); every live item before its deadline."""
    t = FakeTime()
    b: Batcher[int] = Batcher(
        BatcherConfig(max_size=max_size, min_size=1, window_ms=15.0, max_window_ms=45.0, lo_share=share,
                      lag_high=50, max_queued=10**6, prior_a_s=0.002),
        clock=t, waiter=t.wait,
    )
    seen: dict[tuple[str, str], int] = {}
    out: list[int] = []

    def check(batch: Batch[int]) -> None:
        for p in batch.items:
            assert p.deadline_ms > batch.formed_ms
            assert p.payload > seen.get((p.lane, p.tenant), -1)
            seen[(p.lane, p.tenant)] = p.payload
        for lane in ("hi", "lo"):
            got: dict[str, int] = {}
            for p in batch.items:
                if p.lane == lane:
                    got[p.tenant] = got.get(p.tenant, 0) + 1
            waiting = b._lanes[lane].tenants()
            for _x, n_x in got.items():
                for y in waiting:
                    assert n_x <= got.get(y, 0) + 1, (lane, got, waiting)
        out.extend(p.payload for p in batch.items + batch.expired)

    seq = 0
    for op in script:
        if op[0] == "put":
            b.put_nowait(seq, op[1], t.t + op[2], tenant=op[3])
            seq += 1
        elif op[0] == "burst":
            for _ in range(op[2]):
                b.put_nowait(seq, op[1], t.t + 60, tenant="a")
                seq += 1
        elif op[0] == "tick":
            t.t += op[1]
        else:
            batch = b.poll()
            if batch is not None:
                check(batch)

    async def drain() -> None:
        while b.queued():
            check(await b.next_batch())

    asyncio.run(drain())
    assert sorted(out) == list(range(seq)) and len(out) == len(set(out))
