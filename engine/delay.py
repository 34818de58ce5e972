"""Requests the router holds until their tenant's quota can pay for them (``over_quota = "delay"``).

Pure (no Kafka); every time is passed in, in ms.

Semantics (:class:`rtaudit.engine.policy.QuotaPolicy`, the router in :mod:`rtaudit.workers.router`)
    A request beyond its tenant's quota takes a *reservation* from the tenant's bucket
    (:meth:`rtaudit.engine.quota.TokenBucket.reserve`): the bucket goes into debt and the request is
    ready when the debt is paid, 1000 / ``rate_per_s`` ms after the tenant's previous held
    request. The router keeps it in a :class:`HeldQueue` and routes it, on its normal lane,
    from its ``tick()`` once ``ready_at_ms`` has come (the loop ticks after every ``consume``,
    at least every 20 ms). So a tenant's held requests go out at its quota rate, first in
    first out, and other tenants' records, in the same partitions, keep flowing: a held
    record waits beside the partition, not in it.

    A request whose wait would exceed ``max_delay_ms``, or whose ``ready_at_ms`` would fall
    after its own deadline, or that finds the queue full (``max_held`` records or
    ``max_bytes`` of record values), is answered as ``throttle`` answers (a ``throttled``
    verdict of ``on_throttled``, no DLQ record) and takes no token.

Commits (crash safety)
    The router must never commit past a held record: per partition it commits
    ``min(oldest_offset(p), offset after the last record handled)``. A router killed (or a
    partition revoked) with requests held loses nothing: the next owner consumes them again
    from that offset, together with the records after them that were already routed
    (at-least-once: those are routed twice; fusion keeps one verdict per request id).
    :meth:`HeldQueue.drop` forgets a revoked partition's held records for that reason.

Order
    :meth:`HeldQueue.hold` never lets a request of a tenant be ready before an earlier one of
    the same tenant (``ready_at_ms`` is raised to the tenant's latest, e.g. after a raised
    rate), and :meth:`HeldQueue.due` releases by ``ready_at_ms``, then in holding order.

Memory
    At most ``max_held`` records and ``max_bytes`` bytes (the sizes the caller gives) are held.
    Indexes are heaps with lazy deletion: each entry is two numbers; a released or dropped
    record's item is released at once.

:func:`offer` is the whole decision for one request (reserve, then route now, hold or
throttle); the router only acts on its :class:`Offer`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from rtaudit.engine.quota import QuotaLimit, TenantQuotas

T = TypeVar("T")

#: Most records one router holds at once; beyond, a request over quota is throttled.
MAX_HELD = 10_000
#: Most bytes of record values one router holds at once (requests may carry 8 MiB inline images).
MAX_HELD_BYTES = 128 * 1024 * 1024


@dataclass
class Held(Generic[T]):
    """One held record: its tenant, position (``partition``, ``offset``), when it may go
    (``ready_at_ms``), when it was held (``held_at_ms``, the holder's clock), its ``size``
    in bytes and the caller's ``item``."""

    tenant_id: str
    partition: int
    offset: int
    ready_at_ms: float
    held_at_ms: float
    size: int
    item: T
    seq: int = 0


@dataclass
class HeldQueue(Generic[T]):
    """Held records: released in ``ready_at_ms`` order (FIFO per tenant), indexed by partition
    for the commit offset; bounded by ``max_held`` records and ``max_bytes`` bytes."""

    max_held: int = MAX_HELD
    max_bytes: int = MAX_HELD_BYTES
    #: bytes held (the sizes given to :meth:`hold`).
    held_bytes: int = 0
    _live: dict[int, Held[T]] = field(default_factory=dict)
    _by_ready: list[tuple[float, int]] = field(default_factory=list)
    _by_offset: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    #: tenant → (latest ready_at_ms, records held)
    _tenants: dict[str, tuple[float, int]] = field(default_factory=dict)
    _seq: int = 0

    def __len__(self) -> int:
        return len(self._live)

    def room(self, size: int = 0) -> bool:
        """Whether one more record of ``size`` bytes may be held."""
        return len(self._live) < self.max_held and self.held_bytes + size <= self.max_bytes

    def holds(self, tenant_id: str) -> int:
        """Records of ``tenant_id`` held now."""
        return self._tenants.get(tenant_id, (0.0, 0))[1]

    def hold(
        self, tenant_id: str, partition: int, offset: int, ready_at_ms: float, held_at_ms: float, item: T, size: int = 0,
    ) -> Held[T]:
        """Hold ``item`` until ``ready_at_ms`` (raised to the tenant's latest held one: FIFO).
        The caller checks :meth:`room` first; holding beyond it raises ``OverflowError``."""
        if not self.room(size):
            raise OverflowError(f"HeldQueue: {len(self._live)} records, {self.held_bytes} bytes held already")
        last, count = self._tenants.get(tenant_id, (ready_at_ms, 0))
        ready = max(float(ready_at_ms), last)
        self._tenants[tenant_id] = (ready, count + 1)
        self._seq += 1
        held = Held(tenant_id, partition, offset, ready, float(held_at_ms), size, item, self._seq)
        self._live[held.seq] = held
        self.held_bytes += size
        heapq.heappush(self._by_ready, (ready, held.seq))
        heapq.heappush(self._by_offset.setdefault(partition, []), (offset, held.seq))
        return held

    def next_ready_ms(self) -> float | None:
        """The earliest ``ready_at_ms`` held (``None`` when nothing is held)."""
        heap = self._by_ready
        while heap and heap[0][1] not in self._live:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now_ms: float) -> list[Held[T]]:
        """Remove and return the records ready by ``now_ms``, in release order."""
        out: list[Held[T]] = []
        heap = self._by_ready
        while heap and heap[0][0] <= now_ms:
            _, seq = heapq.heappop(heap)
            held = self._live.get(seq)
            if held is not None:
                self._forget(held)
                out.append(held)
        return out

    def oldest_offset(self, partition: int) -> int | None:
        """Offset of the oldest record held from ``partition`` (``None`` when none is)."""
        heap = self._by_offset.get(partition)
        while heap and heap[0][1] not in self._live:
            heapq.heappop(heap)
        if not heap:
            self._by_offset.pop(partition, None)
            return None
        return heap[0][0]

    def drop(self, partitions: list[int]) -> list[Held[T]]:
        """Forget every record held from ``partitions`` (revoked: their next owner replays
        them); returns them, oldest first per partition."""
        out: list[Held[T]] = []
        for p in partitions:
            for _offset, seq in sorted(self._by_offset.pop(p, [])):
                held = self._live.get(seq)
                if held is not None:
                    self._forget(held)
                    out.append(held)
        return out

    def _forget(self, held: Held[T]) -> None:
        del self._live[held.seq]
        self.held_bytes -= held.size
        last, count = self._tenants[held.tenant_id]
        if count <= 1:
            del self._tenants[held.tenant_id]
        else:
            self._tenants[held.tenant_id] = (last, count - 1)


