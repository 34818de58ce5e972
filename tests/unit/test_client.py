"""The producer-side client without a broker: typed errors, bounded deduplication, the
reader's lifecycle, files that cannot become requests, and the verdict line."""

from __future__ import annotations

import base64
import io
import socket
import time

import pytest
from PIL import Image

from rtaudit.schemas.codec import encode
from rtaudit.schemas.errors import MediaTooLarge, MediaUndecodable
from rtaudit.schemas.messages import MAX_INLINE_MEDIA_BYTES, MediaItem, Verdict
from rtaudit.workers import client as client_mod
from rtaudit.workers.client import (
    AuditClient, DeliveryError, InputFileError, RecordReader, SeenIds, VerdictTimeout, request_from_path,
)
from rtaudit.tools.demo.corpus import verdict_line
from rtaudit.workers.kafka import BrokerUnavailable, check_cluster
from rtaudit.workers.settings import Settings


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def verdict(rid: str, **fields) -> Verdict:  # type: ignore[no-untyped-def]
    base = dict(request_id=rid, tenant_id="t", decision="review", complete=True, policy_version="p",
                created_at_ms=1_000, deadline_ms=11_000, decided_at_ms=1_123, latency_ms=123)
    return Verdict(**{**base, **fields})


class FakeMessage:
    def __init__(self, value: bytes, offset: int) -> None:
        self._value, self._offset = value, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return "audit.verdicts"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value


class FakeConsumer:
    """Stands in for confluent_kafka.Consumer: one partition, the given records, then nothing."""

    instances: list["FakeConsumer"] = []

    def __init__(self, conf) -> None:  # type: ignore[no-untyped-def]
        self.records = list(FakeConsumer.pending)
        self.offset = 0
        self.closed = 0
        FakeConsumer.instances.append(self)

    def list_topics(self, topic, timeout):  # type: ignore[no-untyped-def]
        class Md:
            topics = {topic: type("T", (), {"partitions": {0: None}})()}
        return Md()

    def assign(self, partitions) -> None:  # type: ignore[no-untyped-def]
        pass

    def poll(self, timeout: float):  # type: ignore[no-untyped-def]
        if self.records:
            self.offset += 1
            return FakeMessage(self.records.pop(0), self.offset - 1)
        time.sleep(min(timeout, 0.01))
        return None

    def close(self) -> None:
        self.closed += 1


@pytest.fixture()
def fake_reader(monkeypatch):
    def make(records: list[bytes], **kw) -> RecordReader[Verdict]:  # type: ignore[no-untyped-def]
        FakeConsumer.pending = records
        monkeypatch.setattr(client_mod, "Consumer", FakeConsumer)
        monkeypatch.setattr(client_mod, "check_cluster", lambda *a, **k: None)
        return RecordReader(Settings(), **kw)
    return make


def test_seen_ids_is_a_bounded_lru():
    seen = SeenIds(capacity=3)
    assert [seen.seen(k) for k in "abc"] == [False] * 3
    assert seen.seen("a")  # a becomes the most recent
    assert not seen.seen("d")  # evicts b, the least recently seen
    assert len(seen) == 3
    assert not seen.seen("b") and seen.seen("a")
    with pytest.raises(ValueError):
        SeenIds(0)


def test_reader_drops_repeated_verdicts_and_counts_them(fake_reader):
    records = [encode(verdict(r)) for r in ("a", "a", "b", "a", "b", "c")] + [b"not json"]
    reader = fake_reader(records)
    got = [v.request_id for v, _ in reader.stream(timeout_s=0.3)]
    assert got == ["a", "b", "c"]
    assert reader.duplicates_dropped == 3


def test_raw_reader_keeps_repeats(fake_reader):
    reader = fake_reader([encode(verdict(r)) for r in ("a", "a", "b")], dedupe=False)
    assert [v.request_id for v, _ in reader.stream(timeout_s=0.2)] == ["a", "a", "b"]
    assert reader.duplicates_dropped == 0


def test_reader_is_a_context_manager_that_closes_its_consumer_once(fake_reader):
    with fake_reader([]) as reader:
        pass
    reader.close()
    assert FakeConsumer.instances[-1].closed == 1


def test_wait_all_raises_a_typed_timeout_listing_the_missing_ids(fake_reader):
    reader = fake_reader([encode(verdict("a"))])
    with pytest.raises(VerdictTimeout) as info:
        reader.wait_all({"a", "b", "c"}, timeout_s=0.2)
    assert info.value.missing == ("b", "c")
    assert set(info.value.got) == {"a"}
    assert str(info.value) == "2 of 3 verdicts not in within 0.2 s (missing: b, c)"
    assert isinstance(info.value, TimeoutError)


