"""The control plane's state: the latest accepted :class:`rtaudit.schemas.control.ControlMessage` per subject.

Every process reads ``audit.control`` from its first offset with its own reader (no consumer
group: every replica sees every record) and feeds each record to :meth:`ControlState.apply`,
in offset order. The rules, after etcd's and Kubernetes' compare-and-swap on a resource version:

* a record whose value does not parse as a :class:`ControlMessage` for its key is ``malformed``;
* a message whose ``version`` is not greater than the version in force is ``stale``
  (a replay, or an older writer);
* a message whose ``expects`` is not the version in force is a ``cas_conflict`` (someone
  else changed the subject since its author read it);
* anything else is accepted and becomes the subject's version in force;
* a tombstone (``null`` value) clears the subject: it goes back to its ``rtaudit.toml`` value;
  the next message expects 0, and its version must still be above the cleared one (the last
  version number is kept, so a replayed old message stays ``stale``).

The state depends only on the records, never on compaction having run: a compacted topic and an
uncompacted one give the same state. Pure: no Kafka here (``rtaudit.workers.control`` reads the topic).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import orjson
from pydantic import ValidationError

from rtaudit.engine.policy import Breaker, PolicyBook, TenantPolicy
from rtaudit.schemas.control import (
    BreakerPayload,
    ControlMessage,
    ModelPayload,
    PolicyPayload,
    PriorityPayload,
    RolloutPayload,
    subject_kind,
)

RejectCode = Literal["malformed", "stale", "cas_conflict"]
#: rejections kept for the status (the oldest are dropped).
MAX_REJECTIONS_KEPT = 100


@dataclass(frozen=True)
class Applied:
    """A record accepted at ``offset``: ``message`` is ``None`` for a tombstone."""

    offset: int
    subject: str
    message: ControlMessage | None


@dataclass(frozen=True)
class Rejected:
    """A record refused at ``offset``, with its ``code`` and a readable ``message``;
    ``in_force`` is the subject's version when it was refused (``None``: unknown subject)."""

    offset: int
    subject: str
    code: RejectCode
    message: str
    in_force: int | None = None


def _error_text(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()[:5])


def parse(key: bytes | None, value: bytes) -> ControlMessage:
    """The message in a record. Raises ``ValueError`` (with a readable reason) when it is not
    a :class:`ControlMessage`, or the record has no key, or its key differs from the subject."""
    try:
        msg = ControlMessage.model_validate_json(value)
    except ValidationError as exc:
        raise ValueError(f"not a control message: {_error_text(exc)}") from None
    if key is None:  # Apache Kafka refuses a keyless record on a compacted topic: so does the fleet, everywhere
        raise ValueError(f"record has no key: a control record is keyed by its subject ({msg.subject!r})")
    if key.decode("utf-8", "replace") != msg.subject:
        raise ValueError(f"record key {key.decode('utf-8', 'replace')!r} differs from the subject {msg.subject!r}")
    return msg


def encode(msg: ControlMessage) -> tuple[bytes, bytes]:
    """``(key, value)`` of the record that carries ``msg``."""
    return msg.subject.encode(), orjson.dumps(msg.model_dump(mode="json"))


