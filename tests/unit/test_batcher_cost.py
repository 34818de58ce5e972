"""The batcher's item costs: a heavy item (a 32,000-character text) takes several batch slots, and a
batch takes items only while their slots fit (time driven by the fake clock of test_batcher)."""

from __future__ import annotations

import pytest

from .test_batcher import FAR, make, payloads


def test_heavy_items_make_short_batches_and_ordinary_ones_fill_the_rest():
    b, t = make(max_size=4, lo_share=0.0, window_ms=15.0)
    b.put_nowait("huge", "lo", FAR, cost=125.0)  # a 32,000-character text
    b.put_nowait("big", "lo", FAR, cost=3.0)
    for i in range(3):
        b.put_nowait(f"s{i}", "lo", FAR)
    batch = b.poll()
    assert batch is not None and payloads(batch) == ["huge"]  # alone: more than the 4 slots
    batch = b.poll()
    assert batch is not None and payloads(batch) == ["big", "s0"]  # 3 + 1 slots
    t.t += 15  # two items left: they close on the window
    batch = b.poll()
    assert batch is not None and payloads(batch) == ["s1", "s2"]
    assert b.queued() == 0 and b._heavy == 0


def test_a_heavy_low_lane_item_does_not_ride_with_a_full_high_lane_batch():
    b, t = make(max_size=4, lo_share=0.0, window_ms=15.0)
    b.put_nowait("lo-huge", "lo", FAR, cost=50.0)
    b.put_nowait("hi1", "hi", FAR)
    b.put_nowait("hi2", "hi", FAR)
    t.t += 15
    batch = b.poll()
    assert batch is not None and payloads(batch) == ["hi1", "hi2"]  # the huge one waits for its own batch
    batch = b.poll()
    assert batch is not None and payloads(batch) == ["lo-huge"]


def test_expired_heavy_items_are_forgotten_by_the_cost_count():
    b, t = make(max_size=4)
    b.put_nowait("dead", "lo", t.t + 1, cost=10.0)
    t.t += 5
    batch = b.poll()
    assert batch is not None and [p.payload for p in batch.expired] == ["dead"] and b._heavy == 0


@pytest.mark.parametrize("cost", [0.5, 0.0, -1.0, float("nan")])
def test_a_cost_below_one_slot_is_refused(cost):
    b, _ = make()
    with pytest.raises(ValueError, match="cost"):
        b.put_nowait("x", "lo", FAR, cost=cost)
