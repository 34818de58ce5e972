"""What the overhead bench (:mod:`rtaudit.tools.bench.overhead`) sends and reads: the input
records of each target, an output reader that only looks at record keys, and the raw
confluent-kafka client rates on the same records (the physical limit).

Targets and their contracts (the bench only talks to topics, so it measures whatever
the worker is — Faust agents or a batched confluent-kafka loop):

============  ===========================================  ==============================================
target        input (key: request id)                      done when the key was seen on
============  ===========================================  ==============================================
``router``    AuditRequest (text) on ``audit.requests``    ``audit.text.{hi,lo}`` (task) and ``audit.scores`` (manifest)
``text``      ModalityTask on ``audit.text.lo``            ``audit.scores`` (partial)
``fusion``    Manifest + PartialScore on ``audit.scores``  ``audit.verdicts``
``fleet``     AuditRequest (text) on ``audit.requests``    ``audit.verdicts`` (router → text → fusion)
============  ===========================================  ==============================================

Times are ``time.time()`` seconds, the clock of the records' ``*_ms`` fields.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from rtaudit.engine.models.null import NULL_SCORES
from rtaudit.schemas.codec import encode
from rtaudit.schemas.messages import AuditRequest, Manifest, ModalityTask, ModelRef, PartialScore, Timings
from rtaudit.topics.catalog import LANES, REQUESTS, SCORES, VERDICTS, lane_topic
from rtaudit.tools.bench.inputs import TENANT
from rtaudit.workers.kafka import consumer_config
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
TARGETS = ("router", "text", "fusion", "fleet")
#: worker roles each target runs (one process each).
ROLES = {"router": ("router",), "text": ("text",), "fusion": ("fusion",), "fleet": ("router", "text", "fusion")}
#: the part every bench request has: one text.
PART, EXPECTED = "text:0", "text/text:0"

#: one record to produce: ``(topic, value built at the record's due time, s)``.
Record = tuple[str, Callable[[float], bytes]]


def input_topic(target: str) -> str:
    return {"router": REQUESTS, "text": lane_topic("text", "lo"), "fusion": SCORES, "fleet": REQUESTS}[target]


def output_labels(target: str) -> tuple[dict[str, str], frozenset[str]]:
    """``(topic → label, labels a key needs)``: a request is done when its key was seen
    under every required label (the router: a task on a text lane *and* a manifest)."""
    if target == "router":
        return {**{lane_topic("text", lane): "task" for lane in LANES}, SCORES: "manifest"}, frozenset({"task", "manifest"})
    if target == "text":
        return {SCORES: "partial"}, frozenset({"partial"})
    return {VERDICTS: "verdict"}, frozenset({"verdict"})


def records(target: str, text: str, rid: str, slo_ms: int) -> list[Record]:
    """The input records of one request of ``target`` (fusion: its manifest, then its partial)."""

    def request(due_s: float) -> bytes:
        return encode(AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=int(due_s * 1000), slo_ms=slo_ms, text=text))

    def task(due_s: float) -> bytes:
        t = int(due_s * 1000)
        return encode(ModalityTask(
            request_id=rid, tenant_id=TENANT, part=PART, modality="text", lane="lo",
            created_at_ms=t, deadline_ms=t + slo_ms, routed_at_ms=t, text=text,
        ))

    def manifest(due_s: float) -> bytes:
        t = int(due_s * 1000)
        return encode(Manifest(request_id=rid, tenant_id=TENANT, created_at_ms=t, deadline_ms=t + slo_ms, lane="lo", expected=[EXPECTED]))

    def partial(due_s: float) -> bytes:
        t = int(due_s * 1000)
        return encode(PartialScore(
            request_id=rid, tenant_id=TENANT, part=PART, stage="text", model=ModelRef(name="null", version="1"),
            status="ok", scores=dict(NULL_SCORES), timings=Timings(queue_ms=0.0, inference_ms=0.0, batch_size=1),
            deadline_ms=t + slo_ms, produced_at_ms=t,
        ))

    if target in ("router", "fleet"):
        return [(REQUESTS, request)]
    if target == "text":
        return [(input_topic("text"), task)]
    if target == "fusion":
        return [(SCORES, manifest), (SCORES, partial)]
    raise ValueError(f"unknown target {target!r}: one of {', '.join(TARGETS)}")


def produce_all(producer: Producer, batch: Iterable[tuple[str, bytes, bytes]], timeout_s: float = 60.0) -> None:
    """Hand every ``(topic, key, value)`` to the producer without waiting for each
    delivery, then flush once. Raises ``KafkaException`` when any is not acknowledged."""
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))

    for topic, key, value in batch:
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(timeout_s) or errors:
        raise KafkaException(f"bench producer: {len(errors)} records not acknowledged: {errors[:3]}")


def assign_from_beginning(consumer: Consumer, topics: Sequence[str]) -> None:
    """Assign every partition of ``topics`` at the beginning (no group join, nothing committed).
    Raises ``KafkaException`` when a topic has no partitions."""
    assignment = []
    for topic in topics:
        md = consumer.list_topics(topic, timeout=10)
        count = len(md.topics[topic].partitions) if topic in md.topics else 0
        if not count:
            raise KafkaException(f"topic {topic} has no partitions")
        assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)]
    consumer.assign(assignment)


# ---------------------------------------------------------------- raw client


@dataclass(frozen=True)
class RawRates:
    """confluent-kafka alone on the same records and broker: produce (all handed over,
    then one flush) and consume (a fresh consumer from the beginning until all are read,
    timed from the first record: connecting and the first fetch are not counted)."""

    records: int
    mean_bytes: float
    produce_per_s: float
    consume_per_s: float


def raw_rates(settings: Settings, producer: Producer, topic: str, batch: Sequence[tuple[str, bytes, bytes]], timeout_s: float = 60.0) -> RawRates:
    """Produce ``batch`` to ``topic`` (its own, empty topic) then consume it back, records/s each."""
    started = time.perf_counter()
    produce_all(producer, ((topic, k, v) for _, k, v in batch), timeout_s)
    produce_s = time.perf_counter() - started
    consumer = Consumer(consumer_config(settings, f"rtaudit-bench-raw-{uuid.uuid4().hex[:8]}"))
    try:
        assign_from_beginning(consumer, [topic])
        end = time.monotonic() + timeout_s
        first = None
        while first is None and time.monotonic() < end:  # connection, metadata and the first fetch: not timed
            msg = consumer.poll(0.1)
            first = msg if msg is not None and not msg.error() else None
        n, started = (1 if first is not None else 0), time.perf_counter()
        while 0 < n < len(batch) and time.monotonic() < end:
            n += sum(1 for m in consumer.consume(num_messages=10_000, timeout=0.1) if not m.error())
        consume_s = time.perf_counter() - started
    finally:
        consumer.close()
    if n < len(batch):
        raise KafkaException(f"raw consume read {n} of {len(batch)} records of {topic} in {timeout_s} s")
    mean = sum(len(v) for _, _, v in batch) / max(1, len(batch))
    return RawRates(len(batch), mean, len(batch) / produce_s, (n - 1) / consume_s)


# ---------------------------------------------------------------- output reader


class OutputReader:
    """Follows ``topics`` from the beginning in a background thread (no consumer group)
    and records, per expected key, when it was seen under every required label
    (:func:`output_labels`). Looks at keys only: it never decodes a value, so it costs
    little next to the workers it measures. Keys not expected are skipped."""

    def __init__(self, settings: Settings, labels: dict[str, str], required: frozenset[str]) -> None:
        self._labels, self._required = labels, required
        self._consumer = Consumer(consumer_config(settings, f"rtaudit-bench-out-{uuid.uuid4().hex[:8]}"))
        assign_from_beginning(self._consumer, list(labels))
        self._seen: dict[bytes, set[str]] = {}
        self._done: dict[bytes, float] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-outputs", daemon=True)
        self._thread.start()

    def expect(self, keys: Iterable[str]) -> None:
        """Start watching these request ids (call before sending them)."""
        with self._cond:
            for k in keys:
                self._seen.setdefault(k.encode(), set())

    def wait(self, keys: Sequence[str], timeout_s: float, any_of: bool = False) -> bool:
        """Block until every key (with ``any_of``: one) is done or ``timeout_s`` passed; True if so."""
        wanted = [k.encode() for k in keys]
        done = any if any_of else all
        end = time.monotonic() + timeout_s
        with self._cond:
            while not done(k in self._done for k in wanted):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.2))
            return True

    def done_at(self, keys: Sequence[str]) -> list[float | None]:
        """When each key was done (``time.time()`` s), ``None`` if not yet."""
        with self._cond:
            return [self._done.get(k.encode()) for k in keys]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                first = self._consumer.poll(0.05)  # returns as soon as one record is there
                if first is None:
                    continue
                now = time.time()
                msgs = [first, *self._consumer.consume(num_messages=10_000, timeout=0)]
            except KafkaException as exc:  # the broker goes first at shutdown
                log.debug("bench output reader: %s", exc)
                continue
            with self._cond:
                for msg in msgs:
                    key = msg.key()
                    seen = self._seen.get(key) if key is not None and not msg.error() else None
                    if seen is None or key in self._done:
                        continue
                    seen.add(self._labels[msg.topic()])
                    if seen >= self._required:
                        self._done[key] = now
                self._cond.notify_all()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._consumer.close()
