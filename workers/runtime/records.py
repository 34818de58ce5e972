"""What flows between the runtime's threads and a role's handler: the record a handler reads
(:class:`Record`), what it asks to be produced (:class:`Output`, :class:`DeadLetter`), and a
partition's name (:data:`TP`).

A handler never sees a Kafka client: it reads records through the :class:`Record` protocol
(``confluent_kafka.Message`` satisfies it, and so does what the broker-free driver builds) and
returns :data:`Emit` values that the emitter (:mod:`rtaudit.workers.runtime.emitter`) hands to
the producer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rtaudit.schemas.errors import AuditError

#: a partition: ``(topic, partition number)``.
TP = tuple[str, int]


class Record(Protocol):
    """One consumed record, read-only (the accessors of ``confluent_kafka.Message``).

    ``timestamp()`` is ``(type, epoch ms)``: type 0 means no timestamp (``ms`` is then -1)."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> str | bytes | None: ...
    def value(self) -> str | bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def headers(self) -> object: ...  # Kafka headers (a list of (name, value) pairs), or None


@dataclass(frozen=True, slots=True)
class Output:
    """One record to produce. ``partition``: ``None`` lets the producer's partitioner choose
    from ``key`` (murmur2, as Faust and the Java client). ``headers``: Kafka headers (the W3C
    ``traceparent`` of :mod:`rtaudit.workers.tracing`), ``None`` for none."""

    topic: str
    key: bytes | None
    value: bytes
    partition: int | None = None
    headers: list[tuple[str, bytes]] | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """The input ``record`` goes to ``audit.dlq`` with ``error`` as its reason (the emitter
    writes the DLQ record: original bytes, source position, code, message)."""

    record: Record
    error: AuditError


#: what a handler returns for the emitter, in production order.
Emit = Output | DeadLetter


def tp_of(record: Record) -> TP:
    """``(topic, partition)`` of a consumed record (both are set on every consumed record)."""
    return (record.topic() or "", record.partition() or 0)


def raw_value(record: Record) -> bytes:
    """The record's value as bytes (``b""`` for a null value)."""
    value = record.value()
    if value is None:
        return b""
    return value.encode() if isinstance(value, str) else value


def raw_key(record: Record) -> bytes | None:
    """The record's key as bytes, or ``None``."""
    key = record.key()
    return key.encode() if isinstance(key, str) else key
