"""LowLaneOverflow: a full low lane holds low-lane records apart and never the high lane's;
held records enter the batcher in arrival order as it makes room; the low lane is paused
while any is held; a revoked partition's held records are dropped."""

from __future__ import annotations

import asyncio

from rtaudit.engine.batcher import Batcher
from rtaudit.engine.batcher_config import BatcherConfig
from rtaudit.workers.runtime.lane_intake import LaneControl
from rtaudit.workers.runtime.lane_overflow import (
    LO_OVERFLOW_PAUSE, LO_OVERFLOW_PAUSE_BYTES, LO_OVERFLOW_RESUME, LO_OVERFLOW_RESUME_BYTES, LowLaneOverflow, Work,
)

from .builders import task

FAR = 10**13


class Msg:
    def __init__(self, topic: str, partition: int = 0, value: bytes = b"{}") -> None:
        self._topic, self._partition, self._value = topic, partition, value

    def value(self) -> bytes:
        return self._value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition


class Control:
    lo_overflow = 0
    lo_overflow_bytes = 0


def work(i: int, topic: str = "audit.text.lo", partition: int = 0, nbytes: int = 2) -> Work:
    lane = "hi" if topic.endswith(".hi") else "lo"
    return Work(Msg(topic, partition, b"x" * nbytes), lane, task(request_id=f"r{i}", deadline_ms=FAR))  # type: ignore[arg-type]


def test_a_full_low_lane_never_holds_up_the_high_lane() -> None:
    async def run() -> None:
        batcher: Batcher[Work] = Batcher(BatcherConfig(max_size=2, max_queued=2))
        control = Control()
        overflow = LowLaneOverflow(batcher, control)  # type: ignore[arg-type]
        for i in range(5):
            await asyncio.wait_for(overflow.put(work(i)), 1)  # never waits
        hi = work(99, "audit.text.hi")
        await asyncio.wait_for(overflow.put(hi), 1)
        await overflow.settle()
        assert batcher.queued("lo") == 2 and batcher.queued("hi") == 1 and len(overflow) == 3
        assert control.lo_overflow == 3 and control.lo_overflow_bytes == 6  # reported to the lane control (which pauses from LO_OVERFLOW_PAUSE)
        taken = []
        while len(taken) < 6:
            batch = await asyncio.wait_for(batcher.next_batch(), 1)
            taken += [p.payload.task.request_id for p in batch.items]  # type: ignore[union-attr]
            await asyncio.sleep(0)  # the drain moves held records in as room appears
        assert taken[0] == "r99" and [t for t in taken if t != "r99"] == [f"r{i}" for i in range(5)]
        assert len(overflow) == 0 and control.lo_overflow == 0 and control.lo_overflow_bytes == 0

    asyncio.run(run())


def test_a_revoked_partition_s_held_records_are_dropped() -> None:
    async def run() -> None:
        batcher: Batcher[Work] = Batcher(BatcherConfig(max_size=1, max_queued=1))
        overflow = LowLaneOverflow(batcher)
        for i in range(4):
            await overflow.put(work(i, partition=i % 2))
        overflow.forget({("audit.text.lo", 1)})
        assert [w.task.request_id for w in overflow.held] == ["r2"]  # type: ignore[union-attr]
        assert overflow.held_bytes == 2
        overflow.cancel()

    asyncio.run(run())


def test_past_max_held_the_intake_waits_for_room() -> None:
    async def run() -> None:
        batcher: Batcher[Work] = Batcher(BatcherConfig(max_size=1, max_queued=1))
        overflow = LowLaneOverflow(batcher, max_held=2)
        for i in range(5):
            await overflow.put(work(i))
        settling = asyncio.ensure_future(overflow.settle())
        await asyncio.sleep(0.01)
        assert not settling.done()  # 4 held > 2: back-pressure
        for _ in range(5):
            await asyncio.wait_for(batcher.next_batch(), 1)
            await asyncio.sleep(0)
        await asyncio.wait_for(settling, 1)

    asyncio.run(run())


def test_the_low_lane_pauses_from_a_held_backlog_and_resumes_when_it_is_nearly_gone() -> None:
    control = LaneControl(None, "text", {}, Batcher(BatcherConfig(max_size=4)))
    seen = []
    for held in (1, LO_OVERFLOW_PAUSE - 1, LO_OVERFLOW_PAUSE, LO_OVERFLOW_RESUME + 1, LO_OVERFLOW_RESUME, 1, 0):
        control.lo_overflow = held
        seen.append(control.overflow_pause())
    assert seen == [False, False, True, True, False, False, False]


