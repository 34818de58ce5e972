"""Router: ``audit.requests`` → one task per modality item on its lane, and a manifest for fusion.

Start: ``faust -A rtaudit.workers.router worker``. Records are read and routed in batches
(:class:`rtaudit.workers.runtime.loop.BatchLoop` running a :class:`RouterHandler`, consumer group
``rtaudit-router``): decode → :meth:`rtaudit.engine.routing.Router.plan` → tasks and the manifest
to the producer → checkpoint (flush, then commit the offset after the last record routed).
A request's deadline is decided once, when the router first reads it
(:meth:`rtaudit.engine.routing.Router.deadline_ms`), and travels with it through a quota hold.

Quotas: each request takes a token from its tenant's bucket (:mod:`rtaudit.engine.quota`, metered
at the record's broker timestamp, capped at now); beyond the quota the tenant's
``quota.over_quota`` decides: ``lower_lane`` routes it on ``lo``, ``throttle`` answers it at
once through the rejection manifest (code ``throttled``, decision ``on_throttled``, no DLQ record),
``delay`` holds it (:class:`rtaudit.engine.delay.HeldQueue`, at most 10,000 records / 128 MiB) and
routes it on its normal lane from :meth:`RouterHandler.tick` once the tenant's bucket has paid
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
from collections.abc import Callable, Collection, Sequence
from typing import Literal

from rtaudit.engine.clock import now_ms
from rtaudit.engine.delay import HeldQueue, offer
from rtaudit.engine.fusion import rejection_verdict
from rtaudit.engine.policy import PolicyBook, QuotaPolicy
from rtaudit.engine.quota import TenantQuotas
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.routing import Router
from rtaudit.schemas.codec import decode, encode, readable_fields
from rtaudit.schemas.errors import AuditError, RoutingFailed, Throttled, describe
from rtaudit.schemas.messages import AuditRequest, Lane, Manifest
from rtaudit.topics.catalog import REQUESTS, SCORES, VERDICTS, lane_topic
from rtaudit.workers import metrics, tracing
from rtaudit.workers.app import make_app
from rtaudit.workers.runtime.handler import HandlerBase
from rtaudit.workers.runtime.loop import BatchLoop, run_in_faust
from rtaudit.workers.runtime.records import TP, DeadLetter, Emit, Output, Record, raw_key, raw_value
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
ROLE = "router"
#: consumer group of the router on ``audit.requests``.
GROUP_ID = "rtaudit-router"
#: :meth:`RouterHandler.over_quota_lane`'s answer for a request it held (``over_quota = "delay"``).
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
        created_at_ms=min(fields.get("created_at_ms", now), now), deadline_ms=now,  # a clock ahead: see Router.created_ms
        rejection=error.message[:500], rejection_code=str(error.code),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class HeldRequest:
    """A request held under ``over_quota = "delay"``: decoded, its record, and its deadline
    (epoch ms, decided when it was first read)."""

    request: AuditRequest
    record: Record
    deadline_ms: int


class RouterHandler(HandlerBase):
    """The router's handler (module doc): records of ``audit.requests`` → tasks on their lanes,
    a manifest for fusion, or a DLQ record and a rejection verdict. Commits, per partition, the
    offset after the last record routed (or the oldest record it holds for its tenant's quota,
    when that is earlier). Runs on one thread (the loop's); knows nothing of Kafka.

    Args:
        policies: the tenant policies in force (called before each batch and release).
        media_policy: the URI allowlist (:class:`rtaudit.engine.media.MediaPolicy`).
        held: the queue of delayed requests (default: an empty :class:`HeldQueue`).
    """

    def __init__(self, policies: Callable[[], PolicyBook], media_policy: MediaPolicy,
                 held: HeldQueue[HeldRequest] | None = None) -> None:
        self._policies = policies
        self.router = Router(policies=policies(), media_policy=media_policy)
        #: partition number -> offset after the last record handled.
        self.next_offset: dict[int, int] = {}
        self.quotas = TenantQuotas()
        #: requests over quota held until their tenant's bucket pays (``over_quota = "delay"``).
        self.held: HeldQueue[HeldRequest] = held if held is not None else HeldQueue()
        #: outputs of the call in progress (handle or tick), in production order.
        self._out: list[Emit] = []

    def over_quota_lane(self, request: AuditRequest, m: Record, now: int, deadline: int) -> Lane | Literal["held"] | None:
        """``None`` within the tenant's quota, ``"lo"`` beyond it under ``lower_lane``, :data:`HELD`
        when it was held under ``delay``; raises :class:`Throttled` beyond it under ``throttle``
        (and under ``delay`` when it may not wait). Metered at the record's broker timestamp
        (capped at ``now``: a router replaying a backlog meters the producer's rate, not its own)."""
        quota = self.router.policies.for_tenant(request.tenant_id).quota
        kind, ts = m.timestamp()
        at = min(ts, now) if kind and ts > 0 else now
        if quota.over_quota == "delay":
            return self.delay(request, m, quota, at, now, deadline)
        if self.quotas.admit(request.tenant_id, quota.limit, at):
            return None
        tenant = request.tenant_id if request.tenant_id in self.router.policies.tenants else "other"
        metrics.OVER_QUOTA.labels(tenant, quota.over_quota).inc()
        if quota.over_quota == "throttle":
            raise Throttled(f"over quota {quota.rate_per_s:g} req/s", request_id=request.request_id)
        return "lo"

    def delay(self, request: AuditRequest, m: Record, quota: QuotaPolicy, at: int, now: int,
              deadline: int) -> Literal["held"] | None:
        """``over_quota = "delay"`` (:func:`rtaudit.engine.delay.offer`): ``None`` to route now, :data:`HELD`
        when held until its tenant's bucket pays; raises :class:`Throttled` when it may not wait."""
        o = offer(
            self.quotas, self.held, tenant_id=request.tenant_id, limit=quota.limit, arrived_ms=at, now_ms=now,
            max_delay_ms=quota.max_delay_ms, deadline_ms=deadline,
            partition=m.partition() or 0, offset=m.offset() or 0, item=HeldRequest(request, m, deadline),
            size=len(raw_value(m)),
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
        policies = self._policies()
        if policies is not self.router.policies:
            self.router = dataclasses.replace(self.router, policies=policies)

    def handle(self, records: Sequence[Record], now_ms: int) -> list[Emit]:
        self.refresh_policies()
        self._out = out = list[Emit]()
        for m in records:
            self.route(m, now_ms)
            self.next_offset[m.partition() or 0] = (m.offset() or 0) + 1  # once its outputs are returned (or it is held)
        metrics.MESSAGES_CONSUMED.labels(ROLE, REQUESTS).inc(len(records))
        metrics.QUOTA_HELD.set(len(self.held))
        return out

    def tick(self, now_ms: int) -> list[Emit]:
        """Route the held requests whose reservation is paid by ``now_ms``."""
        if not len(self.held):
            return []
        self._out = out = list[Emit]()
        due = self.held.due(now_ms)
        if due:
            self.refresh_policies()
        for held in due:
            self.route(held.item.record, now_ms, held.item)
            self.released(metrics.tenant_label(held.tenant_id, self.router.policies.tenants), now_ms - held.held_at_ms)
        metrics.QUOTA_HELD.set(len(self.held))
        return out

    def route(self, m: Record, now: int, held: HeldRequest | None = None) -> None:
        """Route the record ``m``: tasks and manifest, or DLQ and rejection manifest, or hold it.
        ``held``: a held request being released (decoded, its quota paid): routed on its lane.
        Its outputs carry the trace context of its ``route`` span (:mod:`rtaudit.workers.tracing`)."""
        tracing.begin("route", m)
        try:
            self._route(m, now, held, tracing.current_headers())
        finally:
            tracing.end()

    def _route(self, m: Record, now: int, held: HeldRequest | None, headers: list[tuple[str, bytes]] | None) -> None:
        raw = raw_value(m)
        try:
            try:
                lane: Lane | None = None
                if held is None:
                    request = decode(raw, AuditRequest)
                    deadline = self.router.deadline_ms(request, now)
                    quota_lane = self.over_quota_lane(request, m, now, deadline)
                    if quota_lane == HELD:
                        return
                    lane = quota_lane
                else:
                    request, deadline = held.request, held.deadline_ms
                plan = self.router.plan(request, now, lane, deadline)
            except AuditError:
                raise
            except Exception as exc:  # a bug must not crash-loop the router on one record
                log.exception("routing failed: topic=%s partition=%s offset=%s", m.topic(), m.partition(), m.offset())
                raise RoutingFailed(f"unexpected error while routing: {describe(exc)}") from exc
        except AuditError as exc:
            exc.request_id = exc.request_id or readable_fields(raw, raw_key(m)).get("request_id")
            if exc.to_dlq:
                self._out.append(DeadLetter(m, exc))
            manifest = rejection_manifest(raw, exc, raw_key(m))
            if manifest is not None:
                verdict = rejection_verdict(self.router.policies, manifest, now_ms())  # the manifest's clock
                self._out.append(Output(VERDICTS, verdict.request_id.encode(), encode(verdict), headers=headers))
                metrics.VERDICTS.labels(verdict.decision, "false").inc()
        else:
            key = request.request_id.encode()
            for task in plan.tasks:
                self._out.append(Output(lane_topic(task.modality, task.lane), key, encode(task), headers=headers))
            self._out.append(Output(SCORES, key, encode(plan.manifest), headers=headers))

    def commit_offsets(self, tps: Collection[TP] | None = None) -> dict[TP, int]:
        """Per partition: the offset after the last record handled, or the oldest held one if earlier."""
        out = {}
        for p, offset in self.next_offset.items():
            if tps is None or (REQUESTS, p) in tps:
                oldest = self.held.oldest_offset(p)
                out[(REQUESTS, p)] = offset if oldest is None else min(oldest, offset)
        return out

    def revoked(self, tps: list[TP]) -> None:
        """Drop the partitions' positions and held records (the next owner replays those from the
        committed offset); a dropped record's reserved token goes back to its tenant's bucket."""
        numbers = [p for _, p in tps]
        for held in self.held.drop(numbers):
            self.quotas.refund(held.tenant_id)
            metrics.QUOTA_DELAYED.labels(metrics.tenant_label(held.tenant_id, self.router.policies.tenants), "dropped").inc()
        for p in numbers:
            self.next_offset.pop(p, None)
        metrics.QUOTA_HELD.set(len(self.held))


def router_loop(settings: Settings, group_id: str = GROUP_ID) -> BatchLoop:
    """The router's batch loop: a :class:`RouterHandler` on ``audit.requests`` (group ``group_id``),
    following the control topic's policy changes."""
    return BatchLoop(settings, group_id, [REQUESTS], lambda ctx: RouterHandler(ctx.policies, settings.media.policy()),
                     role=ROLE, control_role=ROLE)


app, settings = make_app(ROLE, app_id=f"{GROUP_ID}-runtime")
run_in_faust(app, lambda: router_loop(settings))
