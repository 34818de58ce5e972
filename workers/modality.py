"""The one adapter every modality worker uses: lane topics → two-lane micro-batcher → model stage → ``audit.scores``.

Flow (one process: an intake thread, the event loop, one inference thread):

0. Before the consumer starts (Faust's ``App.on_first_start``), the model is loaded
   and warmed with one batch: a replica joins its consumer group ready to serve.
1. The intake thread (:class:`rtaudit.workers.lane_intake.LaneIntake`) is one confluent-kafka consumer of both lane
   topics (``audit.<modality>.hi`` and ``.lo``, group ``rtaudit-<role>``). It reads up to
   1,000 records per ``consume`` call, decodes them, and hands the batch to the event loop
   in one hop, which puts each task in the :class:`rtaudit.engine.batcher.Batcher` on its lane; a
   full lane's records are held beside it (:mod:`rtaudit.workers.lane_overflow`) and that lane's
   partitions paused, never the other lane's, so the low lane keeps its share while the high
   lane is saturated. The thread waits until the batch is taken; past 1 s it pauses every
   partition and keeps polling (``max.poll.interval.ms`` is never exceeded, finished records
   are committed meanwhile). A record that does not decode goes to the DLQ. A rebalance
   retires the revoked partitions' ack generations (:class:`rtaudit.workers.acks.InOrderAcks`).
2. One task takes batches (high lane first, low lane's share honoured, closing on
   size, lag-adaptive window or deadline) and runs :func:`rtaudit.engine.stage.process_batch`
   in the single inference thread, off the event loop. Items already past their
   deadline come back from the batcher separately and get ``expired`` partials
   from the same ``process_batch`` call, without inference.
3. Each partial is serialized in the inference thread, right after its batch is scored; the
   tasks a splitting stage made of an item (the video stage's frames and audio track) are
   produced to their lane topics just before that item's partial, in the same acknowledged
   batch, so an offset is committed only once the split and the partial announcing it are out;
   each partial (and DLQ record) of a batch is handed to the producer without waiting,
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import faust

from rtaudit.engine.batcher import LANE_NAMES, Batch, Batcher, LaneName
from rtaudit.engine.models import ModelStage
from rtaudit.engine.stage import BatchResult
from rtaudit.schemas.codec import encode
from rtaudit.schemas.errors import AuditError
from rtaudit.topics.catalog import SCORES, lane_topic
from rtaudit.workers import metrics
from rtaudit.workers.app import make_app
from rtaudit.workers.control import ControlConflict, ControlPlane, publish
from rtaudit.workers.lane_intake import LaneIntake, Work
from rtaudit.workers.serving import LazyStage, ServingSet, bundle_loader
from rtaudit.workers.settings import Settings
from rtaudit.workers.stream import CONTROL_CATCH_UP_S, BatchDelivery

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
    def status() -> dict[str, Any]:
        health, detail = worker_health(serving.settled(), state.get("inferring"), time.monotonic())
        fields: dict[str, Any] = {"serving": [serving.status()], "health": health, "lag": batcher.stats().lag}
        if detail is not None:
            fields["detail"] = detail
        return fields

    control = ControlPlane(settings, role, status=status)

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
    batcher: Batcher[Work] = Batcher(settings.batcher_config(role))
    known_tenants = set(settings.tenants)
    first_start = app.on_first_start
    state: dict[str, Any] = {}  # the intake (once started); the batch in inference (its start and size)

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

    app.on_first_start = load_before_join  # type: ignore[method-assign]  # Faust's App.on_first_start is the documented hook to replace

    async def accept(items: list[tuple[Work, AuditError | None]]) -> None:
        """A consumed batch, on the event loop: track every record, DLQ the undecodable
        ones, put the rest in the batcher on their lane (a full lane holds its records apart and
        never the other lane's: :class:`rtaudit.workers.lane_overflow.LowLaneOverflow`,
        :class:`rtaudit.workers.lane_overflow.HighLaneHold`)."""
        intake: LaneIntake = state["intake"]
        bad: list[Work] = []
        per_topic: Counter[str] = Counter()
        for work, error in items:
            intake.acks.track(work)
            topic = work.tp[0]
            per_topic[topic] += 1
            if error is not None:
                intake.dead_letter(work, error)
                bad.append(work)
                continue
            lane = lanes_by_topic[topic]
            if lane == "hi":  # a full high lane holds its records apart, never the low lane's
                await intake.hi_hold.put(work)
            else:
                await intake.overflow.put(work, lane)
        await intake.overflow.settle()
        for topic, n in per_topic.items():
            metrics.MESSAGES_CONSUMED.labels(role, topic).inc(n)
        if bad:
            await intake.delivered(io_executor)
            intake.finish(bad)

    def score_and_encode(tasks: list[Any]) -> tuple[BatchResult, list[bytes]]:
        """The inference thread's part: score, then serialize every partial (off the event loop,
        which moves, acks and commits the records of every batch)."""
        started = time.perf_counter()
        result = serving.score(tasks)
        values = [encode(p) for p in result.partials]
        if time.perf_counter() - started > TRIM_AFTER_S:
            release_freed_memory()
        return result, values

    async def infer(batch: Batch[Work]) -> tuple[list[Work], BatchResult, list[bytes]]:
        """Run ``batch`` (live and expired items) through the versions served (:class:`ServingSet`),
        in the inference thread; returns the works, the result and each partial's encoded value."""
        works = [p.payload for p in batch.items + batch.expired]
        tasks = [w.task for w in works]  # only decoded records enter the batcher
        assert all(t is not None for t in tasks)
        started = time.perf_counter()
        state["inferring"] = (time.monotonic(), len(tasks))
        try:
            result, values = await asyncio.get_running_loop().run_in_executor(executor, score_and_encode, tasks)
        finally:
            state["inferring"] = None
        if batch.items:
            batcher.observe_duration(len(batch.items), time.perf_counter() - started)
            metrics.BATCH_SIZE.labels(role).observe(len(batch.items))
            model_name = result.partials[0].model.name if result.partials else role
            metrics.INFERENCE_SECONDS.labels(role, model_name).observe(result.inference_s)
        metrics.BATCH_CLOSES.labels(role, batch.reason).inc()
        return works, result, values

    async def emit(batch: Batch[Work], works: list[Work], result: BatchResult, values: list[bytes]) -> None:
        """Hand each partial (and DLQ record) of an inferred batch to the producer, wait
        for the broker's acknowledgement of all of them (their own, not a flush), then
        ack their records."""
        intake: LaneIntake = state["intake"]
        lane_of: dict[int, str] | None = None  # built at the first expired partial: only those are counted by lane
        failures = dict(result.failures)
        subtasks = dict(result.subtasks)
        delivery = BatchDelivery(asyncio.get_running_loop())
        statuses: Counter[str] = Counter()
        for i, (work, partial, value) in enumerate(zip(works, result.partials, values)):
            for sub in subtasks.get(i, ()):  # a split item's tasks, on their lanes, before its partial
                intake.produce(lane_topic(sub.modality, sub.lane), sub.request_id.encode(), encode(sub), delivery)
            intake.produce(SCORES, partial.request_id.encode(), value, delivery)
            statuses[partial.status] += 1
            if partial.status == "expired":
                if lane_of is None:
                    lane_of = {id(p.payload): p.lane for p in batch.items + batch.expired}
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
                works, result, values = await infer(batch)
                emitting.append(asyncio.create_task(emit(batch, works, result, values)))
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
            control.stop()
            raise
        except Exception as exc:  # a dead batch loop would stall the worker silently: crash it
            log.exception("%s batch loop failed; crashing the worker (unacked records are replayed)", role)
            intake.stop()
            await app.crash(exc)

    return app
