"""Records of the control plane: ``audit.control`` (what runs) and ``audit.status`` (what is running).

``audit.control`` has one partition, so its records have one total order. The key is the
*subject* (UTF-8) and the value one :class:`ControlMessage`, or ``null`` (a tombstone: the
subject goes back to its ``rtaudit.toml`` value). Subjects:

==================  ===========================  =============================================
subject             payload                      what it sets
==================  ===========================  =============================================
``model:<stage>``   :class:`ModelPayload`        the bundle in force for a stage (``text``, ``image``, ``ocr``)
``rollout:<stage>`` :class:`RolloutPayload`      a canary: candidate bundle, traffic weight, phase
``policy:<tenant>`` :class:`PolicyPayload`       a tenant's thresholds, fail mode, SLO, lane, quota
``priority:<t>``    :class:`PriorityPayload`     a temporary lane / SLO / quota override, with expiry
``breaker:<t>``     :class:`BreakerPayload`      the tenant's circuit breaker: tripped or not, and its action
==================  ===========================  =============================================

Every message carries a ``version`` strictly increasing per subject and the version it
``expects`` to replace (compare-and-swap: 0 when the subject has none yet). The rules that
accept or reject a message are in :mod:`rtaudit.engine.control`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rtaudit.schemas.messages import EpochMs, Lane
from rtaudit.schemas.policy import BreakerAction, QuotaPolicy, TenantPolicy

#: stages whose model the control topic can change.
CONTROL_STAGES = ("text", "image", "ocr")
#: ``<kind>:<name>``: kind model|rollout with a stage, or policy|priority|breaker with a tenant id.
SUBJECT = re.compile(r"^(?:(model|rollout):(text|image|ocr)|(policy|priority|breaker):([A-Za-z0-9._\-]{1,64}))$")
SubjectKind = Literal["model", "rollout", "policy", "priority", "breaker"]
Phase = Literal["precheck", "rollout", "full", "promoted", "rolled_back", "aborted"]
#: phases in which the candidate takes traffic (``weight_pct`` of it).
ACTIVE_PHASES: tuple[str, ...] = ("precheck", "rollout", "full")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def subject_kind(subject: str) -> tuple[SubjectKind, str]:
    """``("model", "text")`` for ``"model:text"``. Raises ``ValueError`` for an unknown subject."""
    m = SUBJECT.match(subject)
    if m is None:
        raise ValueError(f"unknown control subject {subject!r}: expected model:<stage>, rollout:<stage> "
                         f"(stage in {', '.join(CONTROL_STAGES)}), policy:<tenant>, priority:<tenant> or breaker:<tenant>")
    return (m.group(1) or m.group(3)), (m.group(2) or m.group(4))  # type: ignore[return-value]  # the regex's groups are exactly the SubjectKind literals


class BundleRef(_Strict):
    """A model bundle in a store (:mod:`rtaudit.engine.bundle`): its identity is the sha256 of its ``bundle.json``.

    Attributes:
        stage: ``text`` | ``image`` | ``ocr``.
        version: the bundle's version name (reported on every partial it scores).
        sha256: hex sha256 of the bundle's ``bundle.json`` (which holds the sha256 of every file).
        uri: where the bundle lies: ``file://`` + absolute directory path.
    """

    stage: Literal["text", "image", "ocr"]
    version: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._+\-]*$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    uri: str = Field(min_length=8, max_length=2048, pattern=r"^file://")


class ModelPayload(_Strict):
    """``model:<stage>``: the bundle in force (the *stable* version every request gets outside a canary)."""

    kind: Literal["model"] = "model"
    bundle: BundleRef


class CanaryTriggers(_Strict):
    """When a canary is rolled back or promoted (checked by every worker that serves it).

    Attributes:
        p99_margin_ms: roll back when the candidate's P99 batch latency exceeds the stable
            version's by more than this, ms.
        max_disagreement: roll back when the share of shadowed items whose decision differs
            between the versions passes this (0.001 = 0.1 %).
        max_error_rate: roll back when the share of the candidate's items that fail passes this.
        min_items: items the candidate must have scored before latency or disagreement may trigger.
        promote_after_items: promote to the next step after this many candidate items without a trigger...
        promote_after_s: ...or after this many seconds at the step, whichever comes first (0: never by time).
    """

    p99_margin_ms: float = Field(default=200.0, ge=0.0, le=3_600_000.0)
    max_disagreement: float = Field(default=0.001, ge=0.0, le=1.0)
    max_error_rate: float = Field(default=0.01, ge=0.0, le=1.0)
    min_items: int = Field(default=200, ge=1, le=10**9)
    promote_after_items: int = Field(default=2000, ge=1, le=10**9)
    promote_after_s: float = Field(default=300.0, ge=0.0, le=7 * 86400.0)


class RolloutPayload(_Strict):
    """``rollout:<stage>``: a canary of ``candidate`` against ``stable``.

    Attributes:
        stable: the version the rest of the traffic gets (``None``: the model the worker was started with).
        candidate: the version under test.
        weight_pct: share of requests, in percent ``[0, 100]``, scored by the candidate; ``0``
            means no traffic (never "unset"). Which requests: :func:`rtaudit.engine.rollout.slice_pct`.
        phase: ``precheck`` (first step), ``rollout`` (later steps), ``full`` (100 %), and the
            terminal ``promoted`` (the candidate is now ``model:<stage>``), ``rolled_back`` (by a
            trigger) or ``aborted`` (by an operator); a terminal phase gives the candidate no traffic.
        shadow: score the slice with both versions but count only the stable one (disagreements recorded).
        triggers: :class:`CanaryTriggers`.
    """

    kind: Literal["rollout"] = "rollout"
    stable: BundleRef | None = None
    candidate: BundleRef
    weight_pct: float = Field(ge=0.0, le=100.0)
    phase: Phase = "precheck"
    shadow: bool = False
    triggers: CanaryTriggers = Field(default_factory=CanaryTriggers)

    @model_validator(mode="after")
    def _coherent(self) -> "RolloutPayload":
        if self.phase not in ACTIVE_PHASES and self.weight_pct != 0.0:
            raise ValueError(f"a {self.phase} rollout must have weight_pct 0, not {self.weight_pct}")
        if self.stable is not None and self.stable.stage != self.candidate.stage:
            raise ValueError(f"stable is a {self.stable.stage} bundle, candidate a {self.candidate.stage} bundle")
        return self

    @property
    def active(self) -> bool:
        """True while the candidate takes traffic or is shadowed."""
        return self.phase in ACTIVE_PHASES


class PolicyPayload(_Strict):
    """``policy:<tenant>``: the tenant's whole policy (:class:`rtaudit.engine.policy.TenantPolicy`)."""

    kind: Literal["policy"] = "policy"
    policy: TenantPolicy


