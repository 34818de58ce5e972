"""A role's handler under the broker-free driver (:mod:`rtaudit.workers.runtime.driver`), its
outputs decoded: what the unit tests of the router, fusion and the modality stages read."""

from __future__ import annotations

from typing import Any

import orjson

from rtaudit.workers.runtime.driver import Driver
from rtaudit.workers.runtime.records import Output


class RoleUnderTest:
    """``handler`` run by a :class:`Driver`; :attr:`outputs` holds ``(topic, key, decoded value)``
    of everything produced since the test last cleared it. Other attributes are the handler's."""

    def __init__(self, handler: Any, role: str) -> None:
        self.handler = handler
        self.driver = Driver(handler, role)
        self.outputs: list[tuple[str, bytes | None, Any]] = []

    def _keep(self, outs: list[Output]) -> None:
        self.outputs += [(o.topic, o.key, orjson.loads(o.value)) for o in outs]

    def handle(self, records: list[Any], now: int | None = None, tick: bool = False) -> None:
        """``handler.handle`` on ``records`` (and a tick after it with ``tick``, as the batch loop does)."""
        self._keep(self.driver.handle(records, now, tick))

    def tick(self, now: int | None = None) -> None:
        self._keep(self.driver.tick(now))

    def commit_offsets(self, partitions: list[int] | None = None, topic: str = "audit.requests") -> dict[int, int]:
        """What a checkpoint of ``partitions`` (partition numbers of ``topic``; default all) commits."""
        tps = None if partitions is None else [(topic, p) for p in partitions]
        return {p: o for (_, p), o in self.driver.checkpoint(tps).items()}

    def revoke(self, partitions: list[int], topic: str = "audit.requests") -> None:
        """Revoke partitions (checkpointed first, as the batch loop does)."""
        self.driver.revoke([(topic, p) for p in partitions])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handler, name)
