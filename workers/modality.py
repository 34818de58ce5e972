"""The one adapter every modality worker uses: lane topics → two-lane micro-batcher → model stage → ``audit.scores``.

The worker is a :class:`ModalityWorker` (typed state, each field's owning thread written
where it is declared) in a :class:`ModalityApp`. Faust is the process shell only (command line,
logging, signals, the event loop that runs the worker's task, ``App.crash`` on a failure); its
own consumer reads nothing. The worker's Kafka side is the runtime's
(:mod:`rtaudit.workers.runtime`); the stage's logic is its
:class:`rtaudit.workers.stage_handler.StageHandler`, which knows nothing of Kafka.

Flow (one process: an intake thread, a delivery thread, the event loop, one inference thread):

0. Before the consumer starts (:meth:`ModalityApp.on_first_start`), the model is loaded
   and warmed with one batch: a replica joins its consumer group ready to serve.
1. The intake thread (:class:`rtaudit.workers.runtime.lane_intake.LaneIntake`) is one confluent-kafka consumer of both lane
   topics (``audit.<modality>.hi`` and ``.lo``, group ``rtaudit-<role>``). It reads up to
   1,000 records per ``consume`` call, decodes them (:meth:`StageHandler.decode`: lane and task
   decided once, a :class:`rtaudit.workers.runtime.lane_overflow.Work`), and hands the batch to the event loop
   in one hop, which puts each task in the :class:`rtaudit.engine.batcher.Batcher` on its lane; a
   full lane's records are held beside it (:mod:`rtaudit.workers.runtime.lane_overflow`) and that lane's
   partitions paused, never the other lane's, so the low lane keeps its share while the high
   lane is saturated. The thread waits until the batch is taken; past 1 s it pauses every
   partition and keeps polling (``max.poll.interval.ms`` is never exceeded, finished records
   are committed meanwhile). A record that does not decode goes to the DLQ. A rebalance
   retires the revoked partitions' ack generations (:class:`rtaudit.workers.runtime.acks.InOrderAcks`).
2. One task takes batches (high lane first, low lane's share honoured, closing on
   size, lag-adaptive window or deadline) and runs :meth:`StageHandler.infer` in the single
   inference thread, off the event loop. Items already past their deadline when the batch
   closed come back from the batcher separately (decided there, once) and get ``expired``
   partials from the same :func:`rtaudit.engine.stage.process_batch` call, without inference.
3. Each partial is serialized in the inference thread, right after its batch is scored; the
   tasks a splitting stage made of an item (the video stage's frames and audio track) are
   produced to their lane topics just before that item's partial, in the same acknowledged
   batch, so an offset is committed only once the split and the partial announcing it are out;
   each partial (and DLQ record) of a batch is handed to the producer without waiting,
   counted by the batch's :class:`rtaudit.workers.runtime.emitter.BatchDelivery` (a delivery thread
   serves the producer's callbacks); the emit awaits the broker's acknowledgement of the
   batch's own outputs; a failed delivery crashes the worker before any ack, so the records
   are consumed again. Each emit runs as its own task, so the inference thread starts the
   next batch while earlier ones are emitted; up to ``EMITS_IN_FLIGHT`` batches await their
   acknowledgement at once. :class:`rtaudit.workers.runtime.acks.InOrderAcks` acks records per partition in offset order,
   and every 0.5 s the offset after each partition's acked prefix is committed: an
   offset is never committed before its output was delivered (at-least-once).
4. A 50 ms control timer sets ``rtaudit_consumer_lag_messages`` per partition
   (high watermark seen while fetching minus the next offset to process, clamped
   at 0; tansu's ListOffsets end offset is wrong, docs/broker.md), feeds the lag to
   the batcher, pauses the low lane's partitions while the high lane lags (and
   resumes them when it drains or the low lane's share needs items), and sets the
   batcher gauges.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import faust

from rtaudit.engine.batcher import LANE_NAMES, Batch, Batcher
from rtaudit.engine.lane_queue import LaneName
from rtaudit.engine.models import ModelStage
from rtaudit.engine.stage import BatchResult
from rtaudit.topics.catalog import lane_topic
from rtaudit.workers import metrics, tracing
from rtaudit.workers.app import make_app
from rtaudit.workers.control import ControlConflict, ControlPlane, publish
from rtaudit.workers.drift_monitor import DriftMonitor, text_encoder
from rtaudit.workers.runtime.emitter import BatchDelivery
from rtaudit.workers.runtime.lane_intake import LaneIntake
from rtaudit.workers.runtime.lane_overflow import Work
from rtaudit.workers.runtime.loop import CONTROL_CATCH_UP_S
from rtaudit.workers.serving import LazyStage, ServingSet, bundle_loader
from rtaudit.workers.settings import Settings
from rtaudit.workers.stage_handler import Scored, StageHandler

log = logging.getLogger(__name__)
#: batches whose outputs may await the broker's acknowledgement at once: one ack round
#: trip per batch bounded a null-model text worker at ~4,400 records/s (60,000 produced at
#: once, the worker 50 % busy).
EMITS_IN_FLIGHT = 8
#: longest wait at start for the bundles in force to be loaded before the group join, s.
MODEL_LOAD_TIMEOUT_S = 300.0
#: a batch in inference longer than this makes the worker's heartbeat say ``degraded``, s
#: (a MiniLM batch of 64 takes about 0.4 s on one CPU core, an OCR batch a few seconds).
STALLED_BATCH_S = 30.0


#: a batch whose scoring took longer than this hands the heap's free memory back to the OS after it, s.
TRIM_AFTER_S = 1.0


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018  (glibc only)
        return libc
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> bool:
    """glibc ``malloc_trim(0)``: return the heap's free pages to the OS. Large batches (32,000-character
    texts scored in hundreds of windows) grow the heap, and glibc keeps freed memory for reuse: a
    newcomer's text worker went from 0.77 to 3.5 GB resident after 64 such texts and stayed there;
    measured here, 6 of them: 0.39 → 0.66 GB, 0.43 after a trim. Returns whether it ran (``False``
    where the C library is not glibc)."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def worker_health(settled: bool, inferring: tuple[float, int] | None, now_s: float) -> tuple[str, str | None]:
    """The heartbeat's ``(health, detail)`` of a modality worker: ``loading`` until the versions in
    force are loaded; ``degraded`` while one batch has been in inference for more than
    :data:`STALLED_BATCH_S` (``inferring``: its start, ``time.monotonic()`` s, and its size; the
    worker serves nothing else meanwhile); else ``ok`` (detail ``None``)."""
    if not settled:
        return "loading", None
    if inferring is not None and now_s - inferring[0] > STALLED_BATCH_S:
        return "degraded", f"a batch of {inferring[1]} has been in inference for {now_s - inferring[0]:.0f} s"
    return "ok", None