class PriorityPayload(_Strict):
    """``priority:<tenant>``: a temporary override of the tenant's lane, SLO and quota.

    Attributes:
        lane: lane for the tenant's requests without an explicit priority (``None``: the policy's).
        slo_ms: end-to-end budget, ms (``None``: the policy's).
        quota: request quota (``None``: the policy's).
        until_ms: epoch ms after which the override no longer applies (``None``: until replaced).
    """

    kind: Literal["priority"] = "priority"
    lane: Lane | None = None
    slo_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    quota: QuotaPolicy | None = None
    until_ms: EpochMs | None = None


class BreakerPayload(_Strict):
    """``breaker:<tenant>``: the tenant's circuit breaker (:class:`rtaudit.schemas.policy.Breaker`).

    Attributes:
        action: what verdicts do while it is tripped: ``fail_open``, ``fail_closed`` or ``hold_for_review``.
        tripped: tripped now (by an operator or the page alert's receiver: ``rtaudit control breaker trip``).
    """

    kind: Literal["breaker"] = "breaker"
    action: BreakerAction = "hold_for_review"
    tripped: bool = False


Payload = Annotated[ModelPayload | RolloutPayload | PolicyPayload | PriorityPayload | BreakerPayload,
                    Field(discriminator="kind")]


class ControlMessage(_Strict):
    """One record of ``audit.control`` (key: :attr:`subject`).

    Attributes:
        subject: see the module table; must match the payload's kind.
        version: >= 1, strictly greater than the version in force for the subject.
        expects: the version in force this message replaces (0: the subject has none); a
            message whose ``expects`` is not the version in force is rejected (compare-and-swap).
        author: who published it (``user@host``, or ``auto:<worker id>`` for a worker's own rollback/promotion).
        at_ms: epoch ms when it was published.
        reason: why, for the history (a rollback's trigger, an operator's note).
    """

    subject: str = Field(max_length=80)
    version: int = Field(ge=1, le=2**62, strict=True)  # strict: "1" is not a version
    expects: int = Field(ge=0, le=2**62, strict=True)
    author: str = Field(min_length=1, max_length=128)
    at_ms: EpochMs
    reason: str | None = Field(default=None, max_length=1000)
    payload: Payload

    @model_validator(mode="after")
    def _subject_matches_payload(self) -> "ControlMessage":
        kind, name = subject_kind(self.subject)
        if kind != self.payload.kind:
            raise ValueError(f"subject {self.subject} needs a {kind} payload, not {self.payload.kind}")
        if isinstance(self.payload, ModelPayload | RolloutPayload):
            stage = self.payload.bundle.stage if isinstance(self.payload, ModelPayload) else self.payload.candidate.stage
            if stage != name:
                raise ValueError(f"subject {self.subject} carries a {stage} bundle")
        return self


