"""The one adapter every modality worker uses: lane topics → micro-batch → model stage → ``audit.scores``.

Batches close on the max batch size for the stage or the time window from the
first item (Faust ``take_events``); the model runs in a worker thread, off the
event loop; the batch's events are acked only after all its partials (and DLQ
records) were handed to the producer, which Faust flushes before committing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import faust

from engine.models import ModelStage
from engine.stage import process_batch
from schemas.codec import decode, encode
from schemas.errors import AuditError
from schemas.messages import ModalityTask
from topics.catalog import LANES, SCORES, lane_topic
from workers import metrics
from workers.app import DeadLetters, make_app, raw_topic
from workers.settings import Settings

log = logging.getLogger(__name__)


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


def modality_app(role: str, modality: str, factory: Callable[[Settings], ModelStage]) -> faust.App:
    """Build the Faust app of a modality worker.

    Args:
        role: ``text``, ``image`` or ``ocr``; the consumer group is ``rtaudit-<role>``.
        modality: which lane topics to consume (``audit.<modality>.hi`` and ``.lo``).
        factory: builds the model stage from settings (called once, in a thread).
    """
    app, settings = make_app(role)
    lanes = raw_topic(app, *(lane_topic(modality, lane) for lane in LANES))
    scores = raw_topic(app, SCORES)
    dead_letters = DeadLetters(app, role)
    stage = LazyStage(factory, settings)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{role}-infer")
    max_size = settings.batch.max_size.get(role, 8)
    window_s = settings.batch.window_ms / 1000.0

    @app.task
    async def warm_up() -> None:
        await asyncio.get_running_loop().run_in_executor(executor, stage.get)

    @app.agent(lanes)
    async def infer(stream):  # type: ignore[no-untyped-def]
        loop = asyncio.get_running_loop()
        async for events in stream.take_events(max_size, within=window_s):
            tasks, task_events = [], []
            for event in events:
                metrics.MESSAGES_CONSUMED.labels(role, event.message.topic).inc()
                try:
                    tasks.append(decode(event.value or b"", ModalityTask))
                    task_events.append(event)
                except AuditError as exc:
                    await dead_letters.send(event, exc)
            if not tasks:
                continue
            model_stage = await loop.run_in_executor(executor, stage.get)
            result = await loop.run_in_executor(executor, process_batch, model_stage, tasks)
            metrics.BATCH_SIZE.labels(role).observe(len(tasks))
            metrics.INFERENCE_SECONDS.labels(role, model_stage.model.name).observe(result.inference_s)
            for partial in result.partials:
                await scores.send(key=partial.request_id.encode(), value=encode(partial))
                metrics.PARTIALS.labels(role, partial.status).inc()
            for i, error in result.failures:
                error.request_id = error.request_id or tasks[i].request_id
                await dead_letters.send(task_events[i], error)

    return app
