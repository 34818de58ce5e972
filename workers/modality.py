"""The one adapter every modality worker uses: lane topics → two-lane micro-batcher → model stage → ``audit.scores``.

Flow (one process: an intake thread, the event loop, one inference thread):

0. Before the consumer starts (Faust's ``App.on_first_start``), the model is loaded
   and warmed with one batch: a replica joins its consumer group ready to serve.
1. The intake thread (:class:`LaneIntake`) is one confluent-kafka consumer of both lane
   topics (``audit.<modality>.hi`` and ``.lo``, group ``rtaudit-<role>``). It reads up to
   1,000 records per ``consume`` call, decodes them, and hands the batch to the event loop
   in one hop, which puts each task in the :class:`rtaudit.engine.batcher.Batcher` on its lane; the
   thread waits until the batcher took them (a full lane back-pressures the fetch). A
   record that does not decode goes to the DLQ.
2. One task takes batches (high lane first, low lane's share honoured, closing on
   size, lag-adaptive window or deadline) and runs :func:`rtaudit.engine.stage.process_batch`
   in the single inference thread, off the event loop. Items already past their
   deadline come back from the batcher separately and get ``expired`` partials
   from the same ``process_batch`` call, without inference.
3. Each partial (and DLQ record) of a batch is handed to the producer without waiting,
   counted by the batch's :class:`rtaudit.workers.stream.BatchDelivery` (a delivery thread
   serves the producer's callbacks); the emit awaits the broker's acknowledgement of the
   batch's own outputs; a failed delivery crashes the worker before any ack, so the records
   are consumed again. Each emit runs as its own task, so the inference thread starts the
   next batch while earlier ones are emitted; up to ``EMITS_IN_FLIGHT`` batches await their
   acknowledgement at once. :class:`rtaudit.workers.acks.InOrderAcks` acks records per partition in offset order,
   and every 0.5 s the offset after each partition's acked prefix is committed: an
   offset is never committed before its output was delivered (at-least-once).
4. A 50 ms control timer sets ``rtaudit_consumer_lag_messages`` per partition
   (high watermark seen while fetching minus the next offset to process, clamped
   at 0; tansu's ListOffsets end offset is wrong, BROKER_NOTES), feeds the lag to
   the batcher, pauses the low lane's partitions while the high lane lags (and
   resumes them when it drains or the low lane's share needs items), and sets the
   batcher gauges.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import faust
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from rtaudit.engine.batcher import LANE_NAMES, Batch, Batcher, LaneName
from rtaudit.engine.models import ModelStage
from rtaudit.engine.stage import BatchResult
from rtaudit.schemas.codec import decode, encode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import ModalityTask
from rtaudit.topics.catalog import DLQ, SCORES, lane_topic
from rtaudit.workers import metrics
from rtaudit.workers.acks import InOrderAcks
from rtaudit.workers.app import make_app
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.settings import Settings
from rtaudit.workers.control import ControlConflict, ControlPlane, publish
from rtaudit.workers.serving import LazyStage, ServingSet, bundle_loader
from rtaudit.workers.stream import CONTROL_CATCH_UP_S, BatchDelivery, DeliveryTracker, consume_batch, dead_letter_output

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
#: batches whose outputs may await the broker's acknowledgement at once: one ack round
#: trip per batch bounded a null-model text worker at ~4,400 records/s (60,000 produced at
#: once, the worker 50 % busy).
EMITS_IN_FLIGHT = 8
#: longest wait of one ``Producer.poll`` of the delivery thread, s.
DELIVERY_POLL_S = 0.05
#: longest wait at start for the bundles in force to be loaded before the group join, s.
MODEL_LOAD_TIMEOUT_S = 300.0


#: a partition: ``(topic, partition)``.
TP = tuple[str, int]


@dataclass(eq=False)
class Work:
    """A consumed record and its decoded task (``None`` for a record bound for the DLQ)."""

    message: Message
    task: ModalityTask | None

    @property
    def tp(self) -> TP:
        return (self.message.topic(), self.message.partition())


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
        be paused (:attr:`want_lo_paused`), set the batcher gauges."""
        for lane in LANE_NAMES:
            self.batcher.set_lag(lane, lag[lane])
        self.want_lo_paused = self.batcher.update_lo_pause()
        stats = self.batcher.stats()
        metrics.BATCH_WINDOW_SECONDS.labels(self.role).set(stats.window_ms / 1000.0)
        metrics.BATCH_SIZE_LIMIT.labels(self.role).set(stats.size_limit)
        metrics.BATCH_LAST_SIZE.labels(self.role).set(stats.last_batch_size)
        metrics.MODEL_OCCUPANCY.labels(self.role).set(stats.occupancy)
        metrics.BATCHER_LAG.labels(self.role).set(stats.lag)
        metrics.BATCHER_QUEUED.labels(self.role, "hi").set(stats.queued_hi)
        metrics.BATCHER_QUEUED.labels(self.role, "lo").set(stats.queued_lo)

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
        self.producer = Producer(producer_config(settings))
        self.control = LaneControl(self.consumer, role, lanes, batcher)
        self.deliveries = DeliveryTracker()
        self.acks: InOrderAcks[Work] = InOrderAcks(lambda w: w.tp)
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
    def _commit(self, only: set[TP] | None = None) -> None:
        """Commit the acked prefix of every partition (of ``only``, synchronously, on revoke)."""
        with self._commit_lock:
            if only is None:
                offsets, self._to_commit = self._to_commit, {}
            else:
                offsets = {tp: o for tp, o in self._to_commit.items() if tp in only}
                for tp in offsets:
                    del self._to_commit[tp]
        if offsets:
            try:
                self.consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=only is None
                )
            except KafkaException as exc:
                log.warning("%s commit failed (replayed records are deduplicated downstream): %s", self.role, exc)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(tp.topic, tp.partition) for tp in partitions]
        log.info("%s revoked %s", self.role, tps)
        self._commit(set(tps))
        self.control.forget(tps)
        assert self._loop is not None

        async def forget_acks() -> None:
            for tp in tps:
                self.acks.forget(tp)

        try:
            asyncio.run_coroutine_threadsafe(forget_acks(), self._loop).result(10)
        except (TimeoutError, RuntimeError) as exc:  # the event loop is gone: shutting down
            log.warning("%s could not forget %s: %s", self.role, tps, exc)

    def run(self, loop: asyncio.AbstractEventLoop) -> None:
        """The intake thread: consume batches and hand them to ``accept`` on ``loop``; every
        50 ms read the lag (applied to the batcher on the loop) and sync the low lane's pause;
        every 0.5 s commit the acked prefix; until :meth:`stop`."""
        self._loop = loop
        threading.Thread(target=self._serve_deliveries, name=f"{self.role}-deliveries", daemon=True).start()
        self.consumer.subscribe(
            self.topics, on_assign=lambda c, ps: log.info("%s assigned %s", self.role, [(p.topic, p.partition) for p in ps]),
            on_revoke=self._on_revoke, on_lost=self._on_revoke,
        )
        next_control = next_commit = time.monotonic()
        try:
            while not self._stop.is_set():
                works = []
                last_offsets: dict[TP, int] = {}
                for m in consume_batch(self.consumer, INTAKE_BATCH, INTAKE_POLL_S):
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


