"""Fusion core: join a manifest and partial scores by request id into exactly one verdict.

:class:`Fusion.apply` is a pure state transition ``(state, record, now) → (state, verdict?)``.
:class:`rtaudit.engine.fusion_table.PendingTable` keeps the states of one partition, indexed by
deadline and first offset; a decided state is kept ``retention_ms`` to absorb duplicates
and late partials (at-least-once delivery upstream), then dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rtaudit.engine.policy import PolicyBook
from rtaudit.schemas.messages import Evidence, FusionTick, Manifest, PartialScore, Verdict

#: evidence categories that never flag but are shown after the flagged ones.
_INFO_CATEGORIES = ("ocr", "neutral")


@dataclass(slots=True, kw_only=True)
class FusionState:
    """What fusion knows about one request (a table value; its records were validated when
    decoded, so a plain dataclass: a pydantic model cost ~10 µs per request in attribute sets)."""

    request_id: str
    first_seen_ms: int
    tenant_id: str | None = None
    manifest: Manifest | None = None
    partials: dict[str, PartialScore] = field(default_factory=dict)
    #: parts a splitting stage added after decoding (a video's frames and audio track), in order
    expanded: list[str] = field(default_factory=list)
    deadline_ms: int | None = None
    decided_at_ms: int | None = None


def rejection_verdict(policies: PolicyBook, manifest: Manifest, now_ms: int) -> Verdict:
    """The verdict of a request the router rejected (``manifest.rejection`` set: malformed,
    disallowed, throttled), built by the router itself so a rejected request costs one record
    on ``audit.verdicts`` and no fusion hop. The same rules as :meth:`Fusion.verdict`: decision
    ``policy.quota.on_throttled`` for code ``throttled``, else ``policy.on_rejected``; reasons
    start with ``rejected: <code>: <message>``.

    Raises:
        ValueError: ``manifest`` carries no rejection.
    """
    if manifest.rejection is None:
        raise ValueError(f"manifest of {manifest.request_id!r} is not a rejection")
    state = FusionState(
        request_id=manifest.request_id, first_seen_ms=now_ms, tenant_id=manifest.tenant_id,
        manifest=manifest, deadline_ms=manifest.deadline_ms, decided_at_ms=now_ms,
    )
    return Fusion(policies).verdict(state, now_ms)


@dataclass(frozen=True)
class Fusion:
    """Fusion rules.

    Attributes:
        policies: tenant policies.
        grace_ms: wait past the deadline for in-flight partials before an incomplete verdict, ms.
        retention_ms: keep a decided state this long for deduplication, ms.
        max_evidence: most evidence items on one verdict.
    """

    policies: PolicyBook
    grace_ms: int = 250
    retention_ms: int = 60_000
    max_evidence: int = 64

    def apply(
        self, state: FusionState | None, record: Manifest | PartialScore | FusionTick, now_ms: int
    ) -> tuple[FusionState | None, Verdict | None]:
        """Apply one ``audit.scores`` record. Returns the new state (``None`` = delete) and,
        at most once per request, its verdict."""
        if isinstance(record, FusionTick):
            return self._tick(state, record, now_ms)
        if state is None:
            state = FusionState(request_id=record.request_id, first_seen_ms=now_ms)
        if state.decided_at_ms is not None:
            return state, None  # duplicate or late: the verdict is out already
        state.tenant_id = state.tenant_id or record.tenant_id
        if isinstance(record, Manifest):
            state.manifest = record
            state.deadline_ms = record.deadline_ms
            if record.rejection is not None:
                return self._decide(state, now_ms)
        else:
            previous = state.partials.get(record.key)
            if previous is None or (previous.status != "ok" and record.status == "ok"):
                state.partials[record.key] = record
            for key in record.expands:
                if key not in state.expanded:
                    state.expanded.append(key)
            if state.deadline_ms is None:
                state.deadline_ms = record.deadline_ms
        if state.manifest is not None and all(k in state.partials for k in self.expected(state)):
            return self._decide(state, now_ms)
        return state, None

    @staticmethod
    def expected(state: FusionState) -> list[str]:
        """The parts ``state``'s verdict waits for: the manifest's, then those splitting stages added."""
        expected = list(state.manifest.expected) if state.manifest is not None else list(state.partials)
        return expected + [k for k in state.expanded if k not in set(expected)]

    def _tick(self, state: FusionState | None, tick: FusionTick, now_ms: int) -> tuple[FusionState | None, Verdict | None]:
        if state is None:
            return None, None
        if tick.reason == "expire":
            if state.decided_at_ms is not None and now_ms >= state.decided_at_ms + self.retention_ms:
                return None, None
            return state, None
        if state.decided_at_ms is None and state.deadline_ms is not None and now_ms >= state.deadline_ms + self.grace_ms:
            return self._decide(state, now_ms)
        return state, None

    def _decide(self, state: FusionState, now_ms: int) -> tuple[FusionState, Verdict]:
        state.decided_at_ms = now_ms
        return state, self.verdict(state, now_ms)

    def verdict(self, state: FusionState, now_ms: int) -> Verdict:
        """Build the verdict for ``state`` as of ``now_ms``."""
        tenant = state.tenant_id or "unknown"
        policy = self.policies.for_tenant(tenant)
        manifest = state.manifest
        reasons: list[str] = []
        parts: dict[str, str] = {}
        if manifest is None:
            reasons.append("manifest missing: the router's record never arrived")
        elif manifest.rejection is None and state.deadline_ms is not None and state.first_seen_ms >= state.deadline_ms:
            # e.g. a request sent with a deadline already past: say so before the parts it cost
            reasons.append(f"deadline passed before the request reached fusion "
                           f"({state.first_seen_ms - state.deadline_ms} ms late)")
        expected = self.expected(state)
        for key in expected:
            p = state.partials.get(key)
            if p is None:
                parts[key] = "missing"
                reasons.append(f"{key}: no result by the deadline")
            else:
                parts[key] = p.status
                if p.status == "error":
                    reasons.append(f"{key}: {p.error_code}: {p.error}")
                elif p.status == "expired":
                    reasons.append(f"{key}: expired before inference (deadline passed)")
        for sk in manifest.skipped if manifest else []:
            parts[sk.part] = "skipped"
            reasons.append(f"{sk.part}: skipped: {sk.reason}")

        categories: dict[str, float] = {}
        evidence: list[Evidence] = []
        versions: dict[str, str] = {}
        for key in expected:
            p = state.partials.get(key)
            if p is None:
                continue
            versions[p.stage] = f"{p.model.name}@{p.model.version}"
            if p.status != "ok":
                continue
            for cat, score in p.scores.items():
                categories[cat] = max(categories.get(cat, 0.0), score)
            evidence.extend(p.evidence)

        complete = manifest is not None and manifest.rejection is None and not manifest.skipped and all(
            v == "ok" for v in parts.values()
        )
        flagged = policy.flagged(categories)
        if manifest is not None and manifest.rejection is not None:
            reasons.insert(0, f"rejected: {manifest.rejection_code}: {manifest.rejection}")
            decision = policy.quota.on_throttled if manifest.rejection_code == "throttled" else policy.on_rejected
        else:
            breaker = self.policies.breakers.get(tenant)
            decision, tripped = breaker.decide(policy, categories, complete=complete) if breaker else (
                policy.decide(categories, complete=complete), None)
            if tripped:
                reasons.insert(0, tripped)
            for cat in flagged:
                t = policy.thresholds[cat]
                level = "block" if categories[cat] >= t.block else "review"
                reasons.append(f"{cat} {categories[cat]:.2f} >= {level} threshold {getattr(t, level):.2f}")
            if not complete:
                reasons.append(f"incomplete: policy on_incomplete={policy.on_incomplete}")

        rank = {c: i for i, c in enumerate(flagged)}
        evidence.sort(key=lambda e: (rank.get(e.category, len(rank) + (e.category in _INFO_CATEGORIES)), -e.score))
        created = manifest.created_at_ms if manifest else min(
            (p.produced_at_ms for p in state.partials.values()), default=now_ms
        )
        deadline = state.deadline_ms if state.deadline_ms is not None else now_ms
        return Verdict(
            request_id=state.request_id, tenant_id=tenant, decision=decision, complete=complete,
            categories={k: round(v, 4) for k, v in sorted(categories.items())}, flagged=flagged,
            evidence=evidence[: self.max_evidence], reasons=reasons, parts=parts,
            model_versions=versions, policy_version=policy.version,
            created_at_ms=created, deadline_ms=deadline, decided_at_ms=now_ms, latency_ms=now_ms - created,
        )
