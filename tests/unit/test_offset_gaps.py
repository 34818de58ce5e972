"""OffsetGapGuard without a broker: a record past the expected offset makes the guard seek back
and drop the partition's rest of the batch; a gap still there after the re-reads is accepted;
assignment changes forget the expectation."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from prometheus_client import REGISTRY

from rtaudit.workers.offsets import OffsetGapGuard
from rtaudit.workers.runtime.intake import consume_batch


class Msg:
    def __init__(self, partition: int, offset: int, topic: str = "audit.scores") -> None:
        self._p, self._o, self._t = partition, offset, topic

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def error(self) -> None:
        return None


class SeekRecorder:
    def __init__(self) -> None:
        self.seeks: list[tuple[str, int, int]] = []

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.topic, tp.partition, tp.offset))


def offsets(msgs: list) -> list[tuple[int, int]]:  # type: ignore[type-arg]
    return [(m.partition(), m.offset()) for m in msgs]


def gaps(action: str) -> float:
    return REGISTRY.get_sample_value("rtaudit_fetch_gaps_total", {"role": "t", "topic": "audit.scores", "action": action}) or 0.0


def test_contiguous_records_pass_untouched() -> None:
    c = SeekRecorder()
    g = OffsetGapGuard(c, "t")  # type: ignore[arg-type]
    batch = [Msg(0, 5), Msg(1, 9), Msg(0, 6), Msg(1, 10)]
    assert g.filter(batch) == batch and c.seeks == []
    assert g.filter([Msg(0, 7)]) and c.seeks == []


def test_a_skipped_record_is_read_again_and_the_partition_s_rest_is_dropped() -> None:
    c = SeekRecorder()
    g = OffsetGapGuard(c, "t")  # type: ignore[arg-type]
    g.filter([Msg(0, 10), Msg(1, 3)])
    before = gaps("reread")
    out = g.filter([Msg(0, 12), Msg(1, 4), Msg(0, 13)])  # offset 11 of partition 0 missing
    assert offsets(out) == [(1, 4)]  # partition 1 goes on; partition 0 waits for its re-read
    assert c.seeks == [("audit.scores", 0, 11)] and gaps("reread") - before == 1
    out = g.filter([Msg(0, 11), Msg(0, 12), Msg(0, 13)])  # the re-read brings it, in order
    assert offsets(out) == [(0, 11), (0, 12), (0, 13)] and len(c.seeks) == 1


def test_a_gap_that_stays_is_accepted_after_the_retries() -> None:
    c = SeekRecorder()
    g = OffsetGapGuard(c, "t", max_retries=2)  # type: ignore[arg-type]
    g.filter([Msg(0, 0)])
    before = gaps("accepted")
    assert g.filter([Msg(0, 2)]) == [] and g.filter([Msg(0, 2)]) == []  # two re-reads of offset 1
    out = g.filter([Msg(0, 2), Msg(0, 3)])  # a real gap (compaction, a transaction marker)
    assert offsets(out) == [(0, 2), (0, 3)] and gaps("accepted") - before == 1 and len(c.seeks) == 2
    assert g.filter([Msg(0, 5)]) == [] and len(c.seeks) == 3  # a later gap is retried afresh


def test_a_rebalance_forgets_the_position() -> None:
    c = SeekRecorder()
    g = OffsetGapGuard(c, "t")  # type: ignore[arg-type]
    g.filter([Msg(0, 100)])
    g.forget([TopicPartition("audit.scores", 0)])
    assert offsets(g.filter([Msg(0, 500)])) == [(0, 500)] and c.seeks == []  # another member moved it on
    assert offsets(g.filter([Msg(0, 40)])) == [(0, 40)]  # a replay from an earlier commit passes too


def test_consume_batch_applies_the_guard() -> None:
    class Consumer(SeekRecorder):
        def __init__(self, batches: list[list[Msg]]) -> None:
            super().__init__()
            self.batches = batches

        def consume(self, n: int, timeout: float) -> list[Msg]:
            return self.batches.pop(0) if self.batches else []

    c = Consumer([[Msg(2, 1), Msg(2, 3)], []])
    g = OffsetGapGuard(c, "t")  # type: ignore[arg-type]
    assert offsets(consume_batch(c, 10, 0.0, g)) == [(2, 1)] and c.seeks == [("audit.scores", 2, 2)]  # type: ignore[arg-type]


def test_a_failed_seek_lets_the_records_through() -> None:
    from confluent_kafka import KafkaError, KafkaException

    class Refusing(SeekRecorder):
        def seek(self, tp: TopicPartition) -> None:
            raise KafkaException(KafkaError(KafkaError._STATE, "Erroneous state"))

    g = OffsetGapGuard(Refusing(), "t")  # type: ignore[arg-type]
    g.filter([Msg(0, 1)])
    assert offsets(g.filter([Msg(0, 3), Msg(0, 4)])) == [(0, 3), (0, 4)]  # logged; nothing held back
