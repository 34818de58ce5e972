"""A modality worker's Kafka side (:func:`rtaudit.workers.modality.modality_app` is the rest):
one confluent-kafka consumer of both lane topics owned by an intake thread, one producer
whose delivery callbacks a delivery thread serves, lag readings and the low lane's pause
(:class:`LaneControl`), and in-order acks and offset commits (:class:`LaneIntake`). See the
flow in :mod:`rtaudit.workers.modality`."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from rtaudit.engine.batcher import LANE_NAMES, Batcher, LaneName
from rtaudit.schemas.codec import decode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import ModalityTask
from rtaudit.topics.catalog import DLQ
from rtaudit.workers import metrics
from rtaudit.workers.acks import InOrderAcks
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.settings import Settings
from rtaudit.workers.offsets import OffsetGapGuard
from rtaudit.workers.stream import BatchDelivery, DeliveryTracker, consume_batch, dead_letter_output

log = logging.getLogger(__name__)
#: seconds between lag readings / lane pause decisions.
CONTROL_INTERVAL_S = 0.05
#: seconds a fetched consumer position of a not-yet-seen partition is reused.
POSITION_CACHE_S = 1.0
#: most records one ``consume`` call returns.
INTAKE_BATCH = 1000
#: longest wait of one ``consume`` call for its first record, s.
INTAKE_POLL_S = 0.05
#: seconds between offset commits of the acked prefix.
COMMIT_INTERVAL_S = 0.5
#: longest wait of one ``Producer.poll`` of the delivery thread, s.
DELIVERY_POLL_S = 0.05
#: held low-lane records (beyond the batcher's full low lane) at which the low lane's
#: partitions are paused, or held bytes (record values), whichever comes first. A pause
#: makes librdkafka drop what it prefetched for them, re-fetched on resume: pausing at 2,000
#: held (resuming at 500) cycled every ~1,500 records and cost a null-model text worker a
#: third of its throughput (60,000 tasks at once, A/B in one sitting: 10.3-10.8k vs
#: 15.4-22.0k records/s with these bounds; broker CPU per 1,000 records 0.033 vs 0.014-0.020 s).
LO_OVERFLOW_PAUSE = 20 * INTAKE_BATCH
LO_OVERFLOW_PAUSE_BYTES = 32 * 1024 * 1024
#: ...and at or below which (records and bytes) they are resumed: what is held and batched
#: then covers the re-fetch many times over.
LO_OVERFLOW_RESUME = 5 * INTAKE_BATCH
LO_OVERFLOW_RESUME_BYTES = 8 * 1024 * 1024
#: held records or bytes past which the intake stops fetching (both lanes) until the held
#: backlog shrinks: the bound of the worker's memory for records held beside the batcher.
#: At most one consumed batch arrives after the pause, so it is rarely reached.
LO_OVERFLOW_MAX = 2 * LO_OVERFLOW_PAUSE
LO_OVERFLOW_MAX_BYTES = 2 * LO_OVERFLOW_PAUSE_BYTES


#: characters of text per batch slot: about one 64-word-piece encoder window of English
#: (engine/text/windows.py), so a 32,000-character text takes ~125 slots (a batch of its own).
TEXT_CHARS_PER_SLOT = 256


def task_cost(task: ModalityTask) -> float:
    """Batch slots a task takes (:meth:`rtaudit.engine.batcher.Batcher.put`'s ``cost``): its text's
    length in :data:`TEXT_CHARS_PER_SLOT`, at least 1 (media tasks: 1)."""
    return max(1.0, len(task.text or "") / TEXT_CHARS_PER_SLOT)


#: a partition: ``(topic, partition)``.
TP = tuple[str, int]


@dataclass(eq=False, slots=True)
class Work:
    """A consumed record and its decoded task (``None`` for a record bound for the DLQ).
    ``tp`` (its partition) and ``nbytes`` (its value's size, bytes) are read once, at construction."""

    message: Message
    task: ModalityTask | None
    tp: TP = field(init=False)
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        self.tp = (self.message.topic(), self.message.partition())
        value = self.message.value()
        self.nbytes = len(value) if value else 0


class LaneControl:
    """Lag readings and low-lane pausing for one worker (a confluent-kafka consumer).

    A confluent-kafka consumer serialises its calls: one made while another thread is
    inside ``consume`` waits for it, so the consumer-side steps (:meth:`read_lag`,
    :meth:`sync_pause`, :meth:`seen`, :meth:`forget`) run in the intake thread and only
    :meth:`apply_lag` runs on the event loop.

    ``next_offset`` holds, per partition, the offset after the last record the
    intake received: the worker's position. Lag = high watermark seen while fetching −
    position, clamped at 0; before any record of a partition arrived, the consumer's
    own position is used.
    """

    def __init__(self, consumer: Any, role: str, lanes: dict[str, LaneName], batcher: Batcher[Any]) -> None:
        self.consumer, self.role, self.lanes, self.batcher = consumer, role, lanes, batcher
        self.next_offset: dict[TP, int] = {}
        self.paused: set[TP] = set()
        self.assigned: set[TP] = set()
        #: set on the event loop by :meth:`apply_lag`, read by the consumer's thread.
        self.want_lo_paused = False
        #: low-lane records (and their bytes) the intake holds because the batcher's low lane is full (set on the loop).
        self.lo_overflow = 0
        self.lo_overflow_bytes = 0
        self._overflow_pause = False
        self._positions: dict[TP, tuple[int | None, float]] = {}

    def seen(self, last_offsets: dict[TP, int]) -> None:
        """Records up to ``last_offsets[tp]`` (the last offset received per partition) arrived."""
        for tp, offset in last_offsets.items():
            self.next_offset[tp] = max(self.next_offset.get(tp, 0), offset + 1)

    def forget(self, tps: list[TP]) -> None:
        """Partitions revoked: their positions are no longer ours."""
        for tp in tps:
            self.next_offset.pop(tp, None)
            self._positions.pop(tp, None)
            self.paused.discard(tp)

    def _position(self, tp: TP) -> int | None:
        """The consumer's position of a partition no record came from yet (cached 1 s)."""
        cached = self._positions.get(tp)
        now = time.monotonic()
        if cached is None or now - cached[1] > POSITION_CACHE_S:
            [pos] = self.consumer.position([TopicPartition(*tp)])
            cached = self._positions[tp] = (pos.offset if pos.offset >= 0 else None, now)
        return cached[0]

    def read_lag(self) -> dict[LaneName, int]:
        """Consumer side (the thread that owns the consumer): lag per lane, summed over the
        assigned partitions, and the per-partition lag gauge."""
        consumer = self.consumer
        self.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment() if tp.topic in self.lanes}
        lag: dict[LaneName, int] = {lane: 0 for lane in LANE_NAMES}
        for tp in self.assigned:
            try:
                _, highwater = consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
                if highwater is None or highwater < 0:
                    continue  # nothing fetched yet
                position = self.next_offset.get(tp)
                if position is None:
                    position = self._position(tp)
            except KafkaException:
                continue  # revoked while we read it
            if position is None:
                continue
            tp_lag = max(0, highwater - position)
            lag[self.lanes[tp[0]]] += tp_lag
            metrics.CONSUMER_LAG.labels(self.role, tp[0], str(tp[1])).set(tp_lag)
        return lag

    def apply_lag(self, lag: dict[LaneName, int]) -> None:
        """Batcher side (the event loop): feed the lag, decide whether the low lane should
        be paused (:attr:`want_lo_paused`), set the batcher gauges. Low-lane records held beside
        the batcher (:class:`LowLaneOverflow`) count as that lane's lag: they are past the
        consumer's position but not yet batched (without them the heartbeat's lag read about a
        seventh of a 5,000-request backlog)."""
        for lane in LANE_NAMES:
            self.batcher.set_lag(lane, lag[lane] + (self.lo_overflow if lane == "lo" else 0))
        self.want_lo_paused = self.batcher.update_lo_pause() or self.overflow_pause()
        stats = self.batcher.stats()
        metrics.BATCH_WINDOW_SECONDS.labels(self.role).set(stats.window_ms / 1000.0)
        metrics.BATCH_SIZE_LIMIT.labels(self.role).set(stats.size_limit)
        metrics.BATCH_LAST_SIZE.labels(self.role).set(stats.last_batch_size)
        metrics.MODEL_OCCUPANCY.labels(self.role).set(stats.occupancy)
        metrics.BATCHER_LAG.labels(self.role).set(stats.lag)
        metrics.BATCHER_QUEUED.labels(self.role, "hi").set(stats.queued_hi)
        metrics.BATCHER_QUEUED.labels(self.role, "lo").set(stats.queued_lo)

    def overflow_pause(self) -> bool:
        """Whether the low-lane records held beside the batcher ask for the low lane's pause:
        from ``LO_OVERFLOW_PAUSE`` records or ``LO_OVERFLOW_PAUSE_BYTES`` held until both fall
        to ``LO_OVERFLOW_RESUME`` / ``LO_OVERFLOW_RESUME_BYTES`` (each pause purges the
        prefetch; pausing at the first held record made a null-model text worker fall from
        12,900 to 6,200 records/s, pausing at 2,000 to about 10,500)."""
        if self.lo_overflow >= LO_OVERFLOW_PAUSE or self.lo_overflow_bytes >= LO_OVERFLOW_PAUSE_BYTES:
            self._overflow_pause = True
        elif self.lo_overflow <= LO_OVERFLOW_RESUME and self.lo_overflow_bytes <= LO_OVERFLOW_RESUME_BYTES:
            self._overflow_pause = False
        return self._overflow_pause

    def sync_pause(self) -> None:
        """Consumer side: pause or resume the low lane's partitions to match :attr:`want_lo_paused`
        (every time: a rebalance resumes what it assigns)."""
        self.paused &= self.assigned  # revoked partitions are no longer ours to resume
        lo_tps = {tp for tp in self.assigned if self.lanes[tp[0]] == "lo"}
        try:
            if self.want_lo_paused:
                if lo_tps - self.paused:
                    self.consumer.pause([TopicPartition(*tp) for tp in lo_tps - self.paused])
                self.paused |= lo_tps
            elif self.paused:
                self.consumer.resume([TopicPartition(*tp) for tp in self.paused])
                self.paused = set()
        except KafkaException as exc:  # a partition left meanwhile: the next tick decides again
            log.debug("%s lane pause/resume skipped: %s", self.role, exc)
        metrics.LO_LANE_PAUSED.labels(self.role).set(int(bool(self.paused)))

    def tick(self) -> None:
        """All three steps in one thread (tests; a worker splits them across its threads)."""
        self.apply_lag(self.read_lag())
        self.sync_pause()


class LaneIntake:
    """The worker's Kafka side: one consumer of both lanes, owned by the intake thread (read
    in batches; lag readings, lane pauses and offset commits happen there too, between
    ``consume`` calls), one producer, and in-order acks kept on the event loop.

    ``accept`` (a coroutine function run on the event loop) receives each consumed batch
    as ``(Work, decode error or None)`` pairs; the thread waits for it before fetching again.
    """

    def __init__(
        self, settings: Settings, role: str, topics: list[str], lanes: dict[str, LaneName], batcher: Batcher[Any],
        accept: Callable[[list[tuple[Work, AuditError | None]]], Any],
    ) -> None:
        self.role = role
        self.topics = topics
        self.accept = accept
        self.consumer = Consumer(consumer_config(settings, f"rtaudit-{role}"))
        self.gaps = OffsetGapGuard(self.consumer, role)
        self.producer = Producer(producer_config(settings))
        self.control = LaneControl(self.consumer, role, lanes, batcher)
        self.deliveries = DeliveryTracker()
        self.acks: InOrderAcks[Work] = InOrderAcks(lambda w: w.tp)
        #: low-lane records held while the batcher's low lane is full (event loop side).
        self.overflow = LowLaneOverflow(batcher, self.control)
        #: per partition, the offset after the acked prefix not yet committed (loop writes, thread commits).
        self._to_commit: dict[TP, int] = {}
        self._commit_lock = threading.Lock()
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- event loop side -------------------------------------------------------------
    def produce(self, topic: str, key: bytes | None, value: bytes, batch: BatchDelivery | None = None) -> None:
        """Hand one output to the producer (no waiting); a full local queue is drained first.
        With ``batch``, the output counts toward that batch's acknowledgement."""
        if batch is not None:
            batch.add()
        while True:
            try:
                self.producer.produce(topic, value, key, on_delivery=batch or self.deliveries)
                return
            except BufferError:
                self.producer.poll(0.05)

    def dead_letter(self, work: Work, error: AuditError, batch: BatchDelivery | None = None) -> None:
        """Hand ``work``'s DLQ record (original bytes, position, reason) to the producer."""
        self.produce(DLQ, *dead_letter_output(self.role, work.message, error), batch=batch)

    def _serve_deliveries(self) -> None:
        """The delivery thread: serve the producer's delivery callbacks until :meth:`stop`."""
        while not self._stop.is_set():
            self.producer.poll(DELIVERY_POLL_S)

    async def delivered(self, executor: ThreadPoolExecutor) -> None:
        """Wait until the broker acknowledged every output handed over so far. Raises
        :class:`rtaudit.workers.stream.DeliveryFailed` when one failed (the caller crashes the worker)."""
        await asyncio.get_running_loop().run_in_executor(executor, self.producer.flush, 30.0)
        self.deliveries.raise_if_failed()

    def finish(self, works: list[Work]) -> None:
        """``works``' outputs are on the broker: ack them (and what they unblock)."""
        ready_offsets = {}
        for work in works:
            for ready in self.acks.done(work):
                ready_offsets[ready.tp] = ready.message.offset() + 1
        with self._commit_lock:
            self._to_commit.update(ready_offsets)

    # -- intake thread ---------------------------------------------------------------
    def _commit(self) -> None:
        """Commit the acked prefix of every partition (asynchronously)."""
        with self._commit_lock:
            offsets, self._to_commit = self._to_commit, {}
        if offsets:
            try:
                self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=True)
            except KafkaException as exc:
                log.warning("%s commit failed (replayed records are deduplicated downstream): %s", self.role, exc)

    def _on_loop(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the event loop (where the acks live) and wait for it: a rebalance
        callback must finish its bookkeeping before ``consume`` returns records of the new
        assignment. Returns ``fn``'s result, ``None`` when the loop is gone (shutting down)."""
        assert self._loop is not None

        async def call() -> Any:
            return fn()

        try:
            return asyncio.run_coroutine_threadsafe(call(), self._loop).result(10)
        except (TimeoutError, RuntimeError) as exc:
            log.warning("%s could not %s: %s", self.role, what, exc)
            return None

    def _assign_acks(self, tps: list[TP]) -> None:
        """Event loop: a new ack generation per assigned partition (:class:`InOrderAcks`)."""
        for tp in tps:
            self.acks.assign(tp)
        with self._commit_lock:
            for tp in tps:
                self._to_commit.pop(tp, None)

    def _revoke_acks(self, tps: list[TP]) -> dict[TP, int]:
        """Event loop: retire the partitions' ack generations, drop their held records, and
        take their acked-but-uncommitted offsets (returned: committed now, or dropped when the
        partitions were lost). From here on, nothing of these generations reaches ``_to_commit``."""
        for tp in tps:
            self.acks.revoke(tp)
        for work in self.overflow.forget(set(tps)):
            self.acks.done(work)  # a retired generation's record: finishes, releases nothing
        with self._commit_lock:
            return {tp: self._to_commit.pop(tp) for tp in tps if tp in self._to_commit}

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        log.info("%s assigned %s", self.role, tps)
        self.gaps.forget(partitions)
        self._on_loop("start the ack generations of %s" % tps, lambda: self._assign_acks(tps))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Revoked: commit the acked prefix of the partitions (synchronously) and retire their
        ack generations; records of them still in the batcher finish without being acked."""
        self._release(partitions, commit=True)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Lost (session timeout, eviction): as revoked, without a commit (another member owns them)."""
        self._release(partitions, commit=False)

    def _release(self, partitions: list[TopicPartition], commit: bool) -> None:
        tps = [(tp.topic, tp.partition) for tp in partitions]
        log.info("%s %s %s", self.role, "revoked" if commit else "lost", tps)
        self.gaps.forget(partitions)
        self.control.forget(tps)
        offsets = self._on_loop("retire the ack generations of %s" % tps, lambda: self._revoke_acks(tps)) or {}
        if commit and offsets:
            try:
                self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
            except KafkaException as exc:
                log.warning("%s commit on revoke failed (replayed records are deduplicated downstream): %s", self.role, exc)

    def run(self, loop: asyncio.AbstractEventLoop) -> None:
        """The intake thread: consume batches and hand them to ``accept`` on ``loop``; every
        50 ms read the lag (applied to the batcher on the loop) and sync the low lane's pause;
        every 0.5 s commit the acked prefix; until :meth:`stop`."""
        self._loop = loop
        threading.Thread(target=self._serve_deliveries, name=f"{self.role}-deliveries", daemon=True).start()
        self.consumer.subscribe(
            self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost,
        )
        next_control = next_commit = time.monotonic()
        try:
            while not self._stop.is_set():
                works = []
                last_offsets: dict[TP, int] = {}
                for m in consume_batch(self.consumer, INTAKE_BATCH, INTAKE_POLL_S, self.gaps):
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            log.warning("%s consume error: %s", self.role, err)
                        continue
                    last_offsets[(m.topic(), m.partition())] = m.offset()  # in offset order per partition
                    try:
                        task: ModalityTask | None = decode(m.value() or b"", ModalityTask)
                        error = None
                    except AuditError as exc:
                        task, error = None, exc
                    works.append((Work(m, task), error))
                self.control.seen(last_offsets)
                if works:
                    self._wait(asyncio.run_coroutine_threadsafe(self.accept(works), loop))
                    if not self.control.want_lo_paused and self.control.overflow_pause():
                        self.control.want_lo_paused = True  # pause the low lane now, not at the next tick:
                        self.control.sync_pause()  # every consume until then adds prefetched low-lane records
                now = time.monotonic()
                if now >= next_control:
                    loop.call_soon_threadsafe(self.control.apply_lag, self.control.read_lag())
                    self.control.sync_pause()
                    next_control = now + CONTROL_INTERVAL_S
                if now >= next_commit:
                    self._commit()
                    next_commit = now + COMMIT_INTERVAL_S
            self._commit()
        finally:
            self.consumer.close()

    def _wait(self, fut: Any) -> None:
        """Wait for ``accept`` (it blocks while the batcher is full), but not past :meth:`stop`."""
        while True:
            try:
                fut.result(0.5)
                return
            except TimeoutError:
                if self._stop.is_set():
                    fut.cancel()
                    return

    def stop(self) -> None:
        self._stop.set()


class LowLaneOverflow:
    """Where a decoded record waits when the batcher's low lane is full (event loop side).

    A high-lane record waits for room in its lane (back-pressure). A low-lane record that
    finds its lane full, or older low-lane records already held, is held here in arrival
    order and moved into the batcher as the lane makes room; from ``LO_OVERFLOW_PAUSE`` held
    (or ``LO_OVERFLOW_PAUSE_BYTES``) the :class:`LaneControl` pauses the low lane's partitions
    (until ``LO_OVERFLOW_RESUME``). Before, the intake awaited room
    record by record, so a full low lane held every high-lane record behind it (bench
    --isolation, ``lower_lane``: a quiet tenant's P99 ×100 beside a flooding one). Past
    ``max_held`` records or ``max_held_bytes`` (record values), :meth:`settle` waits for the
    backlog to shrink (the intake stops).
    """

    def __init__(self, batcher: Batcher[Any], control: LaneControl | None = None, max_held: int = LO_OVERFLOW_MAX,
                 max_held_bytes: int = LO_OVERFLOW_MAX_BYTES) -> None:
        self.batcher, self.control, self.max_held, self.max_held_bytes = batcher, control, max_held, max_held_bytes
        self.held: deque[Work] = deque()
        #: bytes of the held records' values.
        self.held_bytes = 0
        self._drain: asyncio.Future[None] | None = None
        #: the held record :meth:`_drain_held` is putting in the batcher (it gets there, revoked or not).
        self._putting: Work | None = None
        self._below_max = asyncio.Event()

    def __len__(self) -> int:
        return len(self.held)

    async def put(self, work: Work, lane: LaneName) -> None:
        """Queue a decoded record on ``lane``: the batcher, or held (see the class docstring)."""
        assert work.task is not None
        if lane == "lo" and (self.held or self.batcher.queued("lo") >= self.batcher.config.queue_limit):
            self.held.append(work)
            self.held_bytes += work.nbytes
            return
        await self.batcher.put(work, lane, work.task.deadline_ms, tenant=work.task.tenant_id, cost=task_cost(work.task))

    async def settle(self) -> None:
        """After a consumed batch: start moving held records, report the count to the lane
        control, and wait while more than ``max_held`` are held."""
        self._report()
        if self.held and (self._drain is None or self._drain.done()):
            self._drain = asyncio.ensure_future(self._drain_held())
        while self._over_max():  # until back under the bound, not until drained
            self._below_max.clear()
            await self._below_max.wait()

    def _over_max(self) -> bool:
        return len(self.held) > self.max_held or self.held_bytes > self.max_held_bytes

    def forget(self, partitions: set[TP]) -> list[Work]:
        """Partitions revoked: their held records are another member's now. Returns them (dropped)."""
        dropped = [w for w in self.held if w.tp in partitions and w is not self._putting]  # that one enters the batcher
        self.held = deque(w for w in self.held if w.tp not in partitions)
        self.held_bytes = sum(w.nbytes for w in self.held)
        self._report()
        if not self._over_max():
            self._below_max.set()
        return dropped

    def cancel(self) -> None:
        if self._drain is not None:
            self._drain.cancel()

    async def _drain_held(self) -> None:
        while self.held:
            work = self.held[0]
            assert work.task is not None
            self._putting = work
            try:
                await self.batcher.put(work, "lo", work.task.deadline_ms, tenant=work.task.tenant_id, cost=task_cost(work.task))
            finally:
                self._putting = None
            if self.held and self.held[0] is work:  # else its partition was revoked meanwhile
                self.held.popleft()
                self.held_bytes -= work.nbytes
            self._report()
            if not self._over_max():
                self._below_max.set()

    def _report(self) -> None:
        if self.control is not None:
            self.control.lo_overflow = len(self.held)
            self.control.lo_overflow_bytes = self.held_bytes