def test_held_bytes_bound_the_backlog_as_records_do() -> None:
    async def run() -> None:
        batcher: Batcher[Work] = Batcher(BatcherConfig(max_size=1, max_queued=1))
        overflow = LowLaneOverflow(batcher, max_held=1000, max_held_bytes=250)
        for i in range(4):
            await overflow.put(work(i, nbytes=100))  # 1 in the batcher, 3 held: 300 bytes
        assert overflow.held_bytes == 300
        settling = asyncio.ensure_future(overflow.settle())
        await asyncio.sleep(0.01)
        assert not settling.done()  # 300 held bytes > 250: back-pressure although 3 records < 1000
        await asyncio.wait_for(batcher.next_batch(), 1)
        await asyncio.sleep(0.01)
        await asyncio.wait_for(settling, 1)
        assert overflow.held_bytes == 200

    asyncio.run(run())


def test_the_low_lane_pauses_on_held_bytes_too() -> None:
    control = LaneControl(None, "text", {}, Batcher(BatcherConfig(max_size=4)))
    seen = []
    for held, nbytes in ((1, LO_OVERFLOW_PAUSE_BYTES - 1), (1, LO_OVERFLOW_PAUSE_BYTES), (1, LO_OVERFLOW_RESUME_BYTES + 1),
                         (LO_OVERFLOW_RESUME + 1, LO_OVERFLOW_RESUME_BYTES), (1, LO_OVERFLOW_RESUME_BYTES)):
        control.lo_overflow, control.lo_overflow_bytes = held, nbytes
        seen.append(control.overflow_pause())
    assert seen == [False, True, True, True, False]


def test_held_low_lane_records_count_as_that_lane_s_lag() -> None:
    batcher: Batcher[Work] = Batcher(BatcherConfig(max_size=4))
    control = LaneControl(None, "text", {}, batcher)
    control.lo_overflow = 300  # fetched, past the consumer's position, not yet in the batcher
    control.apply_lag({"hi": 5, "lo": 100})
    assert batcher.lane_lag("lo") == 400 and batcher.lane_lag("hi") == 5 and batcher.stats().lag == 405


def test_a_task_costs_its_text_in_encoder_windows() -> None:
    from rtaudit.workers.runtime.lane_overflow import TEXT_CHARS_PER_SLOT, task_cost

    assert task_cost(task(text="hello")) == 1.0
    assert task_cost(task(text="x" * 32_000)) == 32_000 / TEXT_CHARS_PER_SLOT > 64  # a batch of its own
    assert task_cost(task(text=None)) == 1.0  # media tasks


class HiControl:
    hi_held = 0
    want_hi_paused = False


def test_a_full_high_lane_never_holds_up_the_low_lane() -> None:
    """Issue 34, defect 4: with the high lane full, low-lane records consumed after high-lane ones
    used to wait for room in the high lane (and the intake stopped fetching): the low lane's
    share was never served. Now they reach the batcher at once; the high lane's records are held,
    in order, and its partitions paused while any is held."""
    from rtaudit.workers.runtime.lane_overflow import HighLaneHold

    async def run() -> None:
        batcher: Batcher[Work] = Batcher(BatcherConfig(max_size=2, max_queued=2, lo_share=0.5))
        control = HiControl()
        hold = HighLaneHold(batcher, control)  # type: ignore[arg-type]
        overflow = LowLaneOverflow(batcher)
        his = [work(i, "audit.text.hi") for i in range(5)]
        for w in his:
            await asyncio.wait_for(hold.put(w), 0.5)  # never waits for room
        await asyncio.wait_for(overflow.put(work(99)), 0.5)
        assert batcher.queued("lo") == 1 and batcher.queued("hi") == 2
        assert len(hold) == 3 and control.want_hi_paused and control.hi_held == 3
        taken: list[str] = []
        while len(taken) < 6:
            batch = await asyncio.wait_for(batcher.next_batch(), 1)
            taken += [p.payload.task.request_id for p in batch.items]  # type: ignore[union-attr]
            await asyncio.sleep(0)  # the hold moves its next record in
        assert "r99" in taken[:4]  # the low lane's share: in the second batch at the latest
        assert [t for t in taken if t != "r99"] == [f"r{i}" for i in range(5)]  # the high lane in order
        assert len(hold) == 0 and not control.want_hi_paused and control.hi_held == 0

    asyncio.run(run())


def test_a_revoked_partition_s_held_high_lane_records_are_dropped() -> None:
    from rtaudit.workers.runtime.lane_overflow import HighLaneHold

    async def run() -> None:
        batcher: Batcher[Work] = Batcher(BatcherConfig(max_size=1, max_queued=1))
        hold = HighLaneHold(batcher)
        ws = [work(i, "audit.text.hi", partition=i % 2) for i in range(4)]
        for w in ws:
            await hold.put(w)
        await asyncio.sleep(0)
        dropped = hold.forget({("audit.text.hi", 1)})
        # r0 is in the batcher; r1 is on its way in (it gets there: acked when it finishes), r3 is dropped
        assert [w.task.request_id for w in dropped] == ["r3"]  # type: ignore[union-attr]
        assert [w.task.request_id for w in hold.held] == ["r2"]  # type: ignore[union-attr]
        hold.cancel()

    asyncio.run(run())
