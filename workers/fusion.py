"""Fusion: joins manifests and partials on ``audit.scores`` by request id and emits
exactly one verdict per request on ``audit.verdicts``. Start: ``faust -A rtaudit.workers.fusion worker``.

State lives in memory, one :class:`rtaudit.engine.fusion_table.PendingTable` per assigned
partition, and is rebuilt by replay, not from a changelog (tansu's wrong end offset
made Faust's changelog recovery lose pending requests, docs/broker.md):

* **commit**: per partition, the first offset of the oldest request still waiting for
  its verdict (everything after it is replayed by whoever owns the partition next), and
  only after every verdict produced so far was acknowledged (:mod:`rtaudit.workers.stream`);
* **rebuild on assignment**: read the keys of the verdicts this partition already has
  (``audit.verdicts``, same partition number, from the time of the committed record
  minus the retention), mark them decided, then consume from the committed offset.
  A request decided before a crash is therefore not decided again: no duplicate after
  a ``kill -9`` on tansu or on Apache Kafka. A duplicate remains possible only from a
  zombie owner (a member that lost its partitions but still produced); the client and
  ``rtaudit verdicts`` keep the first verdict of a request id.
* **late records**: a decided request's id is kept until its deadline + grace + retention
  (:mod:`rtaudit.engine.fusion_table` says why that outlasts every replay); records of it
  that arrive meanwhile (an upstream worker's replay after a rebalance or a crash) are dropped
  and counted (``rtaudit_fusion_dropped_records_total``), never decided again.
* **deadlines**: a heap per partition, popped after every batch (never a table scan).

Intake and emit are batched: one ``consume`` returns up to 2,000 records, verdicts
go to the producer without awaiting each delivery; the checkpoint waits once.
"""

from __future__ import annotations

import dataclasses
import json

import logging
import time

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.engine.fusion import Fusion
from rtaudit.engine.fusion_table import DecidedRequest, PendingTable
from rtaudit.schemas.codec import decode_scores_record, encode
from rtaudit.schemas.errors import AuditError
from rtaudit.topics.catalog import SCORES, VERDICTS
from rtaudit.workers import metrics
from rtaudit.workers.app import make_app
from rtaudit.workers.kafka import consumer_config
from rtaudit.workers.settings import Settings
from rtaudit.workers.stream import BatchLoop, run_in_faust

log = logging.getLogger(__name__)
ROLE = "fusion"
#: consumer group of fusion on ``audit.scores``.
GROUP_ID = "rtaudit-fusion"
#: extra look-back when reading verdicts back, for clock skew between producers, ms.
CLOCK_MARGIN_MS = 10_000
#: longest wait for one read while rebuilding a partition, s.
REBUILD_READ_TIMEOUT_S = 10.0


