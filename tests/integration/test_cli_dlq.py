"""``rtaudit dlq`` on a real embedded broker: what is on audit.dlq, filtered, then it exits."""

from __future__ import annotations

import base64

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.codec import encode
from rtaudit.schemas.messages import DLQRecord
from rtaudit.topics.catalog import DLQ
from rtaudit.cli.main import app
from rtaudit.workers.kafka import producer_config
from rtaudit.workers.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def dead_letter(role: str, code: str, request_id: str | None, original: bytes, key: str | None = None) -> DLQRecord:
    return DLQRecord(
        original_b64=base64.b64encode(original).decode(), original_size_bytes=len(original), source_topic="audit.requests",
        source_partition=1, source_offset=41, source_key=key, role=role, error_code=code,
        error=f"{code} on purpose", request_id=request_id, failed_at_ms=now_ms(),
    )


def test_dlq_prints_every_record_with_its_reason_filters_and_exits(broker_settings: Settings, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = broker_settings
    monkeypatch.chdir(tmp_path)  # no ./rtaudit.toml
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", str(s.embedded_port))
    records = [
        dead_letter("router", "schema_violation", "dlq-1", b'{"request_id": "dlq-1", "text": 5}'),
        dead_letter("text", "invalid_json", None, b"\x1b[31mnot json\x00", key="dlq-key-2"),
        dead_letter("router", "schema_violation", "dlq-1", b'{"request_id": "dlq-1", "text": 5}'),  # sent twice: shown twice
    ]
    producer = Producer(producer_config(s))
    for r in records:
        producer.produce(DLQ, encode(r), (r.request_id or r.source_key or "").encode())
    assert producer.flush(30) == 0

    everything = CliRunner().invoke(app, ["dlq", "--original"])
    assert everything.exit_code == 0, everything.output
    lines = [line for line in everything.stdout.splitlines() if not line.startswith("    original:")]
    assert len(lines) == 3 and sum("dlq-1" in line for line in lines) == 2 and "key=dlq-key-2" in everything.stdout
    assert "audit.requests[1]@41" in everything.stdout and "invalid_json on purpose" in everything.stdout
    assert "\x1b" not in everything.stdout and "\\x1b[31mnot json\\x00" in everything.stdout  # escaped, never raw

    text_only = CliRunner().invoke(app, ["dlq", "--role", "text", "--json"])
    assert text_only.exit_code == 0 and [DLQRecord.model_validate_json(x).source_key for x in text_only.stdout.splitlines()] == ["dlq-key-2"]
    by_id = CliRunner().invoke(app, ["dlq", "--request-id", "dlq-1", "--count", "1"])
    assert by_id.exit_code == 0 and len(by_id.stdout.splitlines()) == 1
