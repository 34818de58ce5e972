"""Fusion: joins manifests and partials on ``audit.scores`` by request id and emits
exactly one verdict per request on ``audit.verdicts``. Start: ``faust -A rtaudit.workers.fusion worker``.

State lives in memory, one :class:`rtaudit.engine.fusion_table.PendingTable` per assigned
partition, and is rebuilt by replay, not from a changelog (tansu's wrong end offset
made Faust's changelog recovery lose pending requests, docs/broker.md):

* **commit**: per partition, the first offset of the oldest request still waiting for
  its verdict (everything after it is replayed by whoever owns the partition next), and
  only after every verdict produced so far was acknowledged (:mod:`rtaudit.workers.runtime.loop`);
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
go to the producer without awaiting each delivery; the checkpoint waits once. The logic is
:class:`FusionHandler` (no Kafka in it); reading the verdicts back is :class:`VerdictReader`,
which the batch loop (:func:`fusion_loop`) calls before the handler takes a partition.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Collection, Sequence

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.engine.fusion import Fusion
from rtaudit.engine.fusion_table import DecidedRequest, PendingTable
from rtaudit.engine.policy import PolicyBook
from rtaudit.schemas.codec import decode_scores_record, encode
from rtaudit.schemas.errors import AuditError
from rtaudit.topics.catalog import SCORES, VERDICTS
from rtaudit.workers import metrics, tracing
from rtaudit.workers.app import make_app
from rtaudit.workers.kafka import consumer_config
from rtaudit.workers.runtime.handler import HandlerBase, HandlerContext
from rtaudit.workers.runtime.loop import BatchLoop, run_in_faust
from rtaudit.workers.runtime.records import TP, DeadLetter, Emit, Output, Record, raw_value
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
ROLE = "fusion"
#: consumer group of fusion on ``audit.scores``.
GROUP_ID = "rtaudit-fusion"
#: extra look-back when reading verdicts back, for clock skew between producers, ms.
CLOCK_MARGIN_MS = 10_000
#: longest wait for one read while rebuilding a partition, s.
REBUILD_READ_TIMEOUT_S = 10.0


#: a request already decided: its id and its deadline (epoch ms; ``None`` when unreadable).
DecidedId = tuple[str, int | None]
#: partition numbers of ``audit.scores`` → the requests their ``audit.verdicts`` partition already decided.
DecidedReader = Callable[[list[int]], dict[int, list[DecidedId]]]


class FusionHandler(HandlerBase):
    """Fusion's handler: ``audit.scores`` records → pending tables → verdicts on ``audit.verdicts``
    (the verdict goes to the partition number of its scores record). Runs on one thread.

    Args:
        fusion: the decision rules (:class:`rtaudit.engine.fusion.Fusion`).
        policies: the tenant policies in force (followed from the next record on).
        decided: reads back the requests each newly assigned partition already decided
            (:class:`VerdictReader`; ``lambda parts: {}`` for a fresh topic).
        known_tenants: tenants named in metrics (others are ``other``).
    """

    def __init__(self, fusion: Fusion, policies: Callable[[], PolicyBook], decided: DecidedReader,
                 known_tenants: Collection[str] = ()) -> None:
        self.fusion, self._policies, self._decided = fusion, policies, decided
        #: partition number -> its pending table.
        self.tables: dict[int, PendingTable] = {}
        self.known_tenants = set(known_tenants)

    # -- partitions ----------------------------------------------------------------
    def assigned(self, tps: list[TP]) -> None:
        parts = [p for t, p in tps if t == SCORES]
        decided = self._decided(parts)
        now = now_ms()
        for p in parts:
            table = self.tables[p] = PendingTable(self.fusion)
            for request_id, deadline in decided.get(p, ()):
                table.mark_decided(request_id, now, deadline)

    def revoked(self, tps: list[TP]) -> None:
        for _, p in tps:
            self.tables.pop(p, None)

    # -- records -------------------------------------------------------------------
    def handle(self, records: Sequence[Record], now_ms: int) -> list[Emit]:
        self._follow_policies()
        metrics.MESSAGES_CONSUMED.labels(ROLE, SCORES).inc(len(records))
        out: list[Emit] = []
        for m in records:
            partition, offset = m.partition() or 0, m.offset() or 0
            table = self.tables.get(partition)
            if table is None:
                continue  # revoked in this very batch
            try:
                record = decode_scores_record(raw_value(m))
            except AuditError as exc:
                out.append(DeadLetter(m, exc))
                table.skip(offset)
                continue
            tracing.fusion_arrived(m, record)
            decision = table.apply(record, offset, now_ms)
            if decision is not None:
                out.append(self._verdict(decision, partition))
        for table in self.tables.values():
            for reason, n in table.take_dropped().items():
                metrics.FUSION_DROPPED.labels(reason).inc(n)
        return out

    def _follow_policies(self) -> None:
        """Decide with the control topic's tenant policies (``policy:<tenant>``) from the next record on."""
        policies = self._policies()
        if policies is not self.fusion.policies:
            self.fusion = dataclasses.replace(self.fusion, policies=policies)
            for table in self.tables.values():
                table.fusion = self.fusion

    def tick(self, now_ms: int) -> list[Emit]:
        self._follow_policies()
        return [self._verdict(decision, partition)
                for partition, table in self.tables.items() for decision in table.due(now_ms)]

    def commit_offsets(self, tps: Collection[TP] | None = None) -> dict[TP, int]:
        metrics.FUSION_PENDING.set(sum(t.undecided for t in self.tables.values()))
        out = {}
        for p, table in self.tables.items():
            if tps is not None and (SCORES, p) not in tps:
                continue
            offset = table.commit_offset()
            if offset is not None:
                out[(SCORES, p)] = offset
        return out

    def _verdict(self, decision: DecidedRequest, partition: int) -> Output:
        """The decision's verdict record, named with its trace id and carrying its ``emit`` span's
        context when the request was traced (:func:`rtaudit.workers.tracing.fusion_emit`)."""
        verdict = tracing.fusion_emit(decision.verdict)
        headers = tracing.current_headers()
        tracing.end()
        metrics.VERDICTS.labels(verdict.decision, str(verdict.complete).lower()).inc()
        metrics.END_TO_END_SECONDS.observe(max(0, verdict.latency_ms) / 1000.0)
        if verdict.decided_at_ms > verdict.deadline_ms:
            tenant = metrics.tenant_label(verdict.tenant_id, self.known_tenants)
            metrics.SLO_MISSES.labels(ROLE, tenant, decision.lane or "unknown", "late_verdict").inc()
        return Output(VERDICTS, verdict.request_id.encode(), encode(verdict), partition, headers)


