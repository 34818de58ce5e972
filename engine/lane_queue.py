"""One lane of the micro-batcher (:mod:`rtaudit.engine.batcher`): queued items, a FIFO per tenant,
served round-robin across tenants (deficit round robin with a quantum of one item), so a
tenant's backlog never stands in front of another tenant's item. Pure: times are epoch ms
passed in."""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from rtaudit.engine.clock import past_deadline

T = TypeVar("T")
LaneName = Literal["hi", "lo"]


@dataclass(eq=False)
class Pending(Generic[T]):
    """One queued item: the caller's ``payload``, its lane, deadline and arrival (epoch ms), its
    tenant (``""`` when the caller named none) and its cost in batch slots (1: an ordinary item)."""

    payload: T
    lane: LaneName
    deadline_ms: float
    enqueued_ms: float
    tenant: str = ""
    cost: float = 1.0


class LaneQueue(Generic[T]):
    """One lane's queued items: a FIFO per tenant, served round-robin across tenants.

    ``_ring`` holds the tenants with items, the next to serve first; a served tenant moves to
    the back (or leaves the ring when it has nothing left), a tenant with its first item joins
    at the back. :meth:`take` and :meth:`peek` agree: ``peek(n)`` is what ``take(n)`` would return.
    """

    def __init__(self) -> None:
        self._queues: dict[str, deque[Pending[T]]] = {}
        self._ring: deque[str] = deque()
        self._len = 0
        #: a lower bound of every held item's deadline (epoch ms): :meth:`sweep` scans only
        #: once ``now`` reaches it (polled after every put, a full scan each time was O(n²)).
        self._earliest_deadline = math.inf

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Pending[T]]:
        return itertools.chain.from_iterable(self._queues[t] for t in self._ring)

    def tenants(self) -> dict[str, int]:
        """Items held per tenant, in serving order."""
        return {t: len(self._queues[t]) for t in self._ring}

    def append(self, item: Pending[T]) -> None:
        queue = self._queues.get(item.tenant)
        if queue is None:
            queue = self._queues[item.tenant] = deque()
            self._ring.append(item.tenant)
        queue.append(item)
        self._len += 1
        if item.deadline_ms < self._earliest_deadline:
            self._earliest_deadline = item.deadline_ms

    def take(self, n: int) -> list[Pending[T]]:
        """Remove and return up to ``n`` items, one per tenant per round."""
        out: list[Pending[T]] = []
        while len(out) < n and self._ring:
            tenant = self._ring.popleft()
            queue = self._queues[tenant]
            out.append(queue.popleft())
            if queue:
                self._ring.append(tenant)
            else:
                del self._queues[tenant]
        self._len -= len(out)
        return out

    def popleft(self) -> Pending[T]:
        """The next item in serving order; ``IndexError`` when empty."""
        taken = self.take(1)
        if not taken:
            raise IndexError("pop from an empty lane")
        return taken[0]

    def peek(self, n: int) -> list[Pending[T]]:
        """What :meth:`take` ``(n)`` would return, without removing anything."""
        out: list[Pending[T]] = []
        depth = 0
        while len(out) < n:
            row = [q[depth] for q in (self._queues[t] for t in self._ring) if depth < len(q)]
            if not row:
                break
            out += row[: n - len(out)]
            depth += 1
        return out

    def oldest_ms(self) -> float:
        """Arrival of the oldest item held (each tenant's head is its oldest); ``inf`` when empty."""
        return min((q[0].enqueued_ms for q in self._queues.values()), default=math.inf)

    def sweep(self, now: float) -> list[Pending[T]]:
        """Remove and return the items past their deadline at ``now`` (O(1) while none can be)."""
        if not past_deadline(self._earliest_deadline, now):
            return []
        expired: list[Pending[T]] = []
        for tenant in list(self._ring):
            queue = self._queues[tenant]
            if any(past_deadline(p.deadline_ms, now) for p in queue):
                expired += [p for p in queue if past_deadline(p.deadline_ms, now)]
                keep = deque(p for p in queue if not past_deadline(p.deadline_ms, now))
                if keep:
                    self._queues[tenant] = keep
                else:
                    del self._queues[tenant]
                    self._ring.remove(tenant)
        self._len -= len(expired)
        self._earliest_deadline = min((p.deadline_ms for q in self._queues.values() for p in q), default=math.inf)
        return expired
