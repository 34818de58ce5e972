"""Batched intake and emit on confluent-kafka, below Faust's per-event path.

Faust stays the application framework (``faust -A rtaudit.workers.<role> worker`` starts the
process, its signals, logging and metrics task); a role whose per-event Faust path is
the cost runs a :class:`BatchLoop` in one thread instead: it reads records in batches
(``Consumer.consume``), hands outputs to the producer without awaiting each delivery,
and commits in this order, written down once (:meth:`BatchLoop.checkpoint`):

1. ``producer.flush()`` — wait until the broker acknowledged every output produced so far;
2. raise :class:`DeliveryFailed` if any delivery failed (the worker crashes, nothing is
   committed past the failed output, its input is consumed again);
3. commit the offsets the role says are safe (:meth:`BatchLoop.commit_offsets`).

So an offset is never committed before its outputs are on the broker (at-least-once).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.codec import encode
from rtaudit.schemas.errors import AuditError
from rtaudit.topics.catalog import DLQ
from rtaudit.workers import metrics, tracing
from rtaudit.engine.policy import PolicyBook
from rtaudit.workers.app import dead_letter_record
from rtaudit.workers.control import ControlPlane
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.offsets import OffsetGapGuard
from rtaudit.workers.producer import RecoveringProducer
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
#: how long a loop waits at start for the control topic to be read to its end, s.
CONTROL_CATCH_UP_S = 15.0


def consume_batch(consumer: Consumer, max_records: int, timeout_s: float, guard: OffsetGapGuard | None = None) -> list[Message]:
    """Up to ``max_records`` records: what the client already fetched, at once; when nothing
    is there, wait up to ``timeout_s`` seconds for the first one, then take what came with it.

    ``Consumer.consume(n, timeout)`` alone waits the whole timeout unless ``n`` records are
    queued: at saturation the fetcher holds fewer than ``n`` most of the time, and every
    call idled for its timeout (measured: the router spent 2.4 s of 7.8 s in 20 ms waits).
    With a ``guard``, records a fetch skipped are read again (:class:`OffsetGapGuard`).
    """
    messages = consumer.consume(max_records, 0)
    if not messages:
        messages = consumer.consume(1, timeout_s)
        if messages:
            messages += consumer.consume(max_records - 1, 0)
    return guard.filter(messages) if guard is not None and messages else messages


def dead_letter_output(role: str, m: Message, error: AuditError) -> tuple[bytes | None, bytes]:
    """The ``(key, value)`` of the ``audit.dlq`` record for the bad record ``m`` (original
    bytes, source position, reason; keyed by the request id when readable); logs and counts it."""
    record = dead_letter_record(m.value() or b"", m.topic(), m.partition(), m.offset(), m.key(), role, error, now_ms())
    log.warning(
        "dlq role=%s topic=%s partition=%s offset=%s code=%s request_id=%s: %s",
        role, m.topic(), m.partition(), m.offset(), error.code, error.request_id, error.message,
    )
    metrics.DLQ_RECORDS.labels(role, str(error.code)).inc()
    return (error.request_id.encode() if error.request_id else None), encode(record)


class DeliveryFailed(RuntimeError):
    """An output was not acknowledged by the broker after the producer's retries."""


class DeliveryTracker:
    """Delivery callback for produced outputs: keeps the first failure and, per
    ``(topic, partition)``, the offset after the last acknowledged record."""

    def __init__(self) -> None:
        self.failure: str | None = None
        self.next_offset: dict[tuple[str, int], int] = {}

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failure = self.failure or f"{msg.topic()}[{msg.partition()}]: {err.str()}"
            return
        tp = (msg.topic(), msg.partition())
        self.next_offset[tp] = max(self.next_offset.get(tp, 0), msg.offset() + 1)

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


