"""Records a fetch skipped, read again: :class:`OffsetGapGuard` (used by every consumer of the
fleet through :func:`rtaudit.workers.runtime.intake.consume_batch`, and by the control-topic readers)."""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from rtaudit.workers import metrics

log = logging.getLogger(__name__)


class OffsetGapGuard:
    """Re-reads records a fetch skipped: per assigned partition, the offset the next record must
    have; a record past it (a gap) makes the guard seek the consumer back to the missing offset
    and drop that partition's records from the batch, so they come again, in order.

    Why: the embedded broker (tansu, memory storage) sometimes answers a fetch without a record
    that two producers were writing to the same partition at once; the record is there on the
    next fetch (measured: 4 producers x 300 records/s into one partition, 20 s: 1-4 gaps of one
    record per run, each one re-read by a seek; ``.rtaudit`` issue 10, "a partial fusion never
    applied"). On Apache Kafka offsets of a non-compacted, non-transactional topic have no gaps,
    so the guard never fires there; a gap that is still there after ``max_retries`` re-reads (a
    compacted topic, a transaction marker) is accepted and logged.

    Args:
        consumer: the consumer whose position the guard moves (``seek``).
        role: metric and log label.
        max_retries: re-reads of one gap before it is accepted.
    """

    def __init__(self, consumer: Consumer, role: str, max_retries: int = 3) -> None:
        self.consumer, self.role, self.max_retries = consumer, role, max_retries
        #: (topic, partition) → offset the next record must have.
        self.expected: dict[tuple[str, int], int] = {}
        self._retries: dict[tuple[str, int, int], int] = {}

    def forget(self, partitions: list[TopicPartition]) -> None:
        """Partitions assigned or revoked: their position is the group's again (committed offset)."""
        for tp in partitions:
            self.expected.pop((tp.topic, tp.partition), None)

    def filter(self, messages: list[Message]) -> list[Message]:
        """``messages`` less the records at and after a gap of their partition (the consumer
        is sought back to the gap's first offset); errors pass through untouched."""
        out: list[Message] = []
        rewound: set[tuple[str, int]] = set()
        for m in messages:
            if m.error() is not None:
                out.append(m)
                continue
            tp = (m.topic() or "", m.partition() or 0)
            offset = m.offset() or 0
            if tp in rewound:
                continue
            want = self.expected.get(tp)
            if want is not None and offset > want:
                key = (tp[0], tp[1], want)
                tries = self._retries.get(key, 0)
                if tries < self.max_retries:
                    self._retries[key] = tries + 1
                    log.warning("%s: fetch of %s[%s] skipped offsets %s..%s; reading them again (try %s)",
                                self.role, tp[0], tp[1], want, offset - 1, tries + 1)
                    metrics.FETCH_GAPS.labels(self.role, tp[0], "reread").inc()
                    try:
                        self.consumer.seek(TopicPartition(tp[0], tp[1], want))
                    except KafkaException as exc:  # e.g. revoked meanwhile: the next owner replays it
                        log.warning("%s: could not seek %s[%s] back to %s: %s", self.role, tp[0], tp[1], want, exc)
                    else:
                        rewound.add(tp)
                        continue
                log.warning("%s: offsets %s..%s of %s[%s] are still missing after %s re-reads; going on",
                            self.role, want, offset - 1, tp[0], tp[1], tries)
                metrics.FETCH_GAPS.labels(self.role, tp[0], "accepted").inc()
                del self._retries[key]
            elif self._retries and want is not None:
                self._retries.pop((tp[0], tp[1], want), None)  # the re-read brought the missing record
            self.expected[tp] = offset + 1
            out.append(m)
        return out
