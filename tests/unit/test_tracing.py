"""workers/tracing.py without a broker: the W3C header, the off switch, and the span tree one request
leaves across the hops (records stand in for Kafka messages; the fleet test is
tests/integration/test_tracing_fleet.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rtaudit.workers import tracing
from rtaudit.workers.obs_settings import TracingSettings

from .builders import manifest, partial


@dataclass
class Msg:
    """What the hops read from a confluent-kafka message: its headers."""

    hdrs: list[tuple[str, bytes]] | None

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self.hdrs


@dataclass
class Work:
    message: Msg
    trace_headers: Any = None


@dataclass
class Pending:
    payload: Work
    enqueued_ms: float


@dataclass
class Batch:
    items: list[Pending]
    formed_ms: float
    expired: list[Pending] = field(default_factory=list)


@pytest.fixture
def traces(tmp_path: Path):  # type: ignore[no-untyped-def]
    tracing.shutdown()
    tracing.configure(TracingSettings(exporter="file", file_dir=str(tmp_path)), "rtaudit-test")
    yield tmp_path
    tracing.shutdown()


def spans_in(folder: Path) -> list[dict[str, Any]]:
    tracing.flush()
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_the_header_is_w3c_trace_context() -> None:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    value = tracing.traceparent(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7)
    assert value == b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    ctx = trace.get_current_span(TraceContextTextMapPropagator().extract({"traceparent": value.decode()})).get_span_context()
    assert tracing.parse(value) == (ctx.trace_id, ctx.span_id, ctx.trace_flags.sampled)
    for bad in (None, b"", b"00-" + b"0" * 32 + b"-00f067aa0ba902b7-01", b"ff" + value[2:], b"00-xyz", value[:40]):
        assert tracing.parse(bad) is None
    assert tracing.parse(value[:-2] + b"00")[2] is False  # type: ignore[index]


def test_off_by_default_creates_nothing_and_reads_no_header() -> None:
    tracing.shutdown()
    tracing.configure(TracingSettings(), "rtaudit-test")
    assert not tracing.enabled()

    class Exploding:
        def headers(self):  # type: ignore[no-untyped-def]
            raise AssertionError("a header was read with tracing off")

    assert tracing.submit_headers("r1") is None
    tracing.begin("route", Exploding())
    assert tracing.current_headers() is None
    tracing.end()
    tracing.batch_spans("text", Batch([Pending(Work(Exploding()), 0.0)], 1.0))  # type: ignore[arg-type]
    tracing.fusion_arrived(Exploding(), manifest("text/text:0"))
    v = partial("text/text:0")
    assert tracing.fusion_emit(v) is v


def test_one_request_leaves_one_trace_with_the_expected_tree(traces: Path) -> None:
    from rtaudit.engine.fusion import Fusion
    from rtaudit.engine.policy import PolicyBook

    submitted = tracing.submit_headers("r1")
    assert submitted is not None
    tracing.begin("route", Msg(submitted))
    to_worker = tracing.current_headers()
    tracing.end(**{"rtaudit.tasks": 1})
    assert to_worker is not None and to_worker != submitted
    items = [Pending(Work(Msg(to_worker)), 1_000.0), Pending(Work(Msg(None)), 1_000.0)]  # an untraced batch-mate
    tracing.batch_spans("text", Batch(items, 1_005.0))
    assert items[1].payload.trace_headers is None
    assert tracing.headers_of(items[0].payload) is not None
    m = manifest("text/text:0")
    tracing.fusion_arrived(Msg(to_worker), m)
    _, verdict = Fusion(PolicyBook()).apply(None, m, 2_000)
    _, verdict = Fusion(PolicyBook()).apply(_, partial("text/text:0"), 2_001)
    stamped = tracing.fusion_emit(verdict)
    out = tracing.current_headers()
    tracing.end()
    trace_id = tracing.parse(submitted[0][1])[0]  # type: ignore[index]
    assert stamped.trace_id == f"{trace_id:032x}" and out is not None
    spans = spans_in(traces)
    by_name = {s["name"]: s for s in spans}
    assert sorted(by_name) == ["emit", "fusion.wait", "infer", "queue", "route", "submit"]
    in_trace = [s for s in spans if s["context"]["trace_id"] == f"0x{trace_id:032x}"]
    assert {s["name"] for s in in_trace} == {"submit", "route", "queue", "fusion.wait", "emit"}
    sid = {n: by_name[n]["context"]["span_id"] for n in by_name}
    assert by_name["submit"]["parent_id"] is None
    assert by_name["route"]["parent_id"] == sid["submit"]
    assert by_name["queue"]["parent_id"] == sid["route"]
    assert by_name["fusion.wait"]["parent_id"] == sid["route"]
    assert by_name["emit"]["parent_id"] == sid["fusion.wait"]
    assert by_name["infer"]["parent_id"] is None
    assert [link["context"]["span_id"] for link in by_name["infer"]["links"]] == [sid["queue"]]
    assert by_name["route"]["attributes"] == {"rtaudit.tasks": 1}


def test_the_sampling_decision_is_made_once_and_followed(tmp_path: Path) -> None:
    tracing.shutdown()
    tracing.configure(TracingSettings(exporter="file", file_dir=str(tmp_path), sampling_ratio=0.0), "rtaudit-test")
    try:
        assert tracing.submit_headers("r1") is None  # sampled out: no header, nothing downstream
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"  # a caller's own unsampled trace
        h = tracing.submit_headers("r1", parent)
        assert h is not None and h[0][1].decode() == parent
        tracing.begin("route", Msg(h))
        assert tracing.current_headers()[0][1].endswith(b"-00")  # type: ignore[index]
        tracing.end()
        item = Pending(Work(Msg(h)), 1.0)
        tracing.batch_spans("text", Batch([item], 2.0))
        assert item.payload.trace_headers[0][1].endswith(b"-00")
        assert spans_in(tmp_path) == []
    finally:
        tracing.shutdown()


def test_an_unreachable_collector_costs_spans_not_the_worker() -> None:
    tracing.shutdown()
    tracing.configure(TracingSettings(exporter="otlp", endpoint="http://127.0.0.1:9/v1/traces"), "rtaudit-test")
    try:
        tracing.submit_headers("r1")
        assert tracing.flush() == 1  # export failed, logged, nothing raised
    finally:
        tracing.shutdown()
