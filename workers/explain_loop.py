"""The explain role's batch loop (started by :mod:`rtaudit.workers.explain`): heatmaps for the
image parts of the verdicts whose decision is in ``explain.decisions`` and for on-demand requests.

Inputs, in its own consumer group ``rtaudit-explain`` (so the verdict path never waits for it):
``audit.image.{hi,lo}`` (the image tasks, which carry the image inline or by URI: the only place
the bytes travel), ``audit.verdicts`` and ``audit.explain.requests``. All are keyed by request id
with the murmur2 partitioner and have the same partition count, so one member owns a request's
records on every topic (librdkafka's range assignor gives it the same partition number of each).
The join is :class:`rtaudit.engine.explain.join.ExplainJoin`; each explanation is
:class:`rtaudit.engine.explain.stage.ExplainStage`; output: one
:class:`rtaudit.schemas.explain.Explanation` per image part on ``audit.explanations``
(key: request id). Commit order as every :class:`rtaudit.workers.stream.BatchLoop`: flush the
producer, then commit the offsets the join says are safe. Explanations are computed in the
loop's thread, ``explain.batch_size`` records per consume (each may cost 30-200 ms on CPU).
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Message, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.engine.explain.join import ExplainJoin, Job
from rtaudit.schemas.codec import decode, encode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.explain import ExplainRequest
from rtaudit.schemas.messages import ModalityTask, Verdict
from rtaudit.topics.catalog import EXPLAIN_REQUESTS, EXPLANATIONS, LANES, VERDICTS, lane_topic
from rtaudit.workers import metrics
from rtaudit.workers.settings import Settings
from rtaudit.workers.stream import BatchLoop

log = logging.getLogger(__name__)
ROLE = "explain"
GROUP_ID = "rtaudit-explain"
IMAGE_LANES = tuple(lane_topic("image", lane) for lane in LANES)


def image_parts(verdict: Verdict) -> list[str]:
    """The image parts a verdict answered for (``"image:0"``...), from its ``parts`` keys
    ``"<stage>/<part>"`` (router-skipped parts carry no stage: no task was routed for them)."""
    out = []
    for key in verdict.parts:
        stage, _, part = key.partition("/")
        if part.startswith("image:") and stage in ("image", "ocr") and part not in out:
            out.append(part)
    return sorted(out)


class ExplainLoop(BatchLoop):
    """The explain role's batch loop (module doc). ``stage``: an
    :class:`rtaudit.engine.explain.stage.ExplainStage` (built from the settings when ``None``)."""

    def __init__(self, settings: Settings, stage=None, group_id: str = GROUP_ID) -> None:
        cfg = settings.explain
        super().__init__(settings, group_id, [*IMAGE_LANES, VERDICTS, EXPLAIN_REQUESTS],
                         batch_size=cfg.batch_size, poll_timeout_s=0.1, control_role=ROLE)
        if stage is None:
            from rtaudit.engine.explain.stage import ExplainStage

            stage = ExplainStage(settings.media.policy(), method=cfg.method, target=cfg.target,
                                 heatmap_side_px=cfg.heatmap_side_px, heatmap_max_bytes=cfg.heatmap_max_bytes,
                                 box_threshold=cfg.box_threshold, device="cuda" if settings.prefer_gpu and _cuda() else "cpu",
                                 threads=settings.model_threads())
        self.stage = stage
        self.join = ExplainJoin(set(cfg.decisions), retention_ms=cfg.retention_ms, budget_bytes=cfg.held_bytes,
                                wait_ms=cfg.verdict_wait_ms)

    def handle(self, records: list[Message]) -> None:
        now = now_ms()
        for m in records:
            position = (m.topic(), m.partition(), m.offset())
            raw = m.value() or b""
            metrics.MESSAGES_CONSUMED.labels(ROLE, m.topic()).inc()
            try:
                if m.topic() in IMAGE_LANES:
                    # the image worker already dead-letters a bad task: here it is only skipped
                    task = decode(raw, ModalityTask)
                    if task.media is None:
                        self.join.seen(position)
                        continue
                    jobs = self.join.add_task(task.request_id, task.part, raw, position, now)
                elif m.topic() == VERDICTS:
                    verdict = decode(raw, Verdict)
                    jobs = self.join.add_verdict(verdict.request_id, verdict.decision, image_parts(verdict), position, now)
                else:
                    ask = decode(raw, ExplainRequest)
                    jobs = self.join.on_demand(ask.request_id, ask.part, position, now)
            except AuditError as exc:
                self.join.seen(position)
                if m.topic() == EXPLAIN_REQUESTS:
                    self.dead_letter(ROLE, m, exc)  # a user's request: the DLQ says why it was refused
                else:
                    log.warning("explain skipped topic=%s partition=%s offset=%s: %s", *position, exc.message)
                continue
            self._run(jobs)

    def tick(self) -> None:
        self._run(self.join.expire(now_ms()))
        metrics.EXPLAIN_HELD_BYTES.set(self.join.held_bytes)

    def _run(self, jobs: list[Job]) -> None:
        for job in jobs:
            started = time.perf_counter()
            record = self.stage.explain(job, now_ms())
            metrics.EXPLAIN_SECONDS.labels(record.method).observe(time.perf_counter() - started)
            metrics.EXPLANATIONS.labels(record.trigger, record.status).inc()
            log.info("explanation request_id=%s part=%s trigger=%s status=%s %.0f ms",
                     record.request_id, record.part, record.trigger, record.status, record.compute_ms)
            self.produce(EXPLANATIONS, record.request_id.encode(), encode(record))

    def commit_offsets(self, partitions: list[int] | None = None) -> list[TopicPartition]:
        return [TopicPartition(topic, p, offset) for (topic, p), offset in self.join.commit_offsets().items()
                if partitions is None or p in partitions]

    def revoked(self, partitions: list[TopicPartition]) -> None:
        self.join.forget({(tp.topic, tp.partition) for tp in partitions})


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
