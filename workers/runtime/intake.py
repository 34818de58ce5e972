"""The intake: owns a role's consumer. Everything that touches the consumer runs in the one
thread that calls :meth:`Intake.fetch` (librdkafka serialises a consumer's calls, and rebalance
callbacks run inside ``consume``): fetching in batches (:func:`consume_batch`), the offset-gap
guard (:class:`rtaudit.workers.offsets.OffsetGapGuard`), the consume-error filter
(:func:`usable`), pause and resume, and committing offsets (:meth:`Intake.commit`).

What to commit is the role's business: the batch loop asks its handler
(:meth:`rtaudit.workers.runtime.handler.Handler.commit_offsets`); a modality worker commits the
acknowledged prefix of each partition's current assignment generation
(:class:`rtaudit.workers.runtime.acks.InOrderAcks`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from rtaudit.workers.kafka import consumer_config
from rtaudit.workers.offsets import OffsetGapGuard
from rtaudit.workers.runtime.records import TP
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)

#: a rebalance callback: the partitions assigned, revoked or lost (called in the intake thread).
Rebalance = Callable[[list[TP]], None]


def consume_batch(consumer: Consumer, max_records: int, timeout_s: float, guard: OffsetGapGuard | None = None) -> list[Message]:
    """Up to ``max_records`` records: what the client already fetched, at once; when nothing
    is there, wait up to ``timeout_s`` seconds for the first one, then take what came with it.

    ``Consumer.consume(n, timeout)`` alone waits the whole timeout unless ``n`` records are
    queued: at saturation the fetcher holds fewer than ``n`` most of the time, and every
    call idled for its timeout (measured: the router spent 2.4 s of 7.8 s in 20 ms waits).
    With a ``guard``, records a fetch skipped are read again (:class:`OffsetGapGuard`).
    """
    messages = consumer.consume(max_records, 0)
    if not messages:
        messages = consumer.consume(1, timeout_s)
        if messages:
            messages += consumer.consume(max_records - 1, 0)
    return guard.filter(messages) if guard is not None and messages else messages


def usable(messages: list[Message], label: str) -> list[Message]:
    """``messages`` less the error events a ``consume`` returns among records (partition EOF
    silently; any other error logged as a WARNING with ``label``)."""
    out = []
    for m in messages:
        err = m.error()
        if err is None:
            out.append(m)
        elif err.code() != KafkaError._PARTITION_EOF:
            log.warning("%s consume error: %s", label, err)
    return out


def tps_of(partitions: Iterable[TopicPartition]) -> list[TP]:
    return [(p.topic, p.partition) for p in partitions]


class Intake:
    """One consumer-group member (see the module doc). Every method but the constructor runs
    in the intake thread.

    Args:
        settings: client profile and bootstrap (:func:`rtaudit.workers.kafka.consumer_config`).
        group_id: consumer group.
        topics: topics to subscribe to.
        label: log and metric label (the role).
        consumer_extra: more librdkafka consumer settings.
    """

    def __init__(self, settings: Settings, group_id: str, topics: list[str], label: str, **consumer_extra: Any) -> None:
        self.group_id, self.topics, self.label = group_id, topics, label
        self.consumer = Consumer(consumer_config(settings, group_id, **consumer_extra))
        self.gaps = OffsetGapGuard(self.consumer, label)

    def subscribe(self, on_assign: Rebalance, on_revoke: Rebalance, on_lost: Rebalance) -> None:
        """Join the group. The callbacks get ``(topic, partition)`` lists; the gap guard forgets
        the partitions' positions before each of them runs."""

        def wrap(kind: str, fn: Rebalance) -> Callable[[Consumer, list[TopicPartition]], None]:
            def callback(consumer: Consumer, partitions: list[TopicPartition]) -> None:
                tps = tps_of(partitions)
                (log.warning if kind == "lost" else log.info)("%s %s %s", self.label, kind, tps)
                self.gaps.forget(partitions)
                fn(tps)
            return callback

        self.consumer.subscribe(self.topics, on_assign=wrap("assigned", on_assign),
                                on_revoke=wrap("revoked", on_revoke), on_lost=wrap("lost", on_lost))

    def fetch(self, max_records: int, timeout_s: float) -> list[Message]:
        """One :func:`consume_batch` with the gap guard, errors filtered out (:func:`usable`)."""
        return usable(consume_batch(self.consumer, max_records, timeout_s, self.gaps), self.label)

    def fetch_raw(self, max_records: int, timeout_s: float) -> list[Message]:
        """As :meth:`fetch`, error events kept (the caller filters them later)."""
        return consume_batch(self.consumer, max_records, timeout_s, self.gaps)

    def commit(self, offsets: dict[TP, int], sync: bool = False) -> None:
        """Commit ``offsets`` (per partition, the offset of the next record to read). A failed
        commit is logged, not raised: the records after the last committed offset are consumed
        again by the partition's next owner (at-least-once; fusion drops what it decided)."""
        if not offsets:
            return
        try:
            positions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
            if sync:
                self.consumer.commit(offsets=positions, asynchronous=False)
            else:
                self.consumer.commit(offsets=positions, asynchronous=True)
        except KafkaException as exc:
            log.warning("%s commit failed (replayed records are deduplicated downstream): %s", self.label, exc)

    def assignment(self) -> set[TP]:
        return set(tps_of(self.consumer.assignment()))

    def pause(self, tps: Iterable[TP]) -> None:
        """Pause ``tps`` (a partition revoked meanwhile is skipped)."""
        tps = list(tps)
        if not tps:
            return
        try:
            self.consumer.pause([TopicPartition(*tp) for tp in tps])
        except KafkaException as exc:
            log.debug("%s pause of %s skipped: %s", self.label, tps, exc)

    def resume(self, tps: Iterable[TP]) -> None:
        """Resume ``tps`` (a failure is logged: the next pause decision runs again)."""
        tps = list(tps)
        if not tps:
            return
        try:
            self.consumer.resume([TopicPartition(*tp) for tp in tps])
        except KafkaException as exc:
            log.warning("%s resume of %s failed: %s", self.label, sorted(tps), exc)

    def close(self) -> None:
        """Leave the group (the revoke callback runs first)."""
        self.consumer.close()