class ModalityWorker:
    """One modality worker's state and its steps (module doc). Built in the Faust app's process
    at import time (loads nothing); :meth:`load_before_join` and :meth:`run` do the work.

    Args:
        settings: the worker's settings.
        role: ``text``, ``image``, ``ocr``, ``audio`` or ``video``; the consumer group is
            ``rtaudit-<role>``; the batcher limits are ``settings.batcher_config(role)``.
        modality: which lane topics to consume (``audit.<modality>.hi`` and ``.lo``).
        factory: builds the model stage from settings (called once, in the inference thread).
    """

    def __init__(self, settings: Settings, role: str, modality: str, factory: Callable[[Settings], ModelStage]) -> None:
        # -- immutable after construction (read by every thread) ------------------------------
        self.settings, self.role, self.modality = settings, role, modality
        self.topics: dict[LaneName, str] = {lane: lane_topic(modality, lane) for lane in LANE_NAMES}
        self.stage = LazyStage(factory, settings)
        #: audit.control reader and heartbeats (its own threads; calls :meth:`status`).
        self.control = ControlPlane(settings, role, status=self.status)
        #: the versions served (its own loader and publisher threads; :meth:`ServingSet.score` in the inference thread).
        self.serving = ServingSet(role, self.stage.get, bundle_loader(settings), self._publish,
                                  author=f"auto:{self.control.worker_id}")
        self.control.listen(self.serving.on_control)
        self.handler = StageHandler(role, {t: lane for lane, t in self.topics.items()}, self.serving.score, settings.tenants)
        #: the one inference thread, and the I/O threads (flush waits).
        self.infer_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{role}-infer")
        self.io_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"{role}-io")
        #: semantic and score drift (:mod:`rtaudit.workers.drift_monitor`): fed by the inference thread,
        #: read by the heartbeat thread; it owns its lock and its embedding thread.
        self.drift = DriftMonitor(settings.drift, role, set(settings.tenants))
        # -- owned by the event loop ------------------------------------------------------------
        self.batcher: Batcher[Work] = Batcher(settings.batcher_config(role))
        #: the Kafka side, built when :meth:`run` starts.
        self.intake: LaneIntake | None = None
        #: the batch in inference: (its start, ``time.monotonic()`` s; its size), else ``None``. Written on
        #: the event loop, read by the heartbeat thread (a tuple is replaced whole, never mutated).
        self.inferring: tuple[float, int] | None = None

    # -- control plane ---------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The heartbeat's fields (heartbeat thread): versions served, health, batcher lag."""
        health, detail = worker_health(self.serving.settled(), self.inferring, time.monotonic())
        fields: dict[str, Any] = {"serving": [self.serving.status()], "health": health, "lag": self.batcher.stats().lag,
                                  "drift": self.drift.readings()}
        if detail is not None:
            fields["detail"] = detail
        return fields

    def _publish(self, subject: str, payload: Any, reason: str, expects: int) -> None:
        """Publish the worker's own canary decision (the serving set's publisher thread)."""
        try:
            publish(self.settings, subject, payload, author=f"auto:{self.control.worker_id}", reason=reason,
                    expects=None if expects < 0 else expects)
        except ControlConflict as exc:  # another replica published the same decision first
            log.info("%s: %s not published (%s): %s", self.control.worker_id, subject, exc.code, exc)

    async def load_before_join(self) -> None:
        """Load and warm the model, start the serving set and the control plane, and wait until the
        versions in force are loaded: before the intake joins its group, so this replica takes
        partitions ready to serve (before, a new replica took partitions and they waited for its
        model load: benchmarks/replica_join.py). Raises ``RuntimeError`` when the warm-up fails."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.infer_pool, self.stage.warm, self.modality)
        self.serving.start()
        self.drift.start(text_encoder(self.stage.get()))
        self.control.start()
        if not await loop.run_in_executor(None, self.control.wait_caught_up, CONTROL_CATCH_UP_S):
            log.warning("%s: audit.control not read to its end within %.0f s", self.role, CONTROL_CATCH_UP_S)
        await loop.run_in_executor(None, self.serving.wait_settled, MODEL_LOAD_TIMEOUT_S)

    # -- the data path (event loop) ----------------------------------------------------------
    def _intake(self) -> LaneIntake:
        if self.intake is None:
            raise RuntimeError(f"{self.role}: the intake is not running")
        return self.intake

    async def accept(self, works: list[Work]) -> None:
        """A consumed batch: track every record, DLQ the undecodable ones, put the rest in the
        batcher on their lane (a full lane holds its records apart and never the other lane's:
        :class:`rtaudit.workers.runtime.lane_overflow.LowLaneOverflow`, :class:`~rtaudit.workers.runtime.lane_overflow.HighLaneHold`)."""
        intake = self._intake()
        bad: list[Work] = []
        per_topic: Counter[str] = Counter()
        for work in works:
            intake.acks.track(work)
            per_topic[work.tp[0]] += 1
            if work.error is not None:
                intake.dead_letter(work, work.error)
                bad.append(work)
            elif work.lane == "hi":  # a full high lane holds its records apart, never the low lane's
                await intake.hi_hold.put(work)
            else:
                await intake.overflow.put(work)
        await intake.overflow.settle()
        for topic, n in per_topic.items():
            metrics.MESSAGES_CONSUMED.labels(self.role, topic).inc(n)
        if bad:
            await intake.delivered(self.io_pool)
            intake.finish(bad)

    def _score(self, live: list[Work], expired: list[Work]) -> tuple[list[Scored], BatchResult]:
        """Inference thread: score and encode (:meth:`StageHandler.infer`); a long batch gives the
        heap's free memory back after it."""
        started = time.perf_counter()
        out = self.handler.infer(live, expired)
        self.drift.observe([s.work.task for s in out[0]], [s.partial for s in out[0]])
        if time.perf_counter() - started > TRIM_AFTER_S:
            release_freed_memory()
        return out

    async def infer(self, batch: Batch[Work]) -> list[Scored]:
        """Run ``batch`` (live and expired items, as the batcher decided) in the inference thread."""
        live, expired = [p.payload for p in batch.items], [p.payload for p in batch.expired]
        started = time.perf_counter()
        self.inferring = (time.monotonic(), len(live) + len(expired))
        try:
            scored, result = await asyncio.get_running_loop().run_in_executor(self.infer_pool, self._score, live, expired)
        finally:
            self.inferring = None
        if live:
            self.batcher.observe_duration(len(live), time.perf_counter() - started)
            metrics.BATCH_SIZE.labels(self.role).observe(len(live))
            model_name = result.partials[0].model.name if result.partials else self.role
            metrics.INFERENCE_SECONDS.labels(self.role, model_name).observe(result.inference_s)
        metrics.BATCH_CLOSES.labels(self.role, batch.reason).inc()
        tracing.batch_spans(self.role, batch)  # before emit: each item's output carries its queue span
        return scored

    async def emit(self, scored: list[Scored]) -> None:
        """Hand a scored batch's outputs (:meth:`StageHandler.outputs`) to the producer, wait for
        the broker's acknowledgement of all of them (their own, not a flush), then ack their records."""
        intake = self._intake()
        delivery = BatchDelivery(asyncio.get_running_loop())
        intake.emitter.emit(self.handler.outputs(scored), delivery)
        delivery.seal()
        await delivery.future
        intake.finish([s.work for s in scored])

    async def run(self, crash: Callable[[BaseException], Awaitable[None]]) -> None:
        """Start the intake thread (joins the group: the model is warm by now), then take
        batches, infer, emit; emitting batch k (event loop) overlaps inferring batch k+1
        (inference thread). Up to ``EMITS_IN_FLIGHT`` batches await their acknowledgement at
        once (records are still acked in offset order, :class:`rtaudit.workers.runtime.acks.InOrderAcks`);
        a failed emit or a dead intake thread calls ``crash`` (Faust's ``App.crash``)."""
        loop = asyncio.get_running_loop()
        intake = self.intake = LaneIntake(self.settings, self.role, list(self.topics.values()),
                                          {t: lane for lane, t in self.topics.items()}, self.batcher, self.accept,
                                          self.handler.decode)
        intake_done = loop.run_in_executor(None, intake.run, loop)
        emitting: deque[asyncio.Task[None]] = deque()
        next_batch: asyncio.Task[Batch[Work]] | None = None
        try:
            while True:
                next_batch = asyncio.ensure_future(self.batcher.next_batch())
                waiting: set[asyncio.Future[Any]] = {next_batch, intake_done}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if intake_done.done():
                    intake_done.result()  # re-raises the intake thread's failure
                    raise RuntimeError(f"{self.role} intake thread stopped")
                scored = await self.infer(next_batch.result())
                emitting.append(asyncio.create_task(self.emit(scored)))
                while emitting and (len(emitting) > EMITS_IN_FLIGHT or emitting[0].done()):
                    await emitting.popleft()  # re-raises an emit failure
        except asyncio.CancelledError:
            for t in (*emitting, next_batch):
                if t is not None:
                    t.cancel()
            intake.overflow.cancel()
            intake.hi_hold.cancel()
            intake.stop()
            await asyncio.wait({intake_done}, timeout=10)
            self.control.stop()
            self.drift.stop()
            raise
        except Exception as exc:  # a dead batch loop would stall the worker silently: crash it
            log.exception("%s batch loop failed; crashing the worker (unacked records are replayed)", self.role)
            intake.stop()
            await crash(exc)