class FusionLoop(BatchLoop):
    """Fusion's batch loop: ``audit.scores`` → pending tables → ``audit.verdicts``.

    Raises:
        RuntimeError: at start, when ``audit.verdicts`` and ``audit.scores`` differ in
            partition count (a request's verdict goes to its scores partition's number).
    """

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, GROUP_ID, [SCORES], control_role=ROLE)
        self.fusion = Fusion(settings.policies, grace_ms=settings.fusion_grace_ms, retention_ms=settings.fusion_retention_ms)
        self.tables: dict[int, PendingTable] = {}
        self.known_tenants = set(settings.tenants)
        meta = self.consumer.list_topics(timeout=30)
        counts = {t: len(meta.topics[t].partitions) for t in (SCORES, VERDICTS) if t in meta.topics}
        if len(counts) == 2 and counts[SCORES] != counts[VERDICTS]:
            raise RuntimeError(f"{VERDICTS} has {counts[VERDICTS]} partitions and {SCORES} {counts[SCORES]}: they must match")

    # -- partitions ----------------------------------------------------------------
    def assigned(self, partitions: list[TopicPartition]) -> None:
        committed = {tp.partition: tp.offset for tp in self.consumer.committed(partitions, timeout=REBUILD_READ_TIMEOUT_S)}
        reader = Consumer(consumer_config(self.settings, f"{GROUP_ID}-rebuild", **{"enable.partition.eof": True}))
        try:
            for tp in partitions:
                started = time.monotonic()
                table = self.tables[tp.partition] = PendingTable(self.fusion)
                since_ms = self._record_time(reader, tp.partition, committed.get(tp.partition, -1))
                n = self._mark_decided(reader, table, tp.partition, since_ms - self.fusion.retention_ms - CLOCK_MARGIN_MS)
                log.info(
                    "fusion partition %s: %s verdicts already out, replay from offset %s (%.2f s)",
                    tp.partition, n, committed.get(tp.partition), time.monotonic() - started,
                )
        finally:
            reader.close()

    def revoked(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.tables.pop(tp.partition, None)

    @staticmethod
    def _read_one(reader: Consumer) -> Message | None:
        """The next record of the reader's single assigned partition; ``None`` at its end."""
        deadline = time.monotonic() + REBUILD_READ_TIMEOUT_S
        while time.monotonic() < deadline:
            m = reader.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                return m
            if m.error().code() == KafkaError._PARTITION_EOF:
                return None
            log.warning("rebuild read error: %s", m.error())
        raise TimeoutError(f"no answer from the broker in {REBUILD_READ_TIMEOUT_S} s while rebuilding fusion state")

    def _record_time(self, reader: Consumer, partition: int, offset: int) -> int:
        """Timestamp (ms) of the scores record at the committed ``offset``: the oldest
        record the replay will see (now, when there is none yet)."""
        if offset < 0:
            return 0  # never committed: the replay starts at the beginning
        reader.assign([TopicPartition(SCORES, partition, offset)])
        m = self._read_one(reader)
        return m.timestamp()[1] if m is not None else now_ms()

    def _mark_decided(self, reader: Consumer, table: PendingTable, partition: int, since_ms: int) -> int:
        """Mark decided every request with a verdict in ``audit.verdicts[partition]`` at or
        after ``since_ms``. Returns how many."""
        [found] = reader.offsets_for_times([TopicPartition(VERDICTS, partition, max(0, since_ms))], timeout=REBUILD_READ_TIMEOUT_S)
        start = found.offset if found.offset >= 0 else reader.get_watermark_offsets(TopicPartition(VERDICTS, partition))[1]
        reader.assign([TopicPartition(VERDICTS, partition, start)])
        now, n, first = now_ms(), 0, True
        while (m := self._read_one(reader)) is not None:
            if first and since_ms > 0 and m.timestamp()[1] < since_ms:
                # tansu answers offset 0 for a time past its last record (Kafka answers the end):
                # no verdict is that recent, so start at the end
                end = reader.get_watermark_offsets(TopicPartition(VERDICTS, partition))[1]
                reader.assign([TopicPartition(VERDICTS, partition, end)])
                first = False
                continue
            first = False
            if m.key():
                table.mark_decided(m.key().decode("utf-8", "replace"), now, self._deadline_of(m))
                n += 1
        return n

    @staticmethod
    def _deadline_of(m: Message) -> int | None:
        """The ``deadline_ms`` of a verdict read back (``None`` when it has none readable). Parsed
        as plain JSON, not validated: the rebuild reads every verdict of the look-back window."""
        try:
            deadline = json.loads(m.value() or b"").get("deadline_ms")
        except (ValueError, AttributeError):
            return None
        return deadline if isinstance(deadline, int) else None

    # -- records -------------------------------------------------------------------
    def handle(self, records: list[Message]) -> None:
        now = now_ms()
        self._follow_policies()
        for m in records:
            table = self.tables.get(m.partition())
            if table is None:
                continue  # revoked in this very batch

            raw = m.value() or b""
            try:
                record = decode_scores_record(raw)
            except AuditError as exc:
                self.dead_letter(ROLE, m, exc)
                table.skip(m.offset())
                continue
            decision = table.apply(record, m.offset(), now)
            if decision is not None:
                self._emit(decision, m.partition())
        for table in self.tables.values():
            for reason, n in table.take_dropped().items():
                metrics.FUSION_DROPPED.labels(reason).inc(n)

    def _follow_policies(self) -> None:
        """Decide with the control topic's tenant policies (``policy:<tenant>``) from the next record on."""
        if self.control is None:
            return
        policies = self.policies()
        if policies is not self.fusion.policies:
            self.fusion = dataclasses.replace(self.fusion, policies=policies)
            for table in self.tables.values():
                table.fusion = self.fusion

    def tick(self) -> None:
        self._follow_policies()
        now = now_ms()
        for partition, table in self.tables.items():
            for decision in table.due(now):
                self._emit(decision, partition)

    def commit_offsets(self, partitions: list[int] | None = None) -> list[TopicPartition]:
        metrics.FUSION_PENDING.set(sum(t.undecided for t in self.tables.values()))
        out = []
        for p, table in self.tables.items():
            if partitions is not None and p not in partitions:
                continue
            offset = table.commit_offset()
            if offset is not None:
                out.append(TopicPartition(SCORES, p, offset))
        return out

    def _emit(self, decision: DecidedRequest, partition: int) -> None:
        verdict = decision.verdict
        self.produce(VERDICTS, verdict.request_id.encode(), encode(verdict), partition)
        metrics.VERDICTS.labels(verdict.decision, str(verdict.complete).lower()).inc()
        metrics.END_TO_END_SECONDS.observe(max(0, verdict.latency_ms) / 1000.0)
        if verdict.decided_at_ms > verdict.deadline_ms:
            tenant = metrics.tenant_label(verdict.tenant_id, self.known_tenants)
            metrics.SLO_MISSES.labels(ROLE, tenant, decision.lane or "unknown", "late_verdict").inc()


app, settings = make_app(ROLE, app_id=f"{GROUP_ID}-runtime")
run_in_faust(app, lambda: FusionLoop(settings))