class VerdictReader:
    """Reads back, for newly assigned ``audit.scores`` partitions, the verdicts their
    ``audit.verdicts`` partition already has, from the time of the committed scores record minus
    the retention (module doc: "rebuild on assignment"). Runs in the intake thread, inside the
    assignment callback (``consumer``: the loop's, for the committed offsets).

    Args:
        settings: client profile (a separate reader consumer, group ``rtaudit-fusion-rebuild``).
        consumer: the loop's consumer.
        retention_ms: how long fusion remembers a decided request, ms.
    """

    def __init__(self, settings: Settings, consumer: Consumer, retention_ms: int) -> None:
        self.settings, self.consumer, self.retention_ms = settings, consumer, retention_ms

    def __call__(self, parts: list[int]) -> dict[int, list[DecidedId]]:
        if not parts:
            return {}
        partitions = [TopicPartition(SCORES, p) for p in parts]
        committed = {tp.partition: tp.offset for tp in self.consumer.committed(partitions, timeout=REBUILD_READ_TIMEOUT_S)}
        reader = Consumer(consumer_config(self.settings, f"{GROUP_ID}-rebuild", None, **{"enable.partition.eof": True}))
        out: dict[int, list[DecidedId]] = {}
        try:
            for p in parts:
                started = time.monotonic()
                since_ms = self._record_time(reader, p, committed.get(p, -1))
                out[p] = self._decided(reader, p, since_ms - self.retention_ms - CLOCK_MARGIN_MS)
                log.info("fusion partition %s: %s verdicts already out, replay from offset %s (%.2f s)",
                         p, len(out[p]), committed.get(p), time.monotonic() - started)
        finally:
            reader.close()
        return out

    @staticmethod
    def _read_one(reader: Consumer) -> Message | None:
        """The next record of the reader's single assigned partition; ``None`` at its end."""
        deadline = time.monotonic() + REBUILD_READ_TIMEOUT_S
        while time.monotonic() < deadline:
            m = reader.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is None:
                return m
            if err.code() == KafkaError._PARTITION_EOF:
                return None
            log.warning("rebuild read error: %s", err)
        raise TimeoutError(f"no answer from the broker in {REBUILD_READ_TIMEOUT_S} s while rebuilding fusion state")

    def _record_time(self, reader: Consumer, partition: int, offset: int) -> int:
        """Timestamp (ms) of the scores record at the committed ``offset``: the oldest
        record the replay will see (now, when there is none yet)."""
        if offset < 0:
            return 0  # never committed: the replay starts at the beginning
        reader.assign([TopicPartition(SCORES, partition, offset)])
        m = self._read_one(reader)
        return m.timestamp()[1] if m is not None else now_ms()

    def _decided(self, reader: Consumer, partition: int, since_ms: int) -> list[DecidedId]:
        """Every request with a verdict in ``audit.verdicts[partition]`` at or after ``since_ms``."""
        [found] = reader.offsets_for_times([TopicPartition(VERDICTS, partition, max(0, since_ms))], timeout=REBUILD_READ_TIMEOUT_S)
        start = found.offset if found.offset >= 0 else reader.get_watermark_offsets(TopicPartition(VERDICTS, partition))[1]
        reader.assign([TopicPartition(VERDICTS, partition, start)])
        out: list[DecidedId] = []
        first = True
        while (m := self._read_one(reader)) is not None:
            if first and since_ms > 0 and m.timestamp()[1] < since_ms:
                # tansu answers offset 0 for a time past its last record (Kafka answers the end):
                # no verdict is that recent, so start at the end
                end = reader.get_watermark_offsets(TopicPartition(VERDICTS, partition))[1]
                reader.assign([TopicPartition(VERDICTS, partition, end)])
                first = False
                continue
            first = False
            key = m.key()
            if key:
                out.append((key.decode("utf-8", "replace") if isinstance(key, bytes) else key, _deadline_of(m)))
        return out


