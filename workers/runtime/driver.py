"""A broker-free driver: runs any :class:`rtaudit.workers.runtime.handler.Handler` over a list
of records, in the order and with the checkpoints the batch loop uses, and returns what it
produced and what it committed (in the spirit of quix-streams' ``Application.run(count=,
timeout=)``, without a broker: for unit tests of every role, and for replaying a captured
topic through a handler).

The driver plays the batch loop (:mod:`rtaudit.workers.runtime.loop`) exactly, minus the
clients: records are handed to ``handler.handle`` in batches of ``batch_size``, ``handler.tick``
runs after each batch and at each ``ticks`` time, a DLQ output is written as the emitter writes
it (:func:`rtaudit.workers.runtime.emitter.dead_letter_output`), and a checkpoint takes
``handler.commit_offsets`` as committed (every output is "acknowledged" at once). Revoking
partitions checkpoints them first, as a revoke does; losing them does not.

Records are real ``confluent_kafka.Message`` objects (:func:`record`, :func:`records`): what a
consumer returns, built without one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, Message

from rtaudit.engine.clock import now_ms as wall_now_ms
from rtaudit.workers.runtime.emitter import as_output
from rtaudit.workers.runtime.handler import Handler
from rtaudit.workers.runtime.records import TP, Output, Record, tp_of


def record(topic: str, value: bytes | None, key: bytes | None = None, *, partition: int = 0, offset: int = 0,
           ts_ms: int | None = None) -> Message:
    """A consumed record as the consumer returns it (``ts_ms``: create time, epoch ms; ``None``:
    no timestamp)."""
    ts = (TIMESTAMP_CREATE_TIME, ts_ms) if ts_ms is not None else (TIMESTAMP_NOT_AVAILABLE, -1)
    return Message(topic=topic, partition=partition, offset=offset, key=key, value=value, timestamp=ts, error=None)


def records(topic: str, values: Iterable[bytes | tuple[bytes | None, bytes]], *, partition: int = 0, start: int = 0,
            ts_ms: int | None = None) -> list[Message]:
    """Consecutive records of one partition from ``start``; each value is ``value`` or ``(key, value)``."""
    out = []
    for i, v in enumerate(values):
        key, value = v if isinstance(v, tuple) else (None, v)
        out.append(record(topic, value, key, partition=partition, offset=start + i, ts_ms=ts_ms))
    return out


@dataclass
class DriverResult:
    """What a run produced and committed.

    Attributes:
        outputs: every record produced, in order (DLQ records as written to ``audit.dlq``).
        commits: per partition, the last offset committed (the next record to read).
    """

    outputs: list[Output] = field(default_factory=list)
    commits: dict[TP, int] = field(default_factory=dict)

    def on(self, topic: str) -> list[Output]:
        """The outputs to ``topic``."""
        return [o for o in self.outputs if o.topic == topic]

    def values(self, topic: str) -> list[Any]:
        """The JSON values produced to ``topic``, decoded."""
        return [orjson.loads(o.value) for o in self.on(topic)]


class Driver:
    """Runs ``handler`` as the batch loop would (module doc). One thread; keeps what was produced
    and committed across calls (:attr:`result`).

    Args:
        handler: the role's handler.
        role: the DLQ records' ``role``.
        batch_size: most records per ``handle`` call (the loop's fetch size).
        clock: wall clock, epoch ms, for calls without an explicit ``now_ms``.
    """

    def __init__(self, handler: Handler, role: str, batch_size: int = 2000, clock: Any = wall_now_ms) -> None:
        self.handler, self.role, self.batch_size, self.clock = handler, role, batch_size, clock
        self.result = DriverResult()
        self.assignment: set[TP] = set()

    @property
    def outputs(self) -> list[Output]:
        return self.result.outputs

    def assign(self, tps: Iterable[TP]) -> None:
        """Partitions assigned (``handler.assigned``); those already held are left as they are."""
        new = [tp for tp in tps if tp not in self.assignment]
        if new:
            self.assignment.update(new)
            self.handler.assigned(new)

    def revoke(self, tps: list[TP]) -> None:
        """Partitions revoked: checkpoint them, then ``handler.revoked``."""
        self.checkpoint(tps)
        self.assignment.difference_update(tps)
        self.handler.revoked(tps)

    def lose(self, tps: list[TP]) -> None:
        """Partitions lost (no commit), then ``handler.revoked``."""
        self.assignment.difference_update(tps)
        self.handler.revoked(tps)

    def _emit(self, emits: Sequence[Any]) -> list[Output]:
        outs = [as_output(self.role, e) for e in emits]
        self.result.outputs.extend(outs)
        return outs

    def handle(self, batch: Sequence[Record], now_ms: int | None = None, tick: bool = True) -> list[Output]:
        """One batch (its partitions assigned first when new), then one tick as the loop does
        (``tick=False``: none); returns its outputs."""
        now = self.clock() if now_ms is None else now_ms
        self.assign(dict.fromkeys(tp_of(m) for m in batch))
        outs = self._emit(self.handler.handle(batch, now))
        return outs + self._emit(self.handler.tick(now)) if tick else outs

    def tick(self, now_ms: int | None = None) -> list[Output]:
        """One ``handler.tick``; returns its outputs."""
        return self._emit(self.handler.tick(self.clock() if now_ms is None else now_ms))

    def checkpoint(self, tps: list[TP] | None = None) -> dict[TP, int]:
        """Take ``handler.commit_offsets`` as committed; returns them."""
        offsets = self.handler.commit_offsets(tps)
        self.result.commits.update(offsets)
        return offsets

    def run(self, batch: Sequence[Record], *, count: int | None = None, now_ms: int | None = None,
            ticks: Iterable[int] = ()) -> DriverResult:
        """Handle ``batch`` (its first ``count`` records when given) in batches of ``batch_size``,
        then tick at each of ``ticks`` (epoch ms, ascending), then checkpoint. Returns
        :attr:`result` (everything so far)."""
        todo = list(batch if count is None else batch[:count])
        for i in range(0, len(todo), self.batch_size):
            self.handle(todo[i:i + self.batch_size], now_ms)
        for t in ticks:
            self.tick(t)
        self.checkpoint()
        return self.result


def run(handler: Handler, batch: Sequence[Record], *, role: str, count: int | None = None, now_ms: int | None = None,
        ticks: Iterable[int] = (), batch_size: int = 2000) -> DriverResult:
    """``Driver(handler, role, batch_size).run(batch, count=, now_ms=, ticks=)``: outputs and commits."""
    return Driver(handler, role, batch_size).run(batch, count=count, now_ms=now_ms, ticks=ticks)
