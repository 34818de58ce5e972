"""Acknowledge consumed records per partition in offset order, whatever order they finish in,
and per assignment generation, whatever rebalances happen while they run.

The batcher lets records of one partition finish out of order (an expired item
leaves before an older live one; a bad record goes to the DLQ at once). A
partition's offset may only be committed up to the first record not yet done, so
records are acked here only once every older record of their partition is done:
an offset is never committed before its partial or DLQ record was delivered
(at-least-once).

Records also outlive their partition's assignment: a rebalance revokes a partition while
some of its records are still in the batcher or in inference, and may give it back before
they finish. Each assignment of a partition is a *generation*: a record belongs to the
generation it was consumed in. Revoking a partition (or assigning it again) retires its
generation; a retired generation's records still finish (:meth:`InOrderAcks.done` returns
nothing for them and raises nothing) but are never released, so their offsets are never
committed by the generation that replaced them (the new generation starts at the group's
committed offset and consumes those records again: at-least-once, fusion deduplicates).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

E = TypeVar("E")


class _Generation:
    """One assignment of one partition: its records in offset order, ``[record, finished]``."""

    __slots__ = ("queue", "live")

    def __init__(self) -> None:
        self.queue: deque[list[Any]] = deque()
        self.live = True


class InOrderAcks(Generic[E]):
    """Tracks records per partition and assignment generation, in arrival (offset) order, and
    acks each live generation's done prefix.

    Records are identified by object identity (``id``), so a record consumed again after a
    rebalance (a new message object) is a new record. Every method runs on one thread.

    Args:
        partition_of: the partition key of a record (e.g. ``(topic, partition)``).
    """

    def __init__(self, partition_of: Callable[[E], Hashable]) -> None:
        self._partition_of = partition_of
        #: partition -> its current generation (live until revoked or replaced).
        self._current: dict[Hashable, _Generation] = {}
        #: id(record) -> (its generation, its entry), until the record is done.
        self._entry: dict[int, tuple[_Generation, list[Any]]] = {}
        #: records finished after their generation was retired (never released).
        self.stale = 0

    def assign(self, partition: Hashable) -> None:
        """``partition`` was assigned: start its new generation. A generation still current
        (assigned twice without a revoke between) is retired first, as by :meth:`revoke`."""
        self.revoke(partition)
        self._current[partition] = _Generation()

    def revoke(self, partition: Hashable) -> None:
        """``partition`` was revoked (or lost): retire its generation. Its unfinished records are
        another member's to commit now; they may still finish (:meth:`done` returns ``[]``)."""
        generation = self._current.pop(partition, None)
        if generation is not None:
            generation.live = False
            generation.queue.clear()

    #: the former name of :meth:`revoke`.
    forget = revoke

    def track(self, record: E) -> None:
        """Register ``record`` as consumed in its partition's current generation (call in the
        order records arrive; a partition not announced by :meth:`assign` gets a generation now)."""
        partition = self._partition_of(record)
        generation = self._current.get(partition)
        if generation is None:
            generation = self._current[partition] = _Generation()
        entry = [record, False]
        generation.queue.append(entry)
        self._entry[id(record)] = (generation, entry)

    def done(self, record: E) -> list[E]:
        """Mark ``record`` finished. Returns the records that may be acked now, in offset
        order: the finished run at the head of its generation (empty while an older record of
        the generation is unfinished, and for a record of a retired generation).

        Raises:
            KeyError: ``record`` was never tracked, or is done already (a bug, not a rebalance).
        """
        found = self._entry.pop(id(record), None)
        if found is None:
            raise KeyError(f"record never tracked: {record!r}")
        generation, entry = found
        if not generation.live:
            self.stale += 1
            return []
        entry[1] = True
        queue = generation.queue
        ready: list[E] = []
        while queue and queue[0][1]:
            ready.append(queue.popleft()[0])
        return ready

    def waiting(self) -> int:
        """Records of live generations tracked and not yet acked."""
        return sum(len(g.queue) for g in self._current.values())

    def retired(self) -> int:
        """Records of retired generations not yet finished."""
        return len(self._entry) - sum(1 for g, _ in self._entry.values() if g.live)
