"""Fusion: joins manifests and partials on ``audit.scores`` by request id in a
changelog-backed Faust table and emits exactly one verdict per request on
``audit.verdicts``. Start: ``faust -A workers.fusion worker``.

Deadlines: the table may only change inside stream processing, so a timer scans
this worker's partitions and publishes a :class:`FusionTick` to ``audit.scores``
(same key, so same partition) when a deadline plus grace has passed, or when a
decided request may be forgotten; the agent applies it like any other record.

Per record: decode → ``Fusion.apply`` → produce the verdict and wait for the
broker's ack → write the table (changelog). A crash between the two replays the
record and may repeat a verdict (at-least-once), never lose one.
"""

from __future__ import annotations

import logging

import orjson

from engine.clock import now_ms
from engine.fusion import Fusion, FusionState
from schemas.codec import decode_scores_record, encode
from schemas.errors import AuditError
from schemas.messages import FusionTick
from topics.catalog import FUSION_APP_ID, FUSION_TABLE, SCORES, VERDICTS
from workers import metrics
from workers.app import DeadLetters, make_app, raw_topic

log = logging.getLogger(__name__)
ROLE = "fusion"
app, settings = make_app(ROLE)
assert app.conf.id == FUSION_APP_ID
fusion = Fusion(settings.policies, grace_ms=settings.fusion_grace_ms, retention_ms=settings.fusion_retention_ms)
scores_topic = raw_topic(app, SCORES)
verdicts_topic = raw_topic(app, VERDICTS)
dead_letters = DeadLetters(app, ROLE)
known_tenants = set(settings.tenants)
#: request_id → JSON of its FusionState; changelog topic ``rtaudit-fusion-pending-changelog``.
pending = app.Table(FUSION_TABLE, default=None, key_type=bytes, value_type=bytes)
#: ticks already published by this process (request_id → reason), so the timer sends each once.
_ticks_sent: dict[bytes, str] = {}


@app.agent(scores_topic)
async def fuse(stream):  # type: ignore[no-untyped-def]
    async for event in stream.events():
        metrics.MESSAGES_CONSUMED.labels(ROLE, event.message.topic).inc()
        try:
            record = decode_scores_record(event.value or b"")
        except AuditError as exc:
            await dead_letters.send(event, exc)
            continue
        key = record.request_id.encode()
        stored = pending.get(key)
        state = FusionState.model_validate_json(stored) if stored is not None else None
        if state is None and isinstance(record, FusionTick):
            continue
        new_state, verdict = fusion.apply(state, record, now_ms())
        if verdict is not None:
            fut = await verdicts_topic.send(key=key, value=encode(verdict))
            await fut  # the verdict is on the broker before the state says "decided"
            metrics.VERDICTS.labels(verdict.decision, str(verdict.complete).lower()).inc()
            metrics.END_TO_END_SECONDS.observe(max(0, verdict.latency_ms) / 1000.0)
            if verdict.decided_at_ms > verdict.deadline_ms:
                lane = new_state.manifest.lane if new_state is not None and new_state.manifest is not None else None
                metrics.SLO_MISSES.labels(
                    ROLE, metrics.tenant_label(verdict.tenant_id, known_tenants), lane or "unknown", "late_verdict"
                ).inc()
        if new_state is None:
            if stored is not None:
                del pending[key]
            _ticks_sent.pop(key, None)
        else:
            pending[key] = encode(new_state)


@app.timer(interval=0.1)
async def publish_due_ticks() -> None:
    now = now_ms()
    due = []
    undecided = 0
    for key, stored in list(pending.items()):
        if stored is None:
            continue
        stored = orjson.loads(stored)
        undecided += stored.get("decided_at_ms") is None
        tick = fusion.due_tick(stored, now)
        if tick is not None and _ticks_sent.get(key) != tick.reason:
            _ticks_sent[key] = tick.reason
            due.append(tick)
    metrics.FUSION_PENDING.set(undecided)
    for tick in due:
        await scores_topic.send(key=tick.request_id.encode(), value=encode(tick))
