"""The control plane's Kafka side: every process's reader of ``audit.control``, heartbeats on
``audit.status``, and the publishing used by the CLI and by workers' automatic rollbacks.

Reader
    :class:`ControlPlane` runs one thread per process. It *assigns* itself partition 0 of
    ``audit.control`` from the first offset (no consumer group, nothing committed: every replica
    reads every record, after a restart too) and applies each record to an
    :class:`rtaudit.engine.control.ControlState`. Listeners are called from that thread after each
    applied batch. A rejected record is logged, counted, shown in the heartbeat and, in the one
    process per fleet that has ``dead_letters`` set (the router), written to ``audit.dlq``;
    nothing in a record can stop the thread. The same thread sends the process's
    :class:`rtaudit.schemas.control.Heartbeat` to ``audit.status`` every ``heartbeat_s`` seconds.

Publishing
    :func:`publish` reads the topic to its end, takes the subject's version in force, produces
    ``version = last + 1, expects = in force`` (or the caller's ``expects``), then reads the
    topic again until its own record was applied, and reports whether it was accepted:
    :class:`ControlConflict` (with the version in force) when another writer won. Workers'
    own rollbacks and promotions use the same compare-and-swap, so two replicas deciding the
    same rollback at once produce one accepted record and one ``cas_conflict``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.engine.control import Applied, ControlState, Rejected, encode
from rtaudit.engine.policy import PolicyBook
from rtaudit.schemas.control import HEARTBEAT_S, BundleRef, ControlMessage, Heartbeat, ModelPayload, ServingStatus
from rtaudit.schemas.errors import ControlRejected
from rtaudit.topics.catalog import CONTROL, DLQ, STATUS
from rtaudit.workers import metrics
from rtaudit.workers.app import dead_letter_record
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.offsets import OffsetGapGuard
from rtaudit.workers.producer import RecoveringProducer
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)

#: how long one poll of the control partition waits, s (also the listeners' worst-case delay).
POLL_S = 0.2
#: longest fetch wait of a control reader on an idle partition, ms: a record is applied within
#: about this plus :data:`POLL_S` (the fleet promises 1 s).
FETCH_WAIT_MS = 200

Listener = Callable[[ControlState, list[Applied]], None]


def worker_id(role: str) -> str:
    """``<role>-<host>-<pid>``: one process of the fleet."""
    return f"{role}-{socket.gethostname()}-{os.getpid()}"


def reader_consumer(settings: Settings) -> Consumer:
    """A consumer assigned ``audit.control`` partition 0 from its first offset; its group id is
    unique and never joined (``assign``, no ``subscribe``; nothing is committed). Its fetches
    wait up to :data:`FETCH_WAIT_MS` on an idle topic (the local profile's 10 ms fetch wait
    would send every process's idle reader to the broker 100 times a second)."""
    consumer = Consumer(consumer_config(settings, f"rtaudit-control-reader-{uuid.uuid4().hex[:12]}", None,
                                        **{"fetch.wait.max.ms": FETCH_WAIT_MS}))
    consumer.assign([TopicPartition(CONTROL, 0, OFFSET_BEGINNING)])
    return consumer


def apply_records(state: ControlState, records: list[Any]) -> tuple[list[Applied], list[tuple[Any, Rejected]]]:
    """Apply confluent ``Message`` s in order; ``(applied, [(message, rejection)])``. Fetch errors are skipped."""
    applied, rejected = [], []
    for m in records:
        if m.error() is not None:
            log.warning("control reader: %s", m.error())
            continue
        result = state.apply(m.offset(), m.key(), m.value())
        if isinstance(result, Rejected):
            rejected.append((m, result))
        else:
            applied.append(result)
    return applied, rejected


def read_to_end(consumer: Consumer, state: ControlState, timeout_s: float = 10.0,
                guard: OffsetGapGuard | None = None) -> ControlState:
    """Apply records until the partition's high watermark (as seen while fetching: tansu's
    ListOffsets answer is unreliable, docs/broker.md) is reached; records a fetch skipped are
    read again (``guard``, :class:`rtaudit.workers.offsets.OffsetGapGuard`). Raises ``TimeoutError``."""
    deadline = time.monotonic() + timeout_s
    tp = TopicPartition(CONTROL, 0)
    guard = guard or OffsetGapGuard(consumer, "control")
    while time.monotonic() < deadline:
        apply_records(state, guard.filter(consumer.consume(500, POLL_S)))
        _, high = consumer.get_watermark_offsets(tp, cached=True)
        if high >= 0 and state.offset >= high:
            return state
    raise TimeoutError(f"could not read {CONTROL} to its end within {timeout_s} s "
                       f"(applied up to offset {state.offset}) from {consumer}")


class ControlConflict(RuntimeError):
    """A published message was rejected: ``code`` (``cas_conflict`` | ``stale`` | ``malformed``)
    and the subject's version ``in_force`` when it was applied."""

    def __init__(self, message: str, code: str, in_force: int | None) -> None:
        super().__init__(message)
        self.code, self.in_force = code, in_force


def read_state(settings: Settings, timeout_s: float = 10.0) -> ControlState:
    """The control state as of the topic's end now (a fresh reader)."""
    consumer = reader_consumer(settings)
    try:
        return read_to_end(consumer, ControlState(), timeout_s)
    finally:
        consumer.close()


def publish(settings: Settings, subject: str, payload: Any, *, author: str, reason: str | None = None,
            expects: int | None = None, timeout_s: float = 10.0) -> ControlMessage:
    """Publish ``payload`` for ``subject`` with compare-and-swap and wait until it is applied.

    Args:
        expects: the version the caller saw in force; ``None``: whatever is in force now.
    Returns:
        the accepted :class:`ControlMessage`.
    Raises:
        ControlConflict: the message was rejected (another writer changed the subject first).
        TimeoutError: the topic could not be read within ``timeout_s``.
    """
    consumer = reader_consumer(settings)
    guard = OffsetGapGuard(consumer, "control")
    producer = RecoveringProducer(producer_config(settings), name="control-publish")
    try:
        state = read_to_end(consumer, ControlState(), timeout_s, guard)
        in_force = state.version(subject)
        version = max(state.versions.get(subject, 0), in_force) + 1
        msg = ControlMessage(subject=subject, version=version, expects=in_force if expects is None else expects,
                             author=author, at_ms=now_ms(), reason=reason, payload=payload)
        why = state.check(msg)
        if why is not None:
            raise ControlConflict(why[1], why[0], in_force)
        key, value = encode(msg)
        producer.produce(CONTROL, value=value, key=key, partition=0)
        if producer.flush(timeout_s) != 0:
            raise TimeoutError(f"the {subject} record was not acknowledged within {timeout_s} s")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            applied, rejected = apply_records(state, guard.filter(consumer.consume(500, POLL_S)))
            for a in applied:
                if a.message == msg:
                    return msg
            for _, r in rejected:
                if r.subject == subject and r.message and f"version {version}" in r.message:
                    raise ControlConflict(r.message, r.code, r.in_force)
        raise TimeoutError(f"the {subject} record was not read back within {timeout_s} s")
    finally:
        consumer.close()


def announce_model(settings: Settings, ref: BundleRef, author: str, reason: str | None = None) -> ControlMessage:
    """Make ``ref`` the stage's model in force at once (``model:<stage>``, no canary: a rollout
    goes through ``rollout:<stage>`` instead). Raises :class:`ControlConflict`, ``TimeoutError``."""
    return publish(settings, f"model:{ref.stage}", ModelPayload(bundle=ref), author=author,
                   reason=reason or f"publish {ref.version}")


class ControlPlane:
    """One process's control reader and heartbeat sender (a daemon thread; see the module doc).

    Args:
        settings: bootstrap and client settings.
        role: the process's role, for the heartbeat and DLQ records.
        dead_letters: write rejected control records to ``audit.dlq`` (one process per fleet: the router).
        status: called every heartbeat for the role's own fields (``serving``, ``lag``, ``health``,
            ``detail``) as a dict; ``None``: only the control fields.
    """

    def __init__(self, settings: Settings, role: str, *, dead_letters: bool = False,
                 status: Callable[[], dict[str, Any]] | None = None, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.settings, self.role, self.dead_letters = settings, role, dead_letters
        self.worker_id = worker_id(role)
        self.state = ControlState()
        self.lock = threading.Lock()
        #: incremented after every applied batch that changed something (readers compare it).
        self.generation = 0
        self.caught_up = threading.Event()
        self._listeners: list[Listener] = []
        self._status = status
        self._heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: RecoveringProducer | None = None
        self._policy_cache: tuple[int, int | None, PolicyBook, PolicyBook] | None = None

    def listen(self, listener: Listener) -> None:
        """Call ``listener(state, applied)`` from the reader thread after each applied batch (and
        once at catch-up with everything applied so far). It must be quick and thread-safe."""
        self._listeners.append(listener)

    def start(self) -> "ControlPlane":
        self._producer = RecoveringProducer(producer_config(self.settings), name=f"control-{self.role}")
        self._thread = threading.Thread(target=self._run, name=f"control-{self.role}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._producer is not None:
            self._producer.flush(2.0)

    def wait_caught_up(self, timeout_s: float) -> bool:
        """True once the reader reached the topic's end as it was at start."""
        return self.caught_up.wait(timeout_s)

    def policy_book(self, base: PolicyBook) -> PolicyBook:
        """``base`` with the control topic's policies and unexpired priorities (cached until the
        next change or expiry; :meth:`rtaudit.engine.control.ControlState.policy_book`)."""
        now = now_ms()
        cache = self._policy_cache
        if cache is not None and cache[0] == self.generation and cache[2] is base and (cache[1] is None or now < cache[1]):
            return cache[3]
        with self.lock:
            generation, book, expiry = self.generation, self.state.policy_book(base, now), self.state.next_expiry_ms(now)
        self._policy_cache = (generation, expiry, base, book)
        return book

    # ------------------------------------------------------------------ thread

    def _run(self) -> None:
        consumer: Consumer | None = None
        guard: OffsetGapGuard | None = None
        next_beat = 0.0
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = reader_consumer(self.settings)
                    guard = OffsetGapGuard(consumer, f"control-{self.role}")
                assert guard is not None
                self._poll(consumer, guard)
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + self._heartbeat_s
                    self._heartbeat()
            except Exception:  # the control thread must outlive any record or broker hiccup
                log.exception("control reader of %s failed; reading on", self.worker_id)
                time.sleep(1.0)
        if consumer is not None:
            consumer.close()

    def _poll(self, consumer: Consumer, guard: OffsetGapGuard) -> None:
        records = guard.filter(consumer.consume(500, POLL_S))
        with self.lock:
            applied, rejected = apply_records(self.state, records)
            if applied:
                self.generation += 1
        for m, r in rejected:
            self._rejected(m, r)
        if not self.caught_up.is_set():
            _, high = consumer.get_watermark_offsets(TopicPartition(CONTROL, 0), cached=True)
            if high >= 0 and self.state.offset >= high:
                self.caught_up.set()
                log.info("%s applied %s up to offset %d (%d subjects)", self.worker_id, CONTROL,
                         self.state.offset, len(self.state.messages))
                applied = applied or [Applied(self.state.offset - 1, s, m) for s, m in self.state.messages.items()]
        if applied and self.caught_up.is_set():
            for listener in self._listeners:
                try:
                    listener(self.state, applied)
                except Exception:
                    log.exception("control listener %s failed", listener)

    def _rejected(self, m: Any, r: Rejected) -> None:
        log.warning("%s rejected %s offset %d: %s (%s)", self.worker_id, CONTROL, r.offset, r.code, r.message)
        metrics.CONTROL_REJECTED.labels(self.role, r.code).inc()
        if self.dead_letters and self._producer is not None:
            error = ControlRejected(f"{r.code}: {r.message}")
            record = dead_letter_record(m.value() or b"", m.topic(), m.partition(), m.offset(), m.key(),
                                        self.role, error, now_ms())
            self._producer.produce(DLQ, value=record.model_dump_json().encode(), key=m.key())

    def heartbeat(self) -> Heartbeat:
        """This process's heartbeat now."""
        extra = self._status() if self._status is not None else {}
        with self.lock:
            last = self.state.rejections[-1] if self.state.rejections else None
            beat: dict[str, Any] = {
                "worker_id": self.worker_id, "role": self.role, "at_ms": now_ms(),
                "control_offset": self.state.offset, "versions": dict(self.state.versions),
                "rejected": self.state.rejected_total,
                "metrics": f"{self.settings.metrics_host}:{self.settings.metrics_port}" if self.settings.metrics_port else None,
                "detail": f"last rejected offset {last.offset}: {last.code}: {last.message}"[:2000] if last else None,
            }
        beat.update(extra)
        beat["serving"] = [s if isinstance(s, ServingStatus) else ServingStatus(**s) for s in beat.get("serving", [])]
        return Heartbeat(**beat)

    def _heartbeat(self) -> None:
        if self._producer is None:
            return
        self._producer.produce(STATUS, value=self.heartbeat().model_dump_json().encode(), key=self.worker_id.encode())
        self._producer.poll(0)