class ServingStatus(_Strict):
    """What one worker serves for one stage: version name → share of traffic in percent."""

    stage: str
    loaded: list[str] = Field(default_factory=list)
    weights: dict[str, float] = Field(default_factory=dict)
    failed: dict[str, str] = Field(default_factory=dict, description="version → why it could not be loaded")


class DriftStatus(_Strict):
    """One ``(stage, tenant)``'s drift as a worker measured it (:mod:`rtaudit.engine.drift`).

    Attributes:
        stage: the stage whose traffic it is.
        tenant: the tenant id, or ``other`` for tenants the settings do not name.
        semantic: 1 − cosine similarity of the last two windows' mean embeddings (``None``: fewer than two windows yet).
        psi: category → population stability index against the model version's reference window.
        windows: semantic windows closed so far.
    """

    stage: str = Field(max_length=32)
    tenant: str = Field(max_length=64)
    semantic: float | None = None
    psi: dict[str, float] = Field(default_factory=dict)
    windows: int = Field(default=0, ge=0)


#: seconds between two heartbeats (:class:`Heartbeat`) of one worker; readers take a silence of a few for a dead worker.
HEARTBEAT_S = 2.0


class Heartbeat(_Strict):
    """One record of ``audit.status`` (key: :attr:`worker_id`), every few seconds from every worker.

    Attributes:
        worker_id: ``<role>-<host>-<pid>``.
        role: ``router`` | ``text`` | ``image`` | ``ocr`` | ``fusion``.
        at_ms: epoch ms when it was sent.
        control_offset: next ``audit.control`` offset the worker will apply (everything before is applied).
        versions: subject → version in force as the worker sees it.
        serving: per stage the worker scores, what it has loaded and serves.
        lag: consumer lag, records, of the worker's input topics (``None``: not measured).
        health: ``ok`` | ``loading`` | ``degraded`` (see ``detail``).
        rejected: control messages this worker rejected so far.
        detail: a readable note (the last rejection, a failed load).
        drift: per stage and tenant, the drift it measures (model workers; empty elsewhere).
        metrics: ``host:port`` of its Prometheus ``/metrics`` (``None``: not served); ``rtaudit top`` reads it.
    """

    worker_id: str = Field(max_length=160)
    role: str = Field(max_length=32)
    at_ms: EpochMs
    control_offset: int = Field(ge=0)
    versions: dict[str, int] = Field(default_factory=dict)
    serving: list[ServingStatus] = Field(default_factory=list)
    lag: int | None = None
    health: Literal["ok", "loading", "degraded"] = "ok"
    rejected: int = Field(default=0, ge=0)
    detail: str | None = Field(default=None, max_length=2000)
    drift: list[DriftStatus] = Field(default_factory=list)
    metrics: str | None = Field(default=None, max_length=300)
