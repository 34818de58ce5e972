"""One trace per request across every process of a real fleet (router, text, image, OCR, fusion, and
the client in this process) on the embedded broker, exported to per-process JSON-lines files
(``[tracing] exporter = "file"``), with the span tree of workers/tracing.py: submit → route →
queue (one per part, in the worker that scored it) and route → fusion.wait → emit; each batch's
``infer`` span links to the queue spans of its items; the verdict names its trace id."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.messages import AuditRequest, MediaItem
from rtaudit.workers import tracing
from rtaudit.workers.client import AuditClient, verdict_reader
from rtaudit.tools.demo.corpus import render_text_image, skimage_file
from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.obs_settings import TracingSettings
from rtaudit.workers.settings import Settings

from .conftest import free_port

pytestmark = pytest.mark.integration
TEXTS = [f"post number {i}: see you at the match on saturday" for i in range(24)] + ["you are a fucking idiot"]


def _image(data: bytes) -> MediaItem:
    return MediaItem(type="image", data_b64=base64.b64encode(data).decode())


def spans_by_trace(folder: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in folder.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            span = json.loads(line)
            out[span["context"]["trace_id"][2:]].append(span)
    return out


def test_one_trace_per_request_across_every_process(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    env = {"RTAUDIT_TRACING__EXPORTER": "file", "RTAUDIT_TRACING__FILE_DIR": str(traces),
           "RTAUDIT_STATE_DIR": str(tmp_path / "state")}
    settings = Settings(embedded_port=free_port(), state_dir=tmp_path / "state",
                        tracing=TracingSettings(exporter="file", file_dir=str(traces)))
    tracing.shutdown()
    fleet = Fleet(settings, roles=("router", "text", "image", "ocr", "fusion"), log_dir=tmp_path / "logs", env=env)
    fleet.start(ready_timeout_s=240)
    try:
        created = now_ms()
        requests = [AuditRequest(request_id=f"tr-{uuid.uuid4().hex[:10]}", tenant_id="trace", created_at_ms=created,
                                 text=t, slo_ms=120_000) for t in TEXTS]
        requests += [AuditRequest(request_id=f"tr-img-{i}", tenant_id="trace", created_at_ms=created, slo_ms=120_000,
                                  media=[_image(skimage_file(name))]) for i, name in enumerate(("coffee.png", "rocket.jpg"))]
        requests.append(AuditRequest(request_id="tr-mixed", tenant_id="trace", created_at_ms=created, slo_ms=120_000,
                                     text="look at this", media=[_image(render_text_image("see you at noon"))]))
        with verdict_reader(settings) as reader:
            client = AuditClient(settings)
            for r in requests:
                client.submit(r)
            client.flush()
            verdicts = {rid: v for rid, (v, _) in reader.wait_all([r.request_id for r in requests], 180).items()}
        tracing.flush()
        time.sleep(3 * tracing.EXPORT_INTERVAL_S + 1.0)  # the workers' export threads run every 0.5 s
    finally:
        fleet.stop()
        tracing.shutdown()
    by_trace = spans_by_trace(traces)
    trace_ids = {v.trace_id for v in verdicts.values()}
    assert None not in trace_ids and len(trace_ids) == len(requests), "one trace id per verdict, none shared"
    trees = []
    for r in requests:
        spans = by_trace[verdicts[r.request_id].trace_id]  # type: ignore[index]
        names = sorted(s["name"] for s in spans)
        parts = len(verdicts[r.request_id].parts)
        assert names == sorted(["submit", "route", "fusion.wait", "emit"] + ["queue"] * parts), (r.request_id, names)
        by_name = {s["name"]: s for s in spans}
        sid = {s["name"]: s["context"]["span_id"] for s in spans if s["name"] != "queue"}
        assert by_name["submit"]["parent_id"] is None
        assert by_name["route"]["parent_id"] == sid["submit"]
        assert by_name["fusion.wait"]["parent_id"] == sid["route"]
        assert by_name["emit"]["parent_id"] == sid["fusion.wait"]
        queues = [s for s in spans if s["name"] == "queue"]
        assert all(q["parent_id"] == sid["route"] for q in queues)
        services = {s["resource"]["attributes"]["service.name"] for s in spans}
        expected = {"rtaudit-client", "rtaudit-router", "rtaudit-fusion"}
        expected |= {"rtaudit-text"} if r.text else set()
        expected |= {"rtaudit-image", "rtaudit-ocr"} if r.media else set()
        assert services == expected, (r.request_id, services)
        trees.append((r.request_id, spans))
    # each queue span is linked from its batch's infer span
    linked = {link["context"]["span_id"] for spans in by_trace.values() for s in spans if s["name"] == "infer"
              for link in s["links"]}
    queue_ids = {s["context"]["span_id"] for _, spans in trees for s in spans if s["name"] == "queue"}
    assert queue_ids <= linked
    rid, spans = next(t for t in trees if t[0] == "tr-mixed")
    t0 = min(int_ns(s["start_time"]) for s in spans)
    print(f"\nspan tree of {rid} (trace {verdicts[rid].trace_id}):")
    for s in sorted(spans, key=lambda s: int_ns(s["start_time"])):
        print(f"  {s['name']:<12} {s['resource']['attributes']['service.name']:<15} "
              f"+{(int_ns(s['start_time']) - t0) / 1e6:9.1f} ms  {(int_ns(s['end_time']) - int_ns(s['start_time'])) / 1e6:9.1f} ms")


def int_ns(iso: str) -> int:
    """Epoch ns of the SDK JSON's ISO 8601 times (``2026-12-05T08:00:00.123456Z``)."""
    from datetime import datetime

    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1e9)
