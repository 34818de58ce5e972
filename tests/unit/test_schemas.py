from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rtaudit.schemas.codec import decode, decode_scores_record, encode, readable_fields, request_id_of_key
from rtaudit.schemas.errors import ErrorCode, InvalidJSON, SchemaViolation
from rtaudit.schemas.export import CONTRACTS, SCHEMA_DIR, render
from rtaudit.schemas.messages import (
    MAX_MEDIA_ITEMS,
    AuditRequest,
    DLQRecord,
    Manifest,
    MediaItem,
    Verdict,
)

from .builders import CREATED_MS, DEADLINE_MS, audit_request, evidence, inline_media, manifest, partial, task, tick


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_exported_json_schema_matches_model(name):
    path = SCHEMA_DIR / f"{name}.schema.json"
    assert path.is_file(), f"{path} is missing: run `rtaudit schemas export`"
    assert path.read_bytes() == render(CONTRACTS[name]), (
        f"{path.name} has drifted from rtaudit.schemas.messages.{CONTRACTS[name].__name__}: run `rtaudit schemas export`"
    )


@pytest.mark.parametrize("raw", [b"", b"not json", b"{", b'{"request_id": "r1",}'])
def test_decode_rejects_non_json_as_invalid_json(raw):
    with pytest.raises(InvalidJSON) as info:
        decode(raw, AuditRequest)
    assert info.value.code == ErrorCode.INVALID_JSON
    assert info.value.request_id is None


def test_decode_schema_violation_names_the_field_and_keeps_the_readable_request_id():
    raw = orjson.dumps({"request_id": "r1", "created_at_ms": 1, "text": "hi"})
    with pytest.raises(SchemaViolation) as info:
        decode(raw, AuditRequest)
    assert info.value.code == ErrorCode.SCHEMA_VIOLATION
    assert info.value.request_id == "r1"
    assert "tenant_id" in info.value.message


@pytest.mark.parametrize(
    "payload",
    [{"request_id": 7, "tenant_id": "t"}, {"tenant_id": "t"}, [1, 2], "just a string", {"request_id": ""}],
)
def test_decode_schema_violation_without_readable_request_id(payload):
    with pytest.raises(SchemaViolation) as info:
        decode(orjson.dumps(payload), AuditRequest)
    assert info.value.request_id is None


def test_decode_rejects_unknown_fields():
    raw = orjson.dumps({**audit_request().model_dump(mode="json", exclude_none=True), "surprise": 1})
    with pytest.raises(SchemaViolation, match="surprise"):
        decode(raw, AuditRequest)


def test_media_item_accepts_exactly_one_source():
    assert MediaItem(type="image", uri="file:///tmp/a.png").uri == "file:///tmp/a.png"
    assert MediaItem(type="image", data_b64="aGk=").data_b64 == "aGk="
    with pytest.raises(ValidationError, match="exactly one"):
        MediaItem(type="image")
    with pytest.raises(ValidationError, match="exactly one"):
        MediaItem(type="image", data_b64="aGk=", uri="file:///tmp/a.png")


@pytest.mark.parametrize("bad", ["not base64!", "abc", "aGk=\n", "aG k="])
def test_media_item_rejects_bad_base64(bad):
    with pytest.raises(ValidationError, match="base64"):
        MediaItem(type="image", data_b64=bad)


@pytest.mark.parametrize("uri", ["ftp://host/a.png", "/tmp/a.png", "s3://bucket/a.png"])
def test_media_item_rejects_unsupported_uri_schemes(uri):
    with pytest.raises(ValidationError):
        MediaItem(type="image", uri=uri)


def test_audit_request_needs_text_or_media():
    with pytest.raises(ValidationError, match="text or at least one media"):
        audit_request(text=None)
    with pytest.raises(ValidationError, match="text or at least one media"):
        audit_request(text="", media=[])
    assert audit_request(text="", media=[inline_media(b"x")]).media


def test_audit_request_limits_media_items():
    with pytest.raises(ValidationError):
        audit_request(media=[inline_media(b"x")] * (MAX_MEDIA_ITEMS + 1))


@pytest.mark.parametrize("request_id", ["has space", "x" * 129, "slash/id", ""])
def test_audit_request_rejects_malformed_request_ids(request_id):
    with pytest.raises(ValidationError):
        audit_request(request_id=request_id)


