"""Acknowledge consumed records per partition in offset order, whatever order they finish in.

The batcher lets records of one partition finish out of order (an expired item
leaves before an older live one; a bad record goes to the DLQ at once). A
partition's offset may only be committed up to the first record not yet done, so
records are acked here only once every older record of their partition is done:
an offset is never committed before its partial or DLQ record was delivered
(at-least-once).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

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
        self._forgotten: set[Hashable] = set()

    def track(self, record: E) -> None:
        """Register ``record`` as consumed (call in the order records arrive)."""
        entry = [record, False]
        partition = self._partition_of(record)
        self._forgotten.discard(partition)
        queue = self._pending.get(partition)
        if queue is None:
            queue = self._pending[partition] = deque()
        queue.append(entry)
        self._entry[id(record)] = entry

    def done(self, record: E) -> list[E]:
        """Mark ``record`` finished. Returns the records that may be acked now, in offset
        order: the finished run at the head of its partition (empty while an older record
        of the partition is unfinished, and for a record of a :meth:`forget`-ten partition).
        Raises ``KeyError`` for a record never tracked."""
        entry = self._entry.pop(id(record), None)
        if entry is None:
            if self._partition_of(record) in self._forgotten:
                return []
            raise KeyError(f"record never tracked: {record!r}")
        entry[1] = True
        queue = self._pending[self._partition_of(record)]
        ready: list[E] = []
        while queue and queue[0][1]:
            ready.append(queue.popleft()[0])
        return ready

    def forget(self, partition: Hashable) -> None:
        """The partition was revoked: drop its records (they are another member's to
        commit now); records of it that finish later are ignored."""
        for entry in self._pending.pop(partition, ()):
            self._entry.pop(id(entry[0]), None)
        self._forgotten.add(partition)

    def waiting(self) -> int:
        """Records tracked and not yet acked."""
        return sum(len(q) for q in self._pending.values())

