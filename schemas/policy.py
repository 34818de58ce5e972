"""Tenant policy contracts: per-category thresholds, quotas, and the decision a policy makes.

A :class:`TenantPolicy` travels in the settings file (``[default]``, ``[tenants.<id>]``) and on
``audit.control`` (``policy:<tenant>`` records, :mod:`rtaudit.schemas.control`); it turns fused category
scores into ``allow`` / ``review`` / ``block``: ``block`` when any category reaches its block threshold,
else ``review`` when any reaches its review threshold, else ``allow``. When the verdict is incomplete
(a part missing, failed or expired at the deadline) the decision is at least ``on_incomplete``:
``allow`` is fail-open, ``review`` or ``block`` fail-closed. :mod:`rtaudit.engine.policy` adds the
categories each stage scores and the checks of a policy against them; :mod:`rtaudit.engine.quota`
meters a :class:`QuotaLimit`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rtaudit.schemas.messages import Decision, Lane

_RANK: dict[str, int] = {"allow": 0, "review": 1, "block": 2}


def stricter(a: Decision, b: Decision) -> Decision:
    """The stricter of two decisions (``block`` > ``review`` > ``allow``)."""
    return a if _RANK[a] >= _RANK[b] else b


@dataclass(frozen=True)
class QuotaLimit:
    """A tenant's limit: ``rate_per_s`` requests per second (0 = unlimited) and ``burst``
    requests at once (>= 1). Raises ``ValueError`` on a negative rate or a burst below 1."""

    rate_per_s: float = 0.0
    burst: float = 1.0

    def __post_init__(self) -> None:
        if not self.rate_per_s >= 0:  # also refuses NaN
            raise ValueError(f"QuotaLimit: rate_per_s must be >= 0 (got {self.rate_per_s!r})")
        if not self.burst >= 1:
            raise ValueError(f"QuotaLimit: burst must be >= 1 (got {self.burst!r})")

    @property
    def unlimited(self) -> bool:
        return self.rate_per_s == 0


class Threshold(BaseModel):
    """Score thresholds in ``[0, 1]``; ``block`` above 1 means the category never blocks."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    review: float = Field(ge=0.0, le=1.0)
    block: float = Field(ge=0.0, le=1.01)

    @model_validator(mode="after")
    def _ordered(self) -> "Threshold":
        if self.block < self.review:
            raise ValueError(f"block threshold {self.block} is below review threshold {self.review}")
        return self


DEFAULT_THRESHOLDS: dict[str, Threshold] = {
    # text categories (engine/text): scores are calibrated so 0.5 is the dev-optimal F1 threshold
    "offensive": Threshold(review=0.5, block=0.9),
    "hate": Threshold(review=0.5, block=0.8),
    "targeted_insult": Threshold(review=0.5, block=0.95),
    # threats and calls for violence (OpenAI: violence, harassment/threatening); self-harm (OpenAI:
    # self-harm, self-harm/intent) goes to review only: a person writing about ending their life is
    # someone to reach, not a post to drop silently (a tenant may set its own block)
    "violence": Threshold(review=0.5, block=0.9),
    "self-harm": Threshold(review=0.5, block=1.01),
    # the lexical-only category of the first text model (alt-profanity-check), kept for existing policies
    "profanity": Threshold(review=0.5, block=0.9),
    "sexual": Threshold(review=0.45, block=0.7),
    "suggestive": Threshold(review=0.6, block=1.01),
}