def _one_of_each_contract():
    ev = evidence("profanity", 0.9, text="darn", span=(0, 4))
    return [
        audit_request(priority="high", slo_ms=500, metadata={"k": "v", "n": 3, "f": 1.5, "b": True},
                      media=[inline_media(b"\x89PNG", name="a.png"), MediaItem(type="audio", uri="https://cdn.example/a.wav")]),
        task("image:0", text=None, media=inline_media(b"img")),
        manifest("text/text:0", "ocr/image:1", skipped=[("audio:2", "no audio worker")]),
        manifest(rejection="bad uri", rejection_code="uri_not_allowed"),
        partial("text/text:0", scores={"profanity": 0.9}, evidence=[ev]),
        partial("image/image:0", status="error", error_code="media_undecodable", error="broken"),
        tick("deadline", DEADLINE_MS),
        Verdict(request_id="r1", tenant_id="acme", decision="review", complete=False, categories={"profanity": 0.6},
                flagged=["profanity"], evidence=[ev], reasons=["why"], parts={"text/text:0": "ok", "audio:1": "skipped"},
                model_versions={"text": "m@1"}, policy_version="p1", created_at_ms=CREATED_MS,
                deadline_ms=DEADLINE_MS, decided_at_ms=CREATED_MS + 5, latency_ms=5),
        DLQRecord(original_b64="e30=", source_topic="audit.requests", source_partition=0, source_offset=42,
                  source_key="r1", role="router", error_code="schema_violation", error="bad", failed_at_ms=CREATED_MS),
    ]


@pytest.mark.parametrize("message", _one_of_each_contract(), ids=lambda m: type(m).__name__)
def test_every_contract_round_trips_through_the_codec(message):
    assert decode(encode(message), type(message)) == message


@pytest.mark.parametrize("record", [manifest("text/text:0"), partial("text/text:0"), tick("expire", 5)],
                         ids=lambda r: r.kind)
def test_scores_records_decode_to_their_kind(record):
    decoded = decode_scores_record(encode(record))
    assert type(decoded) is type(record)
    assert decoded == record


def test_scores_record_with_unknown_kind_is_a_schema_violation():
    with pytest.raises(SchemaViolation) as info:
        decode_scores_record(orjson.dumps({"kind": "gossip", "request_id": "r9"}))
    assert info.value.request_id == "r9"


def test_encode_drops_none_fields():
    payload = orjson.loads(encode(audit_request()))
    assert "deadline_ms" not in payload and "priority" not in payload
    assert payload["text"] == "hello"


def test_partial_score_key_is_stage_slash_part():
    assert partial("ocr/image:3").key == "ocr/image:3"


def test_readable_fields_of_non_json_is_empty():
    assert readable_fields(b"\xff\x00garbage") == {}


def test_readable_fields_reads_request_tenant_and_created_at():
    raw = orjson.dumps({"request_id": "r1", "tenant_id": "acme-eu_1.x", "created_at_ms": 123, "text": 5})
    assert readable_fields(raw) == {"request_id": "r1", "tenant_id": "acme-eu_1.x", "created_at_ms": 123}


@pytest.mark.parametrize(
    "payload, expected",
    [
        ({"tenant_id": "acme", "created_at_ms": 1}, {}),
        ([{"request_id": "r1"}], {}),
        ({"request_id": "r1", "tenant_id": "a b", "created_at_ms": -1}, {"request_id": "r1"}),
        ({"request_id": "r1", "tenant_id": "t" * 65, "created_at_ms": 10**15}, {"request_id": "r1"}),
        ({"request_id": "r1", "tenant_id": 7, "created_at_ms": "123"}, {"request_id": "r1"}),
        ({"request_id": "x" * 129}, {}),
    ],
)
def test_readable_fields_leaves_out_unusable_values(payload, expected):
    assert readable_fields(orjson.dumps(payload)) == expected


@pytest.mark.parametrize(
    "payload",
    [
        {"request_id": "two words", "tenant_id": "acme", "created_at_ms": 1},
        {"request_id": "r1", "tenant_id": "café", "created_at_ms": 1},
        {"request_id": "r1", "tenant_id": "acme", "created_at_ms": True},
    ],
    ids=["request_id-with-space", "non-ascii-tenant", "bool-created-at"],
)
def test_readable_fields_only_returns_contract_valid_values(payload):
    fields = readable_fields(orjson.dumps(payload))
    if "request_id" not in fields:
        assert fields == {}
        return
    rejection = {"tenant_id": "unknown", "created_at_ms": 0, **fields, "deadline_ms": 0, "rejection": "bad"}
    Manifest.model_validate(rejection, strict=True)


