"""In-order acks: a record is released for ack only when every older record of its partition is done."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workers.acks import InOrderAcks


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


def test_records_are_finished_only_after_their_outputs_were_delivered():
    import asyncio

    from workers.acks import finish_when_delivered

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        ok, failed, later = loop.create_future(), loop.create_future(), loop.create_future()
        finished: list[str] = []

        async def finish(record: str) -> None:
            finished.append(record)

        ok.set_result("meta")
        failed.set_exception(RuntimeError("delivery failed after retries"))
        later.set_result("meta")
        with pytest.raises(RuntimeError, match="delivery failed"):
            await finish_when_delivered([("a", [ok]), ("b", [ok, failed]), ("c", [later])], finish)
        return finished

    # "a" is acked; "b" (its DLQ record failed) and everything after it are not: replayed
    assert asyncio.run(scenario()) == ["a"]