Outcome = Literal["within", "routed", "held", "throttled_max_delay", "throttled_deadline", "throttled_max_held"]


@dataclass(frozen=True)
class Offer:
    """What :func:`offer` decided for one request.

    Attributes:
        outcome: ``within`` (within the quota: route now), ``routed`` (over the quota, but its
            reservation was paid while it sat in the topic: route now), ``held`` (in the queue),
            or ``throttled_max_delay`` / ``throttled_deadline`` / ``throttled_max_held``
            (answer it as ``throttle`` does; nothing reserved).
        wait_ms: the wait from its arrival to its reservation's ``ready_at_ms``, ms.
        reason: for a throttled outcome, why, in words (for the verdict).
    """

    outcome: Outcome
    wait_ms: float = 0.0
    reason: str = ""

    @property
    def route_now(self) -> bool:
        return self.outcome in ("within", "routed")

    @property
    def throttled(self) -> bool:
        return self.outcome.startswith("throttled")


def offer(
    quotas: TenantQuotas, queue: HeldQueue[T], *, tenant_id: str, limit: QuotaLimit, arrived_ms: float,
    now_ms: float, max_delay_ms: float, deadline_ms: float, partition: int, offset: int, item: T, size: int = 0,
) -> Offer:
    """One request of ``tenant_id`` under ``over_quota = "delay"``, arrived at ``arrived_ms`` (the
    bucket's clock) and read at ``now_ms`` (the holder's clock, for release), both ms: reserve its
    token (:meth:`TenantQuotas.reserve`, refused beyond ``max_delay_ms`` or past ``deadline_ms``),
    then route it now, hold it in ``queue`` until the reservation is paid, or throttle it (a full
    queue gives the reserved token back). A tenant that has requests held is never routed
    past them: its later requests are held behind them."""
    r = quotas.reserve(tenant_id, limit, arrived_ms, max_wait_ms=max_delay_ms, not_after_ms=deadline_ms)
    queued = queue.holds(tenant_id) > 0
    if not r.granted:
        if r.refusal == "deadline":
            return Offer("throttled_deadline", r.wait_ms, f"a wait of {r.wait_ms:.0f} ms would end after the deadline")
        return Offer("throttled_max_delay", r.wait_ms, f"a wait of {r.wait_ms:.0f} ms exceeds max_delay_ms {max_delay_ms:g}")
    if not queued and r.wait_ms == 0:
        return Offer("within")
    if not queued and r.ready_at_ms <= now_ms:
        return Offer("routed", r.wait_ms)
    if not queue.room(size):
        quotas.refund(tenant_id)
        return Offer("throttled_max_held", r.wait_ms, f"the router holds {len(queue)} delayed requests already")
    queue.hold(tenant_id, partition, offset, r.ready_at_ms, now_ms, item, size)
    return Offer("held", r.wait_ms)