class BatchLoop:
    """One consumer-group member and one producer, run in a thread.

    Subclasses implement :meth:`handle` (a batch of records), :meth:`commit_offsets`
    (what is safe to commit) and may override :meth:`tick` (timers),
    :meth:`assigned` / :meth:`revoked` (partition state).

    Args:
        settings: client profile and bootstrap.
        group_id: consumer group.
        topics: topics to subscribe to.
        batch_size: most records per ``consume`` call.
        poll_timeout_s: longest wait for the first record of a batch, s (also the
            granularity of :meth:`tick`).
        commit_interval_s: seconds between checkpoints.
        control_role: when set, the loop runs a :class:`rtaudit.workers.control.ControlPlane` for that
            role (reader of ``audit.control``, heartbeats) from :meth:`run` until it ends, and
            :meth:`policies` gives the tenant policies with the control topic's changes.
    """

    def __init__(
        self, settings: Settings, group_id: str, topics: list[str], *, batch_size: int = 2000,
        poll_timeout_s: float = 0.02, commit_interval_s: float = 0.5, control_role: str | None = None,
        **consumer_extra: Any,
    ) -> None:
        self.settings = settings
        self.group_id = group_id
        self.topics = topics
        self.batch_size = batch_size
        self.poll_timeout_s = poll_timeout_s
        self.commit_interval_s = commit_interval_s
        self.deliveries = DeliveryTracker()
        self.producer = RecoveringProducer(producer_config(settings), name=group_id)
        self.consumer = Consumer(consumer_config(settings, group_id, **consumer_extra))
        self.gaps = OffsetGapGuard(self.consumer, group_id)
        self._stop = threading.Event()
        self._failed = False
        self.control: ControlPlane | None = None
        if control_role is not None:
            self.control = ControlPlane(settings, control_role, dead_letters=control_role == "router", status=self.status)

    def policies(self) -> PolicyBook:
        """The settings' tenant policies with the control topic's ``policy:`` and unexpired
        ``priority:`` records applied (the same object until something changes)."""
        if self.control is None:
            return self.settings.policies
        return self.control.policy_book(self.settings.policies)

    def status(self) -> dict[str, Any]:
        """The role's own heartbeat fields (:class:`rtaudit.schemas.control.Heartbeat`); none by default."""
        return {}

    # -- hooks ---------------------------------------------------------------------
    def handle(self, records: list[Message]) -> None:
        """Process one batch of records (errors already filtered out)."""
        raise NotImplementedError

    def commit_offsets(self, partitions: list[int] | None = None) -> list[TopicPartition]:
        """Offsets safe to commit (all outputs of the records before them are produced)."""
        raise NotImplementedError

    def tick(self) -> None:
        """Called after every ``consume`` (at least every ``poll_timeout_s``)."""

    def assigned(self, partitions: list[TopicPartition]) -> None:
        """Partitions were assigned to this member (called inside ``consume``)."""

    def revoked(self, partitions: list[TopicPartition]) -> None:
        """Partitions are leaving this member; their state must be dropped."""

    # -- runtime -------------------------------------------------------------------
    def produce(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> None:
        """Hand one output to the producer (no waiting); a full local queue is drained first. It carries
        the trace context of the current hop (:func:`rtaudit.workers.tracing.current_headers`)."""
        kwargs: dict[str, Any] = {"on_delivery": self.deliveries, "headers": tracing.current_headers()}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                self.producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:
                self.producer.poll(0.05)

    def dead_letter(self, role: str, m: Message, error: AuditError) -> None:
        """Route the bad record ``m`` to ``audit.dlq`` (original bytes, position, reason) and count it."""
        self.produce(DLQ, *dead_letter_output(role, m, error))

    def checkpoint(self, partitions: list[int] | None = None) -> None:
        """Flush the producer, fail on any lost output, then commit (order in the module doc)."""
        remaining = self.producer.flush(30.0)
        if remaining:
            raise DeliveryFailed(f"{remaining} outputs still unacknowledged after 30 s")
        self.deliveries.raise_if_failed()
        offsets = self.commit_offsets(partitions)
        if offsets:
            self.consumer.commit(offsets=offsets, asynchronous=partitions is None)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s assigned %s", self.group_id, [p.partition for p in partitions])
        self.gaps.forget(partitions)
        self.assigned(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s revoked %s", self.group_id, [p.partition for p in partitions])
        try:
            if not self._failed:  # after a failure nothing is committed: the input is consumed again
                self.checkpoint([p.partition for p in partitions])
        finally:
            self.gaps.forget(partitions)
            self.revoked(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.warning("%s lost %s (no commit: another member owns them now)", self.group_id, [p.partition for p in partitions])
        self.gaps.forget(partitions)
        self.revoked(partitions)

    def run(self) -> None:
        """Consume, handle, tick and checkpoint until :meth:`stop`. Raises
        :class:`DeliveryFailed` (and whatever a hook raises): the caller crashes the worker."""
        if self.control is not None:
            self.control.start()
            if not self.control.wait_caught_up(CONTROL_CATCH_UP_S):
                log.warning("%s: audit.control not read to its end within %.0f s; starting with what was applied",
                            self.group_id, CONTROL_CATCH_UP_S)
        self.consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        next_checkpoint = time.monotonic() + self.commit_interval_s
        try:
            while not self._stop.is_set():
                messages = consume_batch(self.consumer, self.batch_size, self.poll_timeout_s, self.gaps)
                records = []
                for m in messages:
                    err = m.error()
                    if err is None:
                        records.append(m)
                    elif err.code() != KafkaError._PARTITION_EOF:
                        log.warning("%s consume error: %s", self.group_id, err)
                if records:
                    self.handle(records)
                self.tick()
                self.producer.poll(0)
                if time.monotonic() >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = time.monotonic() + self.commit_interval_s
            self.checkpoint()
        except BaseException:
            self._failed = True
            raise
        finally:
            self.consumer.close()  # leaves the group (revoke → final checkpoint, unless it failed)
            if self.control is not None:
                self.control.stop()

    def stop(self) -> None:
        """Ask :meth:`run` to finish its batch, checkpoint and leave the group."""
        self._stop.set()


def run_in_faust(app: Any, make_loop: Callable[[], BatchLoop]) -> None:
    """Run the loop ``make_loop()`` builds as a task of the Faust ``app``, in its own thread.
    Faust's shutdown stops it (final checkpoint, group leave); a failure crashes the app."""

    @app.task
    async def _run_batch_loop() -> None:
        loop = asyncio.get_running_loop()
        batch_loop = await loop.run_in_executor(None, make_loop)
        done = loop.run_in_executor(None, batch_loop.run)
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            batch_loop.stop()
            await asyncio.wait({done}, timeout=30)
            raise
        except Exception as exc:
            log.exception("%s batch loop failed; crashing the worker (uncommitted input is consumed again)", batch_loop.group_id)
            await app.crash(exc)
