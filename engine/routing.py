"""Router core: deadline, lane and fan-out of one validated request.

One task per modality item goes to ``audit.<modality>.<lane>``; fusion gets a
manifest listing each ``<stage>/<part>`` it must wait for. An image item feeds
two stages (``image`` NudeNet and ``ocr``), each its own consumer group on the
same lane topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rtaudit.engine.media import MediaPolicy, check_uri
from rtaudit.engine.policy import PolicyBook
from rtaudit.schemas.messages import AuditRequest, Lane, Manifest, ModalityTask, SkippedPart

#: Latest deadline the router assigns, ms after routing (the largest ``slo_ms`` a request may
#: ask for). A request's own ``deadline_ms``, or a ``created_at_ms`` in the future, may ask for
#: more: capped, because fusion holds a request's state (and its partition's commit) until
#: the deadline, and ``created_at_ms`` + SLO could leave the contract's time range.
MAX_DEADLINE_AHEAD_MS = 3_600_000

#: modality → stages that answer it, when a worker for it runs in the fleet.
DEFAULT_STAGES: dict[str, tuple[str, ...]] = {
    "text": ("text",), "image": ("image", "ocr"), "audio": ("audio",), "video": ("video",),
}


@dataclass(frozen=True)
class RoutePlan:
    """``tasks`` to publish (one per item and lane topic) and the fusion ``manifest``."""

    tasks: list[ModalityTask]
    manifest: Manifest


@dataclass(frozen=True)
class Router:
    """Pure routing rules.

    Attributes:
        policies: tenant policies (SLO and default lane come from there).
        media_policy: URI allowlist, checked here so a bad URI is rejected at the door.
        stages: modality → stages served by the fleet; other modalities are
            skipped with a reason and make the verdict incomplete.
    """

    policies: PolicyBook
    media_policy: MediaPolicy
    stages: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_STAGES))

    @staticmethod
    def created_ms(req: AuditRequest, now_ms: int) -> int:
        """When the request was made, epoch ms, as the fleet counts it: the producer's ``created_at_ms``, or
        ``now_ms`` (when the router first read it) where the producer's clock runs ahead of the router's. A
        request cannot be made in the future: a clock ahead would give a negative latency and, with the
        tenant's SLO, a later deadline."""
        return min(req.created_at_ms, now_ms)

    def deadline_ms(self, req: AuditRequest, now_ms: int) -> int:
        """The request's absolute deadline, epoch ms: its own ``deadline_ms``, else
        :meth:`created_ms` + its ``slo_ms`` or its tenant's, capped at ``now_ms`` +
        :data:`MAX_DEADLINE_AHEAD_MS` (``now_ms``: when the router first read it). Decided once
        per request: the router's quota hold and :meth:`plan` use the same value."""
        if req.deadline_ms is not None:
            requested = req.deadline_ms
        else:
            slo = req.slo_ms if req.slo_ms is not None else self.policies.for_tenant(req.tenant_id).slo_ms
            requested = self.created_ms(req, now_ms) + slo
        return min(requested, now_ms + MAX_DEADLINE_AHEAD_MS)

    def lane(self, req: AuditRequest) -> Lane:
        """``hi`` for ``priority="high"``, ``lo`` for ``"low"``, else the tenant's lane."""
        if req.priority == "high":
            return "hi"
        if req.priority == "low":
            return "lo"
        return self.policies.for_tenant(req.tenant_id).lane

    def plan(self, req: AuditRequest, now_ms: int, lane: Lane | None = None, deadline_ms: int | None = None) -> RoutePlan:
        """Fan ``req`` out on :meth:`lane`, or on ``lane`` when given (the router's quota moves a
        request beyond it to ``lo``), with ``deadline_ms`` when given (decided when the request
        was first read, :meth:`deadline_ms`), else :meth:`deadline_ms` at ``now_ms``. Raises
        ``URINotAllowed`` when a media URI is outside the allowlist."""
        for item in req.media:
            if item.uri is not None:
                check_uri(item.uri, self.media_policy)
        deadline = self.deadline_ms(req, now_ms) if deadline_ms is None else deadline_ms
        lane = lane or self.lane(req)
        common = dict(
            request_id=req.request_id, tenant_id=req.tenant_id, lane=lane,
            created_at_ms=self.created_ms(req, now_ms), deadline_ms=deadline, routed_at_ms=now_ms,
        )
        tasks: list[ModalityTask] = []
        expected: list[str] = []
        skipped: list[SkippedPart] = []
        if req.text and "text" not in self.stages:
            skipped.append(SkippedPart(part="text:0", reason="no text worker in this fleet"))
        elif req.text:
            tasks.append(ModalityTask(part="text:0", modality="text", text=req.text, **common))
        for i, item in enumerate(req.media):
            part = f"{item.type}:{i}"
            if item.type in self.stages:
                tasks.append(ModalityTask(part=part, modality=item.type, media=item, **common))
            else:
                skipped.append(SkippedPart(part=part, reason=f"no {item.type} worker in this fleet"))
        for task in tasks:
            expected += [f"{stage}/{task.part}" for stage in self.stages.get(task.modality, ())]
        manifest = Manifest(
            request_id=req.request_id, tenant_id=req.tenant_id, created_at_ms=self.created_ms(req, now_ms),
            deadline_ms=deadline, lane=lane, expected=expected, skipped=skipped,
        )
        return RoutePlan(tasks, manifest)