def test_wait_all_returns_everything_when_all_arrive(fake_reader):
    reader = fake_reader([encode(verdict(r)) for r in ("a", "x", "a", "b")])
    got = reader.wait_all({"a", "b"}, timeout_s=5)
    assert set(got) == {"a", "b"}


def test_no_broker_is_one_line_naming_the_address_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no fleet of this user elsewhere: the hint is `rtaudit up`
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable) as info:
        check_cluster(Settings(embedded_port=port), ["audit.requests"], timeout_s=5)
    assert str(info.value) == f"no broker at 127.0.0.1:{port} (connection refused): start one with `rtaudit up`"
    assert time.monotonic() - started < 4  # refused at once: no need to wait out the timeout


def test_no_acknowledgement_is_a_delivery_error_and_nothing_is_reported_delivered():
    delivered: list[str] = []
    client = AuditClient(Settings(embedded_port=closed_port()), on_delivered=delivered.append)
    client.submit_raw(b"r1", b"{}")
    with pytest.raises(DeliveryError, match=r"^1 requests not acknowledged by 127\.0\.0\.1:\d+ within 1 s \(last error: "):
        client.flush(timeout_s=1.0)
    assert delivered == [] and client.delivered == 0


def test_invalid_utf8_text_and_binary_files_are_refused(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9 au lait")
    with pytest.raises(InputFileError, match=r"bad\.txt is not UTF-8 text \(byte 0xe9 at offset 3\)"):
        request_from_path(bad, "t")
    blob = tmp_path / "random.bin"
    blob.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(InputFileError, match="not UTF-8 text"):
        request_from_path(blob, "t")
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"abc\x00def")
    with pytest.raises(InputFileError, match="NUL"):
        request_from_path(nul, "t")
    good = tmp_path / "good.txt"
    good.write_text("café", encoding="utf-8")
    assert request_from_path(good, "t")[0].text == "café"


def test_an_oversized_image_is_reported_in_bytes_against_the_8_mib_limit(tmp_path):
    big = tmp_path / "big.png"
    big.write_bytes(b"\x89PNG" + b"\0" * MAX_INLINE_MEDIA_BYTES)
    with pytest.raises(MediaTooLarge, match=rf"is {MAX_INLINE_MEDIA_BYTES + 4} bytes .* over the {MAX_INLINE_MEDIA_BYTES} bytes \(8 MiB\) limit"):
        request_from_path(big, "t")


def test_schema_reports_oversized_inline_media_in_bytes_not_base64_length():
    data = base64.b64encode(b"\0" * (MAX_INLINE_MEDIA_BYTES + 1)).decode()
    with pytest.raises(ValueError) as info:
        MediaItem(type="image", data_b64=data)
    text = str(info.value)
    assert f"inline media item is {MAX_INLINE_MEDIA_BYTES + 1} bytes, over the {MAX_INLINE_MEDIA_BYTES} bytes (8 MiB) limit" in text
    assert "characters" not in text
    MediaItem(type="image", data_b64=base64.b64encode(b"\0" * MAX_INLINE_MEDIA_BYTES).decode())  # at the limit: fine


def test_error_texts_carry_no_object_reprs():
    try:
        Image.open(io.BytesIO(b"not an image"))
    except Exception as exc:  # Pillow: "cannot identify image file <_io.BytesIO object at 0x...>"
        err = MediaUndecodable(f"not a decodable image: {exc}")
    assert " object at 0x" not in err.message
    assert err.message == "not a decodable image: cannot identify image file"


def test_verdict_line_prints_two_decimals_uncut_and_the_verdicts_own_latency():
    v = verdict("r-1", categories={"targeted_insult": 0.12, "offensive": 1.0, "hate": 0.05})
    line = verdict_line(v)
    assert "offensive=1.00,targeted_insult=0.12" in line
    assert line.endswith("[123 ms]")  # decided - created
    assert verdict_line(v, arrived_ms=2_000).endswith("[1000 ms]")  # created -> arrival


def test_an_empty_inline_image_is_refused_by_the_schema_like_an_empty_text():
    """A producer that sends 0 bytes of media gets the same answer the CLI gives an empty file:
    nothing to moderate (the router rejects it with one verdict, schema_violation), not a
    `review` verdict after two stages failed to decode it."""
    with pytest.raises(ValueError, match=r"inline media item is empty \(0 bytes\): nothing to moderate"):
        MediaItem(type="image", data_b64="")
    assert MediaItem(type="image", data_b64=base64.b64encode(b"\x89").decode()).data_b64 == "iQ=="
