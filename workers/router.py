"""Router: ``audit.requests`` → one task per modality item on its lane, and a manifest for fusion.

Start: ``faust -A workers.router worker``. Records are read and routed in batches
(:class:`workers.stream.BatchLoop`, consumer group ``rtaudit-router``): decode →
:meth:`engine.routing.Router.plan` → hand tasks and the manifest to the producer →
checkpoint (flush, then commit the offset after the last record routed).

Quotas: each request takes a token from its tenant's bucket (:mod:`engine.quota`, metered
at the record's broker timestamp, capped at now); beyond the quota the tenant's
``quota.over_quota`` decides: ``lower_lane`` routes it on ``lo``, ``throttle`` answers it at
once through the rejection manifest (code ``throttled``, decision ``on_throttled``, no DLQ record).

Bad input (not JSON, schema violation, disallowed URI) goes to ``audit.dlq``; when
its request id is readable (from the value, or else the record key), fusion gets a
rejection manifest so the producer still receives a verdict that says why.
"""

from __future__ import annotations

import dataclasses
import logging

from confluent_kafka import Message, TopicPartition

from engine.clock import now_ms
from engine.quota import TenantQuotas
from engine.routing import Router
from schemas.codec import decode, encode, readable_fields
from schemas.errors import AuditError, RoutingFailed, Throttled, describe
from schemas.messages import AuditRequest, Lane, Manifest
from topics.catalog import REQUESTS, SCORES, lane_topic
from workers import metrics
from workers.app import make_app
from workers.settings import Settings
from workers.stream import BatchLoop, run_in_faust

log = logging.getLogger(__name__)
ROLE = "router"
#: consumer group of the router on ``audit.requests``.
GROUP_ID = "rtaudit-router"


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


class RouterLoop(BatchLoop):
    """The router's batch loop; commits, per partition, the offset after the last record routed."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, GROUP_ID, [REQUESTS], control_role=ROLE)
        self.router = Router(policies=settings.policies, media_policy=settings.media.policy())
        self.next_offset: dict[int, int] = {}
        self.quotas = TenantQuotas()

    def over_quota_lane(self, request: AuditRequest, m: Message, now: int) -> Lane | None:
        """``None`` within the tenant's quota, ``"lo"`` beyond it under ``lower_lane``; raises
        :class:`Throttled` beyond it under ``throttle``. Metered at the record's broker timestamp
        (capped at ``now``: a router replaying a backlog meters the producer's rate, not its own)."""
        quota = self.router.policies.for_tenant(request.tenant_id).quota
        kind, ts = m.timestamp()
        at = min(ts, now) if kind and ts > 0 else now
        if self.quotas.admit(request.tenant_id, quota.limit, at):
            return None
        tenant = request.tenant_id if request.tenant_id in self.router.policies.tenants else "other"
        metrics.OVER_QUOTA.labels(tenant, quota.over_quota).inc()
        if quota.over_quota == "throttle":
            raise Throttled(f"over quota {quota.rate_per_s:g} req/s", request_id=request.request_id)
        return "lo"

    def handle(self, records: list[Message]) -> None:
        now = now_ms()
        if self.control is not None:  # the control topic's policy and priority changes, within one batch
            policies = self.policies()
            if policies is not self.router.policies:
                self.router = dataclasses.replace(self.router, policies=policies)
        for m in records:
            raw = m.value() or b""
            try:
                try:
                    request = decode(raw, AuditRequest)
                    lane = self.over_quota_lane(request, m, now)
                    plan = self.router.plan(request, now) if lane is None else self.router.plan(request, now, lane)
                except AuditError:
                    raise
                except Exception as exc:  # a bug must not crash-loop the router on one record
                    log.exception("routing failed: topic=%s partition=%s offset=%s", m.topic(), m.partition(), m.offset())
                    raise RoutingFailed(f"unexpected error while routing: {describe(exc)}") from exc
            except AuditError as exc:
                exc.request_id = exc.request_id or readable_fields(raw, m.key()).get("request_id")
                if exc.to_dlq:
                    self.dead_letter(ROLE, m, exc)
                manifest = rejection_manifest(raw, exc, m.key())
                if manifest is not None:
                    self.produce(SCORES, manifest.request_id.encode(), encode(manifest))
            else:
                key = request.request_id.encode()
                for task in plan.tasks:
                    self.produce(lane_topic(task.modality, task.lane), key, encode(task))
                self.produce(SCORES, key, encode(plan.manifest))
            self.next_offset[m.partition()] = m.offset() + 1  # only once its outputs are with the producer
        metrics.MESSAGES_CONSUMED.labels(ROLE, REQUESTS).inc(len(records))

    def commit_offsets(self, partitions: list[int] | None = None) -> list[TopicPartition]:
        return [
            TopicPartition(REQUESTS, p, offset) for p, offset in self.next_offset.items()
            if partitions is None or p in partitions
        ]

    def revoked(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.next_offset.pop(tp.partition, None)


app, settings = make_app(ROLE, app_id=f"{GROUP_ID}-runtime")
run_in_faust(app, lambda: RouterLoop(settings))
