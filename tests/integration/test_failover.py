"""A fusion worker killed with SIGKILL while requests are in flight loses nothing and
repeats nothing: its replacement reads back the verdicts already produced, replays
``audit.scores`` from the oldest undecided request, and every request gets exactly one
verdict record on ``audit.verdicts`` (counted with a raw consumer, no client dedup)."""

from __future__ import annotations

import base64
import io
import uuid
import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from PIL import Image, ImageDraw

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.codec import decode
from rtaudit.schemas.messages import AuditRequest, MediaItem, Verdict
from rtaudit.topics.catalog import VERDICTS
from rtaudit.workers.client import AuditClient
from rtaudit.workers.kafka import consumer_config

from .conftest import TENANT

pytestmark = pytest.mark.integration


def text_image(text: str) -> str:
    img = Image.new("RGB", (480, 80), "white")
    ImageDraw.Draw(img).text((10, 30), text, fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def raw_verdicts(settings, prefix: str) -> dict[str, list[Verdict]]:  # type: ignore[no-untyped-def]
    """Every verdict record on ``audit.verdicts`` whose key starts with ``prefix``, by key,
    read whole with a raw consumer (no deduplication)."""
    consumer = Consumer(consumer_config(settings, f"raw-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True}))
    parts = consumer.list_topics(VERDICTS, timeout=10).topics[VERDICTS].partitions
    consumer.assign([TopicPartition(VERDICTS, p, 0) for p in parts])
    out: dict[str, list[Verdict]] = defaultdict(list)
    at_end: set[int] = set()
    try:
        while len(at_end) < len(parts):
            m = consumer.poll(10)
            assert m is not None, "audit.verdicts did not reach its end in 10 s"
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                continue
            key = (m.key() or b"").decode()
            if key.startswith(prefix):
                out[key].append(decode(m.value(), Verdict))
    finally:
        consumer.close()
    return out


def test_fusion_killed_mid_stream_loses_no_verdict_and_repeats_none(fleet) -> None:  # type: ignore[no-untyped-def]
    fl, settings = fleet
    run = f"failover-{uuid.uuid4().hex[:8]}"
    # image requests keep fusion waiting on the slow OCR stage, so state is pending when it dies;
    # text-only requests are decided quickly, before and after the kill
    requests = [
        AuditRequest(
            request_id=f"{run}-{i:02d}", tenant_id=TENANT, created_at_ms=now_ms(), text=f"message number {i}",
            media=[MediaItem(type="image", data_b64=text_image(f"caption {i}"))] if i % 3 == 0 else [],
        )
        for i in range(30)
    ]
    expected = {r.request_id for r in requests}
    client = AuditClient(settings)
    for r in requests[:15]:
        client.submit(r)
    client.flush()
    deadline = time.monotonic() + 120
    while len(raw_verdicts(settings, run)) < 3:  # some decided, the image ones still pending
        assert time.monotonic() < deadline, "no verdict within 120 s"
        time.sleep(0.5)
    fl.kill("fusion")
    for r in requests[15:]:
        client.submit(r)
    client.flush()
    fl.spawn("fusion")
    deadline = time.monotonic() + 180
    while set(got := raw_verdicts(settings, run)) != expected and time.monotonic() < deadline:
        time.sleep(2)
    missing = sorted(expected - set(got))
    assert not missing, f"verdicts lost after the fusion crash: {missing}"
    repeated = {k: len(v) for k, v in got.items() if len(v) > 1}
    assert not repeated, f"request ids with more than one verdict record: {repeated}"
    for rid, [verdict] in got.items():
        assert verdict.complete, (rid, verdict.reasons)
