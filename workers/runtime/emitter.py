"""The emitter: owns a role's producer. Every output of every role goes through
:meth:`Emitter.send` (the one place that waits out a full local queue, ``BufferError``); every
DLQ record is written by :func:`dead_letter_output`; deliveries are tracked either for the
whole process (:class:`DeliveryTracker`: the batch loop's checkpoint fails on any lost output)
or per batch (:class:`BatchDelivery`: a modality worker acks a batch's records once the broker
acknowledged that batch's own outputs).

The producer is :class:`rtaudit.workers.producer.RecoveringProducer` (recreated after a fatal
idempotence error or a stall, unacknowledged records produced again). It is thread-safe: the
thread that produces (the batch loop's thread, or a modality worker's event loop) and the
thread that serves delivery callbacks (``poll``/``flush``) may differ.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from confluent_kafka import KafkaError, Message

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.codec import encode
from rtaudit.schemas.errors import AuditError
from rtaudit.topics.catalog import DLQ
from rtaudit.workers import metrics
from rtaudit.workers.app import dead_letter_record
from rtaudit.workers.kafka import producer_config
from rtaudit.workers.producer import RecoveringProducer
from rtaudit.workers.runtime.records import DeadLetter, Emit, Output, Record, raw_key, raw_value
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
#: longest wait of one ``Producer.poll`` while a full local queue drains, s.
BUFFER_FULL_POLL_S = 0.05
#: longest wait of one ``Producer.poll`` of the delivery thread, s.
DELIVERY_POLL_S = 0.05
#: longest wait for every output to be acknowledged at a checkpoint, s.
FLUSH_TIMEOUT_S = 30.0

DeliveryCallback = Callable[[KafkaError | None, Message], None]


class DeliveryFailed(RuntimeError):
    """An output was not acknowledged by the broker after the producer's retries."""


def dead_letter_output(role: str, record: Record, error: AuditError) -> Output:
    """The ``audit.dlq`` record for the bad input ``record`` (original bytes, source position,
    reason; keyed by the request id when readable); logs and counts it
    (``rtaudit_dlq_records_total{role, code}``)."""
    dlq = dead_letter_record(raw_value(record), record.topic() or "", record.partition() or 0, record.offset() or 0,
                             raw_key(record), role, error, now_ms())
    log.warning(
        "dlq role=%s topic=%s partition=%s offset=%s code=%s request_id=%s: %s",
        role, record.topic(), record.partition(), record.offset(), error.code, error.request_id, error.message,
    )
    metrics.DLQ_RECORDS.labels(role, str(error.code)).inc()
    return Output(DLQ, error.request_id.encode() if error.request_id else None, encode(dlq))


def as_output(role: str, emit: Emit) -> Output:
    """``emit`` as the record to produce (a :class:`DeadLetter` becomes its DLQ record)."""
    return dead_letter_output(role, emit.record, emit.error) if isinstance(emit, DeadLetter) else emit


class DeliveryTracker:
    """Delivery callback for a process's outputs: keeps the first failure and, per
    ``(topic, partition)``, the offset after the last acknowledged record. Written by whichever
    thread serves the producer's callbacks; :attr:`failure` is only ever set once."""

    def __init__(self) -> None:
        self.failure: str | None = None
        self.next_offset: dict[tuple[str, int], int] = {}

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failure = self.failure or f"{msg.topic()}[{msg.partition()}]: {err.str()}"
            return
        tp = (msg.topic() or "", msg.partition() or 0)
        self.next_offset[tp] = max(self.next_offset.get(tp, 0), (msg.offset() or 0) + 1)

    def raise_if_failed(self) -> None:
        """Raises :class:`DeliveryFailed` when any output failed since start."""
        if self.failure is not None:
            raise DeliveryFailed(f"output not delivered: {self.failure}")


