"""What a role is to the runtime: a :class:`Handler` takes a batch of records and returns what to
produce, says which offsets are safe to commit, and keeps per-partition state across rebalances.
It knows nothing of Kafka: the batch loop (:mod:`rtaudit.workers.runtime.loop`) or the
broker-free driver (:mod:`rtaudit.workers.runtime.driver`) runs it.

Every handler method runs on one thread (the loop's), so a handler's state needs no lock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rtaudit.engine.policy import PolicyBook
from rtaudit.workers.runtime.records import TP, Emit, Record


class Handler(Protocol):
    """A role's logic over batches of records (see the module doc).

    ``now_ms`` is the wall clock, epoch ms, read once per call by the caller."""

    def handle(self, records: Sequence[Record], now_ms: int) -> list[Emit]:
        """Outputs of one batch, in production order (records in offset order per partition)."""
        ...

    def tick(self, now_ms: int) -> list[Emit]:
        """Outputs due by time alone (deadlines, held requests); called after every fetch."""
        ...

    def commit_offsets(self, tps: Collection[TP] | None = None) -> dict[TP, int]:
        """Per partition of ``tps`` (default: every one held), the offset safe to commit once
        every output returned so far is on the broker."""
        ...

    def assigned(self, tps: list[TP]) -> None:
        """Partitions given to this member (before any of their records is handled)."""
        ...

    def revoked(self, tps: list[TP]) -> None:
        """Partitions leaving this member: drop their state (after their last commit)."""
        ...

    def status(self) -> dict[str, Any]:
        """The role's own heartbeat fields (:class:`rtaudit.schemas.control.Heartbeat`)."""
        ...


@dataclass(frozen=True)
class HandlerContext:
    """What the runtime gives a handler factory.

    Attributes:
        policies: the tenant policies in force (the settings' with ``audit.control``'s changes;
            the same object until something changes).
        consumer: the loop's consumer, for a role adapter that reads state back before it
            hands partitions to its handler (fusion's rebuild); ``None`` in the driver.
    """

    policies: Callable[[], PolicyBook]
    consumer: Any = None


class HandlerBase:
    """Defaults for the optional :class:`Handler` methods (no timers, no partition state, no
    heartbeat fields)."""

    def tick(self, now_ms: int) -> list[Emit]:
        return []

    def assigned(self, tps: list[TP]) -> None:
        return None

    def revoked(self, tps: list[TP]) -> None:
        return None

    def status(self) -> dict[str, Any]:
        return {}
