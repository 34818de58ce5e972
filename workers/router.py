"""Router: ``audit.requests`` → one task per modality item on its lane, and a manifest for fusion.

Start: ``faust -A workers.router worker``. Bad input (not JSON, schema
violation, disallowed URI) goes to ``audit.dlq``; when its request id is
readable, fusion gets a rejection manifest so the producer still receives a
verdict that says why.
"""

from __future__ import annotations

from engine.clock import now_ms
from engine.routing import Router
from schemas.codec import decode, encode, readable_fields
from schemas.errors import AuditError
from schemas.messages import AuditRequest, Manifest
from topics.catalog import LANES, MODALITIES, REQUESTS, SCORES, lane_topic
from workers import metrics
from workers.app import DeadLetters, make_app, raw_topic

ROLE = "router"
app, settings = make_app(ROLE)
router = Router(policies=settings.policies, media_policy=settings.media.policy())
requests_topic = raw_topic(app, REQUESTS)
scores_topic = raw_topic(app, SCORES)
lane_topics = {(m, lane): raw_topic(app, lane_topic(m, lane)) for m in MODALITIES for lane in LANES}
dead_letters = DeadLetters(app, ROLE)


def rejection_manifest(raw: bytes, error: AuditError, key: bytes | None = None) -> Manifest | None:
    """A manifest that makes fusion answer at once with ``on_rejected``, when the request id is
    readable from the value or, failing that, from the record key."""
    fields = readable_fields(raw, key)
    if "request_id" not in fields:
        return None
    now = now_ms()
    return Manifest(  # fields are contract-valid: readable_fields validated each
        request_id=fields["request_id"], tenant_id=fields.get("tenant_id", "unknown"),
        created_at_ms=fields.get("created_at_ms", now), deadline_ms=now,
        rejection=error.message[:500], rejection_code=str(error.code),
    )


@app.agent(requests_topic)
async def route(stream):  # type: ignore[no-untyped-def]
    async for event in stream.events():
        metrics.MESSAGES_CONSUMED.labels(ROLE, event.message.topic).inc()
        raw = event.value or b""
        try:
            request = decode(raw, AuditRequest)
            plan = router.plan(request, now_ms())
        except AuditError as exc:
            exc.request_id = exc.request_id or readable_fields(raw, event.key).get("request_id")
            await dead_letters.send(event, exc)
            manifest = rejection_manifest(raw, exc, event.key)
            if manifest is not None:
                await scores_topic.send(key=manifest.request_id.encode(), value=encode(manifest))
            continue
        key = request.request_id.encode()
        for task in plan.tasks:
            await lane_topics[(task.modality, task.lane)].send(key=key, value=encode(task))
        await scores_topic.send(key=key, value=encode(plan.manifest))