class BatchDelivery:
    """The broker's acknowledgement of one batch's outputs, as an asyncio future.

    Pass the object as ``on_delivery`` of every output of the batch (:meth:`add` first),
    then :meth:`seal` it: :attr:`future` (created on ``loop``) resolves once every output
    was acknowledged, or fails with :class:`DeliveryFailed` naming the first failed one.
    librdkafka runs delivery callbacks in whichever thread calls ``poll``/``flush``, so
    the count is locked and the future is resolved on ``loop`` (``call_soon_threadsafe``).
    Unlike a ``flush`` per batch, later batches' outputs do not delay this one's, and
    several batches can be in flight at once.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        #: outputs handed over and not yet acknowledged (under ``_lock``: producer and callback threads).
        self._outstanding = 0
        self._sealed = False
        self._failure: str | None = None
        self._lock = threading.Lock()

    def add(self) -> None:
        """One more output of this batch is about to be produced."""
        with self._lock:
            self._outstanding += 1

    def seal(self) -> None:
        """No more outputs: the future resolves when the last one is acknowledged (now if none)."""
        with self._lock:
            self._sealed = True
            done = self._outstanding == 0
        if done:
            self._loop.call_soon_threadsafe(self._resolve)

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            self._outstanding -= 1
            if err is not None and self._failure is None:
                self._failure = f"{msg.topic()}[{msg.partition()}]: {err.str()}"
            done = self._sealed and self._outstanding == 0
        if done:
            self._loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if self.future.done():
            return
        if self._failure is not None:
            self.future.set_exception(DeliveryFailed(f"output not delivered: {self._failure}"))
        else:
            self.future.set_result(None)


class Emitter:
    """A role's producer and what it produced (see the module doc).

    Args:
        settings: client profile and bootstrap (:func:`rtaudit.workers.kafka.producer_config`).
        role: the ``role`` label of DLQ records and metrics.
        name: the producer's log label (default ``role``).
        producer: an already built producer (tests); default a :class:`RecoveringProducer`.
    """

    def __init__(self, settings: Settings | None, role: str, name: str | None = None, producer: Any = None) -> None:
        self.role = role
        if producer is None:
            if settings is None:
                raise ValueError("Emitter needs settings or a producer")
            producer = RecoveringProducer(producer_config(settings), name=name or role)
        self.producer = producer
        #: failures of outputs not counted by a :class:`BatchDelivery` (written by the callback thread).
        self.deliveries = DeliveryTracker()

    def send(self, out: Output, on_delivery: DeliveryCallback | BatchDelivery | None = None) -> None:
        """Hand one output to the producer without waiting for its acknowledgement; a full local
        queue (``BufferError``) is drained first, however long that takes (back-pressure). With a
        :class:`BatchDelivery`, the output counts toward that batch's acknowledgement; else toward
        :attr:`deliveries`."""
        if isinstance(on_delivery, BatchDelivery):
            on_delivery.add()
        callback = on_delivery or self.deliveries
        while True:
            try:
                if out.partition is None:
                    self.producer.produce(out.topic, out.value, out.key, on_delivery=callback, headers=out.headers)
                else:
                    self.producer.produce(out.topic, out.value, out.key, partition=out.partition, on_delivery=callback,
                                          headers=out.headers)
                return
            except BufferError:
                self.producer.poll(BUFFER_FULL_POLL_S)

    def emit(self, emits: list[Emit], batch: BatchDelivery | None = None) -> None:
        """:meth:`send` each of ``emits`` in order (a :class:`DeadLetter` as its DLQ record)."""
        for e in emits:
            self.send(as_output(self.role, e), batch)

    def poll(self, timeout_s: float = 0.0) -> None:
        """Serve delivery callbacks for up to ``timeout_s`` seconds."""
        self.producer.poll(timeout_s)

    def flush_or_raise(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Wait until the broker acknowledged every output handed over so far. Raises
        :class:`DeliveryFailed` when one is still unacknowledged after ``timeout_s`` seconds or
        any output tracked by :attr:`deliveries` failed."""
        remaining = self.producer.flush(timeout_s)
        if remaining:
            raise DeliveryFailed(f"{remaining} outputs still unacknowledged after {timeout_s:g} s")
        self.deliveries.raise_if_failed()

    async def delivered(self, executor: Executor | None = None) -> None:
        """:meth:`flush_or_raise` off the event loop (in ``executor``)."""
        await asyncio.get_running_loop().run_in_executor(executor, self.flush_or_raise)

    def serve_deliveries(self, stop: threading.Event) -> None:
        """A delivery thread's body: serve the producer's callbacks until ``stop`` is set."""
        while not stop.is_set():
            self.producer.poll(DELIVERY_POLL_S)
