"""A confluent-kafka producer that recovers from what librdkafka cannot: :class:`RecoveringProducer`.

The fleet's producers are idempotent (``enable.idempotence``). When the broker restarts and
loses its producer state (the embedded broker keeps everything in memory; an Apache Kafka
broker whose producer-state snapshots are gone does the same), librdkafka's idempotent producer
either raises a *fatal* error (``UNKNOWN_PRODUCER_ID`` / ``OUT_OF_ORDER_SEQUENCE_NUMBER`` with
in-flight messages: "unable to retry without risking duplication") after which the instance
never produces again, or bumps its epoch forever, each new epoch refused again, and delivers
nothing until ``message.timeout.ms`` fails every message (measured on tansu, confluent-kafka
2.16: 20 records delivered before a broker restart, 0 of 40 in the 80 s after; librdkafka debug
``eos``: ``UNKPID ... resetting PID`` then ``bumped epoch`` in a loop). A new producer instance
delivers at once.

So the wrapper keeps every record handed to it until its delivery report, and when the instance
reports a fatal error (``error_cb`` or a delivery error with ``fatal()``), or when records are
waiting and no delivery report at all came for ``stall_s`` seconds (reports queued but not yet
served by a ``poll`` count as having come), it purges and drops the
instance, creates a new one from the same configuration and produces every unacknowledged
record again, in the order they were first handed over. Delivery reports of a dropped
instance are ignored. A record may therefore reach the topic twice (it was written but its
acknowledgement was lost): at-least-once, as everywhere in the fleet (request ids deduplicate
downstream). Non-fatal delivery failures (a record too large, ``message.timeout.ms``) are
passed to the record's callback as before.

The outage is reported in one WARNING line once the first delivery succeeds again (how long,
why, how many instances were created, how many records resent); nothing is logged per retry.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

log = logging.getLogger(__name__)
#: seconds without any delivery report, while records wait, after which the producer is recreated.
PRODUCER_STALL_S = 10.0
#: seconds a dropped instance gets to close (purged first, so it has nothing to send).
CLOSE_OLD_S = 5.0
#: delivery error codes that mean "this instance is gone", not "this record is bad": besides fatal and purged,
#: the broker no longer knows this instance's producer id or epoch (a restarted memory-only broker hands ids
#: out from 1 again, so a long-running instance's id may now be another producer's: measured on tansu,
#: ``PRODUCER_FENCED`` on every record, non-fatal, for minutes). A new instance gets a fresh id.
_INSTANCE_GONE = frozenset({
    KafkaError._FATAL, KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT, KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH, KafkaError.UNKNOWN_PRODUCER_ID, KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
    KafkaError.INVALID_PRODUCER_ID_MAPPING,
})

DeliveryCallback = Callable[[KafkaError | None, Message], None]


@dataclass(slots=True)
class _Record:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: Any
    on_delivery: DeliveryCallback | None


class RecoveringProducer:
    """A ``confluent_kafka.Producer`` that recreates itself after a fatal error or a stall and
    produces again what was not acknowledged (see the module doc). Thread-safe like the
    producer it wraps: ``produce``, ``poll`` and ``flush`` may run on different threads.

    Args:
        config: the librdkafka configuration (an ``error_cb`` in it is still called).
        name: label of the log line (e.g. the role).
        stall_s: seconds without a delivery report, while records wait, that count as a stall.
        factory: builds an instance from a configuration (``confluent_kafka.Producer``).
    """

    def __init__(self, config: dict[str, Any], name: str = "producer", stall_s: float = PRODUCER_STALL_S,
                 factory: Callable[[dict[str, Any]], Any] = Producer) -> None:
        self.name, self.stall_s, self._factory = name, stall_s, factory
        self._user_error_cb = config.get("error_cb")
        self._config = {**config, "error_cb": self._on_error}
        self._lock = threading.RLock()
        #: unacknowledged records by sequence number, in the order they were first produced.
        self._pending: dict[int, _Record] = {}
        self._seq = 0
        self._generation = 0
        self._fatal: str | None = None
        self._last_progress = time.monotonic()
        #: the current outage: (start, monotonic s; its first reason; instances created; records resent).
        self._outage: tuple[float, str, int, int] | None = None
        #: instances created after the first (fatal errors and stalls survived), since start.
        self.recreated = 0
        self._producer = factory(self._config)

    # -- the Producer interface the fleet uses --------------------------------------------
    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int | None = None,
                on_delivery: DeliveryCallback | None = None, headers: Any = None) -> None:
        """As ``Producer.produce`` (raises ``BufferError`` when the local queue is full; the
        record is then not kept)."""
        record = _Record(topic, value, key, partition, headers, on_delivery)
        with self._lock:
            self._check()
            if not self._pending:
                self._last_progress = time.monotonic()  # an idle producer is not a stalled one
            seq = self._seq
            self._seq += 1
            self._pending[seq] = record
            try:
                self._send(seq, record)
            except BufferError:
                del self._pending[seq]
                raise

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery reports for up to ``timeout`` seconds (``Producer.poll``), then recover if needed."""
        producer = self._producer
        try:
            n = int(producer.poll(timeout))
        except KafkaException as exc:  # a fatal error raised through poll
            self._note_fatal(exc.args[0] if exc.args else exc)
            n = 0
        with self._lock:
            self._check()
        return n

    def flush(self, timeout: float = -1.0) -> int:
        """Wait until every record handed over so far is acknowledged (recovering meanwhile) or
        ``timeout`` seconds passed (negative: no limit). Returns how many still wait."""
        end = None if timeout < 0 else time.monotonic() + timeout
        while True:
            with self._lock:
                self._check()
                left = len(self._pending)
            if not left:
                return 0
            wait = 1.0 if end is None else min(1.0, end - time.monotonic())
            if wait <= 0:
                return left
            producer = self._producer
            try:
                producer.flush(wait)
            except KafkaException as exc:
                self._note_fatal(exc.args[0] if exc.args else exc)

    def __len__(self) -> int:
        """Records handed over and not yet acknowledged."""
        return len(self._pending)

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        return self._producer.list_topics(*args, **kwargs)

    # -- recovery ---------------------------------------------------------------------------
    def _send(self, seq: int, record: _Record) -> None:
        kwargs: dict[str, Any] = {"on_delivery": functools.partial(self._delivered, self._generation, seq)}
        if record.partition is not None:
            kwargs["partition"] = record.partition
        if record.headers is not None:
            kwargs["headers"] = record.headers
        try:
            self._producer.produce(record.topic, record.value, record.key, **kwargs)
        except KafkaException as exc:  # a fatal instance refuses every produce: the record stays
            self._note_fatal(exc.args[0] if exc.args else exc)  # pending; the next check recreates

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._note_fatal(err)
        if self._user_error_cb is not None:
            self._user_error_cb(err)

    def _note_fatal(self, err: Any) -> None:
        text = err.str() if isinstance(err, KafkaError) else str(err)
        with self._lock:
            self._fatal = self._fatal or f"fatal error: {text}"

    def _delivered(self, generation: int, seq: int, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            if generation != self._generation:
                return  # a dropped instance's report: the record was produced again
            if err is not None and (err.fatal() or err.code() in _INSTANCE_GONE):
                self._fatal = self._fatal or f"fatal error: {err.str()}"
                return  # kept: produced again by the next instance
            record = self._pending.pop(seq, None)
            self._last_progress = time.monotonic()
            if err is None and self._outage is not None:
                self._report_recovery()
        if record is not None and record.on_delivery is not None:
            record.on_delivery(err, msg)

    def _check(self) -> None:
        """Under the lock: recreate the instance after a fatal error, or a stall of ``stall_s``."""
        if self._fatal is None and self._pending and time.monotonic() - self._last_progress > self.stall_s:
            # reports librdkafka holds unserved (the caller did not poll meanwhile) are progress, not a stall
            try:
                self._producer.poll(0)
            except KafkaException as exc:
                self._note_fatal(exc.args[0] if exc.args else exc)
            if self._fatal is None and self._pending and time.monotonic() - self._last_progress > self.stall_s:
                self._fatal = f"no delivery report for {self.stall_s:g} s with {len(self._pending)} records waiting"
        if self._fatal is not None:
            self._recreate()

    def _recreate(self) -> None:
        reason, self._fatal = self._fatal or "unknown", None
        now = time.monotonic()
        if self._outage is None:
            self._outage = (now, reason, 0, 0)
        start, first_reason, instances, resent = self._outage
        old = self._producer
        self._generation += 1
        try:
            old.purge(True, True, False)
        except (KafkaException, RuntimeError) as exc:
            log.debug("%s: purge of the dropped producer failed: %s", self.name, exc)
        threading.Thread(target=_close, args=(old,), name=f"{self.name}-close-producer", daemon=True).start()
        self._producer = self._factory(self._config)
        self.recreated += 1
        self._last_progress = now
        log.debug("%s: producer recreated (%s); producing %s records again", self.name, reason, len(self._pending))
        for seq, record in list(self._pending.items()):
            while True:
                try:
                    self._send(seq, record)
                    break
                except BufferError:
                    self._producer.poll(0.05)
        self._outage = (start, first_reason, instances + 1, resent + len(self._pending))

    def _report_recovery(self) -> None:
        assert self._outage is not None
        start, reason, instances, resent = self._outage
        self._outage = None
        log.warning("%s: producer delivering again after %.1f s (%s); %s new instance%s, %s records produced again",
                    self.name, time.monotonic() - start, reason, instances, "" if instances == 1 else "s", resent)


def _close(producer: Any) -> None:
    """Let a dropped (purged) instance finish and release it (a daemon thread: never blocks the caller)."""
    try:
        producer.flush(CLOSE_OLD_S)
    except KafkaException:
        pass
