"""The one adapter every modality worker uses: lane topics → two-lane micro-batcher → model stage → ``audit.scores``.

Flow (one process, one event loop):

0. Before the consumer starts (Faust's ``App.on_first_start``), the model is loaded
   and warmed with one batch: a replica joins its consumer group ready to serve.
1. Two agents, one per lane topic (``audit.<modality>.hi`` and ``.lo``), read with
   manual acks (``stream.noack()``), decode each record and put it in the
   :class:`engine.batcher.Batcher` on its lane (a record that does not decode goes
   to the DLQ). A full lane blocks only its own agent.
2. One task takes batches (high lane first, low lane's share honoured, closing on
   size, lag-adaptive window or deadline) and runs :func:`engine.stage.process_batch`
   in the single inference thread, off the event loop. Items already past their
   deadline come back from the batcher separately and get ``expired`` partials
   from the same ``process_batch`` call, without inference.
3. Each partial (and DLQ record) is handed to the producer; once the broker has
   acknowledged a record's outputs (a failed delivery crashes the worker before the
   ack, so the record is consumed again), its record is marked done. This emit
   runs as its own task, so the inference thread starts
   the next batch while the event loop emits the last one (measured: the loop
   otherwise idled the model for ~1-2 ms per partial); batches are emitted in
   order, one at a time; :class:`workers.acks.InOrderAcks` acks records per partition in
   offset order, so an offset is committed only after its output was delivered
   (at-least-once).
4. A 50 ms control timer sets ``rtaudit_consumer_lag_messages`` per partition
   (high watermark seen while fetching minus the next offset to process, clamped
   at 0; tansu's ListOffsets end offset is wrong, BROKER_NOTES), feeds the lag to
   the batcher, pauses the low lane's partitions while the high lane lags (and
   resumes them when it drains or the low lane's share needs items), and sets the
   batcher gauges.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import faust
from aiokafka.errors import IllegalStateError
from PIL import Image, ImageDraw

from engine.batcher import LANE_NAMES, Batch, Batcher, LaneName
from engine.clock import now_ms as wall_now_ms
from engine.models import ModelStage
from engine.stage import BatchResult, process_batch
from schemas.codec import decode, encode
from schemas.errors import AuditError
from schemas.messages import MediaItem, ModalityTask
from topics.catalog import SCORES, lane_topic
from workers import metrics
from workers.acks import InOrderAcks, finish_when_delivered
from workers.app import DeadLetters, make_app, raw_topic
from workers.settings import Settings

log = logging.getLogger(__name__)
#: seconds between lag readings / lane pause decisions.
CONTROL_INTERVAL_S = 0.05
#: seconds a fetched consumer position of a not-yet-seen partition is reused.
POSITION_CACHE_S = 1.0


class LazyStage:
    """Loads a model stage once, in a worker thread, at start-up (never at import time)."""

    def __init__(self, factory: Callable[[Settings], ModelStage], settings: Settings) -> None:
        self._factory = factory
        self._settings = settings
        self._stage: ModelStage | None = None
        self._lock = threading.Lock()

    def get(self) -> ModelStage:
        with self._lock:
            if self._stage is None:
                self._stage = self._factory(self._settings)
                log.info("loaded %s model %s", self._stage.stage, self._stage.model)
            return self._stage

    def warm(self, modality: str) -> float:
        """Load the model and run one :func:`warmup_task` batch through it (onnxruntime's first
        run allocates and plans); seconds taken. Raises ``RuntimeError`` when the warm-up item
        fails: a worker that cannot score it should crash at start, not after joining."""
        started = time.perf_counter()
        stage = self.get()
        result = process_batch(stage, [warmup_task(modality)])
        if result.partials[0].status != "ok":
            raise RuntimeError(f"{stage.stage} warm-up batch failed: {dict(result.failures)}")
        took = time.perf_counter() - started
        log.info("warmed %s model %s in %.2f s (before joining the consumer group)", stage.stage, stage.model, took)
        return took


def warmup_task(modality: str) -> ModalityTask:
    """One small task of ``modality``: a short text, or a 240×48 px PNG with two rendered
    words (OCR's detector and recogniser both run on it)."""
    t = wall_now_ms()
    content: dict[str, Any] = {"text": "warm up the model"}
    if modality != "text":
        img = Image.new("RGB", (240, 48), "white")
        ImageDraw.Draw(img).text((10, 16), "warm up", fill="black")
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        content = {"media": MediaItem(type="image", data_b64=base64.b64encode(buf.getvalue()).decode(), name="warmup.png")}
    return ModalityTask(
        request_id="rtaudit-warmup", tenant_id="rtaudit-warmup", part=f"{modality}:0", modality=modality,  # type: ignore[arg-type]
        lane="hi", created_at_ms=t, deadline_ms=t + 600_000, routed_at_ms=t, **content,
    )


@dataclass(eq=False)
class Work:
    """A decoded task (``None`` for a record bound for the DLQ) and the Faust event
    (and stream, for the ack) it came from."""

    event: Any
    stream: Any
    task: ModalityTask | None


class LaneControl:
    """Lag readings and low-lane pausing for one worker (Faust consumer side).

    ``next_offset`` holds, per partition, the offset after the last record the
    agents received: the worker's position. Lag = high watermark − position,
    clamped at 0; before any record of a partition arrived, the consumer's own
    fetch position is used.
    """

    def __init__(self, app: faust.App, role: str, lanes: dict[str, LaneName], batcher: Batcher[Work]) -> None:
        self.app, self.role, self.lanes, self.batcher = app, role, lanes, batcher
        self.next_offset: dict[Any, int] = {}
        self.paused: set[Any] = set()
        self._positions: dict[Any, tuple[int | None, float]] = {}

    def seen(self, tp: Any, offset: int) -> None:
        self.next_offset[tp] = max(self.next_offset.get(tp, 0), offset + 1)

    async def _fetch_position(self, tp: Any) -> int | None:
        """The consumer's position of a partition no record came from yet (a thread hop: cached)."""
        cached = self._positions.get(tp)
        now = time.monotonic()
        if cached is None or now - cached[1] > POSITION_CACHE_S:
            cached = self._positions[tp] = (await self.app.consumer.position(tp), now)
        return cached[0]

    async def tick(self) -> None:
        consumer = self.app.consumer
        assigned = {tp for tp in consumer.assignment() if tp.topic in self.lanes}
        lag = {lane: 0 for lane in LANE_NAMES}
        for tp in assigned:
            # a rebalance can revoke ``tp`` while this tick awaits a position: aiokafka then
            # asserts (highwater) or raises IllegalStateError (position); measured: a second
            # replica joining under load crashed the first worker here. Skip the partition.
            try:
                highwater = consumer.highwater(tp)
                if highwater is None:
                    continue
                position = self.next_offset.get(tp)
                if position is None:
                    position = await self._fetch_position(tp)
                    if position is None:
                        continue
            except (AssertionError, IllegalStateError):
                continue
            tp_lag = max(0, highwater - position)
            lag[self.lanes[tp.topic]] += tp_lag
            metrics.CONSUMER_LAG.labels(self.role, tp.topic, str(tp.partition)).set(tp_lag)
        for lane in LANE_NAMES:
            self.batcher.set_lag(lane, lag[lane])
        self.paused &= assigned  # revoked partitions are no longer ours to resume
        if not getattr(self.app, "rebalancing", False):
            lo_tps = {tp for tp in assigned if self.lanes[tp.topic] == "lo"}
            if self.batcher.update_lo_pause():
                consumer.pause_partitions(lo_tps)  # every tick: Faust's own flow control may resume them
                self.paused |= lo_tps
            elif self.paused:
                consumer.resume_partitions(self.paused)
                self.paused = set()
        stats = self.batcher.stats()
        metrics.BATCH_WINDOW_SECONDS.labels(self.role).set(stats.window_ms / 1000.0)
        metrics.BATCH_SIZE_LIMIT.labels(self.role).set(stats.size_limit)
        metrics.BATCH_LAST_SIZE.labels(self.role).set(stats.last_batch_size)
        metrics.BATCHER_LAG.labels(self.role).set(stats.lag)
        metrics.BATCHER_QUEUED.labels(self.role, "hi").set(stats.queued_hi)
        metrics.BATCHER_QUEUED.labels(self.role, "lo").set(stats.queued_lo)
        metrics.LO_LANE_PAUSED.labels(self.role).set(int(bool(self.paused)))


def modality_app(role: str, modality: str, factory: Callable[[Settings], ModelStage]) -> faust.App:
    """Build the Faust app of a modality worker.

    Args:
        role: ``text``, ``image`` or ``ocr``; the consumer group is ``rtaudit-<role>``; the
            batcher limits are ``settings.batch.config(role)``.
        modality: which lane topics to consume (``audit.<modality>.hi`` and ``.lo``).
        factory: builds the model stage from settings (called once, in a thread).
    """
    app, settings = make_app(role)
    topic_names = {lane: lane_topic(modality, lane) for lane in LANE_NAMES}
    lanes_by_topic: dict[str, LaneName] = {name: lane for lane, name in topic_names.items()}
    dead_letters = DeadLetters(app, role)
    stage = LazyStage(factory, settings)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{role}-infer")
    batcher: Batcher[Work] = Batcher(settings.batch.config(role))
    acks: InOrderAcks[Work] = InOrderAcks(lambda w: w.event.message.tp)

    first_start = app.on_first_start

    async def load_before_join() -> None:
        """Load and warm the model before the consumer starts: Faust's ``App.on_first_start``
        runs before the app's consumer and agents start, so this replica joins its group
        ready to serve (before, a new replica took partitions and they waited for its model
        load: benchmarks/replica_join.py)."""
        await first_start()
        await asyncio.get_running_loop().run_in_executor(executor, stage.warm, modality)

    app.on_first_start = load_before_join  # type: ignore[method-assign]

    async def finish(work: Work) -> None:
        """``work``'s partial or DLQ record is with the producer: ack it and the records it unblocks."""
        for ready in acks.done(work):
            await ready.stream.ack(ready.event)

    control = LaneControl(app, role, lanes_by_topic, batcher)
    known_tenants = set(settings.tenants)

    async def intake(stream: Any, lane: LaneName) -> None:
        stream = stream.noack()
        async for event in stream.events():
            msg = event.message
            metrics.MESSAGES_CONSUMED.labels(role, msg.topic).inc()
            control.seen(msg.tp, msg.offset)
            try:
                task = decode(event.value or b"", ModalityTask)
            except AuditError as exc:
                work = Work(event, stream, None)
                acks.track(work)
                try:
                    await finish_when_delivered([(work, [await dead_letters.send(event, exc)])], finish)
                except Exception as send_error:  # unacked, the record would hold its partition's commits forever
                    log.exception("%s: DLQ record not delivered; crashing the worker (the record is replayed)", role)
                    await app.crash(send_error)
                    return
                continue
            work = Work(event, stream, task)
            acks.track(work)
            await batcher.put(work, lane, task.deadline_ms)

    async def infer(model_stage: ModelStage, batch: Batch[Work]) -> tuple[list[Work], BatchResult]:
        """Run ``batch`` (live and expired items) through the stage in the inference thread."""
        works = [p.payload for p in batch.items + batch.expired]
        tasks = [w.task for w in works]  # only decoded records enter the batcher
        assert all(t is not None for t in tasks)
        started = time.perf_counter()
        result = await asyncio.get_running_loop().run_in_executor(executor, process_batch, model_stage, tasks)
        if batch.items:
            batcher.observe_duration(len(batch.items), time.perf_counter() - started)
            metrics.BATCH_SIZE.labels(role).observe(len(batch.items))
            metrics.INFERENCE_SECONDS.labels(role, model_stage.model.name).observe(result.inference_s)
        metrics.BATCH_CLOSES.labels(role, batch.reason).inc()
        return works, result

    async def emit(batch: Batch[Work], works: list[Work], result: BatchResult) -> None:
        """Hand each partial (and DLQ record) of an inferred batch to the producer, then ack its record."""
        producer = app.producer
        lane_of = {id(p.payload): p.lane for p in batch.items + batch.expired}
        failures = dict(result.failures)
        pending: list[tuple[Work, list[Any]]] = []
        for i, (work, partial) in enumerate(zip(works, result.partials)):
            # straight to the producer: Faust's Topic.send adds a FutureMessage, sensors and a
            # callback per record
            deliveries = [await producer.send(SCORES, partial.request_id.encode(), encode(partial), None, None, None)]
            metrics.PARTIALS.labels(role, partial.status).inc()
            if partial.status == "expired":
                tenant = metrics.tenant_label(partial.tenant_id, known_tenants)
                metrics.SLO_MISSES.labels(role, tenant, lane_of[id(work)], "expired").inc()
            if i in failures:
                error = failures[i]
                error.request_id = error.request_id or partial.request_id
                deliveries.append(await dead_letters.send(work.event, error))
            pending.append((work, deliveries))
        await finish_when_delivered(pending, finish)

    @app.task
    async def run_batches() -> None:
        """Take batches, infer, emit; emitting batch k (event loop) overlaps inferring batch k+1
        (inference thread), so neither waits for the other. At most one emit is in flight and
        batches are emitted in order; a failed emit crashes the worker like a failed batch."""
        model_stage = await asyncio.get_running_loop().run_in_executor(executor, stage.get)
        emitting: asyncio.Task[None] | None = None
        try:
            while True:
                batch = await batcher.next_batch()
                works, result = await infer(model_stage, batch)
                if emitting is not None:
                    await emitting  # in order; re-raises an emit failure
                emitting = asyncio.create_task(emit(batch, works, result))
        except asyncio.CancelledError:
            if emitting is not None:
                emitting.cancel()
            raise
        except Exception as exc:  # a dead batch loop would stall the worker silently: crash it
            log.exception("%s batch loop failed; crashing the worker (unacked records are replayed)", role)
            await app.crash(exc)

    @app.agent(raw_topic(app, topic_names["hi"]))
    async def intake_hi(stream):  # type: ignore[no-untyped-def]
        await intake(stream, "hi")

    @app.agent(raw_topic(app, topic_names["lo"]))
    async def intake_lo(stream):  # type: ignore[no-untyped-def]
        await intake(stream, "lo")

    @app.timer(interval=CONTROL_INTERVAL_S)
    async def lane_control() -> None:
        await control.tick()

    return app
