"""Load machinery of ``rtaudit bench``: an open-loop sender, an arrival reader, and the
naive one-message-at-a-time consumer it is compared against.

All of it talks to the bench's private embedded broker on loopback. Times are
``time.time()`` seconds (epoch), the clock the records' ``*_ms`` fields use.
"""

from __future__ import annotations

import importlib
import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, Producer, TopicPartition

from rtaudit.engine.models import ModelStage
from rtaudit.engine.stage import process_batch
from rtaudit.schemas.codec import decode, decode_scores_record, encode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import ModalityTask, PartialScore, Verdict
from rtaudit.topics.catalog import SCORES, VERDICTS
from rtaudit.tools.bench.stats import Sample
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.settings import Settings
from rtaudit.workers.offsets import OffsetGapGuard
from rtaudit.workers.runtime.intake import consume_batch

log = logging.getLogger(__name__)
Measure = Literal["partial", "verdict"]


def load_stage(role: str, settings: Settings) -> ModelStage:
    """The model stage a worker role serves, built by that worker's own ``stage_factory``
    (``workers/<role>.py``), so the bench measures whatever model the worker runs."""
    module = importlib.import_module(f"rtaudit.workers.{role}")
    return module.stage_factory(settings)


def fetched(consumer: Consumer, stop: threading.Event) -> Iterator[tuple[list[Message], float]]:
    """A bench reader's fetch loop: ``(records, arrival time in epoch s)`` as soon as one record
    is there (``consume(n, timeout)`` alone would wait for n records or the whole timeout:
    measured +25 ms P50 on every latency), until ``stop`` is set; a broker gone at shutdown is
    logged at debug level and read again; records a fetch skipped are read again (:class:`OffsetGapGuard`)."""
    guard = OffsetGapGuard(consumer, "bench")
    while not stop.is_set():
        try:
            msgs = consume_batch(consumer, 1000, 0.05, guard)
        except KafkaException as exc:
            log.debug("bench reader: %s", exc)
            continue
        if msgs:
            yield msgs, time.time()


@dataclass(frozen=True)
class Send:
    """One record of an open-loop load: due at ``due_s``; ``value(due_s)`` builds its bytes."""

    due_s: float
    topic: str
    key: str
    value: Callable[[float], bytes]


