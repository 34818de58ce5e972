"""Acknowledge consumed records per partition in offset order, whatever order they finish in.

The batcher lets records of one partition finish out of order (an expired item
leaves before an older live one; a bad record goes to the DLQ at once). Faust
commits the highest run of consecutive acked offsets, but it does not hold back
an ack that arrives ahead of an unacked older offset in every case (with no
commit yet, or one offset past the last commit, it commits past the gap). So
records are acked here only once every older record of their partition is done:
an offset is never committed before its partial or DLQ record was handed to the
producer (at-least-once).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

E = TypeVar("E")


class InOrderAcks(Generic[E]):
    """Tracks records per partition in arrival (offset) order and acks the done prefix.

    Args:
        partition_of: the partition key of a record (e.g. a Faust ``TP``).
    """

    def __init__(self, partition_of: Callable[[E], Hashable]) -> None:
        self._partition_of = partition_of
        self._pending: dict[Hashable, deque[list]] = {}
        self._entry: dict[int, list] = {}

    def track(self, record: E) -> None:
        """Register ``record`` as consumed (call in the order records arrive)."""
        entry = [record, False]
        self._pending.setdefault(self._partition_of(record), deque()).append(entry)
        self._entry[id(record)] = entry

    def done(self, record: E) -> list[E]:
        """Mark ``record`` finished. Returns the records that may be acked now, in offset
        order: the finished run at the head of its partition (empty while an older record
        of the partition is unfinished). Raises ``KeyError`` for an untracked record."""
        entry = self._entry.pop(id(record))
        entry[1] = True
        queue = self._pending[self._partition_of(record)]
        ready: list[E] = []
        while queue and queue[0][1]:
            ready.append(queue.popleft()[0])
        return ready

    def waiting(self) -> int:
        """Records tracked and not yet acked."""
        return sum(len(q) for q in self._pending.values())


async def finish_when_delivered(
    pending: Sequence[tuple[E, Sequence[Awaitable[Any]]]], finish: Callable[[E], Awaitable[None]]
) -> None:
    """For each ``(record, deliveries)`` in order: wait until the broker acknowledged every
    output of the record (its partial, its DLQ record), then ``finish`` it (ack).

    The outputs were all handed to the producer before this is called, so waiting costs
    one produce round trip per batch, not per record. A delivery that failed after the
    producer's retries raises here, before its record (or any later one) is acked: the
    caller crashes the worker and the unacked records are consumed again — a partial the
    broker never took is never covered by a committed offset.
    """
    for record, deliveries in pending:
        for delivery in deliveries:
            await delivery
        await finish(record)