@dataclass
class ControlState:
    """The subjects in force, from the records applied so far (in offset order).

    Attributes:
        offset: the next offset to apply (every record before it was applied).
        messages: subject → the accepted message in force.
        versions: subject → last accepted version (kept after a tombstone).
        rejections: the latest rejections, oldest first (at most :data:`MAX_REJECTIONS_KEPT`).
        rejected_total: rejections since the start.
    """

    offset: int = 0
    messages: dict[str, ControlMessage] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    rejections: deque[Rejected] = field(default_factory=lambda: deque(maxlen=MAX_REJECTIONS_KEPT))
    rejected_total: int = 0

    def version(self, subject: str) -> int:
        """The version in force for ``subject`` (0 when none, or after a tombstone)."""
        return self.messages[subject].version if subject in self.messages else 0

    def check(self, msg: ControlMessage) -> tuple[RejectCode, str] | None:
        """Why ``msg`` would be rejected now, or ``None`` when it would be accepted."""
        in_force = self.version(msg.subject)
        last = self.versions.get(msg.subject, 0)
        if msg.version <= last:
            return "stale", f"{msg.subject} version {msg.version} is not above the last version {last}"
        if msg.expects != in_force:
            return "cas_conflict", (f"{msg.subject} version {msg.version} expects version {msg.expects}, "
                                    f"but version {in_force} is in force")
        return None

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> Applied | Rejected:
        """Apply the record at ``offset`` (records must come in offset order; an offset below
        :attr:`offset` is a replay and is ignored as ``stale``). Never raises for bad input."""
        subject = key.decode("utf-8", "replace") if key is not None else ""
        if offset < self.offset:
            return self._reject(Rejected(offset, subject, "stale", f"offset {offset} was applied already"))
        self.offset = offset + 1
        if value is None:
            try:
                subject_kind(subject)
            except ValueError as exc:
                return self._reject(Rejected(offset, subject, "malformed", f"tombstone: {exc}"))
            self.messages.pop(subject, None)
            return Applied(offset, subject, None)
        try:
            msg = parse(key, value)
        except ValueError as exc:
            return self._reject(Rejected(offset, subject, "malformed", str(exc)))
        why = self.check(msg)
        if why is not None:
            return self._reject(Rejected(offset, msg.subject, why[0], why[1], self.version(msg.subject)))
        self.messages[msg.subject] = msg
        self.versions[msg.subject] = msg.version
        return Applied(offset, msg.subject, msg)

    def _reject(self, rejected: Rejected) -> Rejected:
        self.rejections.append(rejected)
        self.rejected_total += 1
        return rejected

    # ------------------------------------------------------------------ views

    def model(self, stage: str) -> ModelPayload | None:
        """The ``model:<stage>`` payload in force, if any."""
        msg = self.messages.get(f"model:{stage}")
        return msg.payload if msg is not None and isinstance(msg.payload, ModelPayload) else None

    def rollout(self, stage: str) -> RolloutPayload | None:
        """The ``rollout:<stage>`` payload in force, if any (active or finished)."""
        msg = self.messages.get(f"rollout:{stage}")
        return msg.payload if msg is not None and isinstance(msg.payload, RolloutPayload) else None

    def priority(self, tenant: str, now_ms: int) -> PriorityPayload | None:
        """The tenant's ``priority:<tenant>`` override, unless it expired at ``now_ms``."""
        msg = self.messages.get(f"priority:{tenant}")
        if msg is None or not isinstance(msg.payload, PriorityPayload):
            return None
        until = msg.payload.until_ms
        return msg.payload if until is None or now_ms < until else None

    def policy_book(self, base: PolicyBook, now_ms: int) -> PolicyBook:
        """``base`` (from ``rtaudit.toml``) with every ``policy:<tenant>`` in force replacing the
        tenant's policy, then every unexpired ``priority:<tenant>`` overriding its lane, SLO and
        quota. A policy set by the control topic is versioned ``control-<version>``."""
        tenants = dict(base.tenants)
        for subject, msg in self.messages.items():
            kind, tenant = subject_kind(subject)
            if kind == "policy" and isinstance(msg.payload, PolicyPayload):
                tenants[tenant] = msg.payload.policy.model_copy(update={"version": f"control-{msg.version}"})
        for subject, msg in self.messages.items():
            kind, tenant = subject_kind(subject)
            if kind != "priority":
                continue
            override = self.priority(tenant, now_ms)
            if override is None:
                continue
            policy: TenantPolicy = tenants.get(tenant, base.default)
            update: dict[str, object] = {"version": f"{policy.version}+priority-{msg.version}"}
            if override.lane is not None:
                update["lane"] = override.lane
            if override.slo_ms is not None:
                update["slo_ms"] = override.slo_ms
            if override.quota is not None:
                update["quota"] = override.quota
            tenants[tenant] = policy.model_copy(update=update)
        breakers = {subject_kind(subject)[1]: Breaker(action=msg.payload.action, tripped=msg.payload.tripped,
                                                      version=msg.version)
                    for subject, msg in self.messages.items() if isinstance(msg.payload, BreakerPayload)}
        return PolicyBook(default=base.default, tenants=tenants, breakers={**base.breakers, **breakers})

    def next_expiry_ms(self, now_ms: int) -> int | None:
        """The earliest ``until_ms`` after ``now_ms`` of a priority override (when a cached policy
        book must be rebuilt), or ``None``."""
        times = [m.payload.until_ms for m in self.messages.values()
                 if isinstance(m.payload, PriorityPayload) and m.payload.until_ms is not None and m.payload.until_ms > now_ms]
        return min(times) if times else None
