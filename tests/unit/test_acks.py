"""In-order acks: a record is released for ack only when every older record of its partition is done."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtaudit.workers.acks import InOrderAcks


def test_out_of_order_finish_acks_in_offset_order():
    acks: InOrderAcks[tuple[int, int]] = InOrderAcks(lambda r: r[0])
    records = [(0, 5), (0, 6), (0, 7), (1, 3)]
    for r in records:
        acks.track(r)
    assert acks.done((0, 7)) == []  # 5 and 6 still running
    assert acks.done((1, 3)) == [(1, 3)]  # another partition is independent
    assert acks.done((0, 5)) == [(0, 5)]
    assert acks.done((0, 6)) == [(0, 6), (0, 7)]
    assert acks.waiting() == 0


@given(st.permutations(list(range(30))), st.integers(1, 4))
def test_every_record_acked_once_in_order_per_partition(finish_order, partitions):
    acks: InOrderAcks[tuple[int, int]] = InOrderAcks(lambda r: r[0])
    records = [(i % partitions, i) for i in range(30)]
    for r in records:
        acks.track(r)
    released = [r for i in finish_order for r in acks.done(records[i])]
    assert sorted(released) == sorted(records)
    for p in range(partitions):
        offsets = [o for q, o in released if q == p]
        assert offsets == sorted(offsets)
    assert acks.waiting() == 0


def test_a_forgotten_partition_releases_nothing_and_ignores_late_finishes():
    acks: InOrderAcks[tuple[int, int]] = InOrderAcks(lambda r: r[0])
    for r in [(0, 1), (0, 2), (1, 1)]:
        acks.track(r)
    acks.forget(0)  # revoked while (0, 1) and (0, 2) were in the batcher
    assert acks.done((0, 2)) == [] and acks.done((0, 1)) == []
    assert acks.waiting() == 1
    with pytest.raises(KeyError):
        acks.done((2, 9))  # never tracked: a bug, not a revocation
    acks.track((0, 3))  # assigned again later
    assert acks.done((0, 3)) == [(0, 3)]
