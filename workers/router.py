"""Router: ``audit.requests`` → one task per modality item on its lane, and a manifest for fusion.

Start: ``faust -A rtaudit.workers.router worker``. Records are read and routed in batches
(:class:`rtaudit.workers.stream.BatchLoop`, consumer group ``rtaudit-router``): decode →
:meth:`rtaudit.engine.routing.Router.plan` → hand tasks and the manifest to the producer →
checkpoint (flush, then commit the offset after the last record routed).

Quotas: each request takes a token from its tenant's bucket (:mod:`rtaudit.engine.quota`, metered
at the record's broker timestamp, capped at now); beyond the quota the tenant's
``quota.over_quota`` decides: ``lower_lane`` routes it on ``lo``, ``throttle`` answers it at
once through the rejection manifest (code ``throttled``, decision ``on_throttled``, no DLQ record),
``delay`` holds it (:class:`rtaudit.engine.delay.HeldQueue`, at most 10,000 records / 128 MiB) and
routes it on its normal lane from :meth:`RouterLoop.tick` once the tenant's bucket has paid
for it (a reservation: the tenant's held requests leave at its quota rate, FIFO; other
tenants' records keep flowing); a wait beyond ``max_delay_ms`` (ms) or past the request's
deadline, or a full queue, is answered as ``throttle`` answers. The commit offset of a
partition never passes a held record: ``min(oldest held offset, offset after the last record
handled)``, so a router killed with requests held, or a partition revoked, replays them.

Bad input (not JSON, schema violation, disallowed URI) goes to ``audit.dlq``. A request the
router rejects (bad input whose request id is readable from the value, or else the record
key; a throttled request) is answered by the router itself: one verdict that says why on
``audit.verdicts`` (:func:`rtaudit.engine.fusion.rejection_verdict`, keyed by the request id, so on
the partition fusion would have used), and nothing for fusion. A flooding tenant's throttled
requests thus cost one record in and one out, not three records and a fusion hop (measured:
``rtaudit bench --isolation``, docs/batching.md "Tenant isolation").
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Literal

from confluent_kafka import Message, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.engine.delay import HeldQueue, offer
from rtaudit.engine.fusion import rejection_verdict
from rtaudit.engine.policy import QuotaPolicy
from rtaudit.engine.quota import TenantQuotas
from rtaudit.engine.routing import Router
from rtaudit.schemas.codec import decode, encode, readable_fields
from rtaudit.schemas.errors import AuditError, RoutingFailed, Throttled, describe
from rtaudit.schemas.messages import AuditRequest, Lane, Manifest
from rtaudit.topics.catalog import REQUESTS, SCORES, VERDICTS, lane_topic
from rtaudit.workers import metrics
from rtaudit.workers.app import make_app
from rtaudit.workers.settings import Settings
from rtaudit.workers.stream import BatchLoop, run_in_faust

log = logging.getLogger(__name__)
ROLE = "router"
#: consumer group of the router on ``audit.requests``.
GROUP_ID = "rtaudit-router"
#: :meth:`RouterLoop.over_quota_lane`'s answer for a request it held (``over_quota = "delay"``).
HELD: Literal["held"] = "held"


def rejection_manifest(raw: bytes, error: AuditError, key: bytes | None = None) -> Manifest | None:
    """The rejection of a request whose id is readable from the value or, failing that, from the
    record key (``None`` otherwise): what :func:`rtaudit.engine.fusion.rejection_verdict` answers."""
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
    """The router's batch loop; commits, per partition, the offset after the last record routed
    (or the oldest record it holds for its tenant's quota, when that is earlier)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, GROUP_ID, [REQUESTS], control_role=ROLE)
        self.router = Router(policies=settings.policies, media_policy=settings.media.policy())
        self.next_offset: dict[int, int] = {}
        self.quotas = TenantQuotas()
        #: requests over quota held until their tenant's bucket pays (``over_quota = "delay"``).
        self.held: HeldQueue[tuple[AuditRequest, Message]] = HeldQueue()

    def over_quota_lane(self, request: AuditRequest, m: Message, now: int) -> Lane | Literal["held"] | None:
        """``None`` within the tenant's quota, ``"lo"`` beyond it under ``lower_lane``, :data:`HELD`
        when it was held under ``delay``; raises :class:`Throttled` beyond it under ``throttle``
        (and under ``delay`` when it may not wait). Metered at the record's broker timestamp
        (capped at ``now``: a router replaying a backlog meters the producer's rate, not its own)."""
        quota = self.router.policies.for_tenant(request.tenant_id).quota
        kind, ts = m.timestamp()
        at = min(ts, now) if kind and ts > 0 else now
        if quota.over_quota == "delay":
            return self.delay(request, m, quota, at, now)
        if self.quotas.admit(request.tenant_id, quota.limit, at):
            return None
        tenant = request.tenant_id if request.tenant_id in self.router.policies.tenants else "other"
        metrics.OVER_QUOTA.labels(tenant, quota.over_quota).inc()
        if quota.over_quota == "throttle":
            raise Throttled(f"over quota {quota.rate_per_s:g} req/s", request_id=request.request_id)
        return "lo"

    def delay(self, request: AuditRequest, m: Message, quota: QuotaPolicy, at: int, now: int) -> Literal["held"] | None:
        """``over_quota = "delay"`` (:func:`rtaudit.engine.delay.offer`): ``None`` to route now, :data:`HELD`
        when held until its tenant's bucket pays; raises :class:`Throttled` when it may not wait."""
        o = offer(
            self.quotas, self.held, tenant_id=request.tenant_id, limit=quota.limit, arrived_ms=at, now_ms=now,
            max_delay_ms=quota.max_delay_ms, deadline_ms=self.router.deadline_ms(request),
            partition=m.partition(), offset=m.offset(), item=(request, m), size=len(m.value() or b""),
        )
        if o.outcome == "within":
            return None
        tenant = metrics.tenant_label(request.tenant_id, self.router.policies.tenants)
        metrics.OVER_QUOTA.labels(tenant, "delay").inc()
        if o.outcome == "held":
            return HELD
        if o.route_now:  # its wait passed while it sat in the topic
            self.released(tenant, 0.0)
            return None
        metrics.QUOTA_DELAYED.labels(tenant, o.outcome).inc()
        raise Throttled(f"over quota {quota.rate_per_s:g} req/s: {o.reason}", request_id=request.request_id)

    @staticmethod
    def released(tenant: str, held_ms: float) -> None:
        metrics.QUOTA_DELAYED.labels(tenant, "routed").inc()
        metrics.QUOTA_DELAY_SECONDS.labels(tenant).observe(held_ms / 1000.0)

    def refresh_policies(self) -> None:
        """The control topic's policy and priority changes, between batches."""
        if self.control is not None:
            policies = self.policies()
            if policies is not self.router.policies:
                self.router = dataclasses.replace(self.router, policies=policies)

    def handle(self, records: list[Message], now: int | None = None) -> None:
        now = now_ms() if now is None else now
        self.refresh_policies()
        for m in records:
            self.route(m, now)
            self.next_offset[m.partition()] = m.offset() + 1  # only once its outputs are with the producer (or it is held)
        metrics.MESSAGES_CONSUMED.labels(ROLE, REQUESTS).inc(len(records))
        metrics.QUOTA_HELD.set(len(self.held))

    def tick(self, now: int | None = None) -> None:
        """Route the held requests whose reservation is paid by ``now`` (ms; default the clock)."""
        if not len(self.held):
            return
        now = now_ms() if now is None else now
        due = self.held.due(now)
        if due:
            self.refresh_policies()
        for held in due:
            request, m = held.item
            self.route(m, now, request)
            self.released(metrics.tenant_label(held.tenant_id, self.router.policies.tenants), now - held.held_at_ms)
        metrics.QUOTA_HELD.set(len(self.held))

    def route(self, m: Message, now: int, request: AuditRequest | None = None) -> None:
        """Route the record ``m``: tasks and manifest, or DLQ and rejection manifest, or hold it.
        ``request``: a held request being released (decoded, its quota paid): routed on its lane."""
        raw = m.value() or b""
        try:
            try:
                lane = None
                if request is None:
                    request = decode(raw, AuditRequest)
                    lane = self.over_quota_lane(request, m, now)
                    if lane == HELD:
                        return
                plan = self.router.plan(request, now) if lane is None else self.router.plan(request, now, lane)  # type: ignore[arg-type]  # lane is a Lane here (HELD returned above)
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
                verdict = rejection_verdict(self.router.policies, manifest, now_ms())  # the manifest's clock
                self.produce(VERDICTS, verdict.request_id.encode(), encode(verdict))
                metrics.VERDICTS.labels(verdict.decision, "false").inc()
        else:
            key = request.request_id.encode()
            for task in plan.tasks:
                self.produce(lane_topic(task.modality, task.lane), key, encode(task))
            self.produce(SCORES, key, encode(plan.manifest))

    def commit_offsets(self, partitions: list[int] | None = None) -> list[TopicPartition]:
        """Per partition: the offset after the last record handled, or the oldest held one if earlier."""
        out = []
        for p, offset in self.next_offset.items():
            if partitions is None or p in partitions:
                oldest = self.held.oldest_offset(p)
                out.append(TopicPartition(REQUESTS, p, offset if oldest is None else min(oldest, offset)))
        return out

    def revoked(self, partitions: list[TopicPartition]) -> None:
        """Drop the partitions' positions and held records (the next owner replays those from the
        committed offset); a dropped record's reserved token goes back to its tenant's bucket."""
        numbers = [tp.partition for tp in partitions]
        for held in self.held.drop(numbers):
            self.quotas.refund(held.tenant_id)
            metrics.QUOTA_DELAYED.labels(metrics.tenant_label(held.tenant_id, self.router.policies.tenants), "dropped").inc()
        for p in numbers:
            self.next_offset.pop(p, None)
        metrics.QUOTA_HELD.set(len(self.held))


app, settings = make_app(ROLE, app_id=f"{GROUP_ID}-runtime")
run_in_faust(app, lambda: RouterLoop(settings))
