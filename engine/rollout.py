"""Canary rollouts: which version scores a request, and when a canary is promoted or rolled back.

Slice
    :func:`slice_pct` maps a request id to a number in ``[0, 100)`` with BLAKE2b, so every part
    of one request, on every worker and every retry, falls on the same side of a weight; a
    request is in the canary when its slice is below ``weight_pct`` (weight 0: nobody, weight
    100: everybody). Raising the weight from 5 to 50 keeps the first 5 % in the canary.

Steps
    :data:`STEPS` are the seed's two stages and the end: pre-check on 5 %, rollout on 50 %, then
    100 % (the ``full`` phase); promotion at 100 % makes the candidate ``model:<stage>``.

Judge
    :class:`CanaryJudge` keeps, per worker and rollout step, the batch latencies of each
    version, the candidate's errors and the shadow disagreements, and answers
    :meth:`CanaryJudge.decide`: roll back when the candidate fails more than ``max_error_rate``
    of its items, when its P99 batch latency exceeds the stable version's by more than
    ``p99_margin_ms``, or when more than ``max_disagreement`` of shadowed items change decision;
    promote after ``promote_after_items`` candidate items or ``promote_after_s`` seconds with
    no trigger. (KServe and Seldon leave these checks to the operator; Argo Rollouts'
    analysis runs do them with a metrics query: here each worker judges what it served.)
    Pure: time is passed in.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rtaudit.schemas.control import CanaryTriggers, RolloutPayload

#: traffic weights of the rollout steps, percent: pre-check, rollout, full.
STEPS: tuple[float, ...] = (5.0, 50.0, 100.0)
#: latency samples kept per version (a sliding window).
MAX_SAMPLES = 2048


def slice_pct(request_id: str) -> float:
    """The request's place in ``[0, 100)``: the first 8 bytes of BLAKE2b(request id) over 2**64, times 100."""
    digest = hashlib.blake2b(request_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * 100.0


def in_canary(request_id: str, weight_pct: float) -> bool:
    """True when the request is in a canary slice of ``weight_pct`` percent (0: never, 100: always)."""
    return weight_pct > 0.0 and slice_pct(request_id) < weight_pct


def serves_candidate(request_id: str, rollout: RolloutPayload | None) -> bool:
    """True when the candidate scores this request (an active, non-shadow rollout and the request in its slice)."""
    return rollout is not None and rollout.active and not rollout.shadow and in_canary(request_id, rollout.weight_pct)


def shadowed(request_id: str, rollout: RolloutPayload | None) -> bool:
    """True when the candidate also scores this request in shadow (its result is recorded, not used)."""
    return rollout is not None and rollout.active and rollout.shadow and in_canary(request_id, rollout.weight_pct)


def next_step(weight_pct: float) -> float | None:
    """The weight after ``weight_pct`` in :data:`STEPS`, or ``None`` at 100 % (promote)."""
    for step in STEPS:
        if step > weight_pct:
            return step
    return None


def phase_for(weight_pct: float) -> Literal["precheck", "rollout", "full"]:
    """``precheck`` at the first step (or below), ``full`` at 100 %, else ``rollout``."""
    if weight_pct >= 100.0:
        return "full"
    return "precheck" if weight_pct <= STEPS[0] else "rollout"


@dataclass(frozen=True)
class Hold:
    """No trigger yet."""

    kind: Literal["hold"] = "hold"
    reason: str = ""


@dataclass(frozen=True)
class Promote:
    """The step held long enough: go to the next weight (or make the candidate the stable model)."""

    reason: str
    kind: Literal["promote"] = "promote"


@dataclass(frozen=True)
class Rollback:
    """A trigger fired: the candidate must get 0 % at once."""

    reason: str
    kind: Literal["rollback"] = "rollback"


Decision = Hold | Promote | Rollback


def p99(samples: "deque[float] | list[float]") -> float:
    """The 99th percentile (numpy's linear interpolation) of ``samples``, ms; 0.0 when empty."""
    return float(np.percentile(np.fromiter(samples, dtype=np.float64), 99)) if samples else 0.0


@dataclass
class CanaryJudge:
    """One worker's evidence on one rollout step (create a new judge when the step changes).

    Attributes:
        triggers: the rollout's :class:`CanaryTriggers`.
        started_s: monotonic seconds when the step started (for ``promote_after_s``).
    """

    triggers: CanaryTriggers
    started_s: float
    stable_ms: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))
    candidate_ms: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))
    candidate_items: int = 0
    candidate_errors: int = 0
    shadow_items: int = 0
    disagreements: int = 0
    #: a verification failure (sha256, golden set, load) of the candidate: an immediate rollback.
    failed: str | None = None

    def record_batch(self, version: Literal["stable", "candidate"], latency_ms: float, items: int, errors: int = 0) -> None:
        """One batch scored by ``version``: its model time (ms), item count and failed items."""
        if version == "candidate":
            self.candidate_ms.append(latency_ms)
            self.candidate_items += items
            self.candidate_errors += errors
        else:
            self.stable_ms.append(latency_ms)

    def record_shadow(self, items: int, disagreements: int) -> None:
        """``items`` scored by both versions, of which ``disagreements`` got another decision."""
        self.shadow_items += items
        self.disagreements += disagreements

    def record_failure(self, why: str) -> None:
        """The candidate failed verification on this worker (sha256, golden set, load, warm-up)."""
        self.failed = why

    @property
    def seen(self) -> int:
        """Candidate items scored or shadowed."""
        return self.candidate_items + self.shadow_items

    def decide(self, now_s: float) -> Decision:
        """:class:`Rollback`, :class:`Promote` or :class:`Hold`; rollback triggers are checked first."""
        t = self.triggers
        if self.failed is not None:
            return Rollback(f"verification failed: {self.failed}")
        if self.candidate_items and self.candidate_errors / self.candidate_items > t.max_error_rate:
            return Rollback(f"error rate {self.candidate_errors}/{self.candidate_items} "
                            f"over {t.max_error_rate:.2%}")
        if self.seen >= t.min_items:
            if self.shadow_items and self.disagreements / self.shadow_items > t.max_disagreement:
                return Rollback(f"decisions differ on {self.disagreements}/{self.shadow_items} shadowed items, "
                                f"over {t.max_disagreement:.2%}")
            if self.candidate_ms and self.stable_ms:
                cand, stable = p99(self.candidate_ms), p99(self.stable_ms)
                if cand - stable > t.p99_margin_ms:
                    return Rollback(f"P99 {cand:.0f} ms vs stable {stable:.0f} ms: over the {t.p99_margin_ms:.0f} ms margin")
        if self.seen >= t.promote_after_items:
            return Promote(f"{self.seen} items without a trigger")
        if t.promote_after_s > 0 and now_s - self.started_s >= t.promote_after_s and self.seen >= t.min_items:
            return Promote(f"{now_s - self.started_s:.0f} s and {self.seen} items without a trigger")
        return Hold()


def disagree(stable_scores: dict[str, float], candidate_scores: dict[str, float], threshold: float = 0.5) -> bool:
    """True when the two score sets put a different set of categories at or above ``threshold``
    (the default review line): a changed decision, not a changed number."""
    return ({c for c, s in stable_scores.items() if s >= threshold}
            != {c for c, s in candidate_scores.items() if s >= threshold})
