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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaException, Message, TopicPartition

from rtaudit.engine.batcher import LANE_NAMES, Batcher
from rtaudit.engine.lane_queue import LaneName
from rtaudit.schemas.errors import AuditError
from rtaudit.workers import metrics
from rtaudit.workers.runtime.acks import InOrderAcks
from rtaudit.workers.settings import Settings
from rtaudit.workers.runtime.lane_overflow import (
    INTAKE_BATCH, LO_OVERFLOW_PAUSE, LO_OVERFLOW_PAUSE_BYTES, LO_OVERFLOW_RESUME, LO_OVERFLOW_RESUME_BYTES, HighLaneHold,
    LowLaneOverflow, Work,
)
from rtaudit.workers.runtime.emitter import BatchDelivery, Emitter, dead_letter_output
from rtaudit.workers.runtime.intake import Intake
from rtaudit.workers.runtime.records import TP, Record, tp_of

log = logging.getLogger(__name__)
#: seconds between lag readings / lane pause decisions.
CONTROL_INTERVAL_S = 0.05
#: seconds a fetched consumer position of a not-yet-seen partition is reused.
POSITION_CACHE_S = 1.0
#: longest wait of one ``consume`` call for its first record, s.
INTAKE_POLL_S = 0.05
#: seconds between offset commits of the acked prefix.
COMMIT_INTERVAL_S = 0.5
#: seconds the intake waits for the batcher to take a consumed batch before it pauses every
#: partition and polls on (:meth:`LaneIntake._wait`); far below any ``max.poll.interval.ms``.
BACKPRESSURE_PAUSE_S = 1.0
#: longest wait of one ``consume`` call while the intake is blocked, s.
BLOCKED_POLL_S = 0.1



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
        # -- owned by the intake thread (the consumer's) -----------------------------------
        #: per partition, the offset after the last record received.
        self.next_offset: dict[TP, int] = {}
        self.paused: set[TP] = set()
        self.assigned: set[TP] = set()
        #: the low lane paused at once by the intake when the held low-lane records reached the
        #: pause mark, until the event loop's own decision (:attr:`want_lo_paused`) holds it.
        self.lo_paused_by_intake = False
        self._positions: dict[TP, tuple[int | None, float]] = {}
        # -- owned by the event loop (written there only; the intake thread reads them) ------
        #: set by :meth:`apply_lag`.
        self.want_lo_paused = False
        #: set while high-lane records wait beside the full high lane (:class:`HighLaneHold`).
        self.want_hi_paused = False
        #: high-lane records the :class:`HighLaneHold` holds: part of the high lane's lag.
        self.hi_held = 0
        #: low-lane records (and their bytes) the intake holds because the batcher's low lane is full.
        self.lo_overflow = 0
        self.lo_overflow_bytes = 0
        #: :meth:`overflow_pause`'s hysteresis.
        self._overflow_pause = False

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
            self.batcher.set_lag(lane, lag[lane] + (self.lo_overflow if lane == "lo" else self.hi_held))
        self.want_lo_paused = self.batcher.update_lo_pause() or self.overflow_pause()
        stats = self.batcher.stats()
        metrics.BATCH_WINDOW_SECONDS.labels(self.role).set(stats.window_ms / 1000.0)
        metrics.BATCH_SIZE_LIMIT.labels(self.role).set(stats.size_limit)
        metrics.BATCH_LAST_SIZE.labels(self.role).set(stats.last_batch_size)
        metrics.MODEL_OCCUPANCY.labels(self.role).set(stats.occupancy)
        metrics.BATCHER_LAG.labels(self.role).set(stats.lag)
        metrics.BATCHER_QUEUED.labels(self.role, "hi").set(stats.queued_hi)
        metrics.BATCHER_QUEUED.labels(self.role, "lo").set(stats.queued_lo)

    def pause_lo_now(self) -> bool:
        """Intake thread, after a consumed batch was taken: whether the low lane must be paused
        now rather than at the next lag reading (every ``consume`` until then adds prefetched
        low-lane records): the held low-lane records reached the pause mark and the event loop
        has not decided the pause yet. Sets :attr:`lo_paused_by_intake`; clears it once the
        event loop's decision holds the lane or the held records fell to the resume mark."""
        at_mark = self.lo_overflow >= LO_OVERFLOW_PAUSE or self.lo_overflow_bytes >= LO_OVERFLOW_PAUSE_BYTES
        if at_mark and not self.want_lo_paused and not self.lo_paused_by_intake:
            self.lo_paused_by_intake = True
            return True
        if self.lo_paused_by_intake and (self.want_lo_paused or (
                self.lo_overflow <= LO_OVERFLOW_RESUME and self.lo_overflow_bytes <= LO_OVERFLOW_RESUME_BYTES)):
            self.lo_paused_by_intake = False
        return False

    def overflow_pause(self) -> bool:
        """Event loop: whether the low-lane records held beside the batcher ask for the low lane's pause:
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
        """Consumer side: pause or resume each lane's partitions to match :attr:`want_lo_paused`
        and :attr:`want_hi_paused` (every time: a rebalance resumes what it assigns)."""
        self.paused &= self.assigned  # revoked partitions are no longer ours to resume
        lo = self.want_lo_paused or self.lo_paused_by_intake
        wanted = {lane for lane, want in (("lo", lo), ("hi", self.want_hi_paused)) if want}
        want = {tp for tp in self.assigned if self.lanes[tp[0]] in wanted}
        try:
            if want - self.paused:
                self.consumer.pause([TopicPartition(*tp) for tp in want - self.paused])
            if self.paused - want:
                self.consumer.resume([TopicPartition(*tp) for tp in self.paused - want])
            self.paused = want
        except KafkaException as exc:  # a partition left meanwhile: the next tick decides again
            log.debug("%s lane pause/resume skipped: %s", self.role, exc)
        metrics.LO_LANE_PAUSED.labels(self.role).set(int(any(self.lanes[tp[0]] == "lo" for tp in self.paused)))

    def tick(self) -> None:
        """All three steps in one thread (tests; a worker splits them across its threads)."""
        self.apply_lag(self.read_lag())
        self.sync_pause()


def intake_group(role: str) -> str:
    """The consumer group of a modality role's lane topics: ``rtaudit-<role>`` (what lag-based
    autoscalers such as deploy/k8s/keda-ocr.yaml watch)."""
    return f"rtaudit-{role}"


class LaneIntake:
    """The worker's Kafka side: one consumer of both lanes, owned by the intake thread (read
    in batches; lag readings, lane pauses and offset commits happen there too, between
    ``consume`` calls), one producer, and in-order acks kept on the event loop.

    ``decode`` (run in the intake thread) turns each consumed record into a :class:`Work` (its
    lane, its task or its decode error); ``accept`` (a coroutine function run on the event loop)
    receives each consumed batch; the thread waits for it before fetching again.
    """

    def __init__(
        self, settings: Settings, role: str, topics: list[str], lanes: dict[str, LaneName], batcher: Batcher[Any],
        accept: Callable[[list[Work]], Any], decode: Callable[[Record], Work],
    ) -> None:
        self.role = role
        self.topics = topics
        self.accept, self.decode = accept, decode
        #: the consumer and its gap guard (intake thread).
        self.intake = Intake(settings, intake_group(role), topics, role)
        self.consumer = self.intake.consumer
        #: the producer (produced to on the event loop; callbacks served by the delivery thread).
        self.emitter = Emitter(settings, role)
        #: lag and lane pauses (fields owned per thread: see :class:`LaneControl`).
        self.control = LaneControl(self.consumer, role, lanes, batcher)
        #: in-order acks per assignment generation (event loop only; rebalance callbacks reach it there).
        self.acks: InOrderAcks[Work] = InOrderAcks(lambda w: w.tp)
        #: low-lane records held while the batcher's low lane is full (event loop side).
        self.overflow = LowLaneOverflow(batcher, self.control)
        #: high-lane records held while the batcher's high lane is full (event loop side).
        self.hi_hold = HighLaneHold(batcher, self.control)
        #: per partition, the offset after the acked prefix not yet committed (loop writes, thread commits).
        self._to_commit: dict[TP, int] = {}
        self._commit_lock = threading.Lock()
        #: set by :meth:`stop` (any thread); read by the intake and delivery threads.
        self._stop = threading.Event()
        #: the event loop, set once by :meth:`run` before the group join (read by the intake thread).
        self._loop: asyncio.AbstractEventLoop | None = None
        #: records fetched while :meth:`_wait` polled (intake thread): the next batch.
        self._carry: list[Message] = []

    # -- event loop side -------------------------------------------------------------
    def dead_letter(self, work: Work, error: AuditError, batch: BatchDelivery | None = None) -> None:
        """Hand ``work``'s DLQ record (original bytes, position, reason) to the producer."""
        self.emitter.send(dead_letter_output(self.role, work.message, error), batch)

    async def delivered(self, executor: ThreadPoolExecutor) -> None:
        """Wait until the broker acknowledged every output handed over so far. Raises
        :class:`rtaudit.workers.runtime.emitter.DeliveryFailed` when one failed (the caller crashes the worker)."""
        await self.emitter.delivered(executor)

    def finish(self, works: list[Work]) -> None:
        """``works``' outputs are on the broker: ack them (and what they unblock)."""
        ready_offsets = {}
        for work in works:
            for ready in self.acks.done(work):
                ready_offsets[ready.tp] = (ready.message.offset() or 0) + 1
        with self._commit_lock:
            self._to_commit.update(ready_offsets)

    # -- intake thread ---------------------------------------------------------------
    def _commit(self) -> None:
        """Commit the acked prefix of every partition (asynchronously)."""
        with self._commit_lock:
            offsets, self._to_commit = self._to_commit, {}
        self.intake.commit(offsets)

    def _on_loop(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the event loop (where the acks live) and wait for it: a rebalance
        callback must finish its bookkeeping before ``consume`` returns records of the new
        assignment. Returns ``fn``'s result, ``None`` when the loop is gone (shutting down).
        Raises ``RuntimeError`` before :meth:`run` gave the loop."""
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"{self.role}: a rebalance callback ran before the intake started")

        async def call() -> Any:
            return fn()

        try:
            return asyncio.run_coroutine_threadsafe(call(), loop).result(10)
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
        for work in [*self.overflow.forget(set(tps)), *self.hi_hold.forget(set(tps))]:
            self.acks.done(work)  # a retired generation's record: finishes, releases nothing
        with self._commit_lock:
            return {tp: self._to_commit.pop(tp) for tp in tps if tp in self._to_commit}

    def _on_assign(self, tps: list[TP]) -> None:
        self._on_loop("start the ack generations of %s" % tps, lambda: self._assign_acks(tps))

    def _on_revoke(self, tps: list[TP]) -> None:
        """Revoked: commit the acked prefix of the partitions (synchronously) and retire their
        ack generations; records of them still in the batcher finish without being acked."""
        self._release(tps, commit=True)

    def _on_lost(self, tps: list[TP]) -> None:
        """Lost (session timeout, eviction): as revoked, without a commit (another member owns them)."""
        self._release(tps, commit=False)

    def _release(self, tps: list[TP], commit: bool) -> None:
        gone = set(tps)
        self._carry = [m for m in self._carry if (m.topic(), m.partition()) not in gone]
        self.control.forget(tps)
        offsets = self._on_loop("retire the ack generations of %s" % tps, lambda: self._revoke_acks(tps)) or {}
        if commit:
            self.intake.commit(offsets, sync=True)

    def run(self, loop: asyncio.AbstractEventLoop) -> None:
        """The intake thread: consume batches and hand them to ``accept`` on ``loop``; every
        50 ms read the lag (applied to the batcher on the loop) and sync the low lane's pause;
        every 0.5 s commit the acked prefix; until :meth:`stop`."""
        self._loop = loop
        threading.Thread(target=self.emitter.serve_deliveries, args=(self._stop,), name=f"{self.role}-deliveries",
                         daemon=True).start()
        self.intake.subscribe(self._on_assign, self._on_revoke, self._on_lost)
        next_control = next_commit = time.monotonic()
        try:
            while not self._stop.is_set():
                works = []
                last_offsets: dict[TP, int] = {}
                if self._carry:  # fetched while the intake was blocked (see _wait)
                    messages, self._carry = self._carry, []
                else:
                    messages = self.intake.fetch(INTAKE_BATCH, INTAKE_POLL_S)
                for m in messages:
                    last_offsets[tp_of(m)] = m.offset() or 0  # in offset order per partition
                    works.append(self.decode(m))
                self.control.seen(last_offsets)
                if works:
                    self._wait(asyncio.run_coroutine_threadsafe(self.accept(works), loop), loop)
                    if self.control.pause_lo_now():
                        self.control.sync_pause()
                    elif self.control.want_hi_paused:
                        self.control.sync_pause()  # the high lane is full: fetch the low lane only
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
            self.intake.close()

    def _wait(self, fut: Any, loop: asyncio.AbstractEventLoop) -> None:
        """Wait for ``accept`` (it blocks while the batcher's lane is full), but not past :meth:`stop`,
        and never without polling: a consumer that does not poll for ``max.poll.interval.ms`` is
        thrown out of its group (librdkafka ``MAXPOLL``), however long inference takes.

        After :data:`BACKPRESSURE_PAUSE_S` blocked, every assigned partition is paused and the
        consumer keeps polling (every :data:`BLOCKED_POLL_S`): that serves the poll interval and
        rebalances, and returns only records of partitions assigned meanwhile (they are kept for
        the next batch, and their partitions paused too). The acked prefix is committed every
        :data:`COMMIT_INTERVAL_S` meanwhile, and the lag read. The partitions are resumed once
        ``accept`` returned (except the low lane's, when :class:`LaneControl` holds them paused).
        Re-raises ``accept``'s exception."""
        try:
            fut.result(BACKPRESSURE_PAUSE_S)
            return
        except TimeoutError:
            pass
        held = self._pause_all()
        metrics.INTAKE_BACKPRESSURE_PAUSES.labels(self.role).inc()
        log.info("%s intake blocked for %.1f s (lane full): %s partitions paused, polling on",
                 self.role, BACKPRESSURE_PAUSE_S, len(held))
        next_commit = next_control = time.monotonic()
        try:
            while True:
                try:
                    fut.result(0)
                    return
                except TimeoutError:
                    pass
                if self._stop.is_set():
                    fut.cancel()
                    return
                for m in self.intake.fetch(INTAKE_BATCH, BLOCKED_POLL_S):
                    self._carry.append(m)
                    tp = tp_of(m)
                    if tp not in held:  # assigned while blocked
                        self.intake.pause([tp])
                        held.add(tp)
                now = time.monotonic()
                if now >= next_commit:
                    self._commit()
                    next_commit = now + COMMIT_INTERVAL_S
                if now >= next_control:
                    loop.call_soon_threadsafe(self.control.apply_lag, self.control.read_lag())
                    next_control = now + CONTROL_INTERVAL_S
        finally:
            self._resume(held)

    def _pause_all(self) -> set[TP]:
        """Pause every assigned partition not already paused by the lane control; returns them."""
        tps = self.intake.assignment() - self.control.paused
        self.intake.pause(tps)
        return tps

    def _resume(self, held: set[TP]) -> None:
        """Resume the partitions :meth:`_wait` paused that are still ours and not held by the lane control."""
        self.intake.resume((held & self.intake.assignment()) - self.control.paused)

    def stop(self) -> None:
        self._stop.set()

