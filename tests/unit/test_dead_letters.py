import base64

from rtaudit.schemas.codec import encode
from rtaudit.schemas.errors import SchemaViolation
from rtaudit.schemas.messages import MAX_DLQ_ORIGINAL_BYTES
from rtaudit.topics.catalog import MAX_MESSAGE_BYTES
from rtaudit.workers.app import dead_letter_record


def test_small_original_is_kept_whole():
    record = dead_letter_record(b"not json", "audit.requests", 2, 41, b"r1", "router", SchemaViolation("bad"), 5)
    assert base64.b64decode(record.original_b64) == b"not json"
    assert (record.original_size_bytes, record.original_truncated) == (8, False)
    assert (record.source_topic, record.source_partition, record.source_offset, record.source_key) == ("audit.requests", 2, 41, "r1")
    assert (record.error_code, record.role, record.failed_at_ms) == ("schema_violation", "router", 5)


def test_oversized_original_is_cut_so_the_record_stays_producible():
    raw = b"x" * (13 * 1024 * 1024)
    record = dead_letter_record(raw, "audit.requests", 0, 0, None, "router", SchemaViolation("e" * 10_000), 0)
    assert record.original_truncated and record.original_size_bytes == len(raw)
    assert len(base64.b64decode(record.original_b64)) == MAX_DLQ_ORIGINAL_BYTES
    assert len(record.error) == 2000
    assert len(encode(record)) < MAX_MESSAGE_BYTES // 2