class QuotaPolicy(BaseModel):
    """A tenant's request quota at the router (``[tenants.<id>.quota]``; :mod:`rtaudit.engine.quota`).

    Attributes:
        rate_per_s: requests per second the tenant may send in the long run; 0 = no quota.
            Metered per router process: with R router replicas the fleet admits up to R times it.
        burst: requests it may send at once above the rate (the bucket's size); default
            one second's worth (``max(1, rate_per_s)``).
        over_quota: what happens to a request beyond the quota: ``lower_lane`` routes it on the
            ``lo`` lane (served after the high lane, with ``lo_share`` of contended batches);
            ``throttle`` answers it at once with a verdict of ``on_throttled`` and the reason
            ``throttled: over quota N req/s``, without inference and without a DLQ record;
            ``delay`` holds it in the router and routes it on its normal lane when the tenant's
            bucket can pay for it (tokens are reserved in arrival order: the tenant's held
            requests go out at ``rate_per_s``, first in first out, and other tenants' records
            keep flowing; :mod:`rtaudit.engine.delay`). A request whose wait would exceed
            ``max_delay_ms``, or end after its own deadline, or that finds the router holding
            its maximum (10,000 records or 128 MiB), is throttled instead.
        max_delay_ms: under ``delay``, the longest a request may be held, ms (1 to 30,000:
            a router that restarts replays what came after its oldest held record; fusion
            ignores a repeat within its 60 s retention, the client a later one). The wait
            counts from the request's arrival (its broker timestamp): time in the topic counts.
        on_throttled: decision of a throttled request's verdict.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    rate_per_s: float = Field(default=0.0, ge=0.0, le=1e9)
    burst: float | None = Field(default=None, ge=1.0, le=1e9)
    over_quota: Literal["lower_lane", "throttle", "delay"] = "lower_lane"
    max_delay_ms: int = Field(default=2000, ge=1, le=30_000)
    on_throttled: Decision = "review"

    @functools.cached_property
    def limit(self) -> QuotaLimit:
        """The token-bucket parameters (:class:`QuotaLimit`; built once: the
        router asks for every request)."""
        burst = self.burst if self.burst is not None else max(1.0, self.rate_per_s)
        return QuotaLimit(rate_per_s=self.rate_per_s, burst=burst)


class TenantPolicy(BaseModel):
    """One tenant's moderation policy (``[tenants.<id>]`` in the settings file).

    Attributes:
        version: recorded on every verdict it produced.
        thresholds: category → :class:`Threshold`; categories not listed never flag.
        on_incomplete: least decision for an incomplete verdict (fail-open ``allow``
            or fail-closed ``review``/``block``).
        on_rejected: decision for a request the router rejected (bad schema, URI).
        slo_ms: end-to-end budget, ms, from ``created_at_ms`` to the deadline.
        lane: lane for requests without an explicit priority.
        quota: request quota at the router and what happens beyond it (:class:`QuotaPolicy`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: str = "default-1"
    thresholds: dict[str, Threshold] = Field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    on_incomplete: Decision = "review"
    on_rejected: Decision = "review"
    slo_ms: int = Field(default=10_000, ge=1, le=3_600_000)
    lane: Lane = "lo"
    quota: QuotaPolicy = Field(default_factory=QuotaPolicy)

    def flagged(self, categories: dict[str, float]) -> list[str]:
        """Categories at or above their review threshold, highest score first."""
        hits = [c for c, s in categories.items() if c in self.thresholds and s >= self.thresholds[c].review]
        return sorted(hits, key=lambda c: -categories[c])

    def decide(self, categories: dict[str, float], *, complete: bool) -> Decision:
        """Decision for fused scores; see the module docstring."""
        decision: Decision = "allow"
        for cat, score in categories.items():
            t = self.thresholds.get(cat)
            if t is None:
                continue
            if score >= t.block:
                decision = "block"
            elif score >= t.review:
                decision = stricter(decision, "review")
        return decision if complete else stricter(decision, self.on_incomplete)


BreakerAction = Literal["fail_open", "fail_closed", "hold_for_review"]


class Breaker(BaseModel):
    """A tenant's circuit breaker (``breaker:<tenant>`` on the control topic): what the fleet's
    verdicts do while it is tripped (the joint alert matrix's page cell: P99 > 2 s with drift >= 0.4).

    Attributes:
        action: ``fail_open``: missing, failed or expired parts no longer make the decision stricter
            (the scores that arrived decide; content flows); ``fail_closed``: every verdict is
            ``block``; ``hold_for_review``: every verdict is at least ``review`` (a human looks).
        tripped: whether it is tripped now; an untripped breaker only records the action to take.
        version: the control message's version (``breaker-<version>`` on the verdict's policy version).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    action: BreakerAction = "hold_for_review"
    tripped: bool = False
    version: int = 0

    def decide(self, policy: TenantPolicy, categories: dict[str, float], *, complete: bool) -> tuple[Decision, str | None]:
        """The decision under this breaker and the verdict's reason for it (``None`` when not tripped)."""
        if not self.tripped:
            return policy.decide(categories, complete=complete), None
        if self.action == "fail_open":
            return policy.decide(categories, complete=True), "circuit breaker tripped: fail open (missing parts ignored)"
        if self.action == "fail_closed":
            return "block", "circuit breaker tripped: fail closed (block)"
        return stricter(policy.decide(categories, complete=complete), "review"), "circuit breaker tripped: hold for review"
