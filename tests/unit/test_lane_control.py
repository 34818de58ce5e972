"""The modality worker's control tick: lag per partition from the fetched high watermark,
fed to the batcher, and low-lane partitions paused/resumed (a fake confluent-kafka consumer)."""

from __future__ import annotations

from confluent_kafka import OFFSET_INVALID, TopicPartition

from rtaudit.engine.batcher import Batcher
from rtaudit.engine.batcher_config import BatcherConfig
from rtaudit.workers import metrics
from rtaudit.workers.runtime.lane_intake import LaneControl

HI, LO = "audit.text.hi", "audit.text.lo"


def TP(topic: str, partition: int) -> tuple[str, int]:  # noqa: N802 - reads like the Kafka type
    return (topic, partition)


class FakeConsumer:
    """The confluent-kafka consumer calls the tick makes, on ``(topic, partition)`` keys."""

    def __init__(self, highwaters: dict[tuple[str, int], int | None], positions: dict[tuple[str, int], int]) -> None:
        self.highwaters, self.positions = highwaters, positions
        self.active = set(highwaters)
        self.position_calls = 0

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(*tp) for tp in self.highwaters]

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        assert cached, "tansu's ListOffsets end offset is wrong: only the fetched high watermark counts"
        hw = self.highwaters[(tp.topic, tp.partition)]
        return (0, OFFSET_INVALID if hw is None else hw)

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        self.position_calls += 1
        return [TopicPartition(tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), OFFSET_INVALID)) for tp in tps]

    def pause(self, tps: list[TopicPartition]) -> None:
        self.active -= {(tp.topic, tp.partition) for tp in tps}

    def resume(self, tps: list[TopicPartition]) -> None:
        self.active |= {(tp.topic, tp.partition) for tp in tps}


def control(highwaters, positions=None, **cfg):
    consumer = FakeConsumer(highwaters, positions or {})
    batcher: Batcher[str] = Batcher(BatcherConfig(max_size=4, lo_share=0.25, pause_hi_lag=2, resume_hi_lag=0, **cfg))
    return LaneControl(consumer, "text", {HI: "hi", LO: "lo"}, batcher), consumer, batcher


async def test_lag_is_highwater_minus_next_offset_clamped():
    hi0, hi1, lo0 = TP(HI, 0), TP(HI, 1), TP(LO, 0)
    ctl, consumer, batcher = control({hi0: 10, hi1: None, lo0: 3}, positions={lo0: 1})
    ctl.seen({hi0: 4})  # records up to offset 4 reached the agent: position 5
    ctl.seen({hi0: 2})  # an older one does not move it back
    ctl.tick()
    assert batcher.lane_lag("hi") == 5 and batcher.lane_lag("lo") == 2  # lo0: no record yet, consumer position 1
    assert metrics.CONSUMER_LAG.labels("text", HI, "0")._value.get() == 5
    ctl.seen({lo0: 7})  # position past a stale high watermark: clamped at 0
    ctl.tick()
    assert batcher.lane_lag("lo") == 0
    ctl.tick()
    assert consumer.position_calls == 1  # cached between ticks


async def test_low_lane_paused_while_high_lane_lags_then_resumed():
    hi0, lo0, lo1 = TP(HI, 0), TP(LO, 0), TP(LO, 1)
    ctl, consumer, batcher = control({hi0: 10, lo0: 50, lo1: 50})
    for tp in (hi0, lo0, lo1):
        ctl.seen({tp: -1})
    for i in range(2):  # the low lane's reserve for its share is held
        batcher.put_nowait(f"l{i}", "lo", 10**13)
    ctl.tick()
    assert consumer.active == {hi0}
    assert metrics.LO_LANE_PAUSED.labels("text")._value.get() == 1
    ctl.seen({hi0: 9})  # the high lane drained
    ctl.tick()
    assert consumer.active == {hi0, lo0, lo1}
    assert metrics.LO_LANE_PAUSED.labels("text")._value.get() == 0


def test_the_intake_pauses_the_low_lane_at_once_and_hands_the_pause_to_the_event_loop():
    """``want_lo_paused`` is the event loop's alone; the intake thread's immediate pause (the held
    low-lane records reached the pause mark between two lag readings) is its own flag, given up
    once the loop's decision holds the lane."""
    from rtaudit.workers.runtime.lane_overflow import LO_OVERFLOW_PAUSE, LO_OVERFLOW_RESUME

    lo0, hi0 = TP(LO, 0), TP(HI, 0)
    ctl, consumer, _ = control({hi0: 0, lo0: 0})
    ctl.tick()  # the assignment is read
    ctl.lo_overflow = LO_OVERFLOW_PAUSE  # written on the loop by the overflow
    assert ctl.pause_lo_now() is True and ctl.want_lo_paused is False
    ctl.sync_pause()
    assert lo0 not in consumer.active and hi0 in consumer.active
    assert ctl.pause_lo_now() is False  # asked once
    ctl.apply_lag({"hi": 0, "lo": 0})  # the loop decides: the overflow holds the pause
    assert ctl.want_lo_paused is True
    ctl.pause_lo_now()
    assert ctl.lo_paused_by_intake is False  # the loop's decision holds the lane now
    ctl.sync_pause()
    assert lo0 not in consumer.active
    ctl.lo_overflow = LO_OVERFLOW_RESUME
    ctl.tick()  # drained to the resume mark: resumed
    assert lo0 in consumer.active and ctl.want_lo_paused is False