request_ids = st.from_regex(r"[A-Za-z0-9._:\-]{1,128}", fullmatch=True)
tenant_ids = st.from_regex(r"[A-Za-z0-9._\-]{1,64}", fullmatch=True)
epoch_ms = st.integers(min_value=0, max_value=10**14)
short_text = st.text(max_size=40)
metadata_values = st.one_of(
    short_text,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
inline_items = st.builds(
    MediaItem,
    type=st.sampled_from(["image", "audio", "video"]),
    data_b64=st.binary(min_size=1, max_size=64).map(lambda b: base64.b64encode(b).decode()),
    mime=st.none() | st.sampled_from(["image/png", "audio/wav"]),
    name=st.none() | short_text,
)
uri_items = st.builds(
    MediaItem,
    type=st.sampled_from(["image", "audio", "video"]),
    uri=st.sampled_from(["file:///data/", "https://cdn.example.com/", "http://h:8080/"]).flatmap(
        lambda prefix: st.from_regex(r"[A-Za-z0-9_./%-]{0,60}", fullmatch=True).map(lambda path: prefix + path)
    ),
)


@st.composite
def audit_requests(draw):
    media = draw(st.lists(inline_items | uri_items, max_size=3))
    text = draw(st.none() | st.text(min_size=0 if media else 1, max_size=200))
    if not media and not text:
        text = "x"
    return AuditRequest(
        request_id=draw(request_ids), tenant_id=draw(tenant_ids), created_at_ms=draw(epoch_ms),
        priority=draw(st.none() | st.sampled_from(["high", "normal", "low"])),
        slo_ms=draw(st.none() | st.integers(min_value=1, max_value=3_600_000)),
        deadline_ms=draw(st.none() | epoch_ms), text=text, media=media,
        metadata=draw(st.dictionaries(short_text, metadata_values, max_size=4)),
    )


@settings(max_examples=150, deadline=None, database=None)
@given(audit_requests())
def test_any_valid_audit_request_round_trips(request):
    assert decode(encode(request), AuditRequest) == request


@pytest.mark.parametrize(
    "raw", [b"", b"\xff\x00garbage", b"null", b"[1, 2]", b'{"text": "no id"}', b'{"request_id": "two words"}'],
    ids=["empty", "not-json", "null", "array", "no-request-id", "invalid-request-id"],
)
def test_readable_fields_falls_back_to_the_record_key(raw):
    assert readable_fields(raw, b"req-42") == {"request_id": "req-42"}
    assert readable_fields(raw, None) == {}


def test_readable_fields_prefers_the_value_request_id_and_keeps_value_fields_with_a_key_id():
    assert readable_fields(orjson.dumps({"request_id": "r1"}), b"other-key") == {"request_id": "r1"}
    raw = orjson.dumps({"tenant_id": "acme", "created_at_ms": 5, "request_id": 7})
    assert readable_fields(raw, b"r9") == {"request_id": "r9", "tenant_id": "acme", "created_at_ms": 5}


@pytest.mark.parametrize(
    "key", [None, b"", b"two words", b"\xff\xfe", b"x" * 129, "caf\u00e9".encode()],
    ids=["null", "empty", "space", "invalid-utf8", "too-long", "non-ascii"],
)
def test_a_key_that_is_not_a_valid_request_id_is_not_used(key):
    assert request_id_of_key(key) is None
    assert readable_fields(b"", key) == {}


def test_a_key_addressed_rejection_is_a_valid_manifest():
    fields = readable_fields(b"", b"req-7")
    rejection = {"tenant_id": "unknown", "created_at_ms": 0, **fields, "deadline_ms": 0, "rejection": "empty value"}
    assert Manifest.model_validate(rejection, strict=True).request_id == "req-7"


def test_encode_writes_what_orjson_writes_of_the_json_dump():
    """``encode`` uses pydantic-core's serializer for speed; its bytes are those of the
    straightforward ``orjson.dumps(model_dump(mode="json"))`` on every kind of record."""
    request = audit_request(text="h\u00e9llo \u2028 \U0001F600 tab\t quote\" backslash\\", media=[inline_media(b"\x89PNG")])
    records = [request, task("text:0"), task("image:0", text=None, media=inline_media(b"x")), manifest("text/text:0"),
               tick("deadline", CREATED_MS),
               partial("text/text:0", scores={"offensive": 0.123456789, "hate": 1e-7, "targeted_insult": 1.0},
                       evidence=[evidence("hate", 0.5, span=(0, 3), text="h\u00e9l")])]
    for record in records:
        assert encode(record) == orjson.dumps(record.model_dump(mode="json", exclude_none=True)), type(record).__name__


def test_invalid_utf8_is_named_with_its_byte_and_offset():
    with pytest.raises(InvalidJSON) as info:
        decode(b'{"request_id": "r\xff\xfe", "created_at_ms": 1}', AuditRequest)
    assert str(info.value) == "not JSON: not UTF-8 text (byte 0xff at offset 17)"
