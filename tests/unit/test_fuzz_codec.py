"""Codec findings of the fuzz work: error messages (DLQ records, verdict reasons, worker log
lines) never carry long or non-printable field names from the input."""

from __future__ import annotations

import orjson
import pytest

from rtaudit.schemas.codec import MAX_LOC_PART_CHARS, decode
from rtaudit.schemas.errors import SchemaViolation
from rtaudit.schemas.messages import AuditRequest

VALID = {"request_id": "r1", "tenant_id": "t", "created_at_ms": 1, "text": "hello"}


def rejection(payload: dict) -> str:
    with pytest.raises(SchemaViolation) as info:
        decode(orjson.dumps(payload), AuditRequest)
    return info.value.message


def test_a_megabyte_field_name_is_cut():
    message = rejection({**VALID, "k" * 1_000_000: 1})
    assert "k" * MAX_LOC_PART_CHARS not in message and len(message) < 200
    assert message.startswith("k" * (MAX_LOC_PART_CHARS - 1) + "…: Extra inputs are not permitted")


def test_field_names_cannot_forge_log_lines():
    message = rejection({**VALID, "x\n[2026-01-01] [ERROR] forged\r": 1})
    assert "\n" not in message and "\r" not in message
    assert message.startswith("x\\n[2026-01-01] [ERROR] forged\\r: Extra inputs")


def test_values_are_never_quoted():
    secret = "SECRET-VALUE-" + "v" * 100
    for payload in ({**VALID, "priority": secret}, {**VALID, "created_at_ms": secret}, {**VALID, "tenant_id": secret},
                    {**VALID, "metadata": {"k": [secret]}}, {**VALID, "text": secret * 400}):
        assert "SECRET" not in rejection(payload)