def send_open_loop(producer: Producer, sends: Sequence[Send]) -> float:
    """Publish each record at its due time, never waiting for answers (open loop).

    A record whose time has passed goes out at once: a slow broker or a busy CPU
    makes the generator late, never the schedule. Returns how far behind schedule
    the generator fell at worst, ms (latency is measured from the due time anyway).
    Raises ``confluent_kafka.KafkaException`` when the broker does not acknowledge.
    """
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))

    worst = 0.0
    for s in sorted(sends, key=lambda s: s.due_s):
        delay = s.due_s - time.time()
        if delay > 0:
            time.sleep(delay)
        else:
            worst = max(worst, -delay)
        value = s.value(s.due_s)
        while True:
            try:
                producer.produce(s.topic, key=s.key.encode(), value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(30.0) or errors:
        raise KafkaException(f"load generator: {len(errors)} records not acknowledged: {errors[:3]}")
    return worst * 1000.0


@dataclass
class _Expected:
    due_s: float
    measure: Measure
    arrived_s: float | None = None
    status: str | None = None
    batch_sizes: dict[str, int] = field(default_factory=dict)
    queue_ms: dict[str, float] = field(default_factory=dict)


class ArrivalReader:
    """Follows ``audit.scores`` and ``audit.verdicts`` from the beginning (no consumer
    group: nothing committed, no join delay) in a background thread, and records when
    each expected request id was answered: its first partial (``measure="partial"``,
    a worker isolated on its lane) or its verdict (``"verdict"``, the whole fleet).
    Partials also give each item's micro-batch size per stage. Records of ids not
    expected are skipped by key, undecoded.
    """

    def __init__(self, settings: Settings, topics: Sequence[str] = (SCORES, VERDICTS)) -> None:
        self._consumer = Consumer(consumer_config(settings, group_id=f"rtaudit-bench-{uuid.uuid4().hex[:8]}"))
        assignment = []
        for topic in topics:
            md = self._consumer.list_topics(topic, timeout=10)
            count = len(md.topics[topic].partitions) if topic in md.topics else 0
            if not count:
                raise KafkaException(f"topic {topic} has no partitions")
            assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)]
        self._consumer.assign(assignment)
        self._expected: dict[str, _Expected] = {}
        self._open = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-reader", daemon=True)
        self._thread.start()

    def expect(self, due: dict[str, float], measure: Measure) -> None:
        """Start watching ``request_id → due_s`` (call before sending them)."""
        with self._cond:
            for rid, due_s in due.items():
                self._expected[rid] = _Expected(due_s, measure)
            self._open += len(due)

    def wait(self, ids: Iterable[str], timeout_s: float, any_of: bool = False) -> bool:
        """Block until every id in ``ids`` (with ``any_of``: one of them) was answered or
        ``timeout_s`` passed; True if they were."""
        ids = list(ids)
        done = any if any_of else all
        end = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if done(self._expected[i].arrived_s is not None for i in ids):
                    return True
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.2))

    def settle(self, timeout_s: float) -> bool:
        """Wait until every id ever expected was answered (the system under test is idle again)."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while self._open > 0:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.2))
            return True

    def samples(self, ids: Iterable[str]) -> list[Sample]:
        with self._cond:
            out = []
            for i in ids:
                e = self._expected[i]
                out.append(Sample(e.due_s, e.arrived_s, e.status, dict(e.batch_sizes), dict(e.queue_ms)))
            return out

    def _answered(self, e: _Expected, arrived_s: float, status: str) -> None:
        if e.arrived_s is None:
            e.arrived_s, e.status = arrived_s, status
            self._open -= 1

    def _run(self) -> None:
        for msgs, now in fetched(self._consumer, self._stop):
            with self._cond:
                for msg in msgs:
                    if msg.error() or msg.key() is None:
                        continue
                    e = self._expected.get(msg.key().decode("utf-8", "replace"))
                    if e is None:
                        continue
                    try:
                        if msg.topic() == VERDICTS:
                            if e.measure == "verdict":
                                v = decode(msg.value(), Verdict)
                                self._answered(e, now, "ok" if v.complete else "incomplete")
                        else:
                            rec = decode_scores_record(msg.value())
                            if isinstance(rec, PartialScore):
                                if rec.status == "ok":  # an expired item reports the live batch it skipped
                                    e.batch_sizes.setdefault(rec.stage, rec.timings.batch_size)
                                    e.queue_ms.setdefault(rec.stage, rec.timings.queue_ms)
                                if e.measure == "partial":
                                    self._answered(e, now, rec.status)
                    except AuditError:
                        continue
                self._cond.notify_all()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._consumer.close()


def naive_consume(settings: Settings, role: str, topic: str, stop: threading.Event) -> None:
    """The naive consumer the issue compares against (what a user would write first):
    one record at a time — poll, decode, run the model stage on that one item, produce
    its partial, flush the producer, commit that record's offset synchronously.

    Uses the same stage factory and :func:`rtaudit.engine.stage.process_batch` as the worker,
    so only the batching and the commit policy differ; its own consumer group, on
    ``topic``. Undecodable records are skipped (and committed): a reference, not a worker.
    Runs until ``stop`` is set.
    """
    stage = load_stage(role, settings)
    consumer = Consumer(consumer_config(settings, group_id=f"rtaudit-naive-{uuid.uuid4().hex[:8]}"))
    producer = Producer(producer_config(settings))
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            try:
                task = decode(msg.value(), ModalityTask)
            except AuditError:
                consumer.commit(message=msg, asynchronous=False)
                continue
            result = process_batch(stage, [task])
            for partial in result.partials:
                producer.produce(SCORES, key=partial.request_id.encode(), value=encode(partial))
            producer.flush(30.0)
            consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()


def naive_command(role: str, topic: str) -> list[str]:
    """The command line of a naive consumer process (settings come from its environment)."""
    return [sys.executable, "-m", "rtaudit.tools.bench.load", role, topic]


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m rtaudit.tools.bench.load ROLE TOPIC``: run :func:`naive_consume` until SIGTERM/SIGINT."""
    import argparse

    from rtaudit.workers.settings import load_settings

    parser = argparse.ArgumentParser(description="rtaudit bench's naive one-message-at-a-time consumer")
    parser.add_argument("role", choices=("text", "image", "ocr"))
    parser.add_argument("topic")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    naive_consume(load_settings(), args.role, args.topic, stop)


if __name__ == "__main__":
    main()