class ModalityApp(faust.App):
    """The Faust app of a modality worker: the process shell (module doc) whose first start loads
    and warms the model before any consumer starts (Faust awaits ``on_first_start`` before it
    starts its consumer and the app's tasks)."""

    modality: ModalityWorker | None = None

    async def on_first_start(self) -> None:
        await super().on_first_start()
        if self.modality is not None:
            await self.modality.load_before_join()


def modality_app(role: str, modality: str, factory: Callable[[Settings], ModelStage]) -> ModalityApp:
    """Build the Faust app of a modality worker (``faust -A rtaudit.workers.<role> worker``).

    Args:
        role: the stage (``text``, ``image``, ``ocr``, ``audio``, ``video``): consumer group
            ``rtaudit-<role>``, batcher limits ``settings.batcher_config(role)``.
        modality: which lane topics to consume (``audit.<modality>.hi`` and ``.lo``).
        factory: builds the model stage from settings (called once, in a thread).
    """
    app, settings = make_app(role, app_id=f"rtaudit-{role}-runtime", app_class=ModalityApp)
    worker = app.modality = ModalityWorker(settings, role, modality, factory)

    @app.task  # type: ignore[untyped-decorator]  # faust's App.task is not annotated
    async def run_worker() -> None:
        await worker.run(app.crash)

    return app
