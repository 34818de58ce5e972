"""Producer-side client: submit requests to ``audit.requests`` and await their verdicts.

>>> client = AuditClient(load_settings())
>>> client.submit(AuditRequest(request_id="r1", tenant_id="acme", created_at_ms=now_ms(), text="hi"))
>>> verdicts = verdict_reader(load_settings())
>>> verdicts.wait_for({"r1"}, timeout_s=30)
"""

from __future__ import annotations

import base64
import mimetypes
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from engine.clock import now_ms
from schemas.codec import decode, encode
from schemas.errors import AuditError
from pydantic import BaseModel

from schemas.messages import AuditRequest, DLQRecord, MediaItem, Verdict
from topics.catalog import DLQ, REQUESTS, VERDICTS
from workers.kafka import consumer_config, producer_config
from workers.settings import Settings

R = TypeVar("R", bound=BaseModel)
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp"}


class DeliveryError(RuntimeError):
    """The broker did not acknowledge a request (the librdkafka error is in the message)."""


class AuditClient:
    """Publishes requests, keyed by ``request_id``; :meth:`flush` waits for the broker's acks."""

    def __init__(self, settings: Settings) -> None:
        self._producer = Producer(producer_config(settings))
        self._errors: list[str] = []

    def _on_delivery(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            self._errors.append(f"{msg.key()!r}: {err}")

    def submit_raw(self, key: bytes | None, value: bytes) -> None:
        """Publish raw bytes as is (used to send malformed input on purpose)."""
        while True:
            try:
                self._producer.produce(REQUESTS, key=key, value=value, on_delivery=self._on_delivery)
                break
            except BufferError:
                self._producer.poll(0.05)
        self._producer.poll(0)

    def submit(self, request: AuditRequest) -> None:
        self.submit_raw(request.request_id.encode(), encode(request))

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every acknowledgement. Raises :class:`DeliveryError` on failures or timeout."""
        left = self._producer.flush(timeout_s)
        if left or self._errors:
            errors, self._errors = self._errors, []
            raise DeliveryError(f"{left} requests unacknowledged; errors: {errors[:5]}")


def request_from_path(path: Path, tenant_id: str, **fields: object) -> list[AuditRequest]:
    """Requests for a file: ``.jsonl`` → one per line (validated), image → one inline image
    request, anything else → its UTF-8 text. Raises ``AuditError`` for bad lines."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        out = []
        for n, line in enumerate(path.read_bytes().splitlines(), 1):
            if line.strip():
                try:
                    out.append(decode(line, AuditRequest))
                except AuditError as exc:
                    raise type(exc)(f"{path}:{n}: {exc.message}", request_id=exc.request_id) from None
        return out
    rid = f"{path.stem[:40]}-{uuid.uuid4().hex[:12]}"
    common = dict(request_id=rid, tenant_id=tenant_id, created_at_ms=now_ms(), **fields)
    if suffix in IMAGE_SUFFIXES:
        item = MediaItem(
            type="image", data_b64=base64.b64encode(path.read_bytes()).decode("ascii"),
            mime=mimetypes.guess_type(path.name)[0], name=path.name,
        )
        return [AuditRequest(media=[item], **common)]  # type: ignore[arg-type]
    return [AuditRequest(text=path.read_text(encoding="utf-8", errors="replace"), **common)]  # type: ignore[arg-type]


class RecordReader(Generic[R]):
    """Reads a topic from the beginning of every partition (no consumer group, so no join
    delay; nothing committed), decoding each record into ``model``. Records are yielded with
    their arrival time (ms); ``key_of`` names the id :meth:`wait_for` matches on."""

    def __init__(
        self, settings: Settings, topic: str = VERDICTS, model: type[R] = Verdict,  # type: ignore[assignment]
        key_of: Callable[[R], str | None] = lambda r: getattr(r, "request_id", None),
    ) -> None:
        self.topic, self.model, self.key_of = topic, model, key_of
        self._consumer = Consumer(consumer_config(settings, group_id=f"rtaudit-reader-{uuid.uuid4().hex[:8]}"))
        md = self._consumer.list_topics(topic, timeout=10)
        count = len(md.topics[topic].partitions) if topic in md.topics else 0
        if not count:
            raise KafkaException(f"topic {topic} has no partitions: run `rtaudit topics create`")
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)])

    def stream(self, timeout_s: float | None = None, idle_s: float = 0.5) -> Iterator[tuple[R, int]]:
        """Yield ``(record, arrived_at_ms)`` until ``timeout_s`` passes (``None``: forever).
        Records that do not decode are skipped."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        while end is None or time.monotonic() < end:
            msg = self._consumer.poll(idle_s)
            if msg is None or msg.error():
                continue
            try:
                yield decode(msg.value(), self.model), now_ms()
            except AuditError:
                continue

    def wait_for(
        self, ids: Iterable[str], timeout_s: float, on_record: Callable[[R, int], None] | None = None,
    ) -> dict[str, tuple[R, int]]:
        """Collect the first record of each id until all arrived or ``timeout_s`` passed.
        Returns ``{id: (record, arrived_at_ms)}`` for those that arrived; ``on_record`` is
        called for each as it arrives."""
        wanted = set(ids)
        got: dict[str, tuple[R, int]] = {}
        if not wanted:
            return got
        for record, arrived in self.stream(timeout_s):
            key = self.key_of(record)
            if key in wanted and key not in got:
                got[key] = (record, arrived)
                if on_record is not None:
                    on_record(record, arrived)
                if len(got) == len(wanted):
                    break
        return got

    def close(self) -> None:
        self._consumer.close()


def verdict_reader(settings: Settings) -> RecordReader[Verdict]:
    """Reader of ``audit.verdicts`` keyed by request id."""
    return RecordReader(settings, VERDICTS, Verdict)


def dlq_reader(settings: Settings) -> RecordReader[DLQRecord]:
    """Reader of ``audit.dlq`` keyed by the request id, else the source record's key."""
    return RecordReader(settings, DLQ, DLQRecord, key_of=lambda r: r.request_id or r.source_key)