def modality_app(role: str, modality: str, factory: Callable[[Settings], ModelStage]) -> faust.App:
    """Build the Faust app of a modality worker.

    Args:
        role: ``text``, ``image`` or ``ocr``; the consumer group is ``rtaudit-<role>``; the
            batcher limits are ``settings.batch.config(role)``.
        modality: which lane topics to consume (``audit.<modality>.hi`` and ``.lo``).
        factory: builds the model stage from settings (called once, in a thread).
    """
    app, settings = make_app(role, app_id=f"rtaudit-{role}-runtime")
    topic_names = {lane: lane_topic(modality, lane) for lane in LANE_NAMES}
    lanes_by_topic: dict[str, LaneName] = {name: lane for lane, name in topic_names.items()}
    stage = LazyStage(factory, settings)
    control = ControlPlane(settings, role, status=lambda: {
        "serving": [serving.status()], "health": "ok" if serving.settled() else "loading", "lag": batcher.stats().lag})

    def publisher(subject: str, payload: Any, reason: str, expects: int) -> None:
        try:
            publish(settings, subject, payload, author=f"auto:{control.worker_id}", reason=reason,
                    expects=None if expects < 0 else expects)
        except ControlConflict as exc:  # another replica published the same decision first
            log.info("%s: %s not published (%s): %s", control.worker_id, subject, exc.code, exc)

    serving = ServingSet(role, stage.get, bundle_loader(settings), publisher, author=f"auto:{control.worker_id}")
    control.listen(serving.on_control)
    app.rtaudit_control, app.rtaudit_serving = control, serving  # type: ignore[attr-defined]  # for tests and status
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{role}-infer")
    io_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"{role}-io")
    batcher: Batcher[Work] = Batcher(settings.batch.config(role))
    known_tenants = set(settings.tenants)
    first_start = app.on_first_start
    state: dict[str, Any] = {}  # the intake and its lane control, once started

    async def load_before_join() -> None:
        """Load and warm the model before the consumer starts: Faust's ``App.on_first_start``
        runs before the app's tasks, so this replica joins its group ready to serve
        (before, a new replica took partitions and they waited for its model load:
        benchmarks/replica_join.py)."""
        await first_start()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(executor, stage.warm, modality)
        serving.start()
        control.start()  # the versions in force are loaded before the group join too
        if not await loop.run_in_executor(None, control.wait_caught_up, CONTROL_CATCH_UP_S):
            log.warning("%s: audit.control not read to its end within %.0f s", role, CONTROL_CATCH_UP_S)
        await loop.run_in_executor(None, serving.wait_settled, MODEL_LOAD_TIMEOUT_S)

    app.on_first_start = load_before_join  # type: ignore[method-assign]

    async def accept(items: list[tuple[Work, AuditError | None]]) -> None:
        """A consumed batch, on the event loop: track every record, DLQ the undecodable
        ones, put the rest in the batcher on their lane."""
        intake: LaneIntake = state["intake"]
        bad: list[Work] = []
        for work, error in items:
            msg = work.message
            intake.acks.track(work)
            if error is not None:
                intake.dead_letter(work, error)
                bad.append(work)
                continue
            assert work.task is not None
            await batcher.put(work, lanes_by_topic[msg.topic()], work.task.deadline_ms, tenant=work.task.tenant_id)
        for topic in {w.message.topic() for w, _ in items}:
            metrics.MESSAGES_CONSUMED.labels(role, topic).inc(sum(1 for w, _ in items if w.message.topic() == topic))
        if bad:
            await intake.delivered(io_executor)
            intake.finish(bad)

    async def infer(batch: Batch[Work]) -> tuple[list[Work], BatchResult]:
        """Run ``batch`` (live and expired items) through the versions served (:class:`ServingSet`),
        in the inference thread."""
        works = [p.payload for p in batch.items + batch.expired]
        tasks = [w.task for w in works]  # only decoded records enter the batcher
        assert all(t is not None for t in tasks)
        started = time.perf_counter()
        result = await asyncio.get_running_loop().run_in_executor(executor, serving.score, tasks)
        if batch.items:
            batcher.observe_duration(len(batch.items), time.perf_counter() - started)
            metrics.BATCH_SIZE.labels(role).observe(len(batch.items))
            model_name = result.partials[0].model.name if result.partials else role
            metrics.INFERENCE_SECONDS.labels(role, model_name).observe(result.inference_s)
        metrics.BATCH_CLOSES.labels(role, batch.reason).inc()
        return works, result

    async def emit(batch: Batch[Work], works: list[Work], result: BatchResult) -> None:
        """Hand each partial (and DLQ record) of an inferred batch to the producer, wait
        for the broker's acknowledgement of all of them (their own, not a flush), then
        ack their records."""
        intake: LaneIntake = state["intake"]
        lane_of = {id(p.payload): p.lane for p in batch.items + batch.expired}
        failures = dict(result.failures)
        delivery = BatchDelivery(asyncio.get_running_loop())
        statuses: Counter[str] = Counter()
        for i, (work, partial) in enumerate(zip(works, result.partials)):
            intake.produce(SCORES, partial.request_id.encode(), encode(partial), delivery)
            statuses[partial.status] += 1
            if partial.status == "expired":
                tenant = metrics.tenant_label(partial.tenant_id, known_tenants)
                metrics.SLO_MISSES.labels(role, tenant, lane_of[id(work)], "expired").inc()
            if i in failures:
                error = failures[i]
                error.request_id = error.request_id or partial.request_id
                intake.dead_letter(work, error, delivery)
        for status, n in statuses.items():
            metrics.PARTIALS.labels(role, status).inc(n)
        delivery.seal()
        await delivery.future
        intake.finish(works)

    @app.task
    async def run_worker() -> None:
        """Start the intake thread (joins the group: the model is warm by now), then take
        batches, infer, emit; emitting batch k (event loop) overlaps inferring batch k+1
        (inference thread). Up to ``EMITS_IN_FLIGHT`` batches await their acknowledgement at
        once (records are still acked in offset order, :class:`InOrderAcks`); a failed emit
        or a dead intake thread crashes the worker."""
        loop = asyncio.get_running_loop()
        intake = state["intake"] = LaneIntake(settings, role, list(topic_names.values()), lanes_by_topic, batcher, accept)
        intake_done = loop.run_in_executor(None, intake.run, loop)
        emitting: deque[asyncio.Task[None]] = deque()
        next_batch: asyncio.Task[Batch[Work]] | None = None
        try:
            while True:
                next_batch = asyncio.ensure_future(batcher.next_batch())
                await asyncio.wait({next_batch, intake_done}, return_when=asyncio.FIRST_COMPLETED)
                if intake_done.done():
                    intake_done.result()  # re-raises the intake thread's failure
                    raise RuntimeError(f"{role} intake thread stopped")
                batch = next_batch.result()
                works, result = await infer(batch)
                emitting.append(asyncio.create_task(emit(batch, works, result)))
                while emitting and (len(emitting) > EMITS_IN_FLIGHT or emitting[0].done()):
                    await emitting.popleft()  # re-raises an emit failure
        except asyncio.CancelledError:
            for t in (*emitting, next_batch):
                if t is not None:
                    t.cancel()
            intake.stop()
            await asyncio.wait({intake_done}, timeout=10)
            control.stop()
            raise
        except Exception as exc:  # a dead batch loop would stall the worker silently: crash it
            log.exception("%s batch loop failed; crashing the worker (unacked records are replayed)", role)
            intake.stop()
            await app.crash(exc)

    return app
