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
(key: request id). The logic is :class:`ExplainHandler`, run by the batch loop
(:class:`rtaudit.workers.runtime.loop.BatchLoop`, :func:`explain_loop`): flush the producer, then
commit the offsets the join says are safe. Explanations are computed in the
loop's thread, ``explain.batch_size`` records per consume (each may cost 30-200 ms on CPU).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from typing import Any

from rtaudit.engine.clock import now_ms
from rtaudit.engine.explain.join import ExplainJoin, Job
from rtaudit.schemas.codec import decode, encode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.explain import ExplainRequest
from rtaudit.schemas.messages import ModalityTask, Verdict
from rtaudit.topics.catalog import EXPLAIN_REQUESTS, EXPLANATIONS, LANES, VERDICTS, lane_topic
from rtaudit.workers import metrics
from rtaudit.workers.runtime.handler import HandlerBase
from rtaudit.workers.runtime.loop import BatchLoop
from rtaudit.workers.runtime.records import TP, DeadLetter, Emit, Output, Record, raw_value
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
ROLE = "explain"
GROUP_ID = "rtaudit-explain"
IMAGE_LANES = tuple(lane_topic("image", lane) for lane in LANES)
#: the role's fetch long-poll, ms. It is off the verdict path, so it waits longer than the local
#: profile's 10 ms: the embedded broker does not answer a waiting fetch when data arrives, and every
#: 10 ms fetch costs it CPU the hot path needs (``benchmarks/explain_latency.py``: the broker used
#: 3-5 CPU s more per 45 s with the role's consumer at 10 ms). On Apache Kafka, which answers as
#: soon as data arrives, the value only bounds an idle wait.
FETCH_WAIT_MS = 250


def image_parts(verdict: Verdict) -> list[str]:
    """The image parts a verdict answered for (``"image:0"``...), from its ``parts`` keys
    ``"<stage>/<part>"`` (router-skipped parts carry no stage: no task was routed for them)."""
    out = []
    for key in verdict.parts:
        stage, _, part = key.partition("/")
        if part.startswith("image:") and stage in ("image", "ocr") and part not in out:
            out.append(part)
    return sorted(out)


class ExplainHandler(HandlerBase):
    """The explain role's handler (module doc). Runs on one thread (the loop's).

    Args:
        stage: an :class:`rtaudit.engine.explain.stage.ExplainStage` (anything with its ``explain``).
        join: the join of tasks, verdicts and on-demand requests.
    """

    def __init__(self, stage: Any, join: ExplainJoin) -> None:
        self.stage, self.join = stage, join

    def handle(self, records: Sequence[Record], now_ms: int) -> list[Emit]:
        out: list[Emit] = []
        for m in records:
            topic = m.topic() or ""
            position = (topic, m.partition() or 0, m.offset() or 0)
            raw = raw_value(m)
            metrics.MESSAGES_CONSUMED.labels(ROLE, topic).inc()
            try:
                if topic in IMAGE_LANES:
                    # the image worker already dead-letters a bad task: here it is only skipped
                    task = decode(raw, ModalityTask)
                    if task.media is None:
                        self.join.seen(position)
                        continue
                    jobs = self.join.add_task(task.request_id, task.part, raw, position, now_ms)
                elif topic == VERDICTS:
                    verdict = decode(raw, Verdict)
                    jobs = self.join.add_verdict(verdict.request_id, verdict.decision, image_parts(verdict), position, now_ms)
                else:
                    ask = decode(raw, ExplainRequest)
                    jobs = self.join.on_demand(ask.request_id, ask.part, position, now_ms)
            except AuditError as exc:
                self.join.seen(position)
                if topic == EXPLAIN_REQUESTS:
                    out.append(DeadLetter(m, exc))  # a user's request: the DLQ says why it was refused
                else:
                    log.warning("explain skipped topic=%s partition=%s offset=%s: %s", *position, exc.message)
                continue
            out += self._run(jobs)
        return out

    def tick(self, now_ms: int) -> list[Emit]:
        out = self._run(self.join.expire(now_ms))
        metrics.EXPLAIN_HELD_BYTES.set(self.join.held_bytes)
        return out

    def _run(self, jobs: list[Job]) -> list[Emit]:
        out: list[Emit] = []
        for job in jobs:
            started = time.perf_counter()
            record = self.stage.explain(job, now_ms())
            metrics.EXPLAIN_SECONDS.labels(record.method).observe(time.perf_counter() - started)
            metrics.EXPLANATIONS.labels(record.trigger, record.status).inc()
            log.info("explanation request_id=%s part=%s trigger=%s status=%s %.0f ms",
                     record.request_id, record.part, record.trigger, record.status, record.compute_ms)
            out.append(Output(EXPLANATIONS, record.request_id.encode(), encode(record)))
        return out

    def commit_offsets(self, tps: Collection[TP] | None = None) -> dict[TP, int]:
        return {tp: offset for tp, offset in self.join.commit_offsets().items() if tps is None or tp in tps}

    def revoked(self, tps: list[TP]) -> None:
        self.join.forget(set(tps))


def explain_loop(settings: Settings, stage: Any = None, group_id: str = GROUP_ID) -> BatchLoop:
    """The explain role's batch loop. ``stage``: an :class:`rtaudit.engine.explain.stage.ExplainStage`
    (built from the settings when ``None``)."""
    cfg = settings.explain
    if stage is None:
        from rtaudit.engine.explain.stage import ExplainStage

        stage = ExplainStage(settings.media.policy(), method=cfg.method, target=cfg.target,
                             heatmap_side_px=cfg.heatmap_side_px, heatmap_max_bytes=cfg.heatmap_max_bytes,
                             box_threshold=cfg.box_threshold, device="cuda" if settings.prefer_gpu and _cuda() else "cpu",
                             threads=settings.model_threads())
    join = ExplainJoin(set(cfg.decisions), retention_ms=cfg.retention_ms, budget_bytes=cfg.held_bytes,
                       wait_ms=cfg.verdict_wait_ms)
    return BatchLoop(settings, group_id, [*IMAGE_LANES, VERDICTS, EXPLAIN_REQUESTS], lambda ctx: ExplainHandler(stage, join),
                     role=ROLE, batch_size=cfg.batch_size, poll_timeout_s=0.1, control_role=ROLE,
                     **{"fetch.wait.max.ms": FETCH_WAIT_MS})


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
