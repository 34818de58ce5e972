"""``rtaudit dlq``'s line: every field an operator triages by, and nothing raw from the original."""

from __future__ import annotations

import base64

from rtaudit.schemas.codec import decode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import AuditRequest, DLQRecord
from rtaudit.cli.dlq import ORIGINAL_PREVIEW_BYTES, dlq_line


def record(raw: bytes, **fields) -> DLQRecord:  # type: ignore[no-untyped-def]
    values = dict(original_b64=base64.b64encode(raw).decode(), original_size_bytes=len(raw), source_topic="audit.requests",
                  source_partition=2, source_offset=14, source_key="demo-0007", role="router", error_code="schema_violation",
                  error="text: Input should be a valid string", request_id="demo-0007", failed_at_ms=1764570011482)
    return DLQRecord(**{**values, **fields})


def test_the_line_names_time_role_code_id_position_size_and_reason() -> None:
    raw = b'{"request_id": "demo-0007", "tenant_id": "demo", "created_at_ms": 1764570011000, "text": 5}'
    try:
        decode(raw, AuditRequest)
    except AuditError as exc:
        assert (str(exc.code), exc.message) == ("schema_violation", "text: Input should be a valid string")
    line = dlq_line(record(raw))
    assert line.startswith("2025-12-01 06:20:11.482 router  schema_violation")
    assert "demo-0007" in line and "audit.requests[2]@14 91 B: text: Input should be a valid string" in line
    assert "\n" not in line  # the original only with original=True


def test_the_original_is_escaped_and_cut() -> None:
    raw = b"\x1b[2J\x00" + b"x" * 500
    line = dlq_line(record(raw, request_id=None, original_truncated=True), original=True)
    assert "key=demo-0007" in line and "(truncated)" in line
    preview = line.split("original: ", 1)[1]
    assert "\x1b" not in line and "\x00" not in line and preview.startswith("\\x1b[2J\\x00xxx")
    assert preview.endswith("…") and preview.count("x") == ORIGINAL_PREVIEW_BYTES - 5 + 2  # 5 non-x bytes; 2: the escapes' own x


def test_keys_and_reasons_cannot_drive_the_terminal() -> None:
    from rtaudit.cli.dlq import WHO_CHARS, printable

    assert printable("h1-rid-\x1b[31m\n\r\x00") == "h1-rid-\\x1b[31m\\n\\r\\x00"
    assert printable("k" * 100_000, WHO_CHARS) == "k" * WHO_CHARS + "…"
    assert printable("naïve 🐷 text") == "naïve 🐷 text"
