"""The modality worker's control tick: lag per partition from the fetched high watermark,
fed to the batcher, and low-lane partitions paused/resumed (a fake Faust consumer)."""

from __future__ import annotations

from typing import NamedTuple

from engine.batcher import Batcher, BatcherConfig
from workers import metrics
from workers.modality import LaneControl

HI, LO = "audit.text.hi", "audit.text.lo"


class TP(NamedTuple):
    topic: str
    partition: int


class FakeConsumer:
    def __init__(self, highwaters: dict[TP, int | None], positions: dict[TP, int]) -> None:
        self.highwaters, self.positions = highwaters, positions
        self.active = set(highwaters)
        self.position_calls = 0

    def assignment(self) -> set[TP]:
        return set(self.highwaters)

    def highwater(self, tp: TP) -> int | None:
        return self.highwaters[tp]

    async def position(self, tp: TP) -> int | None:
        self.position_calls += 1
        return self.positions.get(tp)

    def pause_partitions(self, tps) -> None:
        self.active -= set(tps)

    def resume_partitions(self, tps) -> None:
        self.active |= set(tps)


class FakeApp:
    rebalancing = False

    def __init__(self, consumer: FakeConsumer) -> None:
        self.consumer = consumer


def control(highwaters, positions=None, **cfg):
    consumer = FakeConsumer(highwaters, positions or {})
    batcher: Batcher[str] = Batcher(BatcherConfig(max_size=4, lo_share=0.25, pause_hi_lag=2, resume_hi_lag=0, **cfg))
    return LaneControl(FakeApp(consumer), "text", {HI: "hi", LO: "lo"}, batcher), consumer, batcher  # type: ignore[arg-type]


async def test_lag_is_highwater_minus_next_offset_clamped():
    hi0, hi1, lo0 = TP(HI, 0), TP(HI, 1), TP(LO, 0)
    ctl, consumer, batcher = control({hi0: 10, hi1: None, lo0: 3}, positions={lo0: 1})
    ctl.seen(hi0, 4)  # records up to offset 4 reached the agent: position 5
    ctl.seen(hi0, 2)  # an older one does not move it back
    await ctl.tick()
    assert batcher.lane_lag("hi") == 5 and batcher.lane_lag("lo") == 2  # lo0: no record yet, consumer position 1
    assert metrics.CONSUMER_LAG.labels("text", HI, "0")._value.get() == 5
    ctl.seen(lo0, 7)  # position past a stale high watermark: clamped at 0
    await ctl.tick()
    assert batcher.lane_lag("lo") == 0
    await ctl.tick()
    assert consumer.position_calls == 1  # cached between ticks


async def test_low_lane_paused_while_high_lane_lags_then_resumed():
    hi0, lo0, lo1 = TP(HI, 0), TP(LO, 0), TP(LO, 1)
    ctl, consumer, batcher = control({hi0: 10, lo0: 50, lo1: 50})
    for tp in (hi0, lo0, lo1):
        ctl.seen(tp, -1)
    for i in range(2):  # the low lane's reserve for its share is held
        batcher.put_nowait(f"l{i}", "lo", 10**13)
    await ctl.tick()
    assert consumer.active == {hi0}
    assert metrics.LO_LANE_PAUSED.labels("text")._value.get() == 1
    ctl.seen(hi0, 9)  # the high lane drained
    await ctl.tick()
    assert consumer.active == {hi0, lo0, lo1}
    assert metrics.LO_LANE_PAUSED.labels("text")._value.get() == 0
