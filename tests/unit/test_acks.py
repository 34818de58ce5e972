"""In-order acks: a record is released for ack only when every older record of its partition is done."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtaudit.workers.runtime.acks import InOrderAcks


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


# -- assignment generations (rebalances while records are in flight) -------------------------
# A record is a (partition, offset) tuple; a record object consumed again after a rebalance is a
# new object (equal value, different identity), as a re-fetched Kafka message is.


def rec(partition: int, offset: int) -> list[int]:
    """A fresh record object (lists compare by value but are tracked by identity)."""
    return [partition, offset]


def test_the_issue_34_crash_a_record_finishing_after_its_partition_came_back():
    """Today's calls only (revoke, then records of the same partition consumed again): the record
    consumed before the revoke used to raise ``KeyError: record never tracked`` from ``done``."""
    acks: InOrderAcks[list[int]] = InOrderAcks(lambda r: r[0])
    old = rec(0, 744)
    acks.track(old)
    acks.forget(0)
    new = rec(0, 744)
    acks.track(new)  # the partition came back: the record is consumed again
    assert acks.done(old) == []
    assert acks.done(new) == [new]


def test_revoke_then_done_finishes_without_error_and_releases_nothing():
    acks: InOrderAcks[list[int]] = InOrderAcks(lambda r: r[0])
    a, b = rec(0, 1), rec(0, 2)
    acks.track(a)
    acks.track(b)
    acks.revoke(0)
    assert acks.done(b) == [] and acks.done(a) == []
    assert acks.waiting() == 0 and acks.stale == 2


def test_revoke_assign_then_done_of_the_old_generation_is_never_released_by_the_new_one():
    """The crash of issue 34: a record consumed before the revoke finishes after the partition
    came back (``KeyError: record never tracked``)."""
    acks: InOrderAcks[list[int]] = InOrderAcks(lambda r: r[0])
    old = [rec(0, 10), rec(0, 11)]
    for r in old:
        acks.track(r)
    acks.revoke(0)
    acks.assign(0)  # the partition comes back: replay from the committed offset
    new = [rec(0, 10), rec(0, 11), rec(0, 12)]
    for r in new:
        acks.track(r)
    assert acks.done(old[1]) == []  # no error, and nothing of the new generation released
    assert acks.done(new[0]) == [new[0]]
    assert acks.done(old[0]) == []
    assert acks.done(new[2]) == []  # new[1] still running: the new generation keeps its order
    assert acks.done(new[1]) == [new[1], new[2]]
    assert acks.waiting() == 0


def test_assign_twice_without_a_revoke_starts_a_new_generation():
    """An assignment of a partition already held (a lost partition given back, ``on_lost``
    missed) rewinds to the committed offset: the new generation must not wait for the old."""
    acks: InOrderAcks[list[int]] = InOrderAcks(lambda r: r[0])
    acks.assign(0)
    a = rec(0, 5)
    acks.track(a)
    acks.assign(0)
    b = rec(0, 5)
    acks.track(b)
    assert acks.done(b) == [b]
    assert acks.done(a) == []
    assert acks.waiting() == 0


def test_generations_of_several_rebalances_each_finish_alone():
    acks: InOrderAcks[list[int]] = InOrderAcks(lambda r: r[0])
    gens = []
    for _ in range(3):
        acks.assign(0)
        gen = [rec(0, o) for o in range(4)]
        for r in gen:
            acks.track(r)
        gens.append(gen)
        acks.revoke(0)
    acks.assign(0)
    live = [rec(0, o) for o in range(4)]
    for r in live:
        acks.track(r)
    released = [r for gen in gens for r in reversed(gen) for r in acks.done(r)]
    assert released == []
    assert [r for x in live for r in acks.done(x)] == live
    assert acks.waiting() == 0


@given(st.lists(st.sampled_from(["track", "done", "done", "revoke", "assign"]), max_size=80), st.randoms(use_true_random=False))
def test_random_interleavings_never_raise_and_release_only_the_current_generation_in_order(ops, rnd):
    """Whatever the order of consumption, finishes and rebalances on one partition: no error; a
    record is released at most once, only while its generation is current, in offset order."""
    acks: InOrderAcks[list[int]] = InOrderAcks(lambda r: r[0])
    generation, offset = 0, 0
    gen_of: dict[int, int] = {}  # id(record) -> generation it was consumed in
    running: list[list[int]] = []  # consumed, not yet done
    keep: list[list[int]] = []  # every record stays alive: ids are never reused
    released: dict[int, list[int]] = {}  # generation -> offsets released
    for op in ops:
        if op == "track":
            r = rec(0, offset)
            offset += 1
            acks.track(r)
            gen_of[id(r)] = generation
            running.append(r)
            keep.append(r)
        elif op == "done" and running:
            for out in acks.done(running.pop(rnd.randrange(len(running)))):
                assert gen_of[id(out)] == generation
                released.setdefault(generation, []).append(out[1])
        elif op in ("revoke", "assign"):
            getattr(acks, op)(0)
            generation += 1
            offset = 0  # a new generation replays from the committed offset (here: 0)
    while running:
        for out in acks.done(running.pop()):
            assert gen_of[id(out)] == generation
            released.setdefault(generation, []).append(out[1])
    for offsets in released.values():
        assert offsets == sorted(set(offsets))
    current = [r[1] for r in keep if gen_of[id(r)] == generation]
    assert released.get(generation, []) == current  # the live generation is released whole
    assert acks.waiting() == 0