def _deadline_of(m: Message) -> int | None:
    """The ``deadline_ms`` of a verdict read back (``None`` when it has none readable). Parsed
    as plain JSON, not validated: the rebuild reads every verdict of the look-back window."""
    try:
        deadline = json.loads(m.value() or b"").get("deadline_ms")
    except (ValueError, AttributeError):
        return None
    return deadline if isinstance(deadline, int) else None


def check_partition_counts(consumer: Consumer) -> None:
    """Raises ``RuntimeError`` when ``audit.verdicts`` and ``audit.scores`` differ in partition
    count (a request's verdict goes to its scores partition's number)."""
    meta = consumer.list_topics(timeout=30)
    counts = {t: len(meta.topics[t].partitions) for t in (SCORES, VERDICTS) if t in meta.topics}
    if len(counts) == 2 and counts[SCORES] != counts[VERDICTS]:
        raise RuntimeError(f"{VERDICTS} has {counts[VERDICTS]} partitions and {SCORES} {counts[SCORES]}: they must match")


def fusion_loop(settings: Settings, group_id: str = GROUP_ID) -> BatchLoop:
    """Fusion's batch loop: a :class:`FusionHandler` on ``audit.scores`` (group ``group_id``) that
    reads each assigned partition's verdicts back first. Raises ``RuntimeError`` at start when
    ``audit.verdicts`` and ``audit.scores`` differ in partition count."""

    def make(ctx: HandlerContext) -> FusionHandler:
        check_partition_counts(ctx.consumer)
        fusion = Fusion(ctx.policies(), grace_ms=settings.fusion_grace_ms, retention_ms=settings.fusion_retention_ms)
        reader = VerdictReader(settings, ctx.consumer, settings.fusion_retention_ms)
        return FusionHandler(fusion, ctx.policies, reader, settings.tenants)

    return BatchLoop(settings, group_id, [SCORES], make, role=ROLE, control_role=ROLE)


app, settings = make_app(ROLE, app_id=f"{GROUP_ID}-runtime")
run_in_faust(app, lambda: fusion_loop(settings))
